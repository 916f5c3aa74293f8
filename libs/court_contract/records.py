"""Game records, contract v2 (``court.events.v2.Record``): subjects, shards, encoding, redaction.

One record per game step (``protos/court/events/v2/records.proto``; docs/contract.md):

* the **full** record is the game log itself: stream ``COURT_GAMES_<shard>``, subject
  ``court.games.<shard>.<game_id>.log`` (or ``.due`` when the turn clock has work after it),
  written once by the rules service (the append that accepts the move); a game's log is every
  record on ``court.games.<shard>.<game_id>.*``;
* the **public** record is the same message with every hidden part removed (``redact``), written
  by the projector on ``court.events.<game>.<game_id>`` (stream ``COURT_EVENTS``), ``Nats-Msg-Id``
  ``<game_id>-<seq>``.

Shards: ``COURT_GAME_STREAMS`` streams (default 1), a game's shard is ``crc32(game_id) mod n``:
stable for a given n, so n must not change while games are live (docs/operations.md).

Everything that reads or writes records (rules, projector, bot, ranking, analytics) goes through
this module, so the wire format lives in one place.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from court_games.core import Event
from court_kit.settings import ConfigError
from court_kit.structs import field, timestamp_bytes, varint
from court_proto.court.events.v2 import records_pb2 as pb
from court_proto.court.games.v1 import events_pb2 as games_pb

from . import typed

GAMES_STREAM_PREFIX = "COURT_GAMES_"  # COURT_GAMES_0 .. COURT_GAMES_<n-1>
GAMES_SUBJECT_PREFIX = "court.games."
PUBLIC_STREAM = "COURT_EVENTS"
PUBLIC_PREFIX = "court.events."
LIMITS_NAME = "COURT_GAMES"  # every shard has the limits of STREAM_LIMITS["COURT_GAMES"]
MAX_SHARDS = 64

SEQ_HEADER = "Court-Seq"  # the record's game seq, on the log and the public record
LOG_SEQ_HEADER = "Court-Log-Seq"  # on a public record: the log stream sequence it was projected from
CLOSED_HEADER = "Court-Closed"  # on a game's closing record (resumed as another game)
MSG_ID_HEADER = "Nats-Msg-Id"

PUBLIC = pb.VISIBILITY_PUBLIC
FULL = pb.VISIBILITY_FULL


# ---------------------------------------------------------------------------- shards and subjects


def shard_count(environ: Mapping[str, str]) -> int:
    """``COURT_GAME_STREAMS`` (default 1, 1..64)."""
    raw = environ.get("COURT_GAME_STREAMS", "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_SHARDS:
        raise ConfigError(
            f"COURT_GAME_STREAMS must be a whole number of game-log streams from 1 to {MAX_SHARDS}, "
            f"got {raw[:40]!r}"
        )
    return n


def shard_of(game_id: str, shards: int) -> int:
    return zlib.crc32(game_id.encode()) % shards if shards > 1 else 0


def game_stream(shard: int) -> str:
    return f"{GAMES_STREAM_PREFIX}{shard}"


def game_streams(shards: int) -> list[str]:
    return [game_stream(i) for i in range(shards)]


# A record's last subject token: ``due`` when the turn clock has work in the position after it
# (the record carries ``Court-Due``), ``log`` otherwise. The clock's durable follows ``*.due``
# alone, so records with no clock work (bot seats to act, games without a clock, finished games)
# never reach it; a game's log is both (``log_filter``), and every append checks the last
# sequence of the whole log (``Nats-Expected-Last-Subject-Sequence-Subject``).
LOG_TOKEN = "log"
DUE_TOKEN = "due"


def _log_subject(game_id: str, shards: int, last: str) -> str:
    return f"{GAMES_SUBJECT_PREFIX}{shard_of(game_id, shards)}.{game_id}.{last}"


def log_subject(game_id: str, shards: int, due: bool = False) -> str:
    """The subject one record of the game is appended on."""
    return _log_subject(game_id, shards, DUE_TOKEN if due else LOG_TOKEN)


def log_filter(game_id: str, shards: int) -> str:
    """Every record of the game's log (both of its subjects), oldest first when read."""
    return _log_subject(game_id, shards, "*")


