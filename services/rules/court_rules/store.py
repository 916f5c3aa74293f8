"""The rules service's JetStream storage: the per-game state log and the event streams.

Streams (created or updated at start-up; replicas from COURT_STREAM_REPLICAS; every one bounded,
limits from ``court_kit.jetstream.STREAM_LIMITS`` and the COURT_<STREAM>_MAX_* variables):

* ``COURT_GAMES``, subjects ``court.games.<game_id>``: the state log, one
  message per game record (the creation, then one per accepted move), JSON.
  Every append carries ``Nats-Expected-Last-Subject-Sequence`` (the stream
  sequence of the game's last record as the writer knows it), so of two
  writers racing on one game exactly one succeeds; the other gets JetStream's
  "wrong last sequence" (``Conflict``). Header ``Court-Seq`` is the game's
  move number. The log is also the events' outbox (see ``outbox``).
* ``COURT_EVENTS``, subjects ``court.events.<game>.<game_id>.<type>``: public
  events (``court.events.v1.GameEvent``), readable by players, bots, ranking.
* ``COURT_EVENTS_FULL``, subjects ``court.full.<game>.<game_id>.<type>``: the
  full-information events, for the analytics and admin roles only.
* ``COURT_GAMES_ARCHIVE``, subjects ``court.archive.<game_id>``: finished games, one message each
  (the whole state log as JSON, s2-compressed on disk), written when the final move is accepted.
  ``COURT_FINISHED_RETENTION`` (default 2 days) after that, the janitor (``court_rules.archive``)
  purges the game from the three hot streams; the game still loads from the archive (views,
  history, watching), for as long as the archive keeps it (COURT_GAMES_ARCHIVE_MAX_AGE, 365 d).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nats.errors
from court_kit import jetstream as kjs
from court_kit.errors import Unavailable
from nats.aio.client import Client as NATS
from nats.js.api import StreamConfig
from nats.js.errors import APIError

GAMES_STREAM = "COURT_GAMES"
EVENTS_STREAM = "COURT_EVENTS"
FULL_STREAM = "COURT_EVENTS_FULL"
ARCHIVE_STREAM = "COURT_GAMES_ARCHIVE"
ARCHIVE_PREFIX = "court.archive."
GAMES_PREFIX = "court.games."
EVENTS_PREFIX = "court.events."
FULL_PREFIX = "court.full."
DUPLICATE_WINDOW = 120.0  # seconds JetStream de-duplicates Nats-Msg-Id (the default)

SEQ_HEADER = "Court-Seq"
END_HEADER = "Court-End"  # on the last event of a move, per stream
CLOSED_HEADER = "Court-Closed"  # on a game's closing record (it was resumed as another game)
DUE_HEADER = "Court-Due"  # the turn clock has work in the position after this record from then (ms)


class Conflict(Exception):
    """Another writer appended to the game first (wrong last subject sequence)."""


def game_subject(game_id: str) -> str:
    return GAMES_PREFIX + game_id


@dataclass(frozen=True, slots=True)
class Record:
    """One state-log message: ``body`` is the decoded JSON, ``sseq`` its stream sequence."""

    sseq: int
    body: dict[str, Any]
    archived: bool = False  # read from the archive: the game has left the hot log


def _unavailable(what: str, exc: BaseException) -> Unavailable:
    return Unavailable(f"the game store is unavailable ({what}: {type(exc).__name__}); retry with the same request id")


class GameStore:
    def __init__(self, nc: NATS, *, replicas: int = 1, timeout: float = 5.0, environ: Mapping[str, str] | None = None):
        """``environ``: the COURT_ variables with the streams' limits (``Settings.extra``)."""
        self.nc = nc
        self.environ = dict(environ or {})
        self.js = nc.jetstream(timeout=timeout)
        self.publisher = kjs.Publisher(nc)
        self.replicas = replicas
        self.timeout = timeout

    def stream_configs(self) -> list[StreamConfig]:
        """Every stream the rules service writes, bounded (``court_kit.jetstream.stream_config``)."""
        def cfg(name: str, subjects: list[str], description: str) -> StreamConfig:
            return kjs.stream_config(name, subjects, description=description, environ=self.environ,
                                     replicas=self.replicas, duplicate_window=DUPLICATE_WINDOW)

        return [cfg(GAMES_STREAM, [GAMES_PREFIX + "*"], "Court game state logs"),
                cfg(EVENTS_STREAM, [EVENTS_PREFIX + ">"], "Court public game events"),
                cfg(FULL_STREAM, [FULL_PREFIX + ">"], "Court full-information game events (analytics/admin)"),
                cfg(ARCHIVE_STREAM, [ARCHIVE_PREFIX + "*"], "Court finished games, one message each")]

    async def ensure_streams(self) -> None:
        for config in self.stream_configs():
            await kjs.ensure_stream(self.js, config)

    # ------------------------------------------------------------------ state log

    async def append(self, game_id: str, body: dict[str, Any], seq: int, expected_sseq: int, *,
                     closing: bool = False, due: int | None = None) -> int:
        """Append one record; returns its stream sequence. ``Conflict`` when someone else was first.
        ``due``: when the turn clock has work in the position after it (``clockdriver``)."""
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Nats-Expected-Last-Subject-Sequence": str(expected_sseq), SEQ_HEADER: str(seq)}
        if closing:
            headers[CLOSED_HEADER] = "1"
        if due is not None:
            headers[DUE_HEADER] = str(due)
        fut = None
        try:
            fut = await self.publisher.publish(game_subject(game_id), data, headers)
            ack = await asyncio.wait_for(fut, self.timeout)
        except APIError as exc:
            if exc.err_code == kjs.ERR_WRONG_LAST_SEQUENCE:
                raise Conflict(str(exc)) from None
            raise _unavailable("append", exc) from exc
        except (TimeoutError, nats.errors.Error) as exc:  # timeouts, no responders, a closed connection
            if fut is not None:
                self.publisher.forget([fut])
            raise _unavailable("append", exc) from exc
        return int(json.loads(ack)["seq"])

    async def records(self, game_id: str, after_sseq: int = 0) -> list[Record]:
        """The game's records after stream sequence ``after_sseq``, oldest first."""
        try:
            msgs = await kjs.direct_get_batch(self.nc, GAMES_STREAM, game_subject(game_id),
                                              start_seq=after_sseq + 1, timeout=self.timeout)
        except kjs.JetStreamUnavailable as exc:
            raise _unavailable("load", exc) from exc
        except (nats.errors.ConnectionClosedError, nats.errors.OutboundBufferLimitError) as exc:
            raise _unavailable("load", exc) from exc
        if not msgs and after_sseq == 0:
            return await self.archived_records(game_id)
        return [Record(m.seq, json.loads(m.data)) for m in msgs]

    async def archived_records(self, game_id: str) -> list[Record]:
        """A finished game's records from the archive (``[]`` when it holds none)."""
        try:
            m = await kjs.direct_get_last(self.nc, ARCHIVE_STREAM, ARCHIVE_PREFIX + game_id, timeout=self.timeout)
        except (kjs.JetStreamUnavailable, nats.errors.ConnectionClosedError) as exc:
            raise _unavailable("archive read", exc) from exc
        if m is None:
            return []
        doc = json.loads(m.data)
        return [Record(doc["last_sseq"], body, archived=True) for body in doc["records"]]

    async def archive(self, game: str, game_id: str, bodies: list[dict[str, Any]], last_sseq: int) -> bool:
        """Store a finished game's whole log once (the first writer wins); False when it was there."""
        data = json.dumps({"records": bodies, "last_sseq": last_sseq}, separators=(",", ":")).encode()
        headers = {"Nats-Expected-Last-Subject-Sequence": "0", "Nats-Msg-Id": f"archive-{game_id}",
                   "Court-Game": game}
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

    async def purge_hot(self, game: str, game_id: str) -> None:
        """Remove a finished (archived) game from the state log and both event streams."""
        try:
            await self.js.purge_stream(GAMES_STREAM, subject=game_subject(game_id))
            await self.js.purge_stream(EVENTS_STREAM, subject=f"{EVENTS_PREFIX}{game}.{game_id}.>")
            await self.js.purge_stream(FULL_STREAM, subject=f"{FULL_PREFIX}{game}.{game_id}.>")
        except (TimeoutError, nats.errors.Error) as exc:
            raise _unavailable("purge", exc) from exc

    async def last_sseq(self, game_id: str) -> tuple[int, int] | None:
        """(stream sequence, game seq) of the game's last record, or ``None`` for an unknown game."""
        try:
            m = await kjs.direct_get_last(self.nc, GAMES_STREAM, game_subject(game_id), timeout=self.timeout)
        except (kjs.JetStreamUnavailable, nats.errors.ConnectionClosedError) as exc:
            raise _unavailable("read", exc) from exc
        if m is None:
            return None
        return m.seq, int(m.headers.get(SEQ_HEADER, "0"))

    # ------------------------------------------------------------------ events

    async def last_complete_event_seq(self, game: str, game_id: str) -> tuple[int, int]:
        """The last move seq whose events are all stored, in (public, full); -1 when none."""
        out = []
        for stream, prefix in ((EVENTS_STREAM, EVENTS_PREFIX), (FULL_STREAM, FULL_PREFIX)):
            try:
                m = await kjs.direct_get_last(self.nc, stream, f"{prefix}{game}.{game_id}.*", timeout=self.timeout)
            except (kjs.JetStreamUnavailable, nats.errors.ConnectionClosedError) as exc:
                raise _unavailable("event read", exc) from exc
            if m is None:
                out.append(-1)
            else:
                s = int(m.headers.get(SEQ_HEADER, "0"))
                out.append(s if m.headers.get(END_HEADER) else s - 1)
        return out[0], out[1]

    async def publish_events(self, messages: Sequence[tuple[str, bytes, dict[str, str]]]) -> None:
        """Publish (subject, data, headers) in order, pipelined, awaiting every ack.

        The end markers (``Court-End``) go out only once every other message is acknowledged: an
        end marker in a stream then vouches for all of its move's events there, even when a publish
        failed part-way (a stream leader change can lose one message and store the next) and its
        replica died before repairing it."""
        body = [m for m in messages if END_HEADER not in m[2]]
        ends = [m for m in messages if END_HEADER in m[2]]
        try:
            for part in (body, ends):
                if part:
                    await self.publisher.publish_all(part, timeout=self.timeout)
        except (TimeoutError, nats.errors.Error) as exc:  # JetStream API errors are nats errors too
            raise _unavailable("event publish", exc) from exc
