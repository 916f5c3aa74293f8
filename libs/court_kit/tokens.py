"""Bearer tokens: Ed25519-signed JWTs (``alg: EdDSA``) that only their issuers can mint.

Who mints what (``MINTS``; a key in the key set for any other issuer is refused at load)::

    court-lobby   player, service, admin, analytics   (the lobby's key: players on Login,
                                                       its own service identity, and admin or
                                                       analytics tokens via ``court-token``)
    court-bot     bot                                 (the bot service's own key: it can act
                                                       for ``bot:<level>`` seats and nothing else)
    rules, ranking                                    mint nothing and hold no private key

Every service holds the **public** key set (``COURT_TOKEN_KEYS``, a JWKS-like JSON file, one
entry per ``kid`` with the issuer it belongs to) and only the lobby and the bot service hold a
private key (``COURT_SIGNING_KEY``, a JWK JSON file with ``d``). A token is accepted when:

* its header says ``alg: EdDSA`` (pinned: HS256, ``none`` or anything else is refused before any
  key is touched) and names a ``kid`` present in the key set;
* the signature verifies with that kid's public key;
* ``iss`` is the issuer the key set records for that kid, and that issuer may grant ``role``;
* ``aud`` contains the verifying service's audience ``court-<service>``;
* ``exp``, ``nbf`` and ``iat`` are present and hold (``LEEWAY`` seconds of clock skew allowed).

Audiences (``AUDIENCES``): ``player``, ``admin`` and ``analytics`` tokens are for every
player-facing service (court-lobby, court-rules, court-ranking, court-bot); the lobby's
``service`` token for court-rules and court-ranking (the services it calls); the bot service's
``bot`` token for court-rules only.

Rotation: the key set may hold several keys per issuer, so a new key is published first (every
verifier re-reads the key set file when it changes, checked at most every
``COURT_TOKEN_KEYS_RELOAD`` seconds and at once on an unknown kid), then the signer switches, and
the old key is removed once every token it signed has expired (deploy/README.md, "Key rotation").

``court-keys`` creates keys and key sets; ``court-token`` (``make token``) prints a token signed
with the lobby's key (in dev the generated one under the state folder)::

    court-token --sub alice --role player --ttl 3600

``Verifier`` caches good tokens until they expire, so a hot path pays one signature check per
token. In dev (``COURT_ENV=dev``) ``court_kit.keys.ensure_dev_keys`` generates a key pair per signing service,
the key set and an id secret under ``<state>/keys/`` (marked ``court_dev``; prod refuses them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jwt

from .checks import quote
from .keys import (
    ALGORITHM,
    AUDIENCES,
    BOT_SEAT_PREFIX,
    DEV_KEY_DIR,
    MINTS,
    ROLES,
    DevKeys,
    KeySet,
    Signer,
    TrustedKey,
    issue_token,
    issuer_for,
    signing_services,
    write_private,
)
from .settings import ConfigError, Settings

LEEWAY = 5.0
ID_SECRET_USERS = ("rules", "bot")  # the services that derive ids or randomness from COURT_ID_SECRET
MIN_ID_SECRET = 32
# values that are never a production secret (placeholders shipped in examples and dev overlays)
KNOWN_DEFAULTS = ("court-dev-secret-not-for-production", "dev-only", "changeme", "change-me", "secret")


class TokenError(Exception):
    """A token that does not authenticate its bearer; the message says why."""


@dataclass(frozen=True, slots=True)
class Identity:
    sub: str
    role: str
    exp: int
    iss: str = ""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def may_read_full(self) -> bool:
        return self.role in ("admin", "analytics")

    def may_act_for(self, holder: str) -> bool:
        """Whether this identity acts for a seat held by ``holder`` (a player id or
        ``bot:<level>``): a player for its own seats, the bot identity for bot seats."""
        if self.role == "player":
            return holder == self.sub
        if self.role == "bot":
            return holder.startswith(BOT_SEAT_PREFIX)
        return False

    def may_view(self, holder: str) -> bool:
        """Whether this identity reads the view of a seat held by ``holder``: an admin any seat's,
        else the seats it acts for."""
        return self.role == "admin" or self.may_act_for(holder)


# ---------------------------------------------------------------------------------- verify


class Verifier:
    """Verifies tokens for one audience against the key set file, remembering good ones until they
    expire. The file is re-read when it changes (checked at most every ``reload_interval`` seconds,
    and at once, at most every second, on an unknown kid)."""

    def __init__(
        self,
        keys: KeySet | str | Path,
        audience: str,
        *,
        leeway: float = LEEWAY,
        cache_size: int = 50_000,
        reload_interval: float = 10.0,
    ):
        if not audience.startswith("court-"):
            raise ValueError(f"audience must be court-<service>, got {audience!r}")
        self.audience = audience
        self._path: Path | None = None if isinstance(keys, KeySet) else Path(keys)
        self._stamp: tuple[int, int, int] | None = None
        self._keys = keys if isinstance(keys, KeySet) else self._read()
        self._leeway = leeway
        self._cache: OrderedDict[str, Identity] = OrderedDict()
        self._cache_size = cache_size
        self._reload_interval = reload_interval
        self._checked = time.monotonic()
        self._unknown_checked = 0.0

    @classmethod
    def for_service(cls, settings: Settings) -> Verifier:
        return cls(
            settings.token_keys,
            issuer_for(settings.service),
            reload_interval=settings.extra_float("TOKEN_KEYS_RELOAD", 10.0),
        )

    @property
    def keys(self) -> KeySet:
        return self._keys

    def _file_stamp(self) -> tuple[int, int, int] | None:
        assert self._path is not None
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _read(self) -> KeySet:
        assert self._path is not None
        stamp = self._file_stamp()
        keys = KeySet.load(self._path)
        self._stamp = stamp
        return keys

    def reload(self, *, force: bool = False) -> bool:
        """Re-read the key set if its file changed; a broken file keeps the keys in use. True if changed."""
        if self._path is None:
            return False
        stamp = self._file_stamp()
        if not force and (stamp is None or stamp == self._stamp):
            return False
        try:
            keys = self._read()
        except ConfigError:
            return False  # a half-written or broken file: keep verifying with what we have
        if keys.keys != self._keys.keys:
            self._keys = keys
            self._cache.clear()
            return True
        return False

    def verify(self, token: str, *, now: float | None = None) -> Identity:
        t = time.time() if now is None else now
        mono = time.monotonic()
        if self._path is not None and mono - self._checked >= self._reload_interval:
            self._checked = mono
            self.reload()
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

    def _key_for(self, kid: str) -> TrustedKey | None:
        key = self._keys.keys.get(kid)
        if key is None and self._path is not None:
            mono = time.monotonic()
            if mono - self._unknown_checked >= 1.0:  # a flood of made-up kids costs one stat a second
                self._unknown_checked = mono
                self.reload()
                key = self._keys.keys.get(kid)
        return key

    def _decode(self, token: str, now: float) -> Identity:
        if not token:
            raise TokenError("missing bearer token: send metadata 'authorization: Bearer <token>'")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise TokenError("malformed token: expected a signed JWT") from None
        alg = header.get("alg")
        if alg != ALGORITHM:
            raise TokenError(
                f"token algorithm {quote(alg, 16)} is not accepted: Court tokens are {ALGORITHM}"
            )
        kid = header.get("kid")
        key = self._key_for(kid) if isinstance(kid, str) else None
        if key is None:
            raise TokenError(
                "token key id is unknown: it was not issued by this deployment (or its key was "
                "retired); sign in again"
            )
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[ALGORITHM],
                audience=self.audience,
                issuer=key.issuer,
                leeway=self._leeway,
                options={"require": ["iss", "sub", "role", "aud", "exp", "nbf", "iat"], "verify_exp": False},
            )
        except jwt.InvalidSignatureError:
            raise TokenError(
                "token signature does not verify: it was not issued by this deployment"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenError(f"token lacks the {quote(exc.claim)} claim") from None
        except jwt.InvalidAudienceError:
            raise TokenError(f"token is not meant for {self.audience} (its audience differs)") from None
        except jwt.InvalidIssuerError:
            raise TokenError(
                f"token issuer does not match its key: key {quote(kid)} belongs to {key.issuer}"
            ) from None
        except jwt.ImmatureSignatureError:
            raise TokenError("token is not valid yet (nbf or iat in the future): check the clocks") from None
        except jwt.DecodeError:
            raise TokenError("malformed token: expected a signed JWT") from None
        except jwt.InvalidTokenError as exc:
            raise TokenError(f"invalid token: {quote(str(exc), 80)}") from None
        role, sub, exp = claims.get("role"), claims.get("sub"), claims.get("exp")
        if role not in ROLES:
            raise TokenError(f"token role {quote(role)} is not one of {', '.join(ROLES)}")
        if role not in MINTS[key.issuer]:
            raise TokenError(f"{key.issuer} may not grant the {role} role")
        if not isinstance(sub, str) or not sub:
            raise TokenError("token sub must be a non-empty string")
        if role == "player" and sub.startswith(BOT_SEAT_PREFIX):
            raise TokenError("a player token's sub may not name a bot seat")
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            raise TokenError("token exp must be a number")
        if exp + self._leeway < now:
            raise TokenError("token expired: get a new one (the lobby's Login or RefreshToken)")
        return Identity(sub=sub, role=role, exp=int(exp), iss=key.issuer)


# ---------------------------------------------------------------------------------- settings


def _dev_marked(keys: Iterable[TrustedKey]) -> list[str]:
    return [k.kid for k in keys if k.dev]


def check_id_secret(value: str, name: str = "COURT_ID_SECRET", *, dev: bool = False) -> str:
    """Present always; outside dev also long enough and no placeholder."""
    if not value:
        raise ConfigError(
            f"{name} is not set: the secret that keys game ids and other derived values "
            f"({MIN_ID_SECRET}+ random characters, e.g. `openssl rand -hex 32`)"
        )
    if dev:
        return value
    if len(value) < MIN_ID_SECRET:
        raise ConfigError(
            f"{name} is too short ({len(value)} characters): use {MIN_ID_SECRET} or more random "
            "characters (e.g. `openssl rand -hex 32`)"
        )
    low = value.lower()
    if any(d in low for d in KNOWN_DEFAULTS):
        raise ConfigError(
            f"{name} is a placeholder or default value: generate a random one (e.g. `openssl rand -hex 32`)"
        )
    return value


def load_signer(settings: Settings) -> Signer:
    """This service's own private key (lobby, bot); ConfigError when missing or not its own."""
    if not settings.signing_key:
        raise ConfigError(
            f"COURT_SIGNING_KEY is not set: court-{settings.service} signs its own tokens and needs "
            "the path of its private key (court-keys new "
            f"{settings.service} makes one)"
        )
    signer = Signer.load(settings.signing_key, issuer=issuer_for(settings.service))
    if signer.dev and not settings.is_dev:
        raise ConfigError(
            f"COURT_SIGNING_KEY ({settings.signing_key}) is a development key (court_dev): "
            "generate a production key with `court-keys new`"
        )
    return signer