def shard_subjects(shard: int) -> str:
    return f"{GAMES_SUBJECT_PREFIX}{shard}.*.*"


def due_subjects(shard: int) -> str:
    """The shard's records after which the turn clock has work."""
    return f"{GAMES_SUBJECT_PREFIX}{shard}.*.{DUE_TOKEN}"


def game_id_of_log_subject(subject: str) -> str:
    return subject.split(".")[3]


def public_subject(game: str, game_id: str) -> str:
    return f"{PUBLIC_PREFIX}{game}.{game_id}"


def msg_id(game_id: str, seq: int, closed: bool = False) -> str:
    return f"{game_id}-{seq}" + ("-closed" if closed else "")


# The records that move rank points (a round or the game ending) are also published, after their
# public record and in the same public form, on ``court.events.<game>.<game_id>.points`` (in
# ``COURT_EVENTS``, ``Nats-Msg-Id`` ``<game_id>-<seq>-points``): the ranking service's durable
# follows that subject alone, not every move. A subject of five tokens, so the readers of every
# public record (``court.events.*.*``: the bot service, analytics, ``court events``) never see it.
POINTS_TOKEN = "points"
POINTS_EVENTS = frozenset({"RoundEnded", "GameEnded"})


def points_subject(game: str, game_id: str) -> str:
    return f"{PUBLIC_PREFIX}{game}.{game_id}.{POINTS_TOKEN}"


def points_subjects() -> str:
    """Every game's point records (the ranking service's filter)."""
    return f"{PUBLIC_PREFIX}*.*.{POINTS_TOKEN}"


# A bot seat's view of the position a person's move made, pushed by the rules replica that applied
# the move to the bot service (core NATS, no stream): ``court.botviews.<game_id>``, a serialized
# ``court.rules.v1.GameView`` of one bot seat, exactly what GetView answers the bot identity for
# that seat at that seq. Not a public record: only the rules identity publishes here and only the
# bot identity subscribes (court_kit.natsauth). A cache for the bot's turn, never the turn itself:
# one lost or late, the bot reads the view with GetView (docs/contract.md, "Bot seats' views").
BOT_VIEWS_PREFIX = "court.botviews."


def bot_views_subject(game_id: str) -> str:
    return f"{BOT_VIEWS_PREFIX}{game_id}"


def points_msg_id(game_id: str, seq: int) -> str:
    return f"{game_id}-{seq}-{POINTS_TOKEN}"


def moves_points(rec: pb.Record) -> bool:
    """Whether the record ends a round or the game (its events' kinds, without converting them)."""
    body = rec.WhichOneof("body")
    if body not in ("move", "created", "seat_changed"):
        return False
    return any(typed.event_type(e) in POINTS_EVENTS for e in getattr(rec, body).events)


# ---------------------------------------------------------------------------- events
# court.games.v1.Event is typed per event kind (court_contract.typed converts).


def event_to_proto(game: str, e: Event) -> games_pb.Event:
    msg: games_pb.Event = typed.event_to_proto(game, e)
    return msg


def event_from_proto(p: games_pb.Event) -> Event:
    return typed.engine_event_from_proto(p)


def public_event(e: Event) -> Event:
    """What anyone at the table may know of ``e``: its data without the private part."""
    return Event(e.type, e.data) if e.private else e


# ---------------------------------------------------------------------------- encoding


def _stamp(rec: pb.Record, t_ms: int) -> None:
    rec.time.seconds, ms = divmod(t_ms, 1000)
    rec.time.nanos = ms * 1_000_000


def _header(
    rec: pb.Record,
    game: str,
    game_id: str,
    seq: int,
    t_ms: int,
    to_act: Sequence[int],
    seats: Sequence[str],
    finished: bool,
    deadlines: Iterable[tuple[int, int]] = (),
) -> None:
    rec.game_id = game_id
    rec.game = game
    rec.seq = seq
    _stamp(rec, t_ms)
    rec.visibility = FULL
    rec.to_act.extend(to_act)
    rec.to_act_players.extend(seats[i] for i in to_act)
    rec.finished = finished
    for seat, ms in deadlines:
        rec.deadlines.add(seat=seat, deadline_ms=ms)


