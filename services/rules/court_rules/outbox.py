"""Events, published from the state log (the log is the outbox).

After a move's record is appended, its events (derived from the engine, see
``GameEntry.service_events``) are published to ``COURT_EVENTS`` (public form)
and ``COURT_EVENTS_FULL`` (full form), pipelined, every ack awaited, with
``Nats-Msg-Id`` = the event id
``<game_id>-<seq>-<index>``, so a republish within JetStream's duplicate
window stores nothing twice. Within each stream a game's events are stored
in seq order: before publishing move n a writer makes sure moves < n are
complete there (``catch_up``: the last event of the game in each stream, read
with a direct get, carries ``Court-Seq`` and, on the last event of a move,
``Court-End``), republishing what is missing.

A crash between the append and the publish therefore loses nothing:

* the next writer of that game (any replica) republishes the missing moves
  before its own, and
* the sweeper, a durable headers-only consumer on the state log shared by every
  replica (``rules-outbox``), looks at each record once it is ``delay``
  seconds old and republishes the events of any move still incomplete, so a
  game's final move is covered even when nobody touches the game again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from court_games.core import Event
from court_kit import logging as klog
from court_kit.errors import Unavailable
from court_kit.structs import struct_bytes, varint
from court_proto.court.events.v1 import events_pb2
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import Counter

from .games import GameCache, GameEntry
from .store import END_HEADER, EVENTS_PREFIX, FULL_PREFIX, GAMES_PREFIX, GAMES_STREAM, SEQ_HEADER, GameStore

log = klog.get_logger("court_rules.outbox")
REPUBLISHED = Counter("court_rules_events_republished_total",
                      "Moves whose events a catch-up (next writer, loader or sweeper) had to publish")

SCHEMA_VERSION = 1
SWEEPER_DURABLE = "rules-outbox"
PUBLIC = events_pb2.VISIBILITY_PUBLIC
FULL = events_pb2.VISIBILITY_FULL


def event_time(entry: GameEntry, seq: int) -> int:
    return entry.created_t if seq == 0 else entry.moves[seq - 1].t


def _len(n: int) -> bytes:
    return bytes((n,)) if n < 0x80 else varint(n)


class Encoded:
    """One record's events as published, public and full messages, and the public payloads (which
    are also what any seat sees of an event without a private part for it)."""

    __slots__ = ("public", "full", "payloads")

    def __init__(self, public: list[Msg], full: list[Msg], payloads: list[bytes]):
        self.public = public
        self.full = full
        self.payloads = payloads


Msg = tuple[str, bytes, dict[str, str]]


def _str_field(tag: int, value: str) -> bytes:
    raw = value.encode()
    return bytes((tag,)) + _len(len(raw)) + raw


def encode(entry: GameEntry, seq: int, events: Sequence[Event], t_ms: int) -> Encoded:
    """The subjects, bodies and headers of one record's events, public and full.

    Bodies are ``GameEvent`` messages written field by field (the fields every event of the move
    shares once, then each event's own): the same bytes protobuf would parse, for a fraction of
    the cost of building a message per event."""
    seconds, nanos = divmod(t_ms, 1000)
    ts = b"\x08" + varint(seconds) + (b"\x10" + varint(nanos * 1_000_000) if nanos else b"")
    common = (b"\x10" + varint(SCHEMA_VERSION) + _str_field(0x1A, entry.game) + _str_field(0x22, entry.game_id)
              + (b"\x28" + varint(seq) if seq else b"") + b"\x3a" + _len(len(ts)) + ts)
    public: list[Msg] = []
    full: list[Msg] = []
    payloads: list[bytes] = []
    last = len(events) - 1
    head = f"{entry.game}.{entry.game_id}."
    for i, e in enumerate(events):
        event_id = f"{entry.game_id}-{seq}-{i}"
        own = _str_field(0x0A, event_id) + common + (b"\x30" + varint(i) if i else b"") + _str_field(0x42, e.type)
        pub = struct_bytes(e.for_seat(None))
        payloads.append(pub)
        priv = struct_bytes(e.full()) if e.private else pub
        headers = {"Nats-Msg-Id": event_id, SEQ_HEADER: str(seq)}
        if i == last:
            headers[END_HEADER] = "1"
        public.append((f"{EVENTS_PREFIX}{head}{e.type}", own + _PUBLIC + _PAYLOAD_TAG + _len(len(pub)) + pub, headers))
        full.append((f"{FULL_PREFIX}{head}{e.type}", own + _FULL + _PAYLOAD_TAG + _len(len(priv)) + priv, headers))
    return Encoded(public, full, payloads)


_PUBLIC = b"\x48" + varint(PUBLIC)  # field 9, visibility
_FULL = b"\x48" + varint(FULL)
_PAYLOAD_TAG = bytes(((10 << 3) | 2,))


class Outbox:
    def __init__(self, store: GameStore, cache: GameCache):
        self.store = store
        self.cache = cache
        self._repairs: dict[str, asyncio.Task[None]] = {}

    async def publish(self, entry: GameEntry, seq: int, events: Sequence[Event]) -> Encoded:
        """Publish one record's events, after any earlier ones still missing (caller holds entry.lock)."""
        if entry.published < seq - 1:
            await self.catch_up(entry, seq - 1)
        enc = encode(entry, seq, events, event_time(entry, seq))
        try:
            await self.store.publish_events(enc.public + enc.full)
        except Unavailable:
            # some of this move's events may be stored, its last one included: do not let the
            # stream's end marker vouch for it; the next catch-up republishes the whole move
            entry.unconfirmed = seq if entry.unconfirmed is None else min(entry.unconfirmed, seq)
            self._schedule_repair(entry)
            raise
        entry.published = max(entry.published, seq)
        return enc

    async def archive(self, entry: GameEntry) -> None:
        """A finished game's log into the archive, once (caller holds entry.lock). Done before the
        final move's events are published, and again by any catch-up of a finished game, so a
        replica dying between the two leaves it to the sweeper."""
        if entry.archived or not entry.finished:
            return
        bodies = [entry.create_record, *(m.body() for m in entry.moves)]
        await self.store.archive(entry.game, entry.game_id, bodies, entry.last_sseq)
        entry.archived = True

    async def catch_up(self, entry: GameEntry, upto: int) -> None:
        """Make sure every record's events through ``upto`` are stored (caller holds entry.lock)."""
        if entry.finished and not entry.archived:
            await self.archive(entry)
        if entry.published >= upto:
            return
        pub, full = await self.store.last_complete_event_seq(entry.game, entry.game_id)
        if entry.unconfirmed is not None:
            pub, full = min(pub, entry.unconfirmed - 1), min(full, entry.unconfirmed - 1)
        done = min(pub, full)
        if done < upto:
            for seq, _state, events in entry.replay(done, upto):
                enc = encode(entry, seq, events, event_time(entry, seq))
                await self.store.publish_events((enc.public if seq > pub else []) + (enc.full if seq > full else []))
                REPUBLISHED.inc()
            log.info("republished missing events", game_id=entry.game_id, after=done, upto=min(upto, entry.seq))
        # only what was replayed is vouched for: a replica whose read of the log came back short (a
        # stream follower still catching up) must not mark a later move's events as stored
        entry.published = max(entry.published, min(upto, entry.seq))
        if entry.published >= upto:
            entry.unconfirmed = None

    def _schedule_repair(self, entry: GameEntry) -> None:
        """Republish a move whose publish failed part-way, in the background, until it is stored:
        the other replicas cannot know, and the stream's end marker may vouch for it."""
        task = self._repairs.get(entry.game_id)
        if task is None or task.done():
            self._repairs[entry.game_id] = asyncio.get_running_loop().create_task(self._repair(entry))

    async def _repair(self, entry: GameEntry) -> None:
        delay = 0.1
        try:
            while entry.unconfirmed is not None:
                try:
                    async with entry.lock:
                        if entry.unconfirmed is not None:
                            await self.catch_up(entry, entry.seq)
                except Unavailable as exc:
                    log.warning("events still not published; retrying", game_id=entry.game_id, error=str(exc))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        finally:
            if self._repairs.get(entry.game_id) is asyncio.current_task():
                del self._repairs[entry.game_id]

    async def close(self) -> None:
        """Stop background repairs (the sweeper and the next writer cover what they leave)."""
        tasks = list(self._repairs.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._repairs.clear()

    async def on_load(self, entry: GameEntry) -> None:
        """A replica that loads a game republishes whatever events of it are missing."""
        async with entry.lock:
            try:
                await self.catch_up(entry, entry.seq)
            except Unavailable as exc:
                log.warning("could not check the events of a loaded game", game_id=entry.game_id, error=str(exc))

    async def run_sweeper(self, stop: asyncio.Event, *, delay: float = 5.0, ack_wait: float | None = None,
                          batch: int = 512) -> None:
        """Until ``stop``: check every state record ``delay`` seconds after it was written.

        A record a dying replica had fetched comes back to another one after ``ack_wait``.
        """
        ack_wait = max(10.0, 4 * delay) if ack_wait is None else ack_wait
        psub = None
        trouble = klog.StateLog(log, "sweeper")
        try:
            while not stop.is_set():
                try:
                    if psub is None:
                        psub = await self.store.js.pull_subscribe(
                            GAMES_PREFIX + "*", durable=SWEEPER_DURABLE, stream=GAMES_STREAM,
                            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ack_wait, headers_only=True,
                                                  deliver_policy=DeliverPolicy.ALL, max_ack_pending=50_000,
                                                  max_waiting=512),
                        )
                    try:
                        msgs = await psub.fetch(batch, timeout=1.0)
                    except TimeoutError:
                        continue
                    await self._sweep(msgs, delay, stop)
                    trouble.ok("sweeper running again")
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep sweeping: NATS may be restarting
                    trouble.failed("sweeper pass failed", error=str(exc) or type(exc).__name__)
                    psub = await _quietly_unsubscribe(psub)
                    try:
                        await asyncio.wait_for(stop.wait(), 1.0)
                    except TimeoutError:
                        pass
        finally:
            await _quietly_unsubscribe(psub)

    async def _sweep(self, msgs: list[Any], delay: float, stop: asyncio.Event) -> None:
        if not msgs:  # a fetch may end on a status message (408, 409) without any record
            return
        newest = msgs[-1].metadata.timestamp.timestamp()  # in stream order: the last is the newest
        wait = newest + delay - time.time()
        if wait > 0:
            try:
                await asyncio.wait_for(stop.wait(), wait)
                return  # stopping: leave them unacked, another replica takes them
            except TimeoutError:
                pass
        latest: dict[str, int] = {}
        for m in msgs:
            gid = m.subject[len(GAMES_PREFIX):]
            latest[gid] = max(latest.get(gid, 0), int((m.headers or {}).get(SEQ_HEADER, "0")))
        behind: set[str] = set()
        for gid, seq in latest.items():
            entry = self.cache.peek(gid)
            if entry is not None and entry.published >= seq:
                continue
            try:
                entry = await self.cache.get(gid)
                async with entry.lock:
                    if entry.seq < seq:
                        await self.cache.refresh(entry)
                    await self.catch_up(entry, seq)
                    if entry.published < seq:  # our read of the log is behind the record: not yet
                        behind.add(gid)
            except Unavailable:
                raise
            except Exception:  # noqa: BLE001 - one broken game must not stop the sweep
                log.exception("sweeping a game failed", game_id=gid)
        for m in msgs:
            if m.subject[len(GAMES_PREFIX):] in behind:
                await m.nak(delay=delay)  # checked again (here or on another replica) a little later
            else:
                await m.ack()


async def _quietly_unsubscribe(sub: Any) -> None:
    """Drop a subscription (so a later drain does not wait on its undelivered messages)."""
    if sub is not None:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - the connection may be gone already
            pass
    return None
