"""The edge process: ``court-web`` (docs/web.md).

Settings: court_kit.settings (``COURT_WEB_ADDR`` the listen address, default 127.0.0.1:8080;
``COURT_RULES_ADDR``, ``COURT_LOBBY_ADDR``, ``COURT_RANKING_ADDR``, ``COURT_BOT_ADDR`` and
``COURT_TLS_CA`` for the calls it forwards; ``COURT_TLS_CERT``/``COURT_TLS_KEY``: it serves HTTPS; ``COURT_EDGE_SECRET``; ``COURT_METRICS_LISTEN``
default 127.0.0.1:9107; logging, shutdown grace) and the edge's own (``WebConfig``):

    COURT_WEB_STATIC                 the built web client (default web/dist)
    COURT_WEB_CORS_ORIGINS           origins other than the edge's own that may call it (comma-
                                     separated, e.g. https://play.example.org; "*" any; default none)
    COURT_WEB_TRUSTED_PROXIES        addresses or CIDRs of proxies whose X-Forwarded-For is believed
                                     (default none: the peer is the client)
    COURT_WEB_MAX_REQUEST_BYTES      largest request body (default 65536)
    COURT_WEB_MAX_STREAMS_PER_CLIENT open WatchGame streams per client address (default 32)
    COURT_WEB_RATE, COURT_WEB_BURST  calls a second per client address (default 50, burst 200; 0: off)
    COURT_WEB_CALL_TIMEOUT           seconds a unary call may take upstream when the client sets no
                                     deadline (default 30)
    COURT_WEB_MAX_CONNECTIONS        open connections at most; more get HTTP 503 (default 10000)
    COURT_WEB_CSP                    the Content-Security-Policy (default court_web.http.DEFAULT_CSP)

``WebApp.start(settings)`` is what tests and benchmarks use (port 0, in process); ``main`` adds
logging, signals and the graceful shutdown of court_kit.server.run_service: readiness 503, open
calls get ``COURT_SHUTDOWN_GRACE`` seconds, then the connections close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import socket
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import uvicorn
from court_kit import logging as klog
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import client_channel, run_service
from court_kit.settings import Settings, listen_host_port
from court_kit.tokens import preflight
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .codecs import CODECS
from .forward import Forwarder, StreamChannels
from .http import DEFAULT_CSP, EdgeHTTP, parse_networks, parse_origins
from .limits import ClientLimits
from .routes import UPSTREAMS
from .static import StaticFiles

log = klog.get_logger("court_web")

REQUIRED = ("rules", "lobby")  # readiness: without these nothing can be played
READY_CACHE = 1.0  # seconds a readiness answer is reused (a probe flood costs the upstreams nothing)
# the edge's channels reconnect quickly after an upstream comes back (gRPC's default backoff grows
# to two minutes, all that time answering UNAVAILABLE)
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


# the edge's own settings (beyond court_kit.settings'), as WebConfig reads them
SETTINGS = (
    "COURT_WEB_STATIC",
    "COURT_WEB_CORS_ORIGINS",
    "COURT_WEB_TRUSTED_PROXIES",
    "COURT_WEB_MAX_REQUEST_BYTES",
    "COURT_WEB_MAX_STREAMS_PER_CLIENT",
    "COURT_WEB_RATE",
    "COURT_WEB_BURST",
    "COURT_WEB_CALL_TIMEOUT",
    "COURT_WEB_MAX_CONNECTIONS",
    "COURT_WEB_CSP",
)


@dataclass(frozen=True)
class WebConfig:
    static: Path
    cors_origins: frozenset[str]
    trusted_proxies: tuple[Any, ...]
    max_request_bytes: int
    streams_per_client: int
    rate: float
    burst: float
    call_timeout: float
    max_connections: int
    csp: str

    @classmethod
    def from_settings(cls, settings: Settings) -> WebConfig:
        extra = settings.extra
        return cls(
            static=Path(extra.get("COURT_WEB_STATIC", "web/dist")),
            cors_origins=parse_origins(extra.get("COURT_WEB_CORS_ORIGINS", "")),
            trusted_proxies=parse_networks(
                extra.get("COURT_WEB_TRUSTED_PROXIES", ""), "COURT_WEB_TRUSTED_PROXIES"
            ),
            max_request_bytes=settings.extra_int(
                "WEB_MAX_REQUEST_BYTES", 65536, lo=1024, hi=64 * 1024 * 1024
            ),
            streams_per_client=settings.extra_int("WEB_MAX_STREAMS_PER_CLIENT", 32, lo=1, hi=100_000),
            rate=settings.extra_float("WEB_RATE", 50.0),
            burst=max(1.0, settings.extra_float("WEB_BURST", 200.0)),
            call_timeout=settings.extra_float("WEB_CALL_TIMEOUT", 30.0, lo=0.01),
            max_connections=settings.extra_int("WEB_MAX_CONNECTIONS", 10_000, lo=1, hi=1_000_000),
            csp=extra.get("COURT_WEB_CSP", DEFAULT_CSP),
        )


class _Uvicorn(uvicorn.Server):
    def capture_signals(self) -> Generator[None, None, None]:  # type: ignore[override]
        return contextlib.nullcontext()  # type: ignore[return-value]  # court_kit.server owns the signals


class _Server:
    """What court_kit.server.run_service stops: the HTTP server, gracefully within ``grace``."""

    def __init__(self, server: _Uvicorn, task: asyncio.Task[None]):
        self.uv, self.task = server, task

    async def stop(self, grace: float | None) -> None:
        self.uv.config.timeout_graceful_shutdown = math.ceil(max(0.0, grace or 0.0))
        self.uv.should_exit = True
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self.task), (grace or 0.0) + 2.0)
        if not self.task.done():
            self.uv.force_exit = True
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


class _Health:
    """Readiness state: draining once the shutdown begins."""

    def __init__(self) -> None:
        self.draining = False

    async def enter_graceful_shutdown(self) -> None:
        self.draining = True


def _listen_socket(listen: str) -> socket.socket:
    addr = listen_host_port(listen)
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind((host or "0.0.0.0", int(port)))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


@dataclass
class WebApp:
    settings: Settings
    config: WebConfig
    channels: dict[str, grpc.aio.Channel]
    forwarder: Forwarder
    asgi: EdgeHTTP
    server: _Server
    health: _Health
    port: int
    metrics: MetricsServer | None
    _ready: tuple[float, bool, dict[str, str]] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.settings.tls_cert else 'http'}://127.0.0.1:{self.port}"

    @classmethod
    async def start(cls, settings: Settings, *, config: WebConfig | None = None) -> WebApp:
        preflight(settings)
        config = config or WebConfig.from_settings(settings)
        addresses = {up.key: getattr(settings, f"{up.key}_addr") for up in UPSTREAMS}
        channels = {k: client_channel(a, settings, CHANNEL_OPTIONS) for k, a in addresses.items()}
        limits = ClientLimits(
            rate=config.rate, burst=config.burst, streams_per_client=config.streams_per_client
        )
        # separate connections, each its own (not grpc's shared subchannel pool), for the streams
        stream_options = (*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
        streams = {
            k: StreamChannels(
                functools.partial(client_channel, a, settings, stream_options), settings.max_streams
            )
            for k, a in addresses.items()
        }
        forwarder = Forwarder(
            channels,
            addresses,
            limits,
            edge_secret=settings.edge_secret,
            call_timeout=config.call_timeout,
            stream_channels=streams,
        )
        services = {
            f"/{up.full_name}": up.asgi_class(
                forwarder.service(up), read_max_bytes=config.max_request_bytes, codecs=CODECS
            )
            for up in UPSTREAMS
        }
        health = _Health()
        asgi = EdgeHTTP(
            services,
            StaticFiles(config.static),
            None,
            cors_origins=config.cors_origins,
            trusted_proxies=config.trusted_proxies,
            max_request_bytes=config.max_request_bytes,
            csp=config.csp,
        )
        for name in ("uvicorn", "uvicorn.error"):  # its start and stop lines: ours say more, structured
            logging.getLogger(name).setLevel(logging.WARNING)
        sock = _listen_socket(settings.listen)
        uv = _Uvicorn(
            uvicorn.Config(
                asgi,
                loop="none",
                http="httptools",
                ws="none",
                lifespan="off",
                log_config=None,
                access_log=False,
                proxy_headers=False,
                server_header=False,
                limit_concurrency=config.max_connections,
                timeout_keep_alive=30,
                timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
                # COURT_TLS_CERT/KEY: HTTPS (prod: the ingress talks HTTPS to the edge)
                ssl_certfile=settings.tls_cert or None,
                ssl_keyfile=settings.tls_key or None,
            )
        )
        task = asyncio.create_task(uv.serve(sockets=[sock]), name="court-web-http")
        while not uv.started:  # uvicorn offers no event for "listening"
            if task.done():
                sock.close()
                for ch in channels.values():
                    await ch.close()
                task.result()
                raise RuntimeError("court-web's HTTP server stopped during start-up")
            await asyncio.sleep(0.01)
        port = int(sock.getsockname()[1])
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, config, channels, forwarder, asgi, _Server(uv, task), health, port, metrics)
        asgi.ready = app.readiness
        if not config.static.is_dir():
            log.warning("web client not built", static=str(config.static))
        log.info(
            "service listening",
            port=port,
            url=app.url,
            static=str(config.static),
            upstreams=addresses,
            metrics_port=metrics.port if metrics else None,
        )
        return app

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        """The upstreams' gRPC health (``""``), asked at most once a second; not ready while
        draining or while a required upstream (rules, lobby) does not answer SERVING."""
        now = time.monotonic()
        if self._ready is not None and now - self._ready[0] < READY_CACHE:
            _, ok, detail = self._ready
        else:
            keys = list(self.channels)
            answers = await asyncio.gather(*(self._check(k) for k in keys))
            detail = dict(zip(keys, answers, strict=True))
            ok = all(detail[k] == "SERVING" for k in REQUIRED)
            self._ready = (now, ok, detail)
        if self.health.draining:
            return False, {**detail, "web": "draining"}
        return ok, detail

    async def _check(self, key: str) -> str:
        stub = health_pb2_grpc.HealthStub(self.channels[key])
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
        except grpc.aio.AioRpcError as err:
            return f"{err.code().name}: {err.details() or ''}"[:200]
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

    async def close(self) -> None:
        for ch in self.channels.values():
            await ch.close()
        for pool in self.forwarder.stream_channels.values():
            await pool.close()
        if self.metrics is not None:
            self.metrics.close()

    async def stop(self, grace: float = 0.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.close()


def main(argv: list[str] | None = None) -> int:
    return run_service("web", WebApp.start, argv)