CLOCK_KEYS = (
    ("turn_seconds", "turn_s"),
    ("time_bank_seconds", "bank_s"),
    ("autoplay_level", "level"),
    ("abandon_after_seconds", "abandon_s"),
    ("turn_ms", "turn_ms"),
    ("bank_ms", "bank_ms"),
    ("abandon_ms", "abandon_ms"),
)


def clock_to_proto(clock: Mapping[str, Any]) -> games_pb.TurnClock:
    """A creation's turn clock (``court_kit.clock.to_record``'s dict) as its typed message."""
    return games_pb.TurnClock(**{f: clock[k] for f, k in CLOCK_KEYS if k in clock})


def clock_from_proto(c: games_pb.TurnClock) -> dict[str, Any]:
    return {k: getattr(c, f) for f, k in CLOCK_KEYS}


def created_record(
    game: str,
    game_id: str,
    t_ms: int,
    *,
    seats: Sequence[str],
    options: Mapping[str, Any],
    seed: int,
    by: str,
    request_id: str,
    events: Iterable[Event],
    to_act: Sequence[int],
    finished: bool,
    resumed_from: str | None = None,
    save: Mapping[str, Any] | None = None,
    clock: Mapping[str, Any] | None = None,
    deadlines: Iterable[tuple[int, int]] = (),
    online: bool = False,
) -> pb.Record:
    """``online``: the lobby started it as an online game (rank points move); public."""
    rec = pb.Record()
    _header(rec, game, game_id, 0, t_ms, to_act, seats, finished, deadlines)
    c = rec.created
    c.online = online
    c.seats.extend(seats)
    c.options.CopyFrom(typed.options_to_proto(game, options))
    c.seed = seed
    c.created_by = by
    c.request_id = request_id
    if resumed_from:
        c.resumed_from = resumed_from
    if save is not None:
        c.save_json = json.dumps(save, separators=(",", ":"), sort_keys=True)
    if clock is not None:
        c.clock.CopyFrom(clock_to_proto(clock))
    for e in events:
        c.events.append(event_to_proto(game, e))
    return rec


def move_record(
    game: str,
    game_id: str,
    seq: int,
    t_ms: int,
    *,
    seat: int,
    action: Any,
    action_type: str,
    by: str,
    request_id: str,
    events: Iterable[Event],
    to_act: Sequence[int],
    seats: Sequence[str],
    finished: bool,
    autoplay: str = "",
    deadlines: Iterable[tuple[int, int]] = (),
) -> pb.Record:
    """``action``: the typed ``court.rules.v1.Action``; ``autoplay``: "timeout" or "away" for a
    move the turn clock made."""
    rec = pb.Record()
    _header(rec, game, game_id, seq, t_ms, to_act, seats, finished, deadlines)
    m = rec.move
    m.seat = seat
    m.action.CopyFrom(action)
    m.action_type = action_type
    m.by = by
    m.request_id = request_id
    m.autoplay = autoplay
    for e in events:
        m.events.append(event_to_proto(game, e))
    return rec


# move_record_bytes writes a record's fields, and its MoveRecorded's, as protobuf serializes them:
# in field number order, a scalar left out at its default, the time, the move and its action always
# (set, even when empty), ``to_act`` packed. These are the numbers it writes (any other field is
# never set on a move record, so never serialized): a change to them stops the import.
_NUMBERS: dict[Any, dict[str, int]] = {
    pb.Record.DESCRIPTOR: dict(
        game_id=1,
        game=2,
        seq=3,
        time=4,
        visibility=5,
        to_act=6,
        to_act_players=7,
        finished=8,
        deadlines=9,
        move=11,
    ),
    pb.MoveRecorded.DESCRIPTOR: dict(
        seat=1, action=2, action_type=3, by=4, request_id=5, events=6, autoplay=7
    ),
    games_pb.SeatDeadline.DESCRIPTOR: dict(seat=1, deadline_ms=2),
}
if any(
    name not in d.fields_by_name or d.fields_by_name[name].number != number
    for d, numbers in _NUMBERS.items()
    for name, number in numbers.items()
):
    raise ImportError("court.events.v2: a field of Record or MoveRecorded moved: see move_record_bytes")
