"""``court-analytics``: the public game records of the stream, landed as Parquet tables.

Settings (the environment, like every service): ``COURT_NATS_URL``, ``COURT_LISTEN`` (gRPC health
only, default 127.0.0.1:50055), ``COURT_METRICS_LISTEN`` (default 127.0.0.1:9105),
``COURT_STATE_DIR``, and its own:

* ``COURT_ANALYTICS_LAKE``: where the tables go: a folder (default ``<state>/lake``) or any
  pyarrow.fs URL (``s3://bucket/prefix``, ``gs://...``, ``file:///abs/path``);
* ``COURT_ANALYTICS_DURABLE`` (default ``analytics``): the durable consumer's name, shared by
  replicas;
* ``COURT_ANALYTICS_BATCH`` (256 records a fetch), ``COURT_ANALYTICS_ACK_WAIT`` (30 s), ``COURT_ANALYTICS_SWEEP`` (5 s),
  ``COURT_ANALYTICS_COMPACT_EVERY`` (300 s), ``COURT_ANALYTICS_SETTLE`` (600 s: how long a game
  has been done before its files are compacted).

Health SERVING once the consumer runs; on SIGTERM health goes NOT_SERVING, the consumer stops
fetching (a fetched, unacknowledged batch is delivered again), NATS is drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field

from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import add_health_and_reflection, create_server, run_service
from court_kit.settings import ConfigError, Settings
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS

from .consumer import LakeConsumer
from .lake import SETTLE, Lake

log = klog.get_logger("court_analytics.app")
SERVICE_NAME = "court.analytics.v1.Analytics"


def lake_location(settings: Settings) -> str:
    return settings.extra.get("COURT_ANALYTICS_LAKE") or str(settings.state_dir / "lake")


@dataclass
class AnalyticsApp:
    settings: Settings
    nc: NATS
    lake: Lake
    consumer: LakeConsumer
    server: object
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task | None = None

    @classmethod
    async def start(cls, settings: Settings) -> AnalyticsApp:
        try:
            lake = Lake(lake_location(settings), settle=settings.extra_float("ANALYTICS_SETTLE", SETTLE))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"COURT_ANALYTICS_LAKE {lake_location(settings)[:80]!r}: {exc}") from None
        nc = await kjs.connect(settings.nats_servers(), name=f"court-analytics@{settings.listen}",
                               **kjs.connect_options(settings))
        try:
            consumer = LakeConsumer(
                nc, lake, durable=settings.extra.get("COURT_ANALYTICS_DURABLE", "analytics"),
                ack_wait=settings.extra_float("ANALYTICS_ACK_WAIT", 30.0, 0.5),
                batch=settings.extra_int("ANALYTICS_BATCH", 256, 1, 4096),
                sweep_every=settings.extra_float("ANALYTICS_SWEEP", 5.0, 0.05),
                compact_every=settings.extra_float("ANALYTICS_COMPACT_EVERY", 300.0, 0.1),
                fault=settings.extra.get("COURT_ANALYTICS_FAULT", ""))
            server, port = create_server(settings.listen)
            health = await add_health_and_reflection(server, [SERVICE_NAME])
            await server.start()
        except BaseException:
            await nc.close()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, nc, lake, consumer, server, port, health, metrics)
        app._task = asyncio.create_task(consumer.run(app._stop))
        log.info("analytics service listening", port=port, lake=lake.root,
                 metrics_port=metrics.port if metrics else None)
        return app

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 10.0)
        if self.metrics is not None:
            self.metrics.close()
        with contextlib.suppress(Exception):
            await self.nc.drain()


def main(argv: list[str] | None = None) -> int:
    return run_service("analytics", AnalyticsApp.start, argv)


if __name__ == "__main__":
    sys.exit(main())
