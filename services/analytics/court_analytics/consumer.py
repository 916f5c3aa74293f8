"""court-analytics' durable pull consumer: public game records into the lake, acknowledged after.

One durable pull consumer (``analytics`` by default, ``COURT_ANALYTICS_DURABLE``) with explicit
acks on the records' stream (``records.STREAM``), shared by every replica, read with pull requests
kept open (``court_kit.jetstream.Puller``). A batch is what is delivered in ``linger`` seconds
(from its first record; at most ``batch`` records): under live play records trickle in a few at a
time, and one batch of half a second is one staging file per game and one pass of finishing
instead of one per delivery. For each batch every record is staged
(``Lake.stage_batch``, idempotent), every game of the batch that may now be complete is finished
(``Lake.try_finish``), and only then is the batch acknowledged (every ack sent, then one flush), so a
crash at any point, between the writes and the acks included, leaves work that a redelivery
repeats to the same result. A sweep every
``sweep_every`` seconds finishes games whose last missing record was staged by another consumer
(or before a crash), closes out games whose staging has been quiet for ``retention`` seconds
(``Lake.close_out``: unfinished and resumed games land with that status) when the durable has
nothing undelivered, and compacts the lake every ``compact_every`` seconds.

The durable deleted under the consumer (by hand, a restore): the open pull request ends with 409
Consumer Deleted (``court_kit.jetstream.Puller`` raises), the loop drops the subscription and a
second later creates the durable again, from its ack floor as the last sweep read it (every record
after it delivered again; the lake stages each key once, so none is counted twice), or from the
stream's start (``DeliverPolicy.ALL``, as when first created) when no sweep read one yet. What an
analyst sees: the lake goes on filling, a second or two late, nothing missing or doubled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.loops import rest
from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from prometheus_client import Counter, Gauge

from . import records
from .lake import RETENTION, WROTE, Lake

log = klog.get_logger("court_analytics.consumer")
LINGER = 0.5  # seconds a batch gathers records after its first (COURT_ANALYTICS_LINGER; 0: what is there)
PULL_EXPIRES = 5.0  # seconds an open pull request lives (renewed then: a nats-server restart forgets it)

INGESTED = Counter("court_analytics_records_ingested_total", "records staged and acknowledged")
REJECTED = Counter(
    "court_analytics_records_rejected_total", "messages that are not game records (acknowledged)"
)
GAMES = Counter("court_analytics_games_landed_total", "games whose tables were written by this process")
STAGED_GAMES = Gauge("court_analytics_staged_games", "games with staged records and no tables yet")
LAG = Gauge(
    "court_analytics_lag_records", "records in the stream not yet acknowledged by the durable consumer"
)
ACK_FLOOR = Gauge(
    "court_analytics_ack_floor",
    "the durable consumer's ack floor (a stream sequence) as the last sweep read it: where the durable"
    " is created again from if it is deleted",
)
FINISH_FAILED = Counter(
    "court_analytics_finish_failures_total", "attempts to land a game that failed (retried)"
)
COMPACTED = Counter("court_analytics_files_compacted_total", "per-game files merged into part files")


class LakeConsumer:
    def __init__(
        self,
        nc: NATS,
        lake: Lake,
        *,
        durable: str = "analytics",
        batch: int = 256,
        linger: float = LINGER,
        ack_wait: float = 30.0,
        sweep_every: float = 5.0,
        compact_every: float = 300.0,
        retention: float = RETENTION,
        resumed_after: float | None = None,
        fault: str = "",
    ):
        self.nc = nc
        self.js = nc.jetstream()
        self.lake = lake
        self.durable = durable
        self.batch = batch
        self.linger = min(linger, ack_wait / 4)  # a batch's acks go out well within the ack wait
        self.ack_wait = ack_wait
        self.sweep_every = sweep_every
        self.compact_every = compact_every
        self.retention = retention
        self.resumed_after = resumed_after
        self._undelivered: int | None = None  # the durable's records not yet delivered, at the last sweep
        self.floor = 0  # the durable's ack floor (a stream sequence) at the last sweep; 0: none read
        self._next_close = 0.0
        self.ingested = 0
        self.landed = 0
        self._ended: set[str] = set()  # games whose GameEnded this process staged, not yet finished
        self._psub: Any = None
        self._puller: kjs.Puller | None = None
        # fault injection for the crash tests: "staged:N" exits right after the N-th batch is staged
        # (before its acks), "acking:N" after half of the N-th batch's acks went out, "finished:N"
        # right after the N-th game's tables are written (before _done)
        point, _, count = fault.partition(":")
        self._fault = (point, int(count or 0)) if point else None
        self._batches = 0
        self.alive_at = time.monotonic()  # the last time the loop went round without an error
        self.failing = ""  # the last error while the loop keeps failing, "" once it goes round again

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set. Never ends on an error: every failure (NATS away, the
        stream not there yet, a lake write that fails, a staging file a racing replica removed) is
        logged, the subscription dropped, and the loop goes on a second later, so the process is
        never left running with a dead consumer."""
        try:
            await self._loop(stop)
        finally:
            await self._drop_subscription()

    async def _drop_subscription(self) -> None:
        psub, self._psub = self._psub, None
        self._puller = None
        await kjs.unsubscribe_quietly(psub)

    def _handle_batch(self, msgs: list[Any]) -> None:
        """Stage every record, finish what may be complete: the part done before acknowledging."""
        touched: set[str] = set()
        for msg, recs in zip(msgs, self.lake.stage_batch([(m.data, m.headers) for m in msgs]), strict=True):
            if isinstance(recs, ValueError):
                REJECTED.inc()
                log.warning(
                    "not a game record; acknowledged and dropped", subject=msg.subject[:80], error=str(recs)
                )
                continue
            for rec in recs:
                if rec.type == "GameEnded":
                    self._ended.add(rec.game_id)
                touched.add(rec.game_id)
        self._batches += 1
        self._maybe_fail("staged", self._batches, records=len(msgs))
        for game_id in touched & self._ended:
            self._finish(game_id)

    def _finish(self, game_id: str) -> None:
        """Land one game if it is complete. A failure is this game's alone: it is logged and the game
        stays staged for the next sweep; the batch is acknowledged (its records are staged) and the
        other games go on."""
        try:
            outcome = self.lake.try_finish(
                game_id, before_done=lambda: self._maybe_fail("finished", self.landed + 1)
            )
        except Exception as exc:  # noqa: BLE001 - a lake write failing, a staging file that does not decode
            FINISH_FAILED.inc()
            log.warning(
                "game not landed yet; the next sweep tries again",
                game_id=game_id,
                error=str(exc)[:300] or type(exc).__name__,
            )
            return
        if outcome:
            self._ended.discard(game_id)
        if outcome == WROTE:
            self.landed += 1
            GAMES.inc()

    def _maybe_fail(self, point: str, n: int, **about: Any) -> None:
        if self._fault == (point, n):
            log.warning("fault injected: exiting", point=point, n=n, **about)
            os._exit(17)

    def _sweep(self) -> None:
        index = self.lake.staging_index()
        for game_id in self.lake.pending_ended(index):
            self._finish(game_id)
        STAGED_GAMES.set(len(index))
        if self._undelivered == 0 and time.monotonic() >= self._next_close:
            # caught up: a quiet staging folder is a game that stopped, not a backlog. At most once a
            # minute (a quarter of the shortest wait when that is less): it lists the staging area
            waits = [w for w in (self.retention, self.resumed_after or self.lake.settle) if w > 0]
            self._next_close = time.monotonic() + min([60.0, *(w / 4 for w in waits)])
            try:
                closed = self.lake.close_out(retention=self.retention, resumed_after=self.resumed_after)
            except Exception as exc:  # noqa: BLE001 - the next sweep tries again
                log.warning(
                    "closing out quiet games failed; the next sweep tries again", error=str(exc)[:300]
                )
                return
            if closed:
                log.info("games closed out", **closed)

    async def _gather(self, stop: asyncio.Event) -> list[Any]:
        """One batch: the records delivered (waiting up to a second for the first), then those
        delivered in the ``linger`` seconds from the first one's arrival or until ``batch`` records
        are in hand. The records come on pull requests kept open (``court_kit.jetstream.Puller``),
        not a fetch each (a no-wait request, its status answer, then a waiting request: per batch
        of a few records one or two requests and answers per record)."""
        assert self._puller is not None
        msgs = await self._puller.next_batch(1.0)
        deadline = time.monotonic() + self.linger
        while len(msgs) < self.batch and not stop.is_set():
            left = deadline - time.monotonic()
            if left < 0.01:
                break
            try:
                msgs += await self._puller.next_batch(left, self.batch - len(msgs))
            except (TimeoutError, NatsTimeout):
                break
        return msgs

    async def _config(self) -> ConsumerConfig:
        """The durable's configuration, used when it is not there: from the stream's start when first
        created, from its ack floor when it was deleted under this process (``floor``)."""
        start: dict[str, Any] = {"deliver_policy": DeliverPolicy.ALL}
        if self.floor:
            try:
                await self.js.consumer_info(records.STREAM, self.durable)
                gone = False  # there: bound to as it is
            except NotFoundError:
                gone = True
            resume = await kjs.resume_after(self.js, records.STREAM, self.floor) if gone else None
            if resume is not None:
                log.warning(
                    "the durable consumer was gone: creating it again where it left off",
                    durable=self.durable,
                    start_seq=self.floor + 1,
                )
                start = resume
            elif gone:
                self.floor = 0  # the stream was made anew (its sequences start over): from its start
        return ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=-1,
            max_ack_pending=4096,
            max_waiting=512,
            **start,
        )

    async def _loop(self, stop: asyncio.Event) -> None:
        next_sweep = time.monotonic()  # the first pass at once: games a crash left complete-but-unfinished
        next_compact = time.monotonic() + self.compact_every
        while not stop.is_set():
            try:
                now = time.monotonic()
                if now >= next_sweep:
                    self._undelivered = None
                    if self._psub is not None:
                        with contextlib.suppress(Exception):
                            info = await self._psub.consumer_info()
                            LAG.set(info.num_pending + info.num_ack_pending)
                            self._undelivered = info.num_pending
                            self.floor = kjs.ack_floor(info, self.floor)
                            ACK_FLOOR.set(self.floor)
                    await asyncio.to_thread(self._sweep)
                    next_sweep = time.monotonic() + self.sweep_every
                if self._psub is None:
                    self._psub = await self.js.pull_subscribe(
                        records.SUBJECTS,
                        durable=self.durable,
                        stream=records.STREAM,
                        config=await self._config(),
                    )
                    self._puller = kjs.Puller(self._psub, self.batch, expires=PULL_EXPIRES)
                    log.info(
                        "consuming game records",
                        stream=records.STREAM,
                        durable=self.durable,
                        lake=self.lake.root,
                    )
                if now >= next_compact:
                    next_compact = now + self.compact_every
                    COMPACTED.inc(await asyncio.to_thread(self.lake.compact))
                self.alive_at = time.monotonic()
                try:
                    msgs = await self._gather(stop)
                except (TimeoutError, NatsTimeout):
                    continue
                if stop.is_set():
                    return  # unacknowledged: delivered again, here or to another replica
                await asyncio.to_thread(self._handle_batch, msgs)
                for i, msg in enumerate(msgs):
                    if i == len(msgs) // 2 and self._fault == ("acking", self._batches):
                        await self.nc.flush(timeout=5)  # half the batch acknowledged, then the crash
                        self._maybe_fail("acking", self._batches, records=len(msgs))
                    await msg.ack()  # queued on the connection: one flush sends them all
                await self.nc.flush(timeout=max(1, int(self.ack_wait / 2)))
                self.ingested += len(msgs)
                INGESTED.inc(len(msgs))
                self.alive_at = time.monotonic()
                self.failing = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting, the stream not created yet, a lake hiccup
                self.failing = str(exc) or type(exc).__name__
                log.warning("record consumer waiting", error=self.failing)
                await self._drop_subscription()
                await rest(stop, 1.0)
