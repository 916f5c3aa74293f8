"""The rules service process: ``court-rules``.

Settings come from the environment (court_kit.settings); the service's own:

    COURT_GAME_STREAMS         how many streams the game logs are spread over (default 1;
                               court_contract.records: fixed for the life of a deployment)
    COURT_PROJECTOR            on (default): run the projector (court_rules.projector) in this
                               process; off: a court-projector process runs it (court_kit.settings)
    COURT_PROJECTOR_BATCH, COURT_PROJECTOR_ACK_WAIT   the projector's fetch size (256) and
                               ack wait (30 s)
    COURT_PROJECTOR_LINGER     seconds a projector batch waits, while the log is busy, for the
                               records right behind its first (default 0.003; 0: never)
    COURT_GAME_CACHE           games kept in memory per replica (default 20000)
    COURT_FINISHED_RETENTION   how long a finished game stays in the hot streams before the
                               janitor purges it (it stays readable from the archive; default 2d)
    COURT_CLOCK_ACK_WAIT       seconds before a due clock record a replica took (and died with)
                               goes to another replica (default 10)
    COURT_CLOCK_MAX_PENDING    clock records JetStream holds for the replicas at once (default 100000)
    COURT_CLOCK_SECOND_MS      dev/test only: milliseconds one clock second lasts (default 1000;
                               docs/clock.md)

``RulesApp.start(settings)`` is what tests use (port 0, in process); ``main``
adds logging, signals and graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from court_contract import records as krec
from court_kit import clock as kitclock
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.health import Check, nats_check
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import run_service, start_server
from court_kit.settings import Settings
from court_kit.tokens import preflight
from court_proto.court.rules.v1 import rules_pb2
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS

from .application import Faults, RulesApplication
from .archive import run_janitor
from .clockdriver import ClockDriver
from .games import GameCache
from .projector import Projector, projector_for
from .servertime import ServerClock
from .servicer import RulesServicer, add_to_server
from .store import GameStore, ensure_streams_ready
from .tasks import stop_tasks

log = klog.get_logger("court_rules")

SERVICE_NAME = rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name


@dataclass
class RulesApp:
    settings: Settings
    nc: NATS
    store: GameStore
    cache: GameCache
    projector: Projector | None
    application: RulesApplication
    servicer: RulesServicer
    server: grpc.aio.Server
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    _stop_sweeper: asyncio.Event = field(default_factory=asyncio.Event)
    _projecting: asyncio.Task[None] | None = None
    _janitor: asyncio.Task[None] | None = None
    _clock: asyncio.Task[None] | None = None
    _server_time: asyncio.Task[None] | None = None
    driver: ClockDriver | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    service_names = (SERVICE_NAME,)

    def dependencies(self) -> dict[str, Check]:
        """Readiness: NATS (JetStream) is required (court_kit.health)."""
        return {"nats": nats_check(self.nc, self.settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05))}

    @classmethod
    async def start(
        cls,
        settings: Settings,
        *,
        faults: Faults | None = None,
        projector: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> RulesApp:
        """``projector``: run the projector here (default: ``COURT_PROJECTOR``, on). ``clock``: this
        replica's own clock (seconds); only its rate matters: every time the service writes or the
        turn clock fires against is the NATS server's, measured on it (``servertime``)."""
        retention = kjs.parse_age(
            "COURT_FINISHED_RETENTION", settings.extra.get("COURT_FINISHED_RETENTION", "2d")
        )
        second_ms = kitclock.second_ms(settings.env, settings.extra)
        preflight(settings)
        nc = await kjs.connect(
            settings.nats_servers(),
            name=f"court-rules@{settings.listen}",
            # its own appends do not come back as wakes: RulesApplication wakes its watchers itself
            no_echo=True,
            **kjs.connect_options(settings),
        )
        try:
            store = GameStore(nc, replicas=settings.stream_replicas, environ=settings.extra)
            await ensure_streams_ready(store)
            server_time = ServerClock(nc, krec.game_stream(0), local=clock)
            await server_time.sync()
            cache = GameCache(store, capacity=settings.extra_int("GAME_CACHE", 20_000, lo=1))
            if projector is None:
                projector = settings.projector
            proj = projector_for(store, settings) if projector else None
            application = RulesApplication(
                store,
                cache,
                id_secret=settings.id_secret,
                faults=faults,
                clock=server_time.now,
                clock_second_ms=second_ms,
            )
            servicer = RulesServicer(application)
            server, port, health = await start_server(
                settings,
                [SERVICE_NAME],
                lambda server: add_to_server(servicer, server),
            )
        except BaseException:
            await nc.close()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, nc, store, cache, proj, application, servicer, server, port, health, metrics)
        if proj is not None:
            app._projecting = asyncio.create_task(proj.run(app._stop_sweeper))
        app._janitor = asyncio.create_task(run_janitor(store, app._stop_sweeper, retention=retention))
        app.driver = ClockDriver(
            application,
            cache,
            secret=settings.id_secret,
            clock=server_time.now,
            ack_wait=settings.extra_float("CLOCK_ACK_WAIT", 10.0, lo=1.0),
            max_pending=settings.extra_int("CLOCK_MAX_PENDING", 100_000, lo=1),
        )
        app._clock = asyncio.create_task(app.driver.run(app._stop_sweeper))
        app._server_time = asyncio.create_task(server_time.run(app._stop_sweeper))
        log.info("rules service listening", port=port, metrics_port=metrics.port if metrics else None)
        return app

    async def _stop_background(self) -> None:
        """Told to stop and cancelled, then waited for at most 5 s (``tasks.stop_tasks``); closing
        NATS afterwards ends whatever is still in flight."""
        self._stop_sweeper.set()
        pending = await stop_tasks((self._projecting, self._janitor, self._clock, self._server_time), 5.0)
        if pending:
            log.warning("background work still stopping; NATS is closed under it", tasks=len(pending))
        if self.metrics is not None:
            self.metrics.close()

    async def close(self) -> None:
        """After the gRPC server has stopped: background work, then drain NATS."""
        await self._stop_background()
        await self.store.publisher.close()
        with contextlib.suppress(Exception):
            await self.nc.drain()

    async def stop(self, grace: float = 1.0) -> None:
        """Graceful: health NOT_SERVING, in-flight calls finish, then NATS drains."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.close()

    async def kill(self) -> None:
        """Abrupt (tests: a replica dying): no grace, no drain."""
        await self._stop_background()
        await self.server.stop(None)
        with contextlib.suppress(Exception):
            await self.nc.close()


def main(argv: list[str] | None = None) -> int:
    return run_service("rules", RulesApp.start, argv)


if __name__ == "__main__":
    sys.exit(main())
