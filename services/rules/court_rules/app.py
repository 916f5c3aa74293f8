"""The rules service process: ``court-rules``.

Settings come from the environment (court_kit.settings); the service's own:

    COURT_OUTBOX_SWEEP_DELAY   seconds after which the sweeper checks a state
                               record's events (default 5)
    COURT_GAME_CACHE           games kept in memory per replica (default 20000)

``RulesApp.start(settings)`` is what tests use (port 0, in process); ``main``
adds logging, signals and graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field

from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import EdgeInterceptor, add_health_and_reflection, create_server, run_service
from court_kit.settings import Settings
from court_kit.tokens import Verifier, preflight
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS

from .games import GameCache
from .outbox import Outbox
from .servicer import Faults, RulesServicer
from .store import GameStore

log = klog.get_logger("court_rules")

SERVICE_NAME = rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name


@dataclass
class RulesApp:
    settings: Settings
    nc: NATS
    store: GameStore
    cache: GameCache
    outbox: Outbox
    servicer: RulesServicer
    server: object
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    _stop_sweeper: asyncio.Event = field(default_factory=asyncio.Event)
    _sweeper: asyncio.Task | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    async def start(cls, settings: Settings, *, faults: Faults | None = None,
                    sweep_delay: float | None = None, sweep_ack_wait: float | None = None) -> RulesApp:
        preflight(settings)
        nc = await kjs.connect(settings.nats_servers(), name=f"court-rules@{settings.listen}",
                               **kjs.connect_options(settings))
        try:
            store = GameStore(nc, replicas=settings.stream_replicas)
            await store.ensure_streams()
            cache = GameCache(store, capacity=settings.extra_int("GAME_CACHE", 20_000, lo=1))
            outbox = Outbox(store, cache)
            cache.on_load = outbox.on_load
            servicer = RulesServicer(store, cache, outbox, id_secret=settings.id_secret, faults=faults)
            server, port = create_server(settings.listen, settings=settings,
                                         interceptors=[EdgeInterceptor(Verifier.for_service(settings))])
            rules_pb2_grpc.add_RulesServiceServicer_to_server(servicer, server)
            health = await add_health_and_reflection(server, [SERVICE_NAME], reflection_on=settings.reflection,
                                                    health_listen=settings.health_listen)
            await server.start()
        except BaseException:
            await nc.close()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, nc, store, cache, outbox, servicer, server, port, health, metrics)
        delay = settings.extra_float("OUTBOX_SWEEP_DELAY", 5.0) if sweep_delay is None else sweep_delay
        app._sweeper = asyncio.create_task(outbox.run_sweeper(app._stop_sweeper, delay=delay,
                                                              ack_wait=sweep_ack_wait))
        log.info("rules service listening", port=port, metrics_port=metrics.port if metrics else None)
        return app

    async def _stop_background(self) -> None:
        self._stop_sweeper.set()
        await self.outbox.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sweeper
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
