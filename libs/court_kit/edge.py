"""The caller's own address behind court-web: signed by the edge, trusted only with its signature.

Behind the edge every browser's call reaches the services from the edge's address, so per-address
limits (the lobby's sign-up and sign-in limits, court_lobby.accounts) would throttle every browser
together. court-web therefore passes each call's client address in gRPC metadata::

    x-court-client-addr   the client's address as the edge saw it (an IP address)
    x-court-client-sig    "<unix seconds>.<hex HMAC-SHA256(COURT_EDGE_SECRET, addr + "\\n" + seconds)>"

and a service takes that address instead of the connection's peer only when the signature is
valid under its own ``COURT_EDGE_SECRET`` and at most ``MAX_SKEW`` seconds old or ahead. Anyone
else (a plain gRPC client sending the same headers, a stale or tampered signature, a service with
no secret configured) gets the connection's peer address, as before: a forged header changes
nothing. The secret is shared by the edge and the services (generated under ``<state>/keys/`` in
development, a Kubernetes Secret in deploy/); the edge holds no token key (docs/web.md).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable
from typing import Any

from .ratelimit import peer_host
from .settings import ConfigError

ADDR_HEADER = "x-court-client-addr"
SIG_HEADER = "x-court-client-sig"
MAX_SKEW = 60.0  # seconds a signature stays good (clocks of edge and service may differ a little)
MAX_ADDR = 64  # characters: an IPv6 address with a zone fits
MIN_EDGE_SECRET = 32


def check_edge_secret(value: str, *, dev: bool = False) -> str:
    """court-web's start-up check: present, and outside dev long enough."""
    if not value:
        raise ConfigError(
            "COURT_EDGE_SECRET is not set: court-web signs each caller's address with it and the lobby "
            f"checks the signature ({MIN_EDGE_SECRET}+ random characters, e.g. `openssl rand -hex 32`, "
            "the same value for court-web and the lobby; COURT_ENV=dev generates one)"
        )
    if not dev and len(value) < MIN_EDGE_SECRET:
        raise ConfigError(
            f"COURT_EDGE_SECRET is too short ({len(value)} characters): use {MIN_EDGE_SECRET} or more "
            "random characters (e.g. `openssl rand -hex 32`)"
        )
    return value


def _mac(secret: str, addr: str, stamp: str) -> str:
    return hmac.new(secret.encode(), f"{addr}\n{stamp}".encode(), hashlib.sha256).hexdigest()


def sign_client(secret: str, addr: str, now: float | None = None) -> tuple[tuple[str, str], tuple[str, str]]:
    """The two metadata entries the edge adds to a forwarded call."""
    stamp = str(int(time.time() if now is None else now))
    return (ADDR_HEADER, addr), (SIG_HEADER, f"{stamp}.{_mac(secret, addr, stamp)}")


def verified_client(
    metadata: Iterable[tuple[str, Any]] | None, secret: str, now: float | None = None
) -> str | None:
    """The signed client address in ``metadata``, or None when absent, stale or not signed with
    ``secret`` (an empty secret trusts nothing)."""
    if not secret or not metadata:
        return None
    addr = sig = None
    for key, value in metadata:
        if key == ADDR_HEADER:
            addr = value
        elif key == SIG_HEADER:
            sig = value
    if not isinstance(addr, str) or not isinstance(sig, str) or not addr or len(addr) > MAX_ADDR:
        return None
    stamp, _, mac = sig.partition(".")
    if not stamp.isdigit() or len(stamp) > 12:
        return None
    if abs((time.time() if now is None else now) - int(stamp)) > MAX_SKEW:
        return None
    if not hmac.compare_digest(mac, _mac(secret, addr, stamp)):
        return None
    return addr


def client_host(context: Any, secret: str) -> str:
    """The caller's host for per-address limits: the edge's signed client address when the call
    proves it comes from the edge, else the connection's peer host."""
    signed = verified_client(context.invocation_metadata(), secret)
    return signed if signed is not None else peer_host(context.peer())
