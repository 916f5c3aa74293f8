"""court-analytics' durable pull consumer: public game records into the lake, acknowledged after.

One durable pull consumer (``analytics`` by default, ``COURT_ANALYTICS_DURABLE``) with explicit
acks on the records' stream (``records.STREAM``), shared by every replica. For each fetched batch:
every record is staged (``Lake.stage``, idempotent), every game of the batch that may now be
complete is finished (``Lake.try_finish``), and only then is the batch acknowledged, so a crash at
any point leaves work that a redelivery repeats to the same result. A sweep every
``sweep_every`` seconds finishes games whose last missing record was staged by another consumer
(or before a crash), and compacts the lake every ``compact_every`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from court_kit import logging as klog
from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import Counter, Gauge

from . import records
from .lake import Lake

log = klog.get_logger("court_analytics.consumer")

INGESTED = Counter("court_analytics_records_ingested_total", "records staged and acknowledged")
REJECTED = Counter("court_analytics_records_rejected_total", "messages that are not game records (acknowledged)")
GAMES = Counter("court_analytics_games_landed_total", "games whose tables were written by this process")
LAG = Gauge("court_analytics_lag_records", "records in the stream not yet acknowledged by the durable consumer")
COMPACTED = Counter("court_analytics_files_compacted_total", "per-game files merged into part files")


class LakeConsumer:
    def __init__(self, nc: NATS, lake: Lake, *, durable: str = "analytics", batch: int = 256, ack_wait: float = 30.0,
                 sweep_every: float = 5.0, compact_every: float = 300.0, fault: str = ""):
        self.nc = nc
        self.js = nc.jetstream()
        self.lake = lake
        self.durable = durable
        self.batch = batch
        self.ack_wait = ack_wait
        self.sweep_every = sweep_every
        self.compact_every = compact_every
        self.ingested = 0
        self.landed = 0
        self._ended: set[str] = set()  # games whose GameEnded this process staged, not yet finished
        self._psub: Any = None
        # fault injection for the crash tests: "staged:N" exits right after the N-th batch is staged
        # (before its acks), "finished:N" right after the N-th game's tables are written (before _done)
        point, _, count = fault.partition(":")
        self._fault = (point, int(count or 0)) if point else None
        self._batches = 0

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.to_thread(self._sweep)  # games left complete-but-unfinished by a crash
        try:
            await self._loop(stop)
        finally:
            if self._psub is not None:
                with contextlib.suppress(Exception):
                    await self._psub.unsubscribe()

    def _handle_batch(self, msgs: list[Any]) -> None:
        """Stage every record, finish what may be complete: the part done before acknowledging."""
        touched: set[str] = set()
        for msg, recs in zip(msgs, self.lake.stage_batch([(m.data, m.headers) for m in msgs]), strict=True):
            if isinstance(recs, ValueError):
                REJECTED.inc()
                log.warning("not a game record; acknowledged and dropped", subject=msg.subject[:80], error=str(recs))
                continue
            if any(r.type == "GameEnded" for r in recs):
                self._ended.add(recs[0].game_id)
            touched.add(recs[0].game_id)
        self._batches += 1
        self._maybe_fail("staged", self._batches)
        for game_id in touched & self._ended:
            self._finish(game_id)

    def _finish(self, game_id: str) -> None:
        if self.lake.try_finish(game_id, before_done=lambda: self._maybe_fail("finished", self.landed + 1)):
            self._ended.discard(game_id)
            self.landed += 1
            GAMES.inc()

    def _maybe_fail(self, point: str, n: int) -> None:
        if self._fault == (point, n):
            log.warning("fault injected: exiting", point=point, n=n)
            os._exit(17)

    def _sweep(self) -> None:
        for game_id in self.lake.pending():
            self._finish(game_id)

    async def _loop(self, stop: asyncio.Event) -> None:
        psub = None
        next_sweep = time.monotonic() + self.sweep_every
        next_compact = time.monotonic() + self.compact_every
        while not stop.is_set():
            try:
                if psub is None:
                    psub = await self.js.pull_subscribe(
                        records.SUBJECTS, durable=self.durable, stream=records.STREAM,
                        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=self.ack_wait,
                                              deliver_policy=DeliverPolicy.ALL, max_deliver=-1,
                                              max_ack_pending=4096, max_waiting=512))
                    self._psub = psub
                    log.info("consuming game records", stream=records.STREAM, durable=self.durable,
                             lake=self.lake.root)
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + self.sweep_every
                    await asyncio.to_thread(self._sweep)
                    with contextlib.suppress(Exception):
                        info = await psub.consumer_info()
                        LAG.set(info.num_pending + info.num_ack_pending)
                if now >= next_compact:
                    next_compact = now + self.compact_every
                    COMPACTED.inc(await asyncio.to_thread(self.lake.compact))
                try:
                    msgs = await psub.fetch(self.batch, timeout=1.0)
                except (TimeoutError, NatsTimeout):
                    continue
                if stop.is_set():
                    return  # unacknowledged: delivered again, here or to another replica
                await asyncio.to_thread(self._handle_batch, msgs)
                for msg in msgs:
                    await msg.ack()
                self.ingested += len(msgs)
                INGESTED.inc(len(msgs))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting, the stream not created yet, a lake hiccup
                log.warning("record consumer waiting", error=str(exc) or type(exc).__name__)
                psub = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
