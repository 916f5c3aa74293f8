"""The projector: the game logs' records, republished in public form, in order, exactly once.

It follows every game-log stream (``COURT_GAMES_<shard>``) with one durable pull consumer per
stream (``court-projector``, explicit acks: every message acknowledged once its record is public;
read one batch per pull request, ``court_kit.jetstream.OneShotPuller``: each request brings what
the log holds when it arrives, in one write; while the log is busy the next request waits
``COURT_PROJECTOR_LINGER`` s, default 0.003, after a batch is done, so the records appended
meanwhile join it, see ``Projector._next``), and for
each full record publishes its public form (``court_contract.records.redact``) on
``court.events.<game>.<game_id>`` (stream ``COURT_EVENTS``) with

* ``Nats-Msg-Id: <game_id>-<seq>`` (JetStream de-duplicates within its window),
* ``Nats-Expected-Last-Subject-Sequence``: the public stream sequence of the game's previous
  public record (0 for its creation), so the public subject can only ever grow by the next
  record: a republish after the duplicate window has passed is refused (and recognised: the
  game's last public record is read back and the record skipped), and two projectors at once
  (a rolling restart, several rules replicas running one each) can never store a record twice
  or out of order,
* ``Court-Seq`` (the game seq), ``Court-Log-Seq`` (the log stream sequence it came from) and, on
  a resumed game's closing record, ``Court-Closed``.

Each game's position is remembered (the last public record's log sequence); a game not in
memory (after a restart) costs one direct get of its last public record. A record whose
predecessor is not public yet (it went to another projector that died, or was lost in a failed
publish) makes the projector read the missing records from the log and publish them first, so
the public subject never has a gap. A message is acknowledged only after its public record is
stored; a projector dying between publish and ack leaves it to be delivered again, and the
redelivery finds it public already and only acknowledges it.

**Explicit acks, not one per batch.** Several projectors share each durable (every rules
replica runs one; deploy/ runs several ``court-projector`` pods), so an ``AckPolicy.ALL``
acknowledgement of one projector's batch would also acknowledge the messages JetStream had
given to another: if that one died before publishing them, they were never delivered again, and
a game whose latest record was lost so showed nobody its next turn (the bot service plays on
that record: the game froze; found by the chaos suite, pinned by
``tests/rules/test_projector.py``). One ack per record costs one NATS message per move more; it is not sent on its own, though: each ack
waits on the connection's buffer and leaves with the process's next write (a move's append, the
next public record), within 20 ms at the latest (``court_kit.jetstream.LazyAcks``), one socket
write per move fewer.

A tombstone (a game id the lobby closed before any creation: ``court_rules.games``) is only
acknowledged: it has no public form, as no game was ever created under it.

A finished game (its last record ``finished``) is written to ``COURT_GAMES_ARCHIVE`` once its
final public record is stored (``GameStore.archive``, idempotent); the janitor purges the hot log
``COURT_FINISHED_RETENTION`` after that, so a log is never purged before it is public. A game
whose every record this projector made public itself, from its creation on, is archived from
those records as the log delivered them (kept in memory, ``KEEP_RECORDS`` at most, the oldest
games dropped first); any other (records projected elsewhere, a restart mid-game) is read back
from the log, one message per record.

Runs inside every rules process by default (``COURT_PROJECTOR=on``) and as its own process,
``court-projector`` (NATS user ``projector``; then set ``COURT_PROJECTOR=off`` for the rules
replicas: deploy/ does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import nats.errors
import nats.js.errors
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.errors import Unavailable
from court_kit.health import Check, nats_check
from court_kit.loops import rest
from court_kit.metrics import MetricsServer, start_metrics_server
from court_kit.server import run_service, start_server
from court_kit.settings import Settings
from court_proto.court.events.v2 import records_pb2
from grpc_health.v1._async import HealthServicer
from nats.aio.client import Client as NATS
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import APIError
from prometheus_client import Counter, Histogram

from .games import is_tombstone
from .store import EVENTS_STREAM, GameStore, Record, ack_seq, ensure_streams_ready, wait_ack
from .tasks import stop_tasks

log = klog.get_logger("court_rules.projector")

DURABLE = "court-projector"
PROJECTED = Counter("court_projector_records_total", "Public records stored by this projector")
SKIPPED = Counter(
    "court_projector_skipped_total", "Log records found public already (redeliveries, other projectors)"
)
FILLED = Counter(
    "court_projector_filled_total", "Records read back from the log to fill a gap before a later one"
)
LAG = Histogram(
    "court_projector_lag_seconds",
    "Move accepted (record time) to its public record stored",
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60),
)
KEEP = 100_000  # games whose public position is remembered
KEEP_RECORDS = 50_000  # full records kept for archiving games this projector saw whole (~400 B each)
SERVICE_NAME = "court.events.v2.Projector"


@dataclass(slots=True)
class Position:
    """A game's last public record: public stream sequence, game seq, closed, log sequence."""

    pub_sseq: int
    seq: int
    closed: bool
    log_sseq: int


