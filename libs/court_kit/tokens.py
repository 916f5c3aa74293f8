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
token. In dev (``COURT_ENV=dev``) ``ensure_dev_keys`` generates a key pair per signing service,
the key set and an id secret under ``<state>/keys/`` (marked ``court_dev``; prod refuses them).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .checks import quote
from .settings import ConfigError, Settings

ROLES = ("player", "bot", "service", "admin", "analytics")
ALGORITHM = "EdDSA"
BOT_SEAT_PREFIX = "bot:"
LEEWAY = 5.0
PLAYER_FACING = ("court-lobby", "court-rules", "court-ranking", "court-bot")
MINTS: Mapping[str, tuple[str, ...]] = {
    "court-lobby": ("player", "service", "admin", "analytics"),
    "court-bot": ("bot",),
}
AUDIENCES: Mapping[str, tuple[str, ...]] = {
    "player": PLAYER_FACING,
    "admin": PLAYER_FACING,
    "analytics": PLAYER_FACING,
    "service": ("court-rules", "court-ranking"),
    "bot": ("court-rules",),
}
ID_SECRET_USERS = ("rules", "bot")  # the services that derive ids or randomness from COURT_ID_SECRET
DEV_KEY_DIR = "keys"
MIN_ID_SECRET = 32
# values that are never a production secret (placeholders shipped in examples and dev overlays)
KNOWN_DEFAULTS = ("court-dev-secret-not-for-production", "dev-only", "changeme", "change-me", "secret")


def issuer_for(service: str) -> str:
    return f"court-{service}"


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


# ---------------------------------------------------------------------------------- keys


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ConfigError(f"{what} is not base64url") from None


