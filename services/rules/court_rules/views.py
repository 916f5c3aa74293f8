"""Proto messages built from engine values: views, results, legal actions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from court_contract import actions as kactions
from court_contract import records as krec
from court_contract import typed
from court_games.core import Event
from court_kit.structs import field as _field
from court_kit.structs import int64_varint as _int64_varint
from court_kit.structs import timestamp_bytes as _timestamp_bytes
from court_kit.structs import varint as _varint
from court_proto.court.games.v1 import views_pb2 as games_views_pb2
from court_proto.court.rules.v1 import actions_pb2, rules_pb2

from . import clock as kclock
from . import viewwire
from .games import GameEntry, winners_of


class ActionCodec:
    """Engine actions to typed ``Action`` messages, memoised (a game's action space is small)."""

    def __init__(self, limit: int = 200_000):
        self._memo: dict[tuple[str, Any], actions_pb2.Action] = {}
        self._legal: dict[str, dict[Any, bytes]] = {}  # per game: engine action -> legal_bytes
        self._parsed: dict[bytes, tuple[str, Any, dict[str, Any]]] = {}
        self._limit = limit

    def proto(self, entry: GameEntry, action: Any, seat: int) -> actions_pb2.Action:
        key = (entry.game, action)
        msg = self._memo.get(key)
        if msg is None:
            msg = kactions.from_json(entry.game, entry.module.action_to_json(action, seat))
            if len(self._memo) >= self._limit:
                self._memo.clear()
            self._memo[key] = msg
        return msg

    def parsed(self, sent: bytes) -> tuple[str, Any, dict[str, Any]] | None:
        """A submitted ``Action`` (its bytes) read before: its game, its engine action and its
        canonical JSON form (``remember_parsed``; shared by every move that sends it: never
        changed)."""
        return self._parsed.get(sent)

    def remember_parsed(self, sent: bytes, game: str, action: Any, action_json: dict[str, Any]) -> None:
        if len(self._parsed) >= self._limit:
            self._parsed.clear()
        self._parsed[sent] = (game, action, action_json)

    def legal_bytes(self, entry: GameEntry, action: Any, seat: int) -> bytes:
        """The action as one element of ``GameView.legal_actions``, serialized (field tag, length
        and message), memoised: a view's legal actions are these joined, with no copy of any."""
        memo = self._legal.get(entry.game)
        if memo is None:
            memo = self._legal[entry.game] = {}
        b = memo.get(action)
        if b is None:
            b = rules_pb2.GameView(legal_actions=[self.proto(entry, action, seat)]).SerializeToString()
            if len(memo) >= self._limit:
                memo.clear()
            memo[action] = b
        return b

    def legal_list_bytes(self, entry: GameEntry, actions: Sequence[Any], seat: int) -> bytes:
        """``legal_bytes`` of each action, joined: looked up in one pass when every one is known."""
        memo = self._legal.get(entry.game)
        if memo is not None:
            try:
                return b"".join(map(memo.__getitem__, actions))
            except KeyError:
                pass
        return b"".join([self.legal_bytes(entry, a, seat) for a in actions])


def result_proto(entry: GameEntry, state: Any, into: rules_pb2.GameResult, closed: bool = False) -> None:
    """The engine's result; for a closed game: the result as it stood, ``resumed_into`` naming the
    game that continues it (a resume) or ``closed_reason`` saying why (CloseGame), no winners,
    finished."""
    result = entry.module.result(state)
    into.result.CopyFrom(typed.result_to_proto(entry.game, result))
    if closed:
        into.resumed_into = entry.closed_into or ""
        into.closed_reason = entry.closed_reason
        into.finished = True
        return
    into.winners.extend(winners_of(result))
    into.finished = bool(result.get("finished", entry.module.is_terminal(state)))


def game_view(
    entry: GameEntry, codec: ActionCodec, state: Any, seq: int, seat: int | None
) -> rules_pb2.GameView:
    """The view of ``seat`` (``None``: a spectator's) of the position after ``seq``, whose state is
    ``state``: ``view_bytes`` as a message. Memoised beside them (``GameEntry.views``): a move's
    submit answer, the next seat's view and every WatchGame stream of the same seat at that seq
    share one (callers copy it into their answer, never change it)."""
    closed = entry.closed_at(seq)
    key = (seq, closed, seat)
    views = entry.views
    v = views.get(key)
    if v is None:
        v = rules_pb2.GameView.FromString(view_bytes(entry, codec, state, seq, seat))
        _keep(views, key, v)
    return v


VIEWS_KEPT = 64  # views, their parts and updates memoised per game (a few positions' worth of each seat)


def view_bytes(entry: GameEntry, codec: ActionCodec, state: Any, seq: int, seat: int | None) -> bytes:
    """``seat``'s view (``None``: a spectator's) of the position after ``seq``, serialized: the
    part every reader of that position shares (``public_bytes``: built once per position) followed
    by the seat's own part (its ``seat_view``, ``your_seat`` and legal actions), which protobuf
    merges into one GameView. Memoised per game by (seq, closed, seat): the seat is in the key, so
    one seat's part is only ever served with that seat's view."""
    closed = entry.closed_at(seq)
    key = ("bytes", seq, closed, seat)
    views = entry.views
    b = views.get(key)
    if b is None:
        b = _build_view(entry, codec, state, seq, seat, closed)
        _keep(views, key, b)
    return b


def _build_view(
    entry: GameEntry, codec: ActionCodec, state: Any, seq: int, seat: int | None, closed: bool
) -> bytes:
    """The view's bytes: the position's shared part, then the seat's own (``view_bytes``)."""
    return public_bytes(entry, state, seq, closed) + _seat_bytes(entry, codec, state, seat, closed)


def public_bytes(entry: GameEntry, state: Any, seq: int, closed: bool) -> bytes:
    """The part of every view of the position after ``seq`` that reads the same for every seat and
    a spectator, serialized: the game's ids and seats, ``to_act``, the engine's ``public_view``,
    options, result and clock. Nothing of any seat's own (``SEAT_KEYS``; ``your_seat``; legal
    actions): that is ``_seat_bytes``. Written as wire bytes field by field (the view's part by
    ``viewwire``, which reuses the bytes of the fields equal to the game's last public part's)."""
    key = ("public", seq, closed)
    views = entry.views
    b = views.get(key)
    if b is None:
        module = entry.module
        acting = () if closed else module.to_act(state)
        finished = closed or module.is_terminal(state)
        kept = _kept(views)
        last = kept.get(_WIRE_PUBLIC)
        if last is None:
            last = kept[_WIRE_PUBLIC] = viewwire.new_last(_public_keys(entry))
        parts = [
            _static_bytes(entry),
            _SEQ + _varint(seq) if seq else b"",
            _packed(_TO_ACT, acting) if acting else b"",
            _FINISHED if finished else b"",
            _view_field(entry, module.public_view(state), _public_keys(entry), last, state, None),
        ]
        if finished:
            r = rules_pb2.GameView()
            result_proto(entry, state, r.result, closed)
            parts.append(r.SerializeToString())
        parts.append(_clock_bytes(entry, seq, finished))
        b = b"".join(parts)
        _keep(views, key, b)
    return b


# the GameView fields written as bytes here, from the proto's descriptor
_GV = {f.name: f.number for f in rules_pb2.GameView.DESCRIPTOR.fields}
_SEQ = _varint(_GV["seq"] << 3)
_TO_ACT = _varint(_GV["to_act"] << 3 | 2)
_FINISHED = _varint(_GV["finished"] << 3) + b"\x01"
_YOUR_SEAT = _varint(_GV["your_seat"] << 3)
_VIEW = _varint(_GV["view"] << 3 | 2)
_WIRE_PUBLIC = ("wire", "public")  # the game's last public part, field by field (viewwire.view_part)


def _packed(tag: bytes, values: Sequence[int]) -> bytes:
    """A packed repeated field of small non-negative ints (seats)."""
    p = b"".join([_varint(x) for x in values])
    return tag + _varint(len(p)) + p


def _view_field(
    entry: GameEntry,
    part: Mapping[str, Any],
    keys: frozenset[str],
    last: list[Any],
    state: Any,
    seat: int | None,
) -> bytes:
    """``GameView.view`` holding ``part`` of the view (``viewwire.view_part``; a part it does not
    write, through the typed converter, which names the field of a value that does not fit)."""
    try:
        b = viewwire.view_part(entry.game, part, keys, last)
    except viewwire.Unsupported:
        try:
            b = games_views_pb2.View(**typed.view_part_kwargs(entry.game, part, keys)).SerializeToString()
        except (TypeError, ValueError):
            typed.view_to_proto(entry.game, entry.module.view(state, seat))  # the TypedError naming the field
            raise
    return _message_field(_VIEW, b)


_STATIC = ("static",)


def _static_bytes(entry: GameEntry) -> bytes:
    """The part of every view of the game that no move changes, serialized: its ids, seats,
    options and clock settings (kept when the game's views are dropped: ``_keep``)."""
    kept = _kept(entry.views)
    b = kept.get(_STATIC)
    if b is None:
        v = rules_pb2.GameView(game=entry.game, game_id=entry.game_id, seats=entry.seats)
        v.options.MergeFromString(entry.options_bytes)
        if entry.clock_record is not None:
            v.clock.CopyFrom(krec.clock_to_proto(entry.clock_record))
        b = kept[_STATIC] = v.SerializeToString()
    return b


_KEPT = ("kept",)  # what a game's views keep when they are dropped (_kept)


def _kept(views: dict[tuple[Any, ...], Any]) -> dict[tuple[Any, ...], Any]:
    """What a game's views keep across positions, in one dict of their own (a handful of items,
    so dropping the rest is one ``clear``): the static part (``_static_bytes``), each seat's
    last own part (``_seat_bytes``) and each part's last fields (``viewwire.view_part``)."""
    kept: dict[tuple[Any, ...], Any] | None = views.get(_KEPT)
    if kept is None:
        kept = views[_KEPT] = {}
    return kept


def _keep(views: dict[tuple[Any, ...], Any], key: tuple[Any, ...], value: Any) -> None:
    """Memoise ``value`` among a game's views, which hold at most ``VIEWS_KEPT`` (then all are
    dropped but what ``_kept`` holds: the recent positions are built again when asked for)."""
    if len(views) >= VIEWS_KEPT:
        kept = views.get(_KEPT)
        views.clear()
        if kept is not None:
            views[_KEPT] = kept
    views[key] = value


_PUBLIC_KEYS: dict[str, frozenset[str]] = {}


def _public_keys(entry: GameEntry) -> frozenset[str]:
    """The fields of the game's view that ``public_view`` fills: all but the engine's ``SEAT_KEYS``."""
    keys = _PUBLIC_KEYS.get(entry.game)
    if keys is None:
        keys = _PUBLIC_KEYS[entry.game] = typed.view_fields(entry.game) - entry.module.SEAT_KEYS
    return keys


def _seat_bytes(entry: GameEntry, codec: ActionCodec, state: Any, seat: int | None, closed: bool) -> bytes:
    """The seat's own part of its view, serialized: ``your_seat``, its ``seat_view`` and, when it
    is to act, its legal actions (a spectator's: its ``seat_view``, often nothing). The seat's last
    ``seat_view`` and its bytes are kept (key ("seat", seat): only ever this seat's): a seat's own
    part changes only when it moves (its hand), so another seat's move finds it equal and reuses
    its bytes."""
    module = entry.module
    part = module.seat_view(state, seat)
    key = ("seat", seat)
    kept = _kept(entry.views)
    last = kept.get(key)
    if last is not None and last[0] == part:
        b: bytes = last[1]
    else:
        b = _YOUR_SEAT + _varint(seat) if seat is not None else b""
        if part:
            wire_key = ("wire", seat)
            fields = kept.get(wire_key)
            if fields is None:
                fields = kept[wire_key] = viewwire.new_last(module.SEAT_KEYS)
            b += _view_field(entry, part, module.SEAT_KEYS, fields, state, seat)
        kept[key] = (part, b)
    if seat is not None and not closed and seat in module.to_act(state):
        b += codec.legal_list_bytes(entry, module.legal_actions(state, seat), seat)
    return b


def update_bytes(
    entry: GameEntry,
    codec: ActionCodec,
    state: Any,
    seq: int,
    seat: int | None,
    events: Sequence[Event] | None,
) -> bytes:
    """A WatchGame update, serialized as the ``GameUpdate`` it is on the wire: ``seat``'s view
    after ``seq`` (``view_bytes``) and, unless a snapshot (``events`` None), that record's events
    as ``seat`` may read them. Sent as these bytes (``court_rules.servicer.add_to_server``: the
    method's serializer passes bytes through), never parsed into a message and serialized again.
    Memoised beside the views (``GameEntry.views``, key ("update", seq, closed, seat, snapshot)):
    every stream of one seat, and every spectator's (seat None: no private part, no hand), share
    one update per move; the seat is in the key, so one seat's update only ever reaches that
    seat's streams. An event with no private part reads the same for every seat: it is converted
    and serialized once per record and shared by every seat's update."""
    closed = entry.closed_at(seq)
    key = ("update", seq, closed, seat, events is None)
    views = entry.views
    u = views.get(key)
    if u is None:
        view = view_bytes(entry, codec, state, seq, seat)
        parts = [_UPDATE_SEQ + _varint(seq) if seq else b"", _UPDATE_VIEW + _varint(len(view)), view]
        if events:
            parts += _events_for(entry, seq, seat, events)
        u = b"".join(parts)
        _keep(views, key, u)
    return u


# the field numbers of the messages answered as bytes, from the protos; an update's and an answer's
# events are one field number, so one record's serialized events serve both (_events_for)
_UPDATE = {f.name: f.number for f in rules_pb2.GameUpdate.DESCRIPTOR.fields}
_ANSWER = {f.name: f.number for f in rules_pb2.SubmitActionResponse.DESCRIPTOR.fields}
_EVENTS = _UPDATE["events"]
_UPDATE_SEQ = _varint(_UPDATE["seq"] << 3)
_UPDATE_VIEW = _varint(_UPDATE["view"] << 3 | 2)
if _ANSWER["events"] != _EVENTS:
    raise ImportError("GameUpdate.events and SubmitActionResponse.events must share a field number")


def answer_bytes(
    entry: GameEntry,
    codec: ActionCodec,
    state: Any,
    seq: int,
    seat: int,
    events: Sequence[Event],
    full: Sequence[bytes],
    next_seats: Sequence[int],
    with_view: bool = True,
) -> bytes:
    """A SubmitAction answer, serialized as the ``SubmitActionResponse`` it is on the wire: the
    acting seat's view after ``seq`` (left out when not ``with_view``: the bot identity's answer
    once its seat is done, docs/contract.md), the record's events as that seat reads them (shared
    with the WatchGame updates of the record: ``_events_for``) and the views of ``next_seats``.
    Sent as these bytes (``court_rules.servicer.add_to_server``)."""
    return b"".join(
        [
            _field(_ANSWER["seq"], seq) if seq else b"",
            _field(_ANSWER["view"], view_bytes(entry, codec, state, seq, seat)) if with_view else b"",
            *_events_for(entry, seq, seat, events, full),
            *[_field(_ANSWER["next"], view_bytes(entry, codec, state, seq, s)) for s in next_seats],
        ]
    )


def _events_for(
    entry: GameEntry, seq: int, seat: int | None, events: Sequence[Event], full: Sequence[bytes] = ()
) -> list[bytes]:
    """The record's events as ``seat`` reads them, each serialized as one ``GameUpdate.events``
    (or ``SubmitActionResponse.events``) element: each event with no private part, or whose
    private part is not ``seat``'s, in its public form (converted once per record, shared), the
    seat's own events in its owner's form. ``full``: the record's events as its full record holds
    them, each serialized, one for one, when at hand: an event with no private part reads the
    same there (no owner, no secret), so those bytes are used rather than converting it again."""
    key = ("events", seq)
    views = entry.views
    public = views.get(key)
    game = entry.game
    if public is None:
        held: Sequence[bytes | None] = full if len(full) == len(events) else [None] * len(events)
        public = [
            _field(_EVENTS, p if p is not None and not e.private else _event(game, e, None))
            for e, p in zip(events, held, strict=True)
        ]
        _keep(views, key, public)
    if seat is None:
        return public
    return [
        _field(_EVENTS, _event(game, e, seat)) if e.private and e.owner == seat else p
        for e, p in zip(events, public, strict=True)
    ]


def _event(game: str, e: Event, seat: int | None) -> bytes:
    b: bytes = typed.event_for_seat_to_proto(game, e, seat).SerializeToString()
    return b


# SeatClock's and Timestamp's fields, written as bytes (_clock_bytes)
_SC = {f.name: f.number for f in rules_pb2.SeatClock.DESCRIPTOR.fields}
_SEAT_CLOCKS = _varint(_GV["seat_clocks"] << 3 | 2)
_ABANDON_AT = _varint(_GV["abandon_at"] << 3 | 2)
_SC_DEADLINE = _varint(_SC["deadline"] << 3 | 2)
_SC_AWAY_SINCE = _varint(_SC["away_since"] << 3 | 2)
_SC_SEAT = _varint(_SC["seat"] << 3)
_SC_BANK = _varint(_SC["bank_ms"] << 3)
_SC_AWAY = _varint(_SC["away"] << 3) + b"\x01"
_SC_TIMEOUTS = _varint(_SC["timeouts_in_row"] << 3)
_SC_TURN_SEQ = _varint(_SC["turn_seq"] << 3)
_SEAT_CLOCK_MEMO: dict[tuple[int, kclock.SeatState, bool], bytes] = {}
_MEMO_LIMIT = 20_000


def _message_field(tag: bytes, body: bytes) -> bytes:
    return tag + _varint(len(body)) + body


def _seat_clock(i: int, s: kclock.SeatState, over: bool) -> bytes:
    """One ``GameView.seat_clocks`` element, tag and length included: the seat's deadline and
    turn (while the game goes on), bank, away mark and timeouts. Memoised: most seats' clocks
    stay as they were from one move to the next."""
    key = (i, s, over)
    b = _SEAT_CLOCK_MEMO.get(key)
    if b is None:
        body = b"".join(
            [
                _SC_SEAT + _varint(i) if i else b"",
                _message_field(_SC_DEADLINE, _timestamp_bytes(s.deadline))
                if s.deadline is not None and not over
                else b"",
                _SC_BANK + _int64_varint(s.bank_ms) if s.bank_ms else b"",
                _SC_AWAY if s.away else b"",
                _message_field(_SC_AWAY_SINCE, _timestamp_bytes(s.away_since))
                if s.away_since is not None
                else b"",
                _SC_TIMEOUTS + _int64_varint(s.timeouts) if s.timeouts else b"",
                _SC_TURN_SEQ + _varint(s.turn_seq) if s.turn_seq > 0 and not over else b"",
            ]
        )
        b = _message_field(_SEAT_CLOCKS, body)
        if len(_SEAT_CLOCK_MEMO) >= _MEMO_LIMIT:
            _SEAT_CLOCK_MEMO.clear()
        _SEAT_CLOCK_MEMO[key] = b
    return b


def _clock_bytes(entry: GameEntry, seq: int, over: bool) -> bytes:
    """The turn clock as of ``seq`` (its settings are in ``_static_bytes``): every seat's deadline,
    bank and away mark, and when the lobby abandons a game every person left."""
    if seq >= len(entry.clocks):
        return b""
    clk = entry.clock_at(seq)
    cs = entry.clock_settings
    out = [_seat_clock(i, s, over) for i, s in enumerate(clk)]
    if not over and cs.abandon_ms > 0 and entry.humans and all(clk[h].away for h in entry.humans):
        at = max(clk[h].away_since or 0 for h in entry.humans) + cs.abandon_ms
        out.append(_message_field(_ABANDON_AT, _timestamp_bytes(at)))
    return b"".join(out)