def _public_message(
    rec: records_pb2.Record, pos: Position | None, log_sseq: int
) -> tuple[bool, bytes, dict[str, str]]:
    """The record's public message: whether it closes the game, its bytes (``redact``) and its
    headers (module docstring), ``pos`` being the game's last public record."""
    closed = rec.WhichOneof("body") == "closed"
    headers = {
        krec.MSG_ID_HEADER: krec.msg_id(rec.game_id, rec.seq, closed),
        "Nats-Expected-Last-Subject-Sequence": str(pos.pub_sseq if pos else 0),
        krec.SEQ_HEADER: str(rec.seq),
        krec.LOG_SEQ_HEADER: str(log_sseq),
    }
    if closed:
        headers[krec.CLOSED_HEADER] = "1"
    return closed, krec.redact(rec).SerializeToString(), headers


@dataclass(slots=True)
class _Sent:
    """A record of ``Projector._games``' round whose public form is on its way: the log message,
    its record, its log sequence, whether it closes the game, the ack's future and the game's lock."""

    msg: Any
    rec: records_pb2.Record
    log_sseq: int
    closed: bool
    fut: asyncio.Future[bytes]
    lock: asyncio.Lock


def _duplicate(ack: bytes) -> bool:
    """Whether a PubAck says JetStream had the message already (``"duplicate":true``); parsed
    only when the word is there (``store.ack_seq`` reads its sequence)."""
    return b'"duplicate"' in ack and bool(json.loads(ack).get("duplicate"))


def _follows(pos: Position | None, rec: records_pb2.Record) -> bool:
    """Whether ``rec`` is the record right after ``pos`` in its game's log."""
    kind = rec.WhichOneof("body")
    if pos is None:
        return kind == "created"
    if pos.closed:
        return False
    if kind in ("move", "seat_changed"):
        return rec.seq == pos.seq + 1
    if kind == "closed":
        return rec.seq == pos.seq
    return False


