"""The ranking service's durable JetStream consumer of the records that move rank points.

Only a round ending and the game ending move points (the round's points, the payout, the
challenges paid at the end, the ratings), so the durable pull consumer (``ranking``, shared by
every replica) follows ``court.events.<game>.<game_id>.points`` alone: the projector publishes
each such record there, in its public form, after the public record itself
(``court_contract.records.points_subject``). Every other move reaches this service only when it reads
a game back from the stream (``backfill``, a direct get of the game's public subject):

* Queen's Court (the games with points): the challenges are judged on the game's whole history,
  so a point record first reads back the records since the last read (a cursor per game, in
  memory; from the start after a restart), keeps each as ``(seq, index, last of the record,
  payload)`` rows (the payload the event's public form, ``core.Event.full()``), then settles from
  the contiguous prefix of those rows, as before;
* the other games owe nothing but a rating from their end: only their point records' rows are
  kept, and settling reads those.

JetStream hands each message to one replica, and an unacknowledged message (a replica killed
mid-way) is delivered again after ``ack_wait``. Each message is acknowledged only after its effects
are committed, and every effect is idempotent (events and ledger entries are unique-keyed), so a
redelivery changes nothing.

Records of games the lobby never registered (local games) are acknowledged and ignored. Records
published before the lobby registered its game are read back at registration (``backfill``), and
the settle sweep reads back every active game's (``RankingApp.sweep``), which also covers a
durable created before the points subject existed (its filter is moved on start; point records
published before the move had no copy on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.loops import rest
from court_proto.court.events.v2 import records_pb2
from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from . import settle
from .store import RankingStore

log = klog.get_logger("court_ranking.consumer")

STREAM = krec.PUBLIC_STREAM
PREFIX = krec.PUBLIC_PREFIX
DURABLE = "ranking"
FILTER = krec.points_subjects()
CURSORS = 10_000  # games whose read-back position is remembered


def rows_of(rec: records_pb2.Record) -> list[tuple[int, int, bool, dict[str, Any]]]:
    """A record's events as ranking rows: (seq, index, last of the record, payload)."""
    events = krec.events_of(rec)
    return [(int(rec.seq), i, i == len(events) - 1, e.full()) for i, e in enumerate(events)]


def decode(data: bytes) -> records_pb2.Record:
    return krec.decode(data)


def keeps_history(game: str) -> bool:
    """Whether every record of a ``game`` is kept (its challenges are judged on the whole game),
    or only those that move points."""
    return game in settle.RANKED_GAMES_WITH_POINTS


class EventConsumer:
    def __init__(
        self,
        nc: NATS,
        store: RankingStore,
        *,
        durable: str = DURABLE,
        batch: int = 64,
        ack_wait: float = 30.0,
    ):
        self.nc = nc
        self.js = nc.jetstream()
        self.store = store
        self.durable = durable
        self.batch = batch
        self.ack_wait = ack_wait
        self.handled = 0  # messages acknowledged (observability, tests)
        self.progress = asyncio.Condition()  # notified after every acknowledged message
        self._psub: Any = None
        self._cursor: dict[str, int] = {}  # game id -> public stream sequence read back up to

    async def wait_for(self, predicate: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
        """Until ``predicate()`` holds, re-checked after each applied event (tests, tools)."""

        async def loop() -> None:
            while not await predicate():
                async with self.progress:
                    try:
                        await asyncio.wait_for(self.progress.wait(), 1.0)
                    except TimeoutError:
                        pass  # an effect of a gRPC call (a registration) notifies nobody: look again

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None

    async def backfill(self, game: str, game_id: str) -> int:
        """Keep every record of the game the stream holds that this service keeps (all of them for
        Queen's Court, the point records of the others), from where the last read ended; returns
        how many events were new."""
        start = self._cursor.get(game_id, 0) + 1
        msgs = await kjs.direct_get_batch(
            self.nc, STREAM, krec.public_subject(game, game_id), start_seq=start
        )
        if not msgs:
            return 0
        rows = []
        whole = keeps_history(game)
        for m in msgs:
            rec = decode(m.data)
            if whole or krec.moves_points(rec):
                rows.extend(rows_of(rec))
        added = await asyncio.to_thread(self.store.keep_events, game_id, rows)
        if added is None:
            return 0  # not registered (yet): read it all again at registration
        self._cursor.pop(game_id, None)
        self._cursor[game_id] = msgs[-1].seq
        while len(self._cursor) > CURSORS:
            del self._cursor[next(iter(self._cursor))]
        if added:
            log.info("backfilled events", game_id=game_id, added=added)
        return added

    async def handle(self, data: bytes, headers: dict[str, str] | None) -> None:
        """Apply one point record (idempotent: safe to call again for the same message)."""
        rec = decode(data)
        if keeps_history(rec.game):
            # the moves since the last read, up to this one (public before its point copy)
            await self.backfill(rec.game, rec.game_id)
        taken = await asyncio.to_thread(self.store.take_record, rec.game_id, rows_of(rec))
        if taken is not None and not taken.covered:
            self._cursor.pop(rec.game_id, None)  # something is missing: read the whole game again
            await self.backfill(rec.game, rec.game_id)
            await asyncio.to_thread(self.store.settle, rec.game_id)

    async def _subscribe(self) -> Any:
        """The pull subscription on the shared durable, created when missing; a durable made before
        the points subject (filter ``court.events.*.*``, every record) is moved onto it."""
        config = ConsumerConfig(
            durable_name=self.durable,
            filter_subject=FILTER,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            deliver_policy=DeliverPolicy.ALL,
            max_deliver=-1,
            max_ack_pending=1024,
            max_waiting=512,
        )
        try:
            info = await self.js.consumer_info(STREAM, self.durable)
        except NotFoundError:
            info = None
        if info is not None and info.config.filter_subject != FILTER:
            await self.js.add_consumer(STREAM, config)
            log.info(
                "moved the ranking consumer onto the point records",
                durable=self.durable,
                was=info.config.filter_subject,
                now=FILTER,
            )
        return await self.js.pull_subscribe(FILTER, durable=self.durable, stream=STREAM, config=config)

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch and apply events until ``stop`` is set; survives NATS restarts and a missing stream."""
        try:
            await self._loop(stop)
        finally:
            await kjs.unsubscribe_quietly(self._psub)  # a pending pull would hold up the drain

    async def _loop(self, stop: asyncio.Event) -> None:
        psub = None
        trouble = klog.StateLog(log, "event consumer")
        while not stop.is_set():
            try:
                if psub is None:
                    psub = await self._subscribe()
                    self._psub = psub
                    if not trouble.down:
                        log.info("consuming game events", stream=STREAM, durable=self.durable)
                    trouble.ok("consuming game events again", stream=STREAM, durable=self.durable)
                try:
                    msgs = await psub.fetch(self.batch, timeout=1.0)
                except (TimeoutError, NatsTimeout):
                    continue
                for msg in msgs:
                    if stop.is_set():
                        return  # unacknowledged: delivered again, here or to another replica
                    try:
                        await self.handle(msg.data, msg.headers)
                    except Exception:  # noqa: BLE001 - one bad event must not stop the others
                        log.exception("event not applied; it will be delivered again", subject=msg.subject)
                        await msg.nak(delay=1.0)
                        continue
                    await msg.ack()
                    self.handled += 1
                    async with self.progress:
                        self.progress.notify_all()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting, the stream not created yet
                trouble.failed("event consumer waiting", error=str(exc) or type(exc).__name__)
                psub = None
                await rest(stop, 1.0)
