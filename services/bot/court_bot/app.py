"""The bot service process: ``court-bot``.

Settings: ``court_kit.settings`` (COURT_NATS_URL, COURT_LISTEN default 127.0.0.1:50054,
COURT_RULES_ADDR default 127.0.0.1:50051, COURT_TOKEN_KEYS, COURT_SIGNING_KEY (the bot service's
own key: it mints ``bot`` tokens and nothing else), COURT_ID_SECRET (its decisions' randomness), COURT_METRICS_LISTEN default
127.0.0.1:9104, ...) and the bot's own in ``court_bot.config`` (per-level time budgets
COURT_BOT_BUDGET_<LEVEL>_MS, concurrency, ack wait, ...).

``BotApp.start(settings)`` is what tests and benchmarks use (port 0, in process); ``main`` adds
logging, signals and graceful shutdown: health NOT_SERVING, in-flight Suggest calls and turns
finish (COURT_SHUTDOWN_GRACE), untaken turns stay in JetStream for the other replicas, then NATS
drains.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import grpc
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.health import Check, nats_check
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import client_channel, run_service, start_server
from court_kit.settings import Settings
from court_kit.tokens import preflight
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS

from .config import BotConfig
from .decide import Decider, find_adapter
from .servicer import BotServicer
from .turns import Faults, Journal, TurnConsumer, TurnHandler
from .upstream import BotRules

log = klog.get_logger("court_bot")

SERVICE_NAME = bot_pb2.DESCRIPTOR.services_by_name["BotService"].full_name


@dataclass
class BotApp:
    settings: Settings
    config: BotConfig
    nc: NATS
    rules_channel: grpc.aio.Channel
    decider: Decider
    handler: TurnHandler
    consumer: TurnConsumer
    servicer: BotServicer
    server: Any
    port: int
    health: HealthServicer
    metrics: MetricsServer | None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    service_names = (SERVICE_NAME,)

    def dependencies(self) -> dict[str, Check]:
        """Readiness: NATS (JetStream) is required (court_kit.health); the rules service is not
        (it has its own readiness, and a turn that cannot be played comes back later)."""
        return {"nats": nats_check(self.nc, self.settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05))}

    async def quiesce(self) -> None:
        """Shutdown begins: take no new turns (the ones in hand finish during the grace period)."""
        self.consumer._stopping.set()

    @property
    def journal(self) -> Journal:
        return self.consumer.journal

    @classmethod
    async def start(
        cls,
        settings: Settings,
        *,
        config: BotConfig | None = None,
        faults: Faults | None = None,
        adapters: Callable[[str], ModuleType | None] = find_adapter,
        name: str = "",
    ) -> BotApp:
        _, signer = preflight(settings)
        assert signer is not None
        config = config or BotConfig.from_settings(settings)
        decider = Decider(config.budgets_ms, threads=config.decision_threads, adapters=adapters)
        rules_channel = client_channel(settings.rules_addr, settings)
        nc = None
        try:
            nc = await kjs.connect(
                settings.nats_servers(), name=f"court-bot@{settings.listen}", **kjs.connect_options(settings)
            )
            rules = BotRules(rules_channel, signer, timeout=config.rules_timeout)
            handler = TurnHandler(
                rules,
                decider,
                settings.id_secret,
                retry_delay=config.retry_delay,
                faults=faults,
                replica=name or settings.listen,
            )
            consumer = TurnConsumer(
                nc, handler, concurrency=config.concurrency, ack_wait=config.ack_wait, catchup=config.catchup
            )
            servicer = BotServicer(
                rules_channel, decider, settings.id_secret, rules_timeout=config.rules_timeout
            )
            server, port, health = await start_server(
                settings,
                [SERVICE_NAME],
                lambda server: bot_pb2_grpc.add_BotServiceServicer_to_server(servicer, server),
            )
        except BaseException:
            if nc is not None:
                await nc.close()
            await rules_channel.close()
            decider.close()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(
            settings,
            config,
            nc,
            rules_channel,
            decider,
            handler,
            consumer,
            servicer,
            server,
            port,
            health,
            metrics,
        )
        if config.consume:
            consumer.start()
        log.info(
            "bot service listening",
            port=port,
            metrics_port=metrics.port if metrics else None,
            rules=settings.rules_addr,
            budgets_ms=config.budgets_ms,
            adapters=[
                g
                for g in ("queens_court", "hearts", "the_court", "court_wars")
                if decider.adapter(g) is not None
            ],
        )
        return app

    async def close(self, grace: float | None = None) -> None:
        """After the gRPC server has stopped: finish the turns in hand, then drain NATS."""
        await self.consumer.stop(self.settings.shutdown_grace if grace is None else grace)
        if self.metrics is not None:
            self.metrics.close()
        with contextlib.suppress(Exception):
            await self.nc.drain()
        await self.rules_channel.close()
        self.decider.close()

    async def stop(self, grace: float = 1.0) -> None:
        """Graceful: health NOT_SERVING, in-flight calls and turns finish, then NATS drains."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.close(grace)

    async def kill(self) -> None:
        """Abrupt (tests: a replica dying): no grace, no acks, no drain."""
        await self.consumer.kill()
        await self.server.stop(None)
        with contextlib.suppress(Exception):
            await self.nc.close()
        if self.metrics is not None:
            self.metrics.close()
        await self.rules_channel.close()
        self.decider.close()


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "bot",
        lambda settings: BotApp.start(settings, config=BotConfig.from_settings(settings)),
        argv,
        check=BotConfig.from_settings,
    )


if __name__ == "__main__":
    sys.exit(main())
