"""Token keys and minting: Ed25519 key pairs, the public key set, signing a token, and the
development keys. What ``court_kit.settings`` needs to fill in dev keys, without the settings
themselves (``court_kit.tokens`` verifies tokens and checks a service's keys against its settings;
it re-exports every name here). Who mints what and for whom: ``MINTS``, ``AUDIENCES`` (see
``court_kit.tokens``).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .checks import ConfigError, quote

ROLES = ("player", "bot", "service", "admin", "analytics")
ALGORITHM = "EdDSA"
BOT_SEAT_PREFIX = "bot:"
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
DEV_KEY_DIR = "keys"


def issuer_for(service: str) -> str:
    return f"court-{service}"


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


def signing_services() -> tuple[str, ...]:
    return tuple(i.removeprefix("court-") for i in MINTS)


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


def write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def ensure_dev_keys(state_dir: Path | str) -> DevKeys:
    """Generate (once) the development keys under ``<state>/keys/``: a key pair per signing service,
    the key set of their public keys, and a random id secret. Safe when several services start at
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
                    write_private(path, json.dumps(signer.jwk(), indent=2) + "\n")
                publics.append(signer.public)
            want = KeySet({k.kid: k for k in publics})
            current = None
            with contextlib.suppress(ConfigError):
                current = KeySet.load(dk.key_set)
            if current is None or not set(want.keys) <= set(current.keys):
                write_private(dk.key_set, want.to_json())
            if not dk.id_secret_file.exists():
                write_private(dk.id_secret_file, secrets.token_hex(32) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return dk