class Projector:
    def __init__(
        self,
        store: GameStore,
        *,
        batch: int = 256,
        ack_wait: float = 30.0,
        durable: str = DURABLE,
        linger: float = 0.003,
    ):
        self.store = store
        self.linger = linger
        self.batch = batch
        self.ack_wait = ack_wait
        self.durable = durable
        self.positions: OrderedDict[str, Position] = OrderedDict()
        # per game this projector has projected from its creation on, every one of its records so
        # far (serialized, as the log holds them) and the last one's log sequence: a finished game
        # is archived from them instead of read back from the log (one message per move fewer)
        self.kept: OrderedDict[str, tuple[list[bytes], int]] = OrderedDict()
        self._kept_records = 0
        self.archived_from_memory = 0  # (tests)
        self._locks: dict[str, asyncio.Lock] = {}
        self.projected = 0  # public records this projector stored (tests, observability)
        self.pipelined = 0  # of which published in a round of several games' (``_games``; tests)
        self.progress = asyncio.Event()  # set after every batch (tests wait on it)
        self.attached = asyncio.Event()  # every shard's consumer exists and is being pulled

    @functools.cached_property
    def acks(self) -> kjs.LazyAcks:
        """Each record's ack leaves with the connection's next write (module docstring)."""
        return kjs.LazyAcks(self.store.nc)

    # ------------------------------------------------------------------ one record

    async def _position(self, game: str, game_id: str) -> Position | None:
        pos = self.positions.get(game_id)
        if pos is not None:
            self.positions.move_to_end(game_id)
            return pos
        try:
            m = await kjs.direct_get_last(
                self.store.nc, EVENTS_STREAM, krec.public_subject(game, game_id), timeout=self.store.timeout
            )
        except (kjs.JetStreamUnavailable, nats.errors.Error) as exc:
            raise Unavailable(f"reading the last public record of {game_id}: {exc}") from exc
        if m is None:
            return None
        h = m.headers or {}
        pos = Position(
            m.seq,
            int(h.get(krec.SEQ_HEADER, "0")),
            krec.CLOSED_HEADER in h,
            int(h.get(krec.LOG_SEQ_HEADER, "0")),
        )
        self._remember(game_id, pos)
        return pos

    def _remember(self, game_id: str, pos: Position) -> None:
        self.positions[game_id] = pos
        self.positions.move_to_end(game_id)
        while len(self.positions) > KEEP:
            self.positions.popitem(last=False)

    async def project(self, log_sseq: int, rec: records_pb2.Record, raw: bytes = b"") -> bool:
        """Make the record public (and everything before it in its game). False: it was already.
        ``raw``: the record as the log holds it (kept to archive the game; empty: not kept)."""
        lock = self._locks.get(rec.game_id)
        if lock is None:  # (not setdefault: a Lock built per record)
            lock = self._locks[rec.game_id] = asyncio.Lock()
        try:
            async with lock:
                return await self._project(log_sseq, rec, raw)
        finally:
            if not lock.locked() and self._locks.get(rec.game_id) is lock:
                del self._locks[rec.game_id]

    async def _project(self, log_sseq: int, rec: records_pb2.Record, raw: bytes = b"") -> bool:
        gid = rec.game_id
        if is_tombstone(rec):
            # a game id closed before it was created: no game ever existed, so nothing is public
            # (no created record, no public subject: it would name no game) and nothing is archived
            SKIPPED.inc()
            return False
        while True:
            pos = await self._position(rec.game, gid)
            if pos is not None and pos.log_sseq >= log_sseq:
                SKIPPED.inc()
                self._forget_kept(gid)  # made public elsewhere: what is kept here has a gap
                if krec.moves_points(rec):  # its point record may not have been stored: again
                    await self._points(rec, krec.redact(rec).SerializeToString())
                if rec.finished:
                    await self._archive(rec.game, gid)
                return False
            if not _follows(pos, rec):
                await self._fill(rec.game, gid, pos, log_sseq)
                continue
            closed, data, headers = _public_message(rec, pos, log_sseq)
            fut = None
            try:
                fut = await self.store.publisher.publish(krec.public_subject(rec.game, gid), data, headers)
                ack = await wait_ack(fut, self.store.timeout)
            except APIError as exc:
                if exc.err_code == kjs.ERR_WRONG_LAST_SEQUENCE:
                    # someone else (another projector) moved the subject on: read it again
                    self.positions.pop(gid, None)
                    self._forget_kept(gid)
                    continue
                raise Unavailable(f"publishing {gid}-{rec.seq}: {exc}") from exc
            except (TimeoutError, nats.errors.Error) as exc:
                if fut is not None:
                    self.store.publisher.forget([fut])
                self.positions.pop(gid, None)  # it may or may not be stored: read it back next time
                raise Unavailable(f"publishing {gid}-{rec.seq}: {type(exc).__name__}") from exc
            self._stored(rec, ack, closed, log_sseq, pos is None, raw)
            if krec.moves_points(rec):
                await self._points(rec, data)
            if rec.finished:
                await self._archive(rec.game, gid)
            return True

    def _stored(
        self, rec: records_pb2.Record, ack: bytes, closed: bool, log_sseq: int, created: bool, raw: bytes
    ) -> None:
        """A record's public form is stored (its PubAck ``ack``): the game's position moves on."""
        gid = rec.game_id
        self._remember(gid, Position(ack_seq(ack), int(rec.seq), closed, log_sseq))
        self._keep(gid, created, raw, log_sseq)
        if not _duplicate(ack):
            PROJECTED.inc()
            self.projected += 1
            LAG.observe(max(0.0, time.time() - krec.time_ms(rec) / 1000))

    async def _points(self, rec: records_pb2.Record, data: bytes) -> None:
        """The record's copy on its game's points subject (``court_contract.records.points_subject``),
        after its public record and before the log message is acknowledged: a projector dying in
        between leaves the message to be delivered again, which finds the record public and
        publishes this again (``Nats-Msg-Id`` de-duplicates; a later repeat changes nothing in
        ranking, whose every effect is keyed)."""
        headers = {
            krec.MSG_ID_HEADER: krec.points_msg_id(rec.game_id, rec.seq),
            krec.SEQ_HEADER: str(rec.seq),
        }
        fut = None
        try:
            fut = await self.store.publisher.publish(
                krec.points_subject(rec.game, rec.game_id), data, headers
            )
            await wait_ack(fut, self.store.timeout)
        except (APIError, TimeoutError, nats.errors.Error) as exc:
            if fut is not None:
                self.store.publisher.forget([fut])
            raise Unavailable(f"publishing the points of {rec.game_id}-{rec.seq}: {exc}") from exc

    async def _fill(self, game: str, game_id: str, pos: Position | None, upto_log_sseq: int) -> None:
        """Publish the records between the game's last public one and log sequence ``upto``."""
        missing: list[Record] = await self.store.records(game_id, pos.log_sseq if pos else 0)
        missing = [r for r in missing if r.sseq < upto_log_sseq and not r.archived]
        if not missing:
            raise Unavailable(
                f"game {game_id}: the log has no record between public "
                f"{pos.log_sseq if pos else 0} and {upto_log_sseq}"
            )
        for r in missing:
            FILLED.inc()
            await self._project(r.sseq, r.body)

    def _keep(self, game_id: str, created: bool, raw: bytes, log_sseq: int) -> None:
        """Keep a record just made public for the game's archive: the first of a game, or the next
        of a game kept from its first on; anything else (no ``raw``) ends the game's keeping."""
        held = self.kept.get(game_id)
        if not raw or (held is None and not created):
            self._forget_kept(game_id)
            return
        if created:
            self._forget_kept(game_id)
            held = ([], 0)
        assert held is not None
        held[0].append(raw)
        self.kept[game_id] = (held[0], log_sseq)
        self.kept.move_to_end(game_id)
        self._kept_records += 1
        while self._kept_records > KEEP_RECORDS and self.kept:
            self._kept_records -= len(self.kept.popitem(last=False)[1][0])

    def _forget_kept(self, game_id: str) -> None:
        held = self.kept.pop(game_id, None)
        if held is not None:
            self._kept_records -= len(held[0])

    async def _archive(self, game: str, game_id: str) -> None:
        held = self.kept.get(game_id)
        if held is not None:  # every record of the game, in order, as the log holds them
            self._forget_kept(game_id)
            await self.store.archive(game, game_id, held[0], held[1])
            self.archived_from_memory += 1
            return
        records = await self.store.records(game_id)
        if not records or records[0].archived:
            return
        await self.store.archive(game, game_id, [r.body for r in records], records[-1].sseq)

    # ------------------------------------------------------------------ the consumers

    async def run(self, stop: asyncio.Event) -> None:
        """One pull loop per game-log stream until ``stop``."""
        attached = [asyncio.Event() for _ in range(self.store.shards)]

        async def all_attached() -> None:
            for a in attached:
                await a.wait()
            self.attached.set()

        watcher = asyncio.create_task(all_attached())
        try:
            await asyncio.gather(*(self._follow(i, stop, attached[i]) for i in range(self.store.shards)))
        finally:
            watcher.cancel()

    async def _attach(self, shard: int) -> Any:
        """The pull subscription on ``shard``'s durable, created when missing."""
        return await self.store.js.pull_subscribe(
            krec.shard_subjects(shard),
            durable=self.durable,
            stream=krec.game_stream(shard),
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,  # never ALL: the durable is shared (module docstring)
                ack_wait=self.ack_wait,
                deliver_policy=DeliverPolicy.ALL,
                max_deliver=-1,
                max_ack_pending=20_000,
                max_waiting=512,
                description="Court projector: game logs to public records",
            ),
        )

    async def _follow(self, shard: int, stop: asyncio.Event, attached: asyncio.Event) -> None:
        stream = krec.game_stream(shard)
        psub: Any = None
        puller: kjs.OneShotPuller | None = None
        trouble = klog.StateLog(log, f"projector {stream}")
        try:
            while not stop.is_set():
                try:
                    if psub is None:
                        psub = await self._attach(shard)
                        puller = kjs.OneShotPuller(psub, self.batch)
                        attached.set()
                        trouble.ok("projector following again", stream=stream)
                    assert puller is not None
                    try:
                        msgs = await self._next(puller)
                    except (TimeoutError, nats.errors.TimeoutError):
                        continue
                    await self._batch(msgs, stop)
                    self.progress.set()
                    self.progress = asyncio.Event()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - NATS restarting, a stream not there yet
                    trouble.failed("projector waiting", stream=stream, error=str(exc) or type(exc).__name__)
                    await kjs.unsubscribe_quietly(psub)
                    psub = None
                    await rest(stop, 1.0)
        finally:
            await kjs.unsubscribe_quietly(psub)

    async def _next(self, puller: kjs.OneShotPuller) -> list[Any]:
        """The next batch. Each request (``court_kit.jetstream.OneShotPuller``) brings what the log
        holds for this projector when it arrives, in one write; while the log is busy (the last
        request's first record was there within ``linger`` s of asking) the next request goes
        ``linger`` s after the last batch is done, so the records appended meanwhile join it: a
        batch's deliveries, publishes, PubAcks and acks cross the socket in a write or two each
        instead of one per record. A quiet log is not held up: its request waits in nats-server and
        the next record is delivered, and projected, as soon as it is stored."""
        busy = self.linger and puller.waited < self.linger
        return await puller.next_batch(1.0, delay=self.linger if busy else 0.0)

    async def _batch(self, msgs: Sequence[Any], stop: asyncio.Event) -> None:
        """Project a batch: the games side by side, each game's records in order; every message
        acknowledged once its record is public (one stopping mid-batch leaves the rest
        unacknowledged, to be delivered again)."""
        games: dict[str, list[tuple[Any, records_pb2.Record | None]]] = {}
        for m in msgs:
            try:
                rec: records_pb2.Record | None = krec.decode(m.data)
            except ValueError as exc:
                log.error("a game-log message that is no record; skipped", subject=m.subject, error=str(exc))
                rec = None
            games.setdefault(krec.game_id_of_log_subject(m.subject), []).append((m, rec))
        if len(games) == 1:  # the usual batch at low rates: no task per game (make bench: 14% of the CPU)
            await self._game(next(iter(games.values())), stop)
        else:
            await self._games(list(games.values()), stop)

    async def _game(self, items: list[tuple[Any, records_pb2.Record | None]], stop: asyncio.Event) -> None:
        for m, rec in items:
            if not await self._one(m, rec, stop):
                return  # stopping: the rest unacknowledged, delivered again

    async def _one(self, m: Any, rec: records_pb2.Record | None, stop: asyncio.Event) -> bool:
        """Project one log message's record (retried until it is public), then acknowledge it.
        False: stopping first (the message is left unacknowledged, to be delivered again)."""
        delay = 0.05
        while rec is not None:
            try:
                await self.project(kjs.stream_seq(m), rec, m.data)
                break
            except Unavailable as exc:
                if stop.is_set():
                    return False  # unacknowledged: delivered again, here or to another projector
                log.warning(
                    "projecting a record failed; retrying",
                    game_id=rec.game_id,
                    seq=rec.seq,
                    error=str(exc),
                )
                await rest(stop, delay)
                delay = min(delay * 2, 2.0)
        with contextlib.suppress(Exception):  # a lost ack: redelivered, found public, acked again
            self.acks.ack(m)
        return True

    async def _games(
        self, games: list[list[tuple[Any, records_pb2.Record | None]]], stop: asyncio.Event
    ) -> None:
        """Several games' records side by side, each game's in order, without a task per game (a
        task and ``gather``'s bookkeeping cost about 11 us a record in process): in rounds, each
        game's next record that needs nothing but its publish (its game's position in memory, the
        record right after it, no points, not the last) is published at once (``_send``), then the
        round's acks are taken in turn; any other record (a game's first here, a gap, points, an
        archive, a publish that failed) takes ``_one``'s path, those of a round side by side."""
        queues = [deque(items) for items in games]
        while queues:
            sent: list[_Sent] = []
            other: list[tuple[Any, records_pb2.Record | None]] = []
            try:
                for q in queues:
                    m, rec = q.popleft()
                    s = await self._send(m, rec) if rec is not None else None
                    if s is None:
                        other.append((m, rec))
                    else:
                        sent.append(s)
                for s in sent:
                    if not await self._finish(s, stop):
                        return
            finally:
                for s in sent:
                    self._unlock(s.rec.game_id, s.lock)
            if len(other) == 1:
                if not await self._one(*other[0], stop):
                    return
            elif other and not all(await asyncio.gather(*(self._one(m, r, stop) for m, r in other))):
                return
            queues = [q for q in queues if q]

    async def _send(self, m: Any, rec: records_pb2.Record) -> _Sent | None:
        """Publish the record's public form when that is all it needs (``_games``), under its game's
        lock (taken here, held until ``_games`` is done with the round); None: ``_one``'s path."""
        gid = rec.game_id
        pos = self.positions.get(gid)
        if (
            pos is None
            or gid in self._locks
            or rec.finished
            or not _follows(pos, rec)
            or krec.moves_points(rec)
            or is_tombstone(rec)
        ):
            return None
        log_sseq = kjs.stream_seq(m)
        if pos.log_sseq >= log_sseq:
            return None  # public already (a redelivery): _project's path says so
        closed, data, headers = _public_message(rec, pos, log_sseq)
        lock = self._locks[gid] = asyncio.Lock()
        await lock.acquire()  # (a new lock: taken at once)
        try:
            fut = await self.store.publisher.publish(krec.public_subject(rec.game, gid), data, headers)
        except BaseException as exc:
            self._unlock(gid, lock)
            if not isinstance(exc, Exception):
                raise  # cancelled
            return None  # not sent: _one's path retries it and says why
        return _Sent(m, rec, log_sseq, closed, fut, lock)

    async def _finish(self, s: _Sent, stop: asyncio.Event) -> bool:
        """Take the ack of a record ``_send`` published; one that failed (another projector moved
        the game on, a timeout) is judged again on ``_one``'s path. False: stopping."""
        gid = s.rec.game_id
        try:
            ack = await wait_ack(s.fut, self.store.timeout)
        except Exception:  # noqa: BLE001 - APIError, TimeoutError, a closed connection
            self.store.publisher.forget([s.fut])
            self.positions.pop(gid, None)  # stored or not, or moved on elsewhere: read it back
            self._forget_kept(gid)
            self._unlock(gid, s.lock)
            return await self._one(s.msg, s.rec, stop)
        self._stored(s.rec, ack, s.closed, s.log_sseq, False, s.msg.data)
        self.pipelined += 1
        self._unlock(gid, s.lock)
        with contextlib.suppress(Exception):  # a lost ack: redelivered, found public, acked again
            self.acks.ack(s.msg)
        return True

    def _unlock(self, game_id: str, lock: asyncio.Lock) -> None:
        if lock.locked():
            lock.release()
            if self._locks.get(game_id) is lock:
                del self._locks[game_id]