def _raw_public(key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _raw_private(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


@dataclass(frozen=True, slots=True)
class TrustedKey:
    kid: str
    issuer: str
    key: Ed25519PublicKey
    dev: bool = False

    def jwk(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kty": "OKP",
            "crv": "Ed25519",
            "alg": ALGORITHM,
            "use": "sig",
            "kid": self.kid,
            "iss": self.issuer,
            "x": _b64(_raw_public(self.key)),
        }
        if self.dev:
            out["court_dev"] = True
        return out


def _parse_jwk(entry: Any, where: str) -> tuple[str, str, bool]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: each key is a JSON object (a JWK)")
    if entry.get("kty") != "OKP" or entry.get("crv") != "Ed25519":
        raise ConfigError(
            f"{where}: only Ed25519 keys (kty OKP, crv Ed25519) are accepted, got "
            f"kty={str(entry.get('kty'))[:16]!r} crv={str(entry.get('crv'))[:16]!r}"
        )
    if entry.get("alg", ALGORITHM) != ALGORITHM:
        raise ConfigError(f"{where}: alg must be {ALGORITHM}")
    kid, iss = entry.get("kid"), entry.get("iss")
    if not isinstance(kid, str) or not kid or len(kid) > 64:
        raise ConfigError(f"{where}: every key needs a kid (1 to 64 characters)")
    if not isinstance(iss, str) or iss not in MINTS:
        raise ConfigError(
            f"{where}: key {kid!r} belongs to issuer {str(iss)[:32]!r}, which mints no tokens; "
            f"issuers: {', '.join(MINTS)} (rules and ranking mint nothing)"
        )
    return kid, iss, bool(entry.get("court_dev", False))


@dataclass(frozen=True)
class KeySet:
    """The public keys a verifier trusts, by kid."""

    keys: Mapping[str, TrustedKey]

    @classmethod
    def parse(cls, data: Any, where: str = "key set") -> KeySet:
        entries = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f'{where}: expected {{"keys": [JWK, ...]}} with at least one key')
        keys: dict[str, TrustedKey] = {}
        for entry in entries:
            kid, iss, dev = _parse_jwk(entry, where)
            if "d" in entry:
                raise ConfigError(
                    f"{where}: key {kid!r} carries a private part (d): a key set holds public "
                    "keys only (court-keys keyset makes one)"
                )
            raw = _unb64(str(entry.get("x", "")), f"{where}: key {kid!r} x")
            if len(raw) != 32:
                raise ConfigError(f"{where}: key {kid!r} x must be 32 bytes (an Ed25519 public key)")
            if kid in keys:
                raise ConfigError(f"{where}: kid {kid!r} appears twice")
            keys[kid] = TrustedKey(kid, iss, Ed25519PublicKey.from_public_bytes(raw), dev)
        return cls(keys)

    @classmethod
    def load(cls, path: str | Path) -> KeySet:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(
                f"COURT_TOKEN_KEYS: cannot read the key set {str(path)!r}: {exc.strerror}"
            ) from None
        try:
            data = json.loads(text)
        except ValueError:
            raise ConfigError(f"COURT_TOKEN_KEYS: {str(path)!r} is not JSON") from None
        return cls.parse(data, f"COURT_TOKEN_KEYS ({path})")

    def to_json(self) -> str:
        return json.dumps({"keys": [k.jwk() for k in self.keys.values()]}, indent=2) + "\n"


@dataclass(frozen=True)
class Signer:
    """A private key and its kid: what an issuing service (lobby, bot) signs tokens with."""

    kid: str
    issuer: str
    key: Ed25519PrivateKey
    dev: bool = False

    @classmethod
    def generate(cls, issuer: str, kid: str | None = None, *, dev: bool = False) -> Signer:
        if issuer not in MINTS:
            raise ValueError(f"issuer {issuer!r} mints no tokens; issuers: {', '.join(MINTS)}")
        kid = kid or f"{issuer.removeprefix('court-')}-{time.strftime('%Y%m%d')}-{secrets.token_hex(3)}"
        return cls(kid, issuer, Ed25519PrivateKey.generate(), dev)

    @classmethod
    def load(cls, path: str | Path, *, issuer: str) -> Signer:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(f"COURT_SIGNING_KEY: cannot read {str(path)!r}: {exc.strerror}") from None
        except ValueError:
            raise ConfigError(f"COURT_SIGNING_KEY: {str(path)!r} is not JSON (a JWK)") from None
        where = f"COURT_SIGNING_KEY ({path})"
        kid, iss, dev = _parse_jwk(data, where)
        if iss != issuer:
            raise ConfigError(f"{where}: the key belongs to {iss}, not to this service ({issuer})")
        raw = _unb64(str(data.get("d", "")), f"{where} d")
        if len(raw) != 32:
            raise ConfigError(f"{where}: d must be 32 bytes (an Ed25519 private key)")
        return cls(kid, iss, Ed25519PrivateKey.from_private_bytes(raw), dev)

    @property
    def public(self) -> TrustedKey:
        return TrustedKey(self.kid, self.issuer, self.key.public_key(), self.dev)

    def jwk(self) -> dict[str, Any]:
        return {**self.public.jwk(), "d": _b64(_raw_private(self.key))}

    def issue(
        self,
        sub: str,
        role: str,
        ttl: float = 3600.0,
        *,
        now: float | None = None,
        audience: Sequence[str] | None = None,
        **claims: Any,
    ) -> str:
        return issue_token(self, sub, role, ttl, now=now, audience=audience, **claims)


def issue_token(
    signer: Signer,
    sub: str,
    role: str,
    ttl: float = 3600.0,
    *,
    now: float | None = None,
    audience: Sequence[str] | None = None,
    **claims: Any,
) -> str:
    """A token for ``sub`` in ``role``, signed by ``signer`` (whose issuer must be allowed the role)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {quote(role)}; roles: {', '.join(ROLES)}")
    if role not in MINTS.get(signer.issuer, ()):
        raise ValueError(
            f"{signer.issuer} may not mint {role} tokens (it mints: "
            f"{', '.join(MINTS.get(signer.issuer, ())) or 'nothing'})"
        )
    if not sub or (role == "player" and sub.startswith(BOT_SEAT_PREFIX)):
        raise ValueError(
            f"a player's sub must be non-empty and not start with {quote(BOT_SEAT_PREFIX)}: {quote(sub)}"
        )
    if ttl <= 0:
        raise ValueError("ttl must be positive")
    iat = int(time.time() if now is None else now)
    body = {
        "iss": signer.issuer,
        "sub": sub,
        "role": role,
        "aud": list(audience or AUDIENCES[role]),
        "iat": iat,
        "nbf": iat,
        "exp": iat + int(ttl),
        **claims,
    }
    return jwt.encode(body, signer.key, algorithm=ALGORITHM, headers={"kid": signer.kid})


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


def signing_services() -> tuple[str, ...]:
    return tuple(i.removeprefix("court-") for i in MINTS)


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


# ---------------------------------------------------------------------------------- dev keys


@dataclass(frozen=True)
class DevKeys:
    folder: Path

    @property
    def key_set(self) -> Path:
        return self.folder / "token-keys.json"

    def signing_key(self, service: str) -> Path:
        return self.folder / f"{service}.jwk.json"

    @property
    def id_secret_file(self) -> Path:
        return self.folder / "id-secret"

    def id_secret(self) -> str:
        return self.id_secret_file.read_text().strip()

    @property
    def edge_secret_file(self) -> Path:
        return self.folder / "edge-secret"

    def edge_secret(self) -> str:
        """COURT_EDGE_SECRET in dev: court-web signs callers' addresses with it (court_kit.edge)."""
        return self.edge_secret_file.read_text().strip()


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def ensure_dev_keys(state_dir: Path | str) -> DevKeys:
    """Generate (once) the development keys under ``<state>/keys/``: a key pair per signing service,
    the key set of their public keys, a random id secret and a random edge secret (court-web signs
    callers' addresses with it, court_kit.edge). Safe when several services start at
    once (a file lock). Every key is marked ``court_dev``, so prod refuses them."""
    dk = DevKeys(Path(state_dir) / DEV_KEY_DIR)
    dk.folder.mkdir(parents=True, exist_ok=True)
    with open(dk.folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            publics = []
            for service in signing_services():
                path = dk.signing_key(service)
                if path.exists():
                    signer = Signer.load(path, issuer=issuer_for(service))
                else:
                    signer = Signer.generate(
                        issuer_for(service), f"dev-{service}-{secrets.token_hex(3)}", dev=True
                    )
                    _write_private(path, json.dumps(signer.jwk(), indent=2) + "\n")
                publics.append(signer.public)
            want = KeySet({k.kid: k for k in publics})
            current = None
            with contextlib.suppress(ConfigError):
                current = KeySet.load(dk.key_set)
            if current is None or not set(want.keys) <= set(current.keys):
                _write_private(dk.key_set, want.to_json())
            if not dk.id_secret_file.exists():
                _write_private(dk.id_secret_file, secrets.token_hex(32) + "\n")
            if not dk.edge_secret_file.exists():
                _write_private(dk.edge_secret_file, secrets.token_hex(32) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return dk


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
        settings = Settings.load(service)
        signer = load_signer(settings)
        token = issue_token(signer, args.sub, args.role, args.ttl, audience=args.aud)
    except (ConfigError, ValueError) as exc:
        print(f"court-token: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


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
            _write_private(Path(args.out), json.dumps(signer.jwk(), indent=2) + "\n")
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