def preflight(settings: Settings, *, needs_id_secret: bool | None = None) -> tuple[KeySet, Signer | None]:
    """Every key check a service makes before it starts (ConfigError with the reason, exit 2):
    a readable Ed25519 key set, no development keys outside dev, the service's own private key
    when it signs (and none when it must not), and an id secret when it derives ids."""
    if settings.service == "web":  # the edge verifies no token and mints none: it holds no key
        from .edge import check_edge_secret  # noqa: PLC0415 - edge imports settings

        if settings.signing_key:
            raise ConfigError("COURT_SIGNING_KEY is set, but court-web mints no tokens: remove it")
        check_edge_secret(settings.edge_secret, dev=settings.is_dev)
        return KeySet({}), None
    if not settings.token_keys:
        raise ConfigError(
            "COURT_TOKEN_KEYS is not set: the path of the token key set (the public keys every "
            "service verifies tokens with; court-keys keyset makes one; COURT_ENV=dev "
            "generates one under the state folder)"
        )
    keys = KeySet.load(settings.token_keys)
    dev = _dev_marked(keys.keys.values())
    if dev and not settings.is_dev:
        raise ConfigError(
            f"COURT_TOKEN_KEYS ({settings.token_keys}) holds development keys ({', '.join(dev)}): "
            "outside COURT_ENV=dev only production keys (court-keys new) are trusted"
        )
    signer = None
    if settings.service in signing_services():
        signer = load_signer(settings)
        if signer.kid not in keys.keys:
            raise ConfigError(
                f"COURT_SIGNING_KEY's kid {signer.kid!r} is not in COURT_TOKEN_KEYS: publish its "
                "public key in the key set first (deploy/README.md, key rotation)"
            )
    elif settings.signing_key:
        raise ConfigError(
            f"COURT_SIGNING_KEY is set, but court-{settings.service} mints no tokens: remove it "
            "(only the lobby and the bot service hold a private key)"
        )
    if needs_id_secret is None:
        needs_id_secret = settings.service in ID_SECRET_USERS
    if needs_id_secret:
        check_id_secret(settings.id_secret, dev=settings.is_dev)
    return keys, signer


