"""Passwords (argon2id) and the token pair the lobby issues: a short-lived bearer token every
service verifies (court_kit.tokens, role ``player``) and a one-time refresh token."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from court_kit.errors import InvalidArgument, ResourceExhausted
from court_kit.keys import Signer, issue_token
from court_kit.ratelimit import RateLimiter, peer_host
from court_kit.settings import Settings

MIN_PASSWORD, MAX_PASSWORD = 8, 256
_hasher = PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Verifying against this keeps an unknown name as slow as a wrong password. Made on first use,
    with the hasher's own parameters, not at import: one argon2 hash is 0.2 s of CPU, paid by every
    process that imports this module (each lobby replica, each tool, each test worker)."""
    return _hasher.hash("court-no-such-account")


def check_password(password: str) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidArgument(f"a password has {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return password


def hash_password(password: str) -> str:
    return _hasher.hash(check_password(password))


def verify_password(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _dummy_hash(), password) and password_hash is not None
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


class LoginLimits:
    """Sign-in and sign-up rate limits (argon2 is CPU-bound: a flood must not starve the lobby).

    Per peer address: ``COURT_LOGIN_RATE`` attempts a second (default 10, burst ``COURT_LOGIN_BURST``
    30) for Login; ``COURT_SIGNUP_RATE`` (default 2, burst ``COURT_SIGNUP_BURST`` 30) for
    CreateAccount and CreateGuest. Per account name: ``COURT_LOGIN_NAME_RATE`` Logins a second
    (default 0.5, burst ``COURT_LOGIN_NAME_BURST`` 10), so a password guesser spread over many
    addresses is slowed too. 0 turns a limit off. Exceeded: RESOURCE_EXHAUSTED saying when to retry,
    before any password hashing. Behind a proxy every client shares the proxy's address: raise the
    per-address limits or limit at the proxy. Password hashing runs on its own pool of
    ``COURT_PASSWORD_WORKERS`` threads (default 1 per replica), apart from the database threads.
    """

    def __init__(
        self,
        *,
        login: tuple[float, float] = (10.0, 30.0),
        name: tuple[float, float] = (0.5, 10.0),
        signup: tuple[float, float] = (2.0, 30.0),
        workers: int = 1,
    ):
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="argon2")
        self.login = RateLimiter(*login) if login[0] > 0 else None
        self.name = RateLimiter(*name) if name[0] > 0 else None
        self.signup = RateLimiter(*signup) if signup[0] > 0 else None

    @classmethod
    def from_settings(cls, settings: Settings) -> LoginLimits:
        def pair(name: str, rate: float, burst: float) -> tuple[float, float]:
            return (
                settings.extra_float(f"{name}_RATE", rate),
                max(1.0, settings.extra_float(f"{name}_BURST", burst)),
            )

        return cls(
            login=pair("LOGIN", 10.0, 30.0),
            name=pair("LOGIN_NAME", 0.5, 10.0),
            signup=pair("SIGNUP", 2.0, 30.0),
            workers=settings.extra_int("PASSWORD_WORKERS", 1, lo=1, hi=64),
        )

    @staticmethod
    def _check(limiter: RateLimiter | None, key: str, what: str) -> None:
        if limiter is None:
            return
        wait = limiter.take(key)
        if wait > 0:
            raise ResourceExhausted(f"too many {what}; try again in {max(1, round(wait + 0.5))} s")

    def check_login(self, peer: str, name: str) -> None:
        self._check(self.login, peer_host(peer), "sign-in attempts from your address")
        self._check(self.name, name.strip().casefold()[:64], "sign-in attempts for this account")

    def check_signup(self, peer: str) -> None:
        self._check(self.signup, peer_host(peer), "new accounts from your address")
