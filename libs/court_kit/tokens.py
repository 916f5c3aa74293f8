"""Bearer tokens: HS256 JWTs with ``sub``, ``role``, ``iat`` and ``exp``.

The lobby issues them to players; services mint their own ``service`` token;
``court-token`` (and ``make token``) issues development tokens::

    court-token --sub alice --role player --ttl 3600

Roles: ``player`` (acts for the seats whose id is their sub), ``bot`` (the bot
service: acts for ``bot:<level>`` seats), ``service`` (service to service,
e.g. the lobby creating games), ``admin`` and ``analytics`` (full-information
reads). ``Verifier`` checks signature, expiry and claims, caching good tokens
until they expire so a hot path pays the HMAC once per token.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass

import jwt

from .checks import quote
from .settings import ConfigError, Settings

ROLES = ("player", "bot", "service", "admin", "analytics")
ALGORITHM = "HS256"
ISSUER = "court"
BOT_SEAT_PREFIX = "bot:"


class TokenError(Exception):
    """A token that does not authenticate its bearer; the message says why."""


@dataclass(frozen=True, slots=True)
class Identity:
    sub: str
    role: str
    exp: int

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def may_read_full(self) -> bool:
        return self.role in ("admin", "analytics")


def issue_token(secret: str, sub: str, role: str, ttl: float = 3600.0, *, now: float | None = None) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown role {quote(role)}; roles: {', '.join(ROLES)}")
    if not sub or (role == "player" and sub.startswith(BOT_SEAT_PREFIX)):
        raise ValueError(f"a player's sub must be non-empty and not start with {quote(BOT_SEAT_PREFIX)}: {quote(sub)}")
    if ttl <= 0:
        raise ValueError("ttl must be positive")
    iat = int(time.time() if now is None else now)
    claims = {"sub": sub, "role": role, "iat": iat, "exp": iat + int(ttl), "iss": ISSUER}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


class Verifier:
    """Verifies tokens against one secret, remembering good ones until they expire."""

    def __init__(self, secret: str, *, leeway: float = 5.0, cache_size: int = 50_000):
        if not secret:
            raise ConfigError("a token verifier needs a secret (COURT_TOKEN_SECRET)")
        self._secret = secret
        self._leeway = leeway
        self._cache: OrderedDict[str, Identity] = OrderedDict()
        self._cache_size = cache_size

    def verify(self, token: str, *, now: float | None = None) -> Identity:
        t = time.time() if now is None else now
        hit = self._cache.get(token)
        if hit is not None:
            if hit.exp + self._leeway >= t:
                return hit
            del self._cache[token]
            raise TokenError("token expired: get a new one (the lobby's Login or RefreshToken)")
        ident = self._decode(token, t)
        self._cache[token] = ident
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return ident

    def _decode(self, token: str, now: float) -> Identity:
        if not token:
            raise TokenError("missing bearer token: send metadata 'authorization: Bearer <token>'")
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                options={"require": ["sub", "role", "exp", "iat"], "verify_exp": False},
            )
        except jwt.InvalidSignatureError:
            raise TokenError("token signature does not verify: it was not issued by this deployment") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenError(f"token lacks the {quote(exc.claim)} claim") from None
        except jwt.DecodeError:
            raise TokenError("malformed token: expected a signed JWT") from None
        except jwt.InvalidTokenError as exc:
            raise TokenError(f"invalid token: {exc}") from None
        role, sub, exp = claims.get("role"), claims.get("sub"), claims.get("exp")
        if role not in ROLES:
            raise TokenError(f"token role {quote(role)} is not one of {', '.join(ROLES)}")
        if not isinstance(sub, str) or not sub:
            raise TokenError("token sub must be a non-empty string")
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            raise TokenError("token exp must be a number")
        if exp + self._leeway < now:
            raise TokenError("token expired: get a new one (the lobby's Login or RefreshToken)")
        return Identity(sub=sub, role=role, exp=int(exp))


def service_token(settings: Settings, ttl: float = 24 * 3600.0) -> str:
    """A ``service`` token for this service's own calls to others (sub = the service's name)."""
    return issue_token(settings.token_secret, f"service:{settings.service}", "service", ttl)


def main(argv: list[str] | None = None) -> int:
    """``court-token``: print a signed bearer token (development and operations)."""
    p = argparse.ArgumentParser(prog="court-token", description="Issue a Court bearer token.")
    p.add_argument("--sub", required=True, help="the player id (or service name)")
    p.add_argument("--role", default="player", choices=ROLES)
    p.add_argument("--ttl", type=float, default=86400.0, help="seconds until it expires (default a day)")
    args = p.parse_args(argv)
    try:
        settings = Settings.load("rules")
        token = issue_token(settings.token_secret, args.sub, args.role, args.ttl)
    except (ConfigError, ValueError) as exc:
        print(f"court-token: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
