"""Passwords (argon2id) and the token pair the lobby issues: a short-lived bearer token every
service verifies (court_kit.tokens, role ``player``) and a one-time refresh token."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from court_kit.errors import InvalidArgument
from court_kit.tokens import Signer, issue_token

MIN_PASSWORD, MAX_PASSWORD = 8, 256
_hasher = PasswordHasher()
# verifying against this keeps an unknown name as slow as a wrong password
_DUMMY_HASH = _hasher.hash("court-no-such-account")


def check_password(password: str) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidArgument(f"a password has {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return password


def hash_password(password: str) -> str:
    return _hasher.hash(check_password(password))


def verify_password(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)


@dataclass(frozen=True, slots=True)
class TokenPolicy:
    signer: Signer  # the lobby's own private key: the only one that mints player identities
    ttl: float = 3600.0  # the bearer token
    refresh_ttl: float = 30 * 24 * 3600.0

    def access(self, player_id: str) -> tuple[str, datetime]:
        now = time.time()
        token = issue_token(self.signer, player_id, "player", self.ttl, now=now)
        return token, datetime.fromtimestamp(int(now) + int(self.ttl), UTC)

    @property
    def refresh_delta(self) -> timedelta:
        return timedelta(seconds=self.refresh_ttl)
