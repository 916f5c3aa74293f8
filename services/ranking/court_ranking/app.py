"""The ranking service process: ``court-ranking`` (serve) and ``court-ranking migrate``.

Settings come from the environment (court_kit.settings): COURT_DATABASE_URL (default a SQLite
file under COURT_STATE_DIR), COURT_NATS_URL, COURT_LISTEN (default 127.0.0.1:50053),
COURT_TOKEN_KEYS (the public token keys: ranking verifies tokens and mints none), COURT_SETTLE_SWEEP
(seconds between sweeps that settle any active game whose end the consumer has not settled, reading
its events back from the stream; default 30, one runs at start-up) and COURT_SETTLE_LEASE (seconds a
replica holds a game while settling it, default 60). The schema is migrated at start (Alembic;
``migrate`` runs only that) unless COURT_MIGRATE_ON_START=false, which only checks it is current
(deploy/ migrates in a Job).

TTL purge (``RankingStore.purge``, every COURT_PURGE_INTERVAL seconds, default 3600): the stored
events of games that ended more than COURT_RANKED_EVENTS_TTL ago (default 30 days; GetChallenges
of such a game then answers FAILED_PRECONDITION; its ledger entries and ratings stay).
``RankingApp.start(settings)`` is what tests use (port 0, in process).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import court_store
import grpc
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.health import Check, database_check, nats_check
from court_kit.loops import rest
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import run_service, start_server
from court_kit.settings import Settings
from court_kit.tokens import preflight
from court_proto.court.ranking.v1 import ranking_pb2, ranking_pb2_grpc
from court_store.purge import PurgeTask
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS
from sqlalchemy.engine import Engine

from .consumer import EventConsumer
from .servicer import RankingServicer
from .store import RankingStore, check_schema, migrate

log = klog.get_logger("court_ranking")

SERVICE_NAME = ranking_pb2.DESCRIPTOR.services_by_name["RankingService"].full_name


def open_database(settings: Settings, *, migrate_schema: bool | None = None) -> Engine:
    """The engine for COURT_DATABASE_URL, migrated (or, COURT_MIGRATE_ON_START=false, checked)."""
    return court_store.open_service_database(settings, migrate, check_schema, migrate_schema=migrate_schema)


@dataclass
class RankingApp:
    settings: Settings
    engine: Engine
    nc: NATS
    store: RankingStore
    consumer: EventConsumer
    server: grpc.aio.Server
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _sweeper: asyncio.Task[None] | None = None
    swept: int = 0  # games the settle sweep has looked at (tests)
    purger: PurgeTask | None = None
    _purge_task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    service_names = (SERVICE_NAME,)

    def dependencies(self) -> dict[str, Check]:
        """Readiness: NATS (the event consumer) and the database are required (court_kit.health)."""
        timeout = self.settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05)
        return {"nats": nats_check(self.nc, timeout), "database": database_check(self.engine, timeout)}

    @classmethod
    async def start(
        cls, settings: Settings, *, durable: str = "ranking", ack_wait: float = 30.0
    ) -> RankingApp:
        preflight(settings)
        engine = await asyncio.to_thread(open_database, settings)
        store = RankingStore(engine)
        nc = await kjs.connect(
            settings.nats_servers(), name=f"court-ranking@{settings.listen}", **kjs.connect_options(settings)
        )
        try:
            consumer = EventConsumer(nc, store, durable=durable, ack_wait=ack_wait)
            servicer = RankingServicer(store, backfill=consumer.backfill)
            server, port, health = await start_server(
                settings,
                [SERVICE_NAME],
                lambda server: ranking_pb2_grpc.add_RankingServiceServicer_to_server(servicer, server),
            )
        except BaseException:
            await nc.close()
            engine.dispose()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, engine, nc, store, consumer, server, port, health, metrics)
        app._task = asyncio.create_task(consumer.run(app._stop))
        app._sweeper = asyncio.create_task(
            app._sweep_loop(
                settings.extra_float("SETTLE_SWEEP", 30.0, lo=0.05),
                settings.extra_float("SETTLE_LEASE", 60.0, lo=0.1),
            )
        )
        ttl = timedelta(seconds=settings.extra_float("RANKED_EVENTS_TTL", 30 * 86400.0, lo=1.0))
        app.purger = PurgeTask(
            "ranking",
            lambda: store.purge(events_ttl=ttl),
            interval=settings.extra_float("PURGE_INTERVAL", 3600.0, lo=0.05),
        )
        app._purge_task = asyncio.create_task(app.purger.run(app._stop))
        log.info("ranking service listening", port=port, metrics_port=metrics.port if metrics else None)
        return app

    async def sweep(self, lease: float = 60.0) -> int:
        """Settle every active online game whose lease is free: its events read back from the stream
        (whatever the consumer missed), then settled; under the game row's lease, so two replicas
        never settle one game at once. Returns how many games it looked at."""
        n = 0
        for game, game_id in await asyncio.to_thread(self.store.unsettled):
            owner = uuid.uuid4().hex
            if not await asyncio.to_thread(self.store.acquire_lease, game_id, owner, lease):
                continue
            try:
                await self.consumer.backfill(game, game_id)
                await asyncio.to_thread(self.store.settle, game_id)
                n += 1
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.store.release_lease, game_id, owner)
        self.swept += n
        return n

    async def _sweep_loop(self, every: float, lease: float) -> None:
        while not self._stop.is_set():
            try:
                await self.sweep(lease)
            except Exception as exc:  # noqa: BLE001 - NATS or the database away for a moment
                log.warning("settle sweep failed", error=str(exc)[:200] or type(exc).__name__)
            await rest(self._stop, every)

    async def _stop_background(self) -> None:
        self._stop.set()
        for task in (self._task, self._sweeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._purge_task is not None:
            with contextlib.suppress(Exception):
                await self._purge_task
        if self.metrics is not None:
            self.metrics.close()

    async def close(self) -> None:
        """After the gRPC server has stopped: the consumer, then drain NATS, then the database."""
        await self._stop_background()
        with contextlib.suppress(Exception):
            await self.nc.drain()
        self.engine.dispose()

    async def stop(self, grace: float = 1.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.close()

    async def kill(self) -> None:
        """Abrupt (tests: a replica dying): nothing acknowledged after this, no drain."""
        await self._stop_background()
        await self.server.stop(None)
        with contextlib.suppress(Exception):
            await self.nc.close()
        self.engine.dispose()


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "ranking",
        RankingApp.start,
        argv,
        migrate=lambda settings: open_database(settings, migrate_schema=True).dispose(),
    )


if __name__ == "__main__":
    sys.exit(main())