_FULL = field(5, FULL)
_FINISHED = field(8, 1)


def record_head(game: str, game_id: str) -> bytes:
    """A record's first fields (``game_id``, ``game``), serialized: the same in every record of a
    game (``move_record_bytes``)."""
    return (field(1, game_id.encode()) if game_id else b"") + (field(2, game.encode()) if game else b"")


def acting_bytes(to_act: Sequence[int], seats: Sequence[str]) -> bytes:
    """A record's ``to_act`` and ``to_act_players`` (the seats to act and who holds them),
    serialized (``move_record_bytes``)."""
    if not to_act:
        return b""
    return field(6, b"".join([varint(i) for i in to_act])) + b"".join(
        [field(7, seats[i].encode()) for i in to_act]
    )


def move_record_bytes(
    head: bytes,
    seq: int,
    t_ms: int,
    acting: bytes,
    finished: bool,
    *,
    seat: int,
    action: bytes,
    action_type: str,
    by: str,
    request_id: str,
    events: Sequence[bytes],
    autoplay: str = "",
    deadlines: Iterable[tuple[int, int]] = (),
) -> bytes:
    """``move_record(...).SerializeToString()``, byte for byte, written from its parts: ``head``
    (``record_head``), ``acting`` (``acting_bytes`` of the seats to act), ``action`` (the typed
    ``court.rules.v1.Action``, serialized) and ``events`` (the record's events, each serialized in
    its full form: ``event_to_proto(game, e).SerializeToString()``). Building the record through
    protobuf and serializing it cost a move about three times as much (tests/rules/test_encoding.py
    checks the bytes against it)."""
    if t_ms < 0 or seq < 0:
        raise ValueError(f"a record's seq and time are not negative: seq {seq}, time {t_ms} ms")
    # the move (MoveRecorded): seat 1, action 2, action_type 3, by 4, request_id 5, events 6, autoplay 7
    move = [b"\x08" + varint(seat) if seat else b"", b"\x12", varint(len(action)), action]
    for number, text in ((b"\x1a", action_type), (b"\x22", by), (b"\x2a", request_id)):
        if text:
            raw = text.encode()
            move += (number, varint(len(raw)), raw)
    for e in events:
        move += (b"\x32", varint(len(e)), e)
    if autoplay:
        raw = autoplay.encode()
        move += (b"\x3a", varint(len(raw)), raw)
    body = b"".join(move)
    # the time (Timestamp: seconds 1, nanos 2), always set
    stamp = timestamp_bytes(t_ms)
    out = [head, b"\x18" + varint(seq) if seq else b"", b"\x22", varint(len(stamp)), stamp, _FULL, acting]
    if finished:
        out.append(_FINISHED)
    for s, d in deadlines:
        out.append(field(9, games_pb.SeatDeadline(seat=s, deadline_ms=d).SerializeToString()))
    out += (b"\x5a", varint(len(body)), body)
    return b"".join(out)


def seat_record(
    game: str,
    game_id: str,
    seq: int,
    t_ms: int,
    *,
    seat: int,
    kind: str,
    by: str,
    request_id: str,
    events: Iterable[Event],
    to_act: Sequence[int],
    seats: Sequence[str],
    finished: bool,
    deadlines: Iterable[tuple[int, int]] = (),
) -> pb.Record:
    """A turn clock seat record (``kind`` "seat_away" or "seat_returned"): no action."""
    rec = pb.Record()
    _header(rec, game, game_id, seq, t_ms, to_act, seats, finished, deadlines)
    s = rec.seat_changed
    s.seat = seat
    s.kind = kind
    s.by = by
    s.request_id = request_id
    for e in events:
        s.events.append(event_to_proto(game, e))
    return rec