# ---------------------------------------------------------------------------------- CLIs


def service_audience(role: str, audience: Sequence[str] | None) -> list[str]:
    return list(audience) if audience else list(AUDIENCES[role])


def main(argv: list[str] | None = None) -> int:
    """``court-token``: print a bearer token signed with the lobby's key (development and operations)."""
    p = argparse.ArgumentParser(
        prog="court-token",
        description="Issue a Court bearer token, signed with the "
        "lobby's key (COURT_SIGNING_KEY; with COURT_ENV=dev the generated dev key).",
    )
    p.add_argument("--sub", required=True, help="the player id (or service name)")
    p.add_argument("--role", default="player", choices=ROLES)
    p.add_argument("--ttl", type=float, default=86400.0, help="seconds until it expires (default a day)")
    p.add_argument("--aud", action="append", help="an audience (court-rules, ...); default: the role's set")
    args = p.parse_args(argv)
    try:
        service = "bot" if args.role == "bot" else "lobby"
        _dev_keys_exist(service)
        settings = Settings.load(service)
        signer = load_signer(settings)
        token = issue_token(signer, args.sub, args.role, args.ttl, audience=args.aud)
    except (ConfigError, ValueError) as exc:
        print(f"court-token: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


def _dev_keys_exist(service: str, environ: Mapping[str, str] | None = None) -> None:
    """``court-token`` in dev with no key given signs with the key a running stack generated under
    ``<COURT_STATE_DIR>/keys/``: ConfigError when there is none, rather than generating a new key that
    no stack trusts (a stack started with another COURT_STATE_DIR is the usual cause)."""
    env = os.environ if environ is None else environ
    if env.get("COURT_ENV", "prod").strip().lower() != "dev" or env.get("COURT_SIGNING_KEY"):
        return
    state = env.get("COURT_STATE_DIR", ".state")
    key = DevKeys(Path(state) / DEV_KEY_DIR).signing_key(service)
    if not key.exists():
        raise ConfigError(
            f"no development key under {state}/{DEV_KEY_DIR}/ ({key.name}): the local stack generates it "
            "when it starts (`make run`); for a stack started with another state folder, name it here too "
            "(COURT_STATE_DIR=..., e.g. `make token COURT_STATE_DIR=/path/to/state`)"
        )


def keys_main(argv: list[str] | None = None) -> int:
    """``court-keys``: create signing keys and public key sets."""
    p = argparse.ArgumentParser(prog="court-keys", description="Court's token keys (Ed25519).")
    sub = p.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="a new private key (JWK JSON) for a signing service")
    new.add_argument("service", choices=signing_services())
    new.add_argument("--kid", help="key id (default <service>-<date>-<random>)")
    new.add_argument("--out", required=True, help="file to write (mode 0600)")
    ks = sub.add_parser("keyset", help="a public key set from private keys and/or key sets")
    ks.add_argument("files", nargs="+", help="private key files (their public half is taken) or key sets")
    ks.add_argument("--drop", action="append", default=[], help="a kid to leave out (retiring a key)")
    args = p.parse_args(argv)
    try:
        if args.command == "new":
            signer = Signer.generate(issuer_for(args.service), args.kid)
            write_private(Path(args.out), json.dumps(signer.jwk(), indent=2) + "\n")
            print(signer.kid)
            return 0
        merged: dict[str, TrustedKey] = {}
        for f in args.files:
            data = json.loads(Path(f).read_text())
            if isinstance(data, dict) and "keys" in data:
                merged.update(KeySet.parse(data, f).keys)
            else:
                iss = data.get("iss", "") if isinstance(data, dict) else ""
                s = Signer.load(f, issuer=iss)
                merged[s.kid] = s.public
        for kid in args.drop:
            merged.pop(kid, None)
        if not merged:
            raise ConfigError("the key set would be empty")
        sys.stdout.write(KeySet(merged).to_json())
        return 0
    except (ConfigError, ValueError, OSError) as exc:
        print(f"court-keys: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