# ---------------------------------------------------------------------- court-projector


@dataclass
class ProjectorApp:
    """The projector as its own process (``court-projector``): NATS, the projector, gRPC health."""

    settings: Settings
    nc: NATS
    store: GameStore
    projector: Projector
    server: grpc.aio.Server
    port: int
    health: HealthServicer
    metrics: MetricsServer | None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    service_names = (SERVICE_NAME,)

    def dependencies(self) -> dict[str, Check]:
        return {"nats": nats_check(self.nc, self.settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05))}

    @classmethod
    async def start(cls, settings: Settings) -> ProjectorApp:
        nc = await kjs.connect(
            settings.nats_servers(),
            name=f"court-projector@{settings.listen}",
            **kjs.connect_options(settings),
        )
        try:
            store = GameStore(nc, replicas=settings.stream_replicas, environ=settings.extra)
            await ensure_streams_ready(store)
            projector = projector_for(store, settings)
            server, port, health = await start_server(settings, [SERVICE_NAME], edge=False)
        except BaseException:
            await nc.close()
            raise
        metrics = start_metrics_server(settings.metrics_listen)
        app = cls(settings, nc, store, projector, server, port, health, metrics)
        app._task = asyncio.create_task(projector.run(app._stop))
        log.info("projector running", shards=store.shards, port=port)
        return app

    async def close(self) -> None:
        """Graceful: the loop is told to stop and cancelled, then waited for at most 10 s
        (``tasks.stop_tasks``, as ``RulesApp`` stops its background work; a batch in hand unacked
        is delivered again and found public); then NATS drains, which ends whatever still runs."""
        self._stop.set()
        pending = await stop_tasks([self._task], 10.0)
        if pending:
            log.warning("projector loop still stopping; NATS is drained under it")
        if self.metrics is not None:
            self.metrics.close()
        await self.store.publisher.close()
        with contextlib.suppress(Exception):
            await self.nc.drain()

    async def kill(self) -> None:
        """Abrupt (tests): no acks for what is in hand, no drain. Bounded (``tasks.stop_tasks``):
        the loop is told to stop and cancelled; one still running after 2 s has the connection
        closed under it, which ends every fetch and publish in flight, and is waited for 5 s more."""
        self._stop.set()
        pending = await stop_tasks([self._task], 2.0)
        await self.server.stop(None)
        if self.metrics is not None:
            self.metrics.close()
        with contextlib.suppress(Exception):
            await self.nc.close()
        await stop_tasks(pending, 5.0)


def projector_for(store: GameStore, settings: Settings) -> Projector:
    return Projector(
        store,
        batch=settings.extra_int("PROJECTOR_BATCH", 256, 1, 4096),
        ack_wait=settings.extra_float("PROJECTOR_ACK_WAIT", 30.0, 0.5),
        linger=settings.extra_float("PROJECTOR_LINGER", 0.003, 0.0),
    )


def main(argv: list[str] | None = None) -> int:
    return run_service("projector", ProjectorApp.start, argv)


if __name__ == "__main__":
    sys.exit(main())
