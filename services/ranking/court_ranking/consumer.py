"""The ranking service's durable JetStream consumer of the public game records.

One durable pull consumer (``ranking``) on ``COURT_EVENTS`` (subjects
``court.events.<game>.<game_id>``, one ``court.events.v2.Record`` per game step, written by the
rules service's projector) is shared by every replica. Settling needs public facts only (rounds
and the game ending); each record's events are kept as ``(seq, index, last of the record,
payload)`` rows, the payload the event's public form (``core.Event.full()`` of the public event).
JetStream hands each message JetStream hands each message
to one replica, and an unacknowledged message (a replica killed mid-way) is delivered again after
``ack_wait``. Each message is acknowledged only after its effects are committed, and every effect
is idempotent (events and ledger entries are unique-keyed), so a redelivery changes nothing.

Events of games the lobby never registered (local games) are acknowledged and ignored. Events
published before the lobby registered its game, or missed for any other reason, are read back
from the stream (``backfill``, a direct get of the game's subjects) when a settling event (a round
or the game ending) finds a gap before it, and once at registration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit import records as krec
from court_proto.court.events.v2 import records_pb2
from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from .store import RankingStore

log = klog.get_logger("court_ranking.consumer")

STREAM = krec.PUBLIC_STREAM
PREFIX = krec.PUBLIC_PREFIX
DURABLE = "ranking"


def rows_of(rec: records_pb2.Record) -> list[tuple[int, int, bool, dict[str, Any]]]:
    """A record's events as ranking rows: (seq, index, last of the record, payload)."""
    events = krec.events_of(rec)
    return [(int(rec.seq), i, i == len(events) - 1, e.full()) for i, e in enumerate(events)]


def decode(data: bytes) -> records_pb2.Record:
    return krec.decode(data)


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
        """Record every event of the game the stream holds; returns how many were new."""
        msgs = await kjs.direct_get_batch(self.nc, STREAM, krec.public_subject(game, game_id))
        rows = []
        for m in msgs:
            rows.extend(rows_of(decode(m.data)))
        added = await asyncio.to_thread(self.store.record_events, game_id, rows)
        if added:
            log.info("backfilled events", game_id=game_id, added=added)
        return added

    async def handle(self, data: bytes, headers: dict[str, str] | None) -> None:
        """Apply one record message (idempotent: safe to call again for the same message)."""
        rec = decode(data)
        taken = await asyncio.to_thread(self.store.take_record, rec.game_id, rows_of(rec))
        if taken is not None and not taken.covered:
            await self.backfill(rec.game, rec.game_id)
            await asyncio.to_thread(self.store.settle, rec.game_id)

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch and apply events until ``stop`` is set; survives NATS restarts and a missing stream."""
        try:
            await self._loop(stop)
        finally:
            if self._psub is not None:  # a pending pull would otherwise hold up the connection's drain
                with contextlib.suppress(Exception):
                    await self._psub.unsubscribe()

    async def _loop(self, stop: asyncio.Event) -> None:
        psub = None
        trouble = klog.StateLog(log, "event consumer")
        while not stop.is_set():
            try:
                if psub is None:
                    psub = await self.js.pull_subscribe(
                        f"{PREFIX}*.*",
                        durable=self.durable,
                        stream=STREAM,
                        config=ConsumerConfig(
                            ack_policy=AckPolicy.EXPLICIT,
                            ack_wait=self.ack_wait,
                            deliver_policy=DeliverPolicy.ALL,
                            max_deliver=-1,
                            max_ack_pending=1024,
                            max_waiting=512,
                        ),
                    )
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
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except TimeoutError:
                    pass
