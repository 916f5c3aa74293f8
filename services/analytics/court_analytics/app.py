"""``court-analytics``: the public game records of the stream, landed as Parquet tables.

Settings (the environment, like every service): ``COURT_NATS_URL``, ``COURT_LISTEN`` (gRPC health
only, default 127.0.0.1:50055), ``COURT_METRICS_LISTEN`` (default 127.0.0.1:9105),
``COURT_STATE_DIR``, and its own:

* ``COURT_ANALYTICS_LAKE``: where the tables go: a folder (default ``<state>/lake``) or any
  pyarrow.fs URL (``s3://bucket/prefix``, ``gs://...``, ``file:///abs/path``);
* ``COURT_ANALYTICS_DURABLE`` (default ``analytics``): the durable consumer's name, shared by
  replicas;
* ``COURT_ANALYTICS_BATCH`` (256 records at most a batch), ``COURT_ANALYTICS_LINGER`` (0.5 s: how
  long a batch gathers records after its first, so live play's trickle is staged and acknowledged
  in one pass; 0: what is delivered at once), ``COURT_ANALYTICS_ACK_WAIT`` (30 s), ``COURT_ANALYTICS_SWEEP`` (5 s),
  ``COURT_ANALYTICS_COMPACT_EVERY`` (300 s), ``COURT_ANALYTICS_SETTLE`` (600 s: how long a game
  has been done before its files are compacted), ``COURT_ANALYTICS_STALL`` (60 s, readiness);
* ``COURT_ANALYTICS_STAGING_RETENTION`` (``7d``; seconds or 30m/12h/7d): a game none of whose
  records arrived for that long is closed out: its complete moves land with ``status``
  ``unfinished`` (an abandoned game, one nobody finishes); ``COURT_ANALYTICS_RESUMED_AFTER``
  (``10m``): the same for a game another game resumed (``status`` ``resumed``). Keep the retention
  longer than any pause a game may take and shorter than the stream keeps records; 0: never.

Health: readiness is NATS answering and the consumer coming round (``dependencies``;
``COURT_ANALYTICS_STALL``, default 60 s), liveness the process; ``COURT_HEALTH_LISTEN`` serves
them on a plaintext port for the kubelet's probes. On SIGTERM health goes NOT_SERVING, the
consumer stops fetching and finishes the batch in hand within the grace (else that batch,
unacknowledged, is delivered again), NATS is drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass, field

import grpc
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.health import Check, nats_check
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import run_service, start_server
from court_kit.settings import ConfigError, Settings
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS

from .consumer import LINGER, LakeConsumer
from .lake import SETTLE, Lake

log = klog.get_logger("court_analytics.app")
SERVICE_NAME = "court.analytics.v1.Analytics"


# the settings of its own it reads (COURT_ANALYTICS_*; the deploy tests check manifests against it)
SETTINGS = (
    "COURT_ANALYTICS_LAKE",
    "COURT_ANALYTICS_DURABLE",
    "COURT_ANALYTICS_BATCH",
    "COURT_ANALYTICS_LINGER",
    "COURT_ANALYTICS_ACK_WAIT",
    "COURT_ANALYTICS_SWEEP",
    "COURT_ANALYTICS_COMPACT_EVERY",
    "COURT_ANALYTICS_SETTLE",
    "COURT_ANALYTICS_STALL",
    "COURT_ANALYTICS_STAGING_RETENTION",
    "COURT_ANALYTICS_RESUMED_AFTER",
    "COURT_ANALYTICS_FAULT",
)


def lake_location(settings: Settings) -> str:
    return settings.extra.get("COURT_ANALYTICS_LAKE") or str(settings.state_dir / "lake")


@dataclass
class AnalyticsApp:
    settings: Settings
    nc: NATS
    lake: Lake
    consumer: LakeConsumer
    server: grpc.aio.Server
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    service_names = (SERVICE_NAME,)
    _task: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, settings: Settings) -> AnalyticsApp:
        try:
            lake = Lake(lake_location(settings), settle=settings.extra_float("ANALYTICS_SETTLE", SETTLE))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"COURT_ANALYTICS_LAKE {lake_location(settings)[:80]!r}: {exc}") from None
        retention = kjs.parse_age(
            "COURT_ANALYTICS_STAGING_RETENTION", settings.extra.get("COURT_ANALYTICS_STAGING_RETENTION", "7d")
        )
        resumed_after = kjs.parse_age(
            "COURT_ANALYTICS_RESUMED_AFTER", settings.extra.get("COURT_ANALYTICS_RESUMED_AFTER", "10m")
        )
        nc = await kjs.connect(
            settings.nats_servers(),
            name=f"court-analytics@{settings.listen}",
            **kjs.connect_options(settings),
        )
        try:
            consumer = LakeConsumer(
                nc,
                lake,
                durable=settings.extra.get("COURT_ANALYTICS_DURABLE", "analytics"),
                ack_wait=settings.extra_float("ANALYTICS_ACK_WAIT", 30.0, 0.5),
                batch=settings.extra_int("ANALYTICS_BATCH", 256, 1, 4096),
                linger=settings.extra_float("ANALYTICS_LINGER", LINGER, 0.0),
                sweep_every=settings.extra_float("ANALYTICS_SWEEP", 5.0, 0.05),
                compact_every=settings.extra_float("ANALYTICS_COMPACT_EVERY", 300.0, 0.1),
                retention=retention,
                resumed_after=resumed_after,
                fault=settings.extra.get("COURT_ANALYTICS_FAULT", ""),
            )
            server, port, health = await start_server(settings, [SERVICE_NAME], edge=False)
        except BaseException:
            await nc.close()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, nc, lake, consumer, server, port, health, metrics)
        app._task = asyncio.create_task(consumer.run(app._stop))
        log.info(
            "analytics service listening",
            port=port,
            lake=lake.root,
            metrics_port=metrics.port if metrics else None,
        )
        return app

    def dependencies(self) -> dict[str, Check]:
        """Readiness (court_kit.health): NATS (JetStream) answers, and the consumer goes round: its
        task is alive and its loop came round without an error in the last ``COURT_ANALYTICS_STALL``
        seconds (default 60; one round is a fetch of at most a second and one batch)."""
        timeout = self.settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05)
        stall = self.settings.extra_float("ANALYTICS_STALL", 60.0, lo=1.0)

        async def consumer() -> None:
            if self._task is None or self._task.done():
                raise RuntimeError("the record consumer has stopped")
            idle = time.monotonic() - self.consumer.alive_at
            if idle > stall:
                raise RuntimeError(
                    f"the record consumer has not come round for {idle:.0f}s: "
                    f"{self.consumer.failing or 'a batch is still being written'}"
                )

        return {"nats": nats_check(self.nc, timeout), "consumer": consumer}

    async def quiesce(self) -> None:
        """SIGTERM, health already NOT_SERVING: no new fetch; the batch in hand is staged and
        acknowledged if that takes less than the grace, else left to be delivered again."""
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=max(0.5, self.settings.shutdown_grace - 1.0))

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            if not self._task.done():
                self._task.cancel()  # a batch still in hand: unacknowledged, so delivered again
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 1.0)
        if self.metrics is not None:
            self.metrics.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.nc.drain(), 1.0)
        if not self.nc.is_closed:
            with contextlib.suppress(Exception):
                await self.nc.close()


def main(argv: list[str] | None = None) -> int:
    return run_service("analytics", AnalyticsApp.start, argv)


if __name__ == "__main__":
    sys.exit(main())
