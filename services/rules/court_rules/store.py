"""The rules service's JetStream storage: the game logs (sharded), the public records, the archive.

Streams (created or updated at start-up; replicas from COURT_STREAM_REPLICAS; every one bounded,
limits from ``court_kit.jetstream.STREAM_LIMITS`` and the COURT_<STREAM>_MAX_* variables):

* ``COURT_GAMES_<shard>`` (``COURT_GAME_STREAMS`` of them, default 1: ``COURT_GAMES_0``),
  subjects ``court.games.<shard>.<game_id>``: the game logs, one full-information
  ``court.events.v2.Record`` per message (the creation, then one per accepted move, and a closing
  record for a game resumed as another). Every append carries
  ``Nats-Expected-Last-Subject-Sequence`` (the stream sequence of the game's last record as the
  writer knows it), so of two writers racing on one game exactly one succeeds; the other gets
  JetStream's "wrong last sequence" (``Conflict``). Header ``Court-Seq`` is the game's seq. This
  append is the move's only write: the log record is the full record (``court_contract.records``).
  Every shard has the limits of ``STREAM_LIMITS["COURT_GAMES"]`` (``COURT_GAMES_MAX_*``).
* ``COURT_EVENTS``, subjects ``court.events.<game>.<game_id>``: the public records, written by
  the projector (``court_rules.projector``), readable by players' services, bots, ranking,
  analytics.
* ``COURT_GAMES_ARCHIVE``, subjects ``court.archive.<game_id>``: finished games, one
  ``court.events.v2.GameLog`` each (s2-compressed on disk), written by the projector once the
  final record is public. ``COURT_FINISHED_RETENTION`` (default 2 days) after that, the janitor
  (``court_rules.archive``) purges the game's log from its hot stream; the game still loads from
  the archive (views, history, watching) for as long as the archive keeps it
  (COURT_GAMES_ARCHIVE_MAX_AGE, 365 d). Public records age out of ``COURT_EVENTS`` by its own
  limits (a feed, 30 d).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.errors import Unavailable
from court_kit.structs import field
from court_proto.court.events.v2 import records_pb2
from nats.aio.client import Client as NATS
from nats.js.api import StreamConfig
from nats.js.errors import APIError

EVENTS_STREAM = krec.PUBLIC_STREAM
ARCHIVE_STREAM = "COURT_GAMES_ARCHIVE"
ARCHIVE_PREFIX = "court.archive."
EVENTS_PREFIX = krec.PUBLIC_PREFIX
DUPLICATE_WINDOW = 120.0  # seconds JetStream de-duplicates Nats-Msg-Id (the default)

SUBJECTS_KEPT = 50_000  # games whose subjects GameStore keeps (_subjects_of)
SEQ_HEADER = krec.SEQ_HEADER
CLOSED_HEADER = krec.CLOSED_HEADER
DUE_HEADER = "Court-Due"  # the turn clock has work in the position after this record from then (ms)
EXPECTED_SUBJECT_HEADER = "Nats-Expected-Last-Subject-Sequence-Subject"  # nats-server >= 2.11


class Conflict(Exception):
    """Another writer appended to the game first (wrong last subject sequence)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One log message: ``body`` is the decoded full record, ``sseq`` its stream sequence."""

    sseq: int
    body: records_pb2.Record
    archived: bool = False  # read from the archive: the game has left the hot log


def _unavailable(what: str, exc: BaseException) -> Unavailable:
    # JetStream's own description when it refused (e.g. "maximum bytes exceeded": the log stream is
    # full), so an operator reading the client's error knows why
    why = getattr(exc, "description", None) or type(exc).__name__
    return Unavailable(f"the game store is unavailable ({what}: {why}); retry with the same request id")


TIMER_SLACK = 0.002  # a loop's timer may fire this much before its time (uvloop: millisecond ticks)


def _expire(fut: asyncio.Future[bytes]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


async def wait_ack(fut: asyncio.Future[bytes], timeout: float) -> bytes:
    """``asyncio.wait_for(fut, timeout)`` for an ack's future that only this caller awaits (the
    append's, the projector's publishes), at the cost of one timer (``wait_for`` adds a future of
    its own and its callbacks, per move): the future fails with ``TimeoutError`` when no ack came
    in time; cancelling the caller cancels it."""
    if fut.done():
        return fut.result()
    timer = fut.get_loop().call_later(timeout, _expire, fut)  # (its loop: no getpid, as get_running_loop)
    try:
        return await fut
    finally:
        timer.cancel()


class AckDeadlines:
    """``wait_ack`` for many acks that share a timeout (the appends'), with one timer for all of
    them instead of one per wait (a timer set and cancelled per move costs 1.6 us in uvloop):
    waits that share a timeout end in the order they began, so the timer is set for the oldest
    wait still open, and when it fires it fails every future whose time is up (``TimeoutError``),
    forgets the ones that are done, and is set again for the next. A wait's own end (the ack, a
    failure, the caller's cancellation reaching the future) needs no timer work at all. A wait
    that would end before one begun earlier (its timeout was shortened meanwhile) gets a timer of
    its own (``wait_ack``)."""

    def __init__(self) -> None:
        self._waits: deque[tuple[float, asyncio.Future[bytes]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def wait(self, fut: asyncio.Future[bytes], timeout: float) -> bytes:
        if fut.done():
            return fut.result()
        loop = fut.get_loop()  # (its loop: no getpid, as get_running_loop)
        if loop is not self._loop:  # another loop's waits (a store outliving its loop) are over
            self._loop, self._waits, self._timer = loop, deque(), None
        waits = self._waits
        while waits and waits[0][1].done():  # the acks that came: the oldest first, most of the time
            waits.popleft()
        at = loop.time() + timeout
        if waits and at < waits[-1][0]:
            return await wait_ack(fut, timeout)
        waits.append((at, fut))
        if self._timer is None:
            self._timer = loop.call_at(waits[0][0], self._expire, loop)
        return await fut

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return
        self._timer = None
        waits = self._waits
        now = loop.time() + TIMER_SLACK
        while waits and (waits[0][1].done() or waits[0][0] <= now):
            _expire(waits.popleft()[1])
        if waits:
            self._timer = loop.call_at(waits[0][0], self._expire, loop)


_ACK_SEQ = re.compile(rb'"seq":(\d+)')


def ack_seq(ack: bytes) -> int:
    """The stream sequence of a JetStream PubAck (``{"stream":...,"seq":N,...}``), read without
    parsing the JSON (a string value cannot hold ``"seq":`` unescaped); parsed when not found."""
    m = _ACK_SEQ.search(ack)
    return int(m.group(1)) if m is not None else int(json.loads(ack)["seq"])


class GameStore:
    def __init__(
        self, nc: NATS, *, replicas: int = 1, timeout: float = 5.0, environ: Mapping[str, str] | None = None
    ):
        """``environ``: the COURT_ variables (``Settings.extra``): the streams' limits and
        ``COURT_GAME_STREAMS``."""
        self.nc = nc
        self.environ = dict(environ or {})
        self.shards = krec.shard_count(self.environ)
        self.js = nc.jetstream(timeout=timeout)
        self.publisher = kjs.Publisher(nc)
        self.replicas = replicas
        self.timeout = timeout
        self.acks = AckDeadlines()  # the appends' acks
        # per game: its log's filter and the subjects of its records without and with clock work
        # (each move names two of them: a crc32 and two formattings saved), bounded
        self._subjects: dict[str, tuple[str, str, str]] = {}

    def _subjects_of(self, game_id: str) -> tuple[str, str, str]:
        names = self._subjects.get(game_id)
        if names is None:
            if len(self._subjects) >= SUBJECTS_KEPT:
                self._subjects.clear()
            names = self._subjects[game_id] = (
                krec.log_filter(game_id, self.shards),
                krec.log_subject(game_id, self.shards, False),
                krec.log_subject(game_id, self.shards, True),
            )
        return names

    def subject(self, game_id: str) -> str:
        """The game's whole log (a filter: ``court.games.<shard>.<game_id>.*``)."""
        return self._subjects_of(game_id)[0]

    def stream_of(self, game_id: str) -> str:
        return krec.game_stream(krec.shard_of(game_id, self.shards))

    def stream_configs(self) -> list[StreamConfig]:
        """Every stream the rules service writes, bounded (``court_kit.jetstream.stream_config``)."""

        def cfg(name: str, subjects: list[str], description: str, limits: str | None = None) -> StreamConfig:
            default = kjs.stream_limits(limits, self.environ) if limits else None
            return kjs.stream_config(
                name,
                subjects,
                description=description,
                environ=self.environ,
                replicas=self.replicas,
                duplicate_window=DUPLICATE_WINDOW,
                default=default,
            )

        logs = [
            cfg(
                krec.game_stream(i),
                [krec.shard_subjects(i)],
                f"Court game logs, shard {i} of {self.shards} (full-information records)",
                krec.LIMITS_NAME,
            )
            for i in range(self.shards)
        ]
        return [
            *logs,
            cfg(
                EVENTS_STREAM,
                [EVENTS_PREFIX + "*.*", krec.points_subjects()],
                "Court public game records (court.events.v2)",
            ),
            cfg(ARCHIVE_STREAM, [ARCHIVE_PREFIX + "*"], "Court finished games, one message each"),
        ]

    async def ensure_streams(self) -> None:
        for config in self.stream_configs():
            await kjs.ensure_stream(self.js, config)

    # ------------------------------------------------------------------ game log

    async def append(
        self,
        game_id: str,
        data: bytes,
        seq: int,
        expected_sseq: int,
        *,
        closing: bool = False,
        due: int | None = None,
    ) -> int:
        """Append one serialized full record; returns its stream sequence. ``Conflict`` when
        someone else was first. ``due``: when the turn clock has work in the position after it
        (header ``Court-Due``, ms since the epoch; ``court_rules.clockdriver``)."""
        log, subject, due_subject = self._subjects_of(game_id)
        headers = {
            "Nats-Expected-Last-Subject-Sequence": str(expected_sseq),
            # the check covers the whole log, both of its subjects (court_contract.records.log_subject)
            EXPECTED_SUBJECT_HEADER: log,
            SEQ_HEADER: str(seq),
        }
        if closing:
            headers[CLOSED_HEADER] = "1"
        if due is not None:
            headers[DUE_HEADER] = str(due)
        fut = None
        try:
            # written at once (``now``): one append per call, which no other publish of the loop's
            # turn joins (a write each either way), so nats-py's flusher task is not woken for it
            fut = await self.publisher.publish(
                subject if due is None else due_subject, data, headers, now=True
            )
            ack = await self.acks.wait(fut, self.timeout)
        except APIError as exc:
            if exc.err_code == kjs.ERR_WRONG_LAST_SEQUENCE:
                raise Conflict(str(exc)) from None
            raise _unavailable("append", exc) from exc
        except (TimeoutError, nats.errors.Error) as exc:  # timeouts, no responders, a closed connection
            if fut is not None:
                self.publisher.forget([fut])
            raise _unavailable("append", exc) from exc
        return ack_seq(ack)

    async def records(self, game_id: str, after_sseq: int = 0) -> list[Record]:
        """The game's records after stream sequence ``after_sseq``, oldest first."""
        try:
            msgs = await kjs.direct_get_batch(
                self.nc,
                self.stream_of(game_id),
                self.subject(game_id),
                start_seq=after_sseq + 1,
                timeout=self.timeout,
            )
        except kjs.JetStreamUnavailable as exc:
            raise _unavailable("load", exc) from exc
        except (nats.errors.ConnectionClosedError, nats.errors.OutboundBufferLimitError) as exc:
            raise _unavailable("load", exc) from exc
        if not msgs and after_sseq == 0:
            return await self.archived_records(game_id)
        return [Record(m.seq, krec.decode(m.data)) for m in msgs]

    async def archived_records(self, game_id: str) -> list[Record]:
        """A finished game's records from the archive (``[]`` when it holds none)."""
        try:
            m = await kjs.direct_get_last(
                self.nc, ARCHIVE_STREAM, ARCHIVE_PREFIX + game_id, timeout=self.timeout
            )
        except (kjs.JetStreamUnavailable, nats.errors.ConnectionClosedError) as exc:
            raise _unavailable("archive read", exc) from exc
        if m is None:
            return []
        doc = records_pb2.GameLog.FromString(m.data)
        return [Record(doc.last_sseq, rec, archived=True) for rec in doc.records]

    async def archive(
        self, game: str, game_id: str, records: Sequence[records_pb2.Record | bytes], last_sseq: int
    ) -> bool:
        """Store a finished game's whole log once (the first writer wins); False when it was there.
        ``records``: the records, each a message or serialized (as the log holds it: written into
        the archive as they are, not parsed and serialized again)."""
        data = game_log_bytes(records, last_sseq)
        headers = {
            "Nats-Expected-Last-Subject-Sequence": "0",
            "Nats-Msg-Id": f"archive-{game_id}",
            "Court-Game": game,
        }
        try:
            fut = await self.publisher.publish(ARCHIVE_PREFIX + game_id, data, headers)
            ack = await asyncio.wait_for(fut, self.timeout)
        except APIError as exc:
            if exc.err_code == kjs.ERR_WRONG_LAST_SEQUENCE:
                return False
            raise _unavailable("archive", exc) from exc
        except (TimeoutError, nats.errors.Error) as exc:
            raise _unavailable("archive", exc) from exc
        return b'"duplicate"' not in ack

    async def purge_hot(self, game_id: str) -> None:
        """Remove a finished (archived, projected) game's log from its hot stream."""
        try:
            await self.js.purge_stream(self.stream_of(game_id), subject=self.subject(game_id))
        except (TimeoutError, nats.errors.Error) as exc:
            raise _unavailable("purge", exc) from exc

    async def last_sseq(self, game_id: str) -> tuple[int, int] | None:
        """(stream sequence, game seq) of the game's last record, or ``None`` for an unknown game."""
        try:
            m = await kjs.direct_get_last(
                self.nc, self.stream_of(game_id), self.subject(game_id), timeout=self.timeout
            )
        except (kjs.JetStreamUnavailable, nats.errors.ConnectionClosedError) as exc:
            raise _unavailable("read", exc) from exc
        if m is None:
            return None
        return m.seq, int(m.headers.get(SEQ_HEADER, "0"))

    async def last_public(self, game: str, game_id: str) -> tuple[int, int] | None:
        """(public stream sequence, game seq) of the game's last public record, or ``None``."""
        try:
            m = await kjs.direct_get_last(
                self.nc, EVENTS_STREAM, krec.public_subject(game, game_id), timeout=self.timeout
            )
        except (kjs.JetStreamUnavailable, nats.errors.ConnectionClosedError) as exc:
            raise _unavailable("public read", exc) from exc
        if m is None:
            return None
        return m.seq, int(m.headers.get(SEQ_HEADER, "0"))


_LOG_RECORDS = records_pb2.GameLog.DESCRIPTOR.fields_by_name["records"].number


def game_log_bytes(records: Sequence[records_pb2.Record | bytes], last_sseq: int) -> bytes:
    """``GameLog(records=records, last_sseq=last_sseq)`` serialized, byte for byte; a record given
    as bytes is written as it is."""
    parts = [field(_LOG_RECORDS, r if isinstance(r, bytes) else r.SerializeToString()) for r in records]
    parts.append(records_pb2.GameLog(last_sseq=last_sseq).SerializeToString())
    return b"".join(parts)


# JetStream's "no suitable peers for placement": fewer servers have joined the cluster than the
# streams' replicas ask for (a cluster still forming, or one down for the moment)
NO_PEERS_FOR_PLACEMENT = 10005


async def ensure_streams_ready(store: GameStore) -> None:
    """Create or update the streams, waiting while JetStream cannot answer yet (a cluster electing
    its meta leader, a server still recovering its store) or has too few servers yet for the
    streams' replicas (logged, with JetStream's reason, every 30 s while it lasts: a cluster
    smaller than ``COURT_STREAM_REPLICAS`` stays here); any other refusal is an error."""
    waiting = klog.StateLog(klog.get_logger("court_rules"), "stream set-up", summary_every=30.0)
    while True:
        try:
            await store.ensure_streams()
        except (TimeoutError, nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError) as exc:
            waiting.failed(
                "waiting for JetStream to create the streams", error=str(exc) or type(exc).__name__
            )
            await asyncio.sleep(0.5)
            continue
        except nats.js.errors.APIError as exc:
            if exc.code != 503 and exc.err_code != NO_PEERS_FOR_PLACEMENT:
                raise
            waiting.failed("waiting for JetStream to create the streams", error=str(exc))
            await asyncio.sleep(0.5)
            continue
        waiting.ok("streams ready")
        return
