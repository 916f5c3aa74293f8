"""The lobby service process: ``court-lobby`` (serve) and ``court-lobby migrate``.

Settings come from the environment (court_kit.settings): COURT_DATABASE_URL (default a SQLite
file under COURT_STATE_DIR), COURT_LISTEN (default 127.0.0.1:50052), COURT_RULES_ADDR,
COURT_RANKING_ADDR, COURT_TOKEN_KEYS and COURT_SIGNING_KEY (the lobby's private key: it alone
signs player identities), and the lobby's own COURT_TOKEN_TTL (seconds a bearer
token lives, default 3600) and COURT_REFRESH_TTL (default 30 days); the start saga's
COURT_START_SWEEP (seconds between sweeps for lobbies left in ``starting``, default 10; one runs
at start-up) and COURT_START_LEASE (seconds a replica holds a lobby while driving it, default 30).

TTL purges (``store.purge``, every COURT_PURGE_INTERVAL seconds, default 3600): request-log rows
older than COURT_REQUEST_TTL (default 7 days), refresh tokens past their expiry, lobbies of
finished or abandoned games older than COURT_FINISHED_LOBBY_TTL (default 30 days).
Turn clock (docs/clock.md): every COURT_ABANDON_SWEEP seconds (default 30) the lobby abandons the
started games whose every person's seat has been away for the lobby's abandon_after_seconds, and
finishes every abandon a backend was away for (every person asked AbandonGame: the game is closed
in the rules service, then every ante refunded, then the lobby marked abandoned). Every replica
sweeps; each game is abandoned by one, under the lobby row's lease (COURT_ABANDON_LEASE seconds,
default 60), the others pass it by.

The schema is migrated at start (Alembic; ``migrate`` runs only that) unless
COURT_MIGRATE_ON_START=false, which only checks it is current (deploy/ migrates in a Job).
``LobbyApp.start(settings)`` is what tests use.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from datetime import timedelta

import court_store
import grpc
from court_kit import logging as klog
from court_kit.health import Check, database_check
from court_kit.loops import rest
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import run_service, start_server
from court_kit.settings import Settings
from court_kit.tokens import preflight
from court_proto.court.lobby.v1 import lobby_pb2, lobby_pb2_grpc
from court_store.purge import PurgeTask
from grpc_health.v1._async import HealthServicer
from sqlalchemy.engine import Engine

from .accounts import LoginLimits, TokenPolicy
from .application import LobbyApplication
from .clients import Backends
from .saga import Faults, Starter
from .servicer import PUBLIC_METHODS, LobbyServicer, render_start
from .store import LobbyStore, check_schema, migrate, purge

log = klog.get_logger("court_lobby")

SERVICE_NAME = lobby_pb2.DESCRIPTOR.services_by_name["LobbyService"].full_name


def open_database(settings: Settings, *, migrate_schema: bool | None = None) -> Engine:
    """The engine for COURT_DATABASE_URL, migrated (or, COURT_MIGRATE_ON_START=false, checked)."""
    return court_store.open_service_database(settings, migrate, check_schema, migrate_schema=migrate_schema)


@dataclass
class LobbyApp:
    settings: Settings
    engine: Engine
    store: LobbyStore
    backends: Backends
    server: grpc.aio.Server
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    starter: Starter
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    purger: PurgeTask | None = None
    _purge_task: asyncio.Task[None] | None = None
    _away_task: asyncio.Task[None] | None = None
    servicer: LobbyServicer | None = None
    application: LobbyApplication | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    service_names = (SERVICE_NAME,)

    def dependencies(self) -> dict[str, Check]:
        """Readiness: the database is required (court_kit.health); rules and ranking are other
        services with readiness of their own (calls that need them answer UNAVAILABLE meanwhile)."""
        return {
            "database": database_check(self.engine, self.settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05))
        }

    @classmethod
    async def start(cls, settings: Settings, *, faults: Faults | None = None) -> LobbyApp:
        _, signer = preflight(settings)
        assert signer is not None
        engine = await asyncio.to_thread(open_database, settings)
        store = LobbyStore(engine)
        backends = Backends(settings, signer)
        try:
            tokens = TokenPolicy(
                signer,
                ttl=settings.extra_float("TOKEN_TTL", 3600.0, lo=1.0),
                refresh_ttl=settings.extra_float("REFRESH_TTL", 30 * 24 * 3600.0, lo=1.0),
            )
            starter = Starter(
                store,
                backends,
                render_start,
                lease=settings.extra_float("START_LEASE", 30.0, lo=0.1),
                sweep=settings.extra_float("START_SWEEP", 10.0, lo=0.05),
                faults=faults,
            )
            application = LobbyApplication(
                store, backends, starter, abandon_lease=settings.extra_float("ABANDON_LEASE", 60.0, lo=0.1)
            )
            servicer = LobbyServicer(application, tokens, LoginLimits.from_settings(settings))
            server, port, health = await start_server(
                settings,
                [SERVICE_NAME],
                lambda server: lobby_pb2_grpc.add_LobbyServiceServicer_to_server(servicer, server),
                public_methods=PUBLIC_METHODS,
            )
        except BaseException:
            await backends.close()
            engine.dispose()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        log.info("lobby service listening", port=port, metrics_port=metrics.port if metrics else None)
        app = cls(settings, engine, store, backends, server, port, health, metrics, starter)
        app._task = asyncio.create_task(starter.run(app._stop))  # leftover starts now, then every sweep
        day = 86400.0
        request_ttl = timedelta(seconds=settings.extra_float("REQUEST_TTL", 7 * day, lo=1.0))
        finished_ttl = timedelta(seconds=settings.extra_float("FINISHED_LOBBY_TTL", 30 * day, lo=1.0))
        app.purger = PurgeTask(
            "lobby",
            lambda: purge(store, request_ttl=request_ttl, finished_ttl=finished_ttl),
            interval=settings.extra_float("PURGE_INTERVAL", 3600.0, lo=0.05),
        )
        app._purge_task = asyncio.create_task(app.purger.run(app._stop))
        app.servicer = servicer
        app.application = application
        app._away_task = asyncio.create_task(
            app._abandon_away(application, settings.extra_float("ABANDON_SWEEP", 30.0, lo=0.05))
        )
        return app

    async def _abandon_away(self, application: LobbyApplication, every: float) -> None:
        """Until stopped: finish the abandons a backend was away for (every person asked), and
        abandon games every person of which has been away for the abandon time."""
        while not self._stop.is_set():
            if await rest(self._stop, every):
                return
            try:
                await application.finish_abandons()
                await application.abandon_away_games()
            except Exception as exc:  # noqa: BLE001 - the database or rules away for a moment: next round
                log.warning("abandon sweep failed", error=str(exc)[:200] or type(exc).__name__)

    async def _stop_background(self) -> None:
        self._stop.set()
        if self._purge_task is not None:
            with contextlib.suppress(Exception):
                await self._purge_task
        for t in (self._away_task,):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def close(self) -> None:
        await self._stop_background()
        if self.metrics is not None:
            self.metrics.close()
        with contextlib.suppress(Exception):
            await self.backends.close()
        self.engine.dispose()

    async def stop(self, grace: float = 1.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.close()


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "lobby",
        LobbyApp.start,
        argv,
        migrate=lambda settings: open_database(settings, migrate_schema=True).dispose(),
    )


if __name__ == "__main__":
    sys.exit(main())
