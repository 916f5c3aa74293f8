"""The edge's HTTP layer: one ASGI application in front of the generated Connect applications.

Every request, in order:

1. the client's address: the connection's peer, or, when that peer is one of
   ``COURT_WEB_TRUSTED_PROXIES`` (an ingress), the nearest untrusted hop of ``X-Forwarded-For``;
2. security headers on every response (CSP, ``X-Content-Type-Options``, ``Referrer-Policy``,
   ``X-Frame-Options``, ...), and CORS headers for origins in ``COURT_WEB_CORS_ORIGINS``;
3. by path:

   * ``/<package>.<Service>/<Method>`` of a public method (court_web.routes): CORS checked, the body
     bounded (``COURT_WEB_MAX_REQUEST_BYTES``), then the generated Connect / gRPC-Web application;
   * any other ``/<package>.<Service>/<Method>`` (admin-only, service-only, unknown): HTTP 404 with
     the Connect error ``unimplemented``, exactly as for a method that does not exist;
   * ``/healthz`` (liveness), ``/readyz`` (readiness: the upstreams answer gRPC health);
   * anything else: the web client's files (``COURT_WEB_STATIC``, court_web.static).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from court_kit import logging as klog
from court_kit.settings import ConfigError

from .forward import CLIENT
from .limits import REFUSED
from .routes import PUBLIC

log = klog.get_logger("court_web.http")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# what a Connect or gRPC-Web method path looks like: /court.rules.v1.RulesService/GetView
RPC_PATH = re.compile(r"^/[A-Za-z_][\w]*(?:\.[\w]+)+/[A-Za-z_]\w*$")

DEFAULT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

# request headers a Connect or gRPC-Web client sends (CORS preflight), and response headers it reads
ALLOW_HEADERS = (
    "authorization, content-type, connect-protocol-version, connect-timeout-ms, "
    "connect-accept-encoding, connect-content-encoding, accept-encoding, content-encoding, "
    "grpc-timeout, grpc-accept-encoding, grpc-encoding, x-grpc-web, x-user-agent"
)
EXPOSE_HEADERS = (
    "grpc-status, grpc-message, grpc-status-details-bin, content-encoding, connect-content-encoding"
)


def security_headers(csp: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"cross-origin-resource-policy", b"same-origin"),
        (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=()"),
    ]


def parse_networks(raw: str, name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    out = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        try:
            out.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ConfigError(f"{name} must be IP addresses or networks (CIDR), got {part!r}") from None
    return tuple(out)


def parse_origins(raw: str) -> frozenset[str]:
    out = set()
    for part in (p.strip().rstrip("/") for p in raw.split(",")):
        if not part:
            continue
        if part != "*":
            u = urlsplit(part)
            if u.scheme not in ("http", "https") or not u.netloc or u.path or u.query:
                raise ConfigError(
                    f"COURT_WEB_CORS_ORIGINS must be origins like https://play.example.org, got {part!r}"
                )
        out.add(part.lower())
    return frozenset(out)


def _header(scope: Scope, name: bytes) -> str:
    for k, v in scope.get("headers", ()):
        if k == name:
            return bytes(v).decode("latin-1")
    return ""


def _headers_all(scope: Scope, name: bytes) -> list[str]:
    return [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if k == name]


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def client_address(scope: Scope, trusted: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> str:
    """The client's own address: the peer, or behind trusted proxies the nearest untrusted
    ``X-Forwarded-For`` hop (read from the right, so a client cannot choose it by prepending)."""
    peer = scope.get("client")
    host = str(peer[0]) if peer else ""
    nets = tuple(trusted)
    if not nets:
        return host

    def is_trusted(addr: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return addr is not None and any(addr in n for n in nets)

    if not is_trusted(_ip(host)):
        return host
    hops = [h.strip() for line in _headers_all(scope, b"x-forwarded-for") for h in line.split(",")]
    for hop in reversed([h for h in hops if h]):
        addr = _ip(hop)
        if addr is None:
            break  # garbage in the chain: stop at the last proxy we trust
        if not is_trusted(addr):
            return str(addr)
        host = str(addr)
    return host


async def send_simple(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = b"text/plain; charset=utf-8",
    headers: Iterable[tuple[bytes, bytes]] = (),
    *,
    head: bool = False,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


async def connect_error(send: Send, status: int, code: str, message: str) -> None:
    """A Connect error as a unary response (HTTP status + JSON body); gRPC-Web clients read the HTTP
    status (404 -> unimplemented, 413/429 -> resource_exhausted, 403 -> permission_denied)."""
    body = json.dumps({"code": code, "message": message}).encode()
    await send_simple(send, status, body, b"application/json")


class EdgeHTTP:
    """The whole edge as one ASGI application (see the module doc)."""

    def __init__(
        self,
        services: Mapping[str, ASGIApp],
        static: ASGIApp,
        ready: Callable[[], Awaitable[tuple[bool, dict[str, str]]]] | None,
        *,
        cors_origins: frozenset[str],
        trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
        max_request_bytes: int,
        csp: str = DEFAULT_CSP,
    ):
        self.services = services  # "/court.rules.v1.RulesService" -> its generated Connect app
        self.static = static
        self.ready = ready  # set by court_web.app once the app exists
        self.cors_origins = cors_origins
        self.trusted = trusted_proxies
        self.max_request_bytes = max_request_bytes
        self.headers = security_headers(csp)

    def origin_allowed(self, origin: str) -> bool:
        return "*" in self.cors_origins or origin.rstrip("/").lower() in self.cors_origins

    def _same_origin(self, scope: Scope, origin: str) -> bool:
        host = _header(scope, b"host").lower()
        if self.trusted and _header(scope, b"x-forwarded-host"):
            peer = scope.get("client")
            addr = _ip(str(peer[0])) if peer else None
            if addr is not None and any(addr in n for n in self.trusted):
                host = _header(scope, b"x-forwarded-host").split(",")[0].strip().lower()
        return bool(host) and urlsplit(origin).netloc.lower() == host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return  # websockets: not served (uvicorn answers 403)
        CLIENT.set(client_address(scope, self.trusted))
        origin = _header(scope, b"origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin and self.origin_allowed(origin):
            cors = [
                (b"access-control-allow-origin", origin.encode()),
                (b"access-control-expose-headers", EXPOSE_HEADERS.encode()),
                (b"vary", b"Origin"),
            ]
        extra = self.headers + cors

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self._route(scope, receive, send_with_headers, origin)

    async def _route(self, scope: Scope, receive: Receive, send: Send, origin: str) -> None:
        path: str = scope["path"]
        method: str = scope["method"]
        if RPC_PATH.match(path):
            if method == "OPTIONS":
                await self._preflight(scope, send, origin)
                return
            if path not in PUBLIC:
                REFUSED.labels("unknown_method").inc()
                await connect_error(
                    send, 404, "unimplemented", f"{path.lstrip('/')} is not a method court-web serves"
                )
                return
            if origin and not self.origin_allowed(origin) and not self._same_origin(scope, origin):
                REFUSED.labels("origin").inc()
                await connect_error(
                    send,
                    403,
                    "permission_denied",
                    f"origin {origin} may not call this edge (not in COURT_WEB_CORS_ORIGINS)",
                )
                return
            content_type = _header(scope, b"content-type")
            if content_type.startswith("application/grpc") and not content_type.startswith(
                "application/grpc-web"
            ):
                await send_simple(
                    send,
                    415,
                    b"court-web speaks Connect and gRPC-Web; native gRPC clients call the services directly\n",
                )
                return
            length = _header(scope, b"content-length")
            if length.isdigit() and int(length) > self.max_request_bytes:
                REFUSED.labels("size").inc()
                await connect_error(
                    send,
                    413,
                    "resource_exhausted",
                    f"the request body has {int(length)} bytes; this edge takes at most "
                    f"{self.max_request_bytes} (COURT_WEB_MAX_REQUEST_BYTES)",
                )
                return
            service = path.rsplit("/", 1)[0]
            await self.services[service](scope, receive, send)
            return
        if path == "/healthz":
            await send_simple(send, 200, b"ok\n", head=method == "HEAD")
            return
        if path == "/readyz":
            ok, detail = await self.ready() if self.ready is not None else (False, {"web": "starting"})
            body = json.dumps({"ready": ok, "upstreams": detail}, sort_keys=True).encode() + b"\n"
            await send_simple(send, 200 if ok else 503, body, b"application/json", head=method == "HEAD")
            return
        await self.static(scope, receive, send)

    async def _preflight(self, scope: Scope, send: Send, origin: str) -> None:
        if not origin or not self.origin_allowed(origin):
            REFUSED.labels("origin").inc()
            await send_simple(
                send,
                403,
                f"origin {origin or '(none)'} is not allowed to call this edge (COURT_WEB_CORS_ORIGINS)\n".encode(),
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 204,
                "headers": [
                    (b"access-control-allow-methods", b"POST, GET"),
                    (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
                    (b"access-control-max-age", b"7200"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})