def closed_record(
    game: str, game_id: str, seq: int, t_ms: int, *, into: str, by: str, request_id: str, reason: str = ""
) -> pb.Record:
    """A game's last record: resumed as game ``into``, or (``into`` empty) closed for ``reason``."""
    rec = pb.Record()
    _header(rec, game, game_id, seq, t_ms, (), (), True)
    rec.closed.into = into
    rec.closed.by = by
    rec.closed.request_id = request_id
    if reason:
        rec.closed.reason = reason
    return rec


def decode(data: bytes) -> pb.Record:
    """One record (``ValueError`` when the bytes are not one)."""
    try:
        rec = pb.Record.FromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError
        raise ValueError(f"not a court.events.v2.Record: {exc}") from None
    if not rec.game_id or rec.WhichOneof("body") is None:
        raise ValueError("a court.events.v2.Record without game_id or body")
    return rec


# ---------------------------------------------------------------------------- redaction


# What a public record keeps of each message of the full one (``redact``): every field of these
# messages is named here as public or hidden, and a field added to the protos stops the import
# until it is placed, so nothing new reaches a public record unjudged.
_PUBLIC_FIELDS: dict[Any, frozenset[str]] = {
    pb.Record: frozenset(
        "game_id game seq time visibility to_act to_act_players finished deadlines "
        "created move closed seat_changed".split()
    ),
    pb.GameCreated: frozenset(("seats", "options", "resumed_from", "events", "clock", "online")),
    pb.MoveRecorded: frozenset(("seat", "action_type", "events", "autoplay")),
    pb.SeatChanged: frozenset(("seat", "kind", "events")),
    pb.GameClosed: frozenset(("into", "reason")),
}
_HIDDEN_FIELDS: dict[Any, tuple[str, ...]] = {
    pb.Record: (),
    pb.GameCreated: ("seed", "save_json", "created_by", "request_id"),
    pb.MoveRecorded: ("action", "by", "request_id"),
    pb.SeatChanged: ("by", "request_id"),
    pb.GameClosed: ("by", "request_id"),
}
for _cls, _public in _PUBLIC_FIELDS.items():
    _names = {f.name for f in _cls.DESCRIPTOR.fields}
    if _names != _public | set(_HIDDEN_FIELDS[_cls]) or _public & set(_HIDDEN_FIELDS[_cls]):
        raise ImportError(
            f"{_cls.DESCRIPTOR.full_name}: a field is neither public nor hidden in "
            f"court_contract.records._PUBLIC_FIELDS/_HIDDEN_FIELDS: "
            f"{sorted(_names ^ (_public | set(_HIDDEN_FIELDS[_cls])))}"
        )
_BODY_HIDDEN = {
    fd.name: _HIDDEN_FIELDS[type(getattr(pb.Record(), fd.name))]
    for fd in pb.Record.DESCRIPTOR.oneofs_by_name["body"].fields
}


def redact(full: pb.Record) -> pb.Record:
    """The public form of a full record: the same envelope, every hidden part removed (the
    events' private parts, the seed, a save point, the action itself, who called and with which
    request id; ``_HIDDEN_FIELDS``), and any field this code does not know (a newer writer's).
    A copy of the record with those cleared (the projector's every record: a few calls into
    protobuf, not one per field kept)."""
    out = pb.Record()
    out.CopyFrom(full)
    out.DiscardUnknownFields()
    out.visibility = PUBLIC
    body = out.WhichOneof("body")
    if body is not None:
        part = getattr(out, body)
        for name in _BODY_HIDDEN[body]:
            part.ClearField(name)
        if body != "closed":
            for e in part.events:
                p = typed.public_event(e)
                if p is not e:
                    e.CopyFrom(p)
    return out


def events_of(rec: pb.Record) -> list[Event]:
    """The record's events as engine events (public records: without private parts)."""
    body = rec.WhichOneof("body")
    if body == "move":
        return [event_from_proto(p) for p in rec.move.events]
    if body == "created":
        return [event_from_proto(p) for p in rec.created.events]
    if body == "seat_changed":
        return [event_from_proto(p) for p in rec.seat_changed.events]
    return []


def time_ms(rec: pb.Record) -> int:
    return rec.time.seconds * 1000 + rec.time.nanos // 1_000_000
