"""Proto messages built from engine values: views, results, legal actions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from court_contract import actions as kactions
from court_contract import records as krec
from court_contract import typed
from court_games.core import Event
from court_proto.court.rules.v1 import actions_pb2, rules_pb2

from .games import GameEntry, winners_of


class ActionCodec:
    """Engine actions to typed ``Action`` messages, memoised (a game's action space is small)."""

    def __init__(self, limit: int = 200_000):
        self._memo: dict[tuple[str, Any], actions_pb2.Action] = {}
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
    ``state``. Memoised per entry for its recent positions (``GameEntry.views``): a move's submit
    answer, the next seat's view and every WatchGame stream of the same seat at that seq share one
    (callers copy it into their answer, never change it). The key is the position (seq, closed) and
    the seat: a view is only ever served to whoever may read that seat's view."""
    closed = entry.closed_at(seq)
    key = (seq, closed, seat)
    views = entry.views
    v = views.get(key)
    if v is None:
        v = _build_view(entry, codec, state, seq, seat, closed)
        if len(views) >= VIEWS_KEPT:
            views.clear()
        views[key] = v
    return v


VIEWS_KEPT = 48  # views and updates memoised per game (a few positions' worth of every seat and a spectator)


def game_update(
    entry: GameEntry,
    codec: ActionCodec,
    state: Any,
    seq: int,
    seat: int | None,
    events: Sequence[Event] | None,
) -> rules_pb2.GameUpdate:
    """A WatchGame update: ``seat``'s view after ``seq`` and, unless a snapshot (``events`` None),
    that record's events as ``seat`` may read them. Memoised beside the views (``GameEntry.views``,
    key ("update", seq, closed, seat, snapshot)): every stream of one seat, and every spectator's
    (seat None: no private part, no hand), share one update per move instead of building one
    each; callers never change it."""
    closed = entry.closed_at(seq)
    key = ("update", seq, closed, seat, events is None)
    views = entry.views
    u = views.get(key)
    if u is None:
        u = rules_pb2.GameUpdate(seq=seq, view=game_view(entry, codec, state, seq, seat))
        if events is not None:
            u.events.extend([typed.event_for_seat_to_proto(entry.game, e, seat) for e in events])
        if len(views) >= VIEWS_KEPT:
            views.clear()
        views[key] = u
    return u


def _build_view(
    entry: GameEntry, codec: ActionCodec, state: Any, seq: int, seat: int | None, closed: bool
) -> rules_pb2.GameView:
    module = entry.module
    acting = () if closed else module.to_act(state)
    finished = closed or module.is_terminal(state)
    engine_view = module.view(state, seat)
    try:
        # the typed view built in place (typed.view_kwargs), not built and then copied in
        v = rules_pb2.GameView(
            game=entry.game,
            game_id=entry.game_id,
            seq=seq,
            to_act=acting,
            finished=finished,
            seats=entry.seats,
            # protobuf builds a message field from a dict (no copy); its stubs allow only the message
            view=typed.view_kwargs(entry.game, engine_view),  # type: ignore[arg-type]
        )
    except (TypeError, ValueError):
        typed.view_to_proto(entry.game, engine_view)  # the TypedError that names the field
        raise
    if seat is not None:
        v.your_seat = seat
    v.options.MergeFromString(entry.options_bytes)
    if seat is not None and seat in acting:
        v.legal_actions.extend([codec.proto(entry, a, seat) for a in module.legal_actions(state, seat)])
    if finished:
        result_proto(entry, state, v.result, closed)
    clock_proto(entry, seq, v)
    return v


def clock_proto(entry: GameEntry, seq: int, v: rules_pb2.GameView) -> None:
    """The turn clock as of ``seq``: settings, and every seat's deadline, bank and away mark."""
    if entry.clock_record is not None:
        v.clock.CopyFrom(krec.clock_to_proto(entry.clock_record))
    if seq >= len(entry.clocks):
        return
    over = v.finished
    clk = entry.clock_at(seq)
    cs = entry.clock_settings
    if not over and cs.abandon_ms > 0 and entry.humans and all(clk[h].away for h in entry.humans):
        v.abandon_at.FromMilliseconds(max(clk[h].away_since or 0 for h in entry.humans) + cs.abandon_ms)
    for i, s in enumerate(clk):
        c = v.seat_clocks.add(seat=i, bank_ms=s.bank_ms, away=s.away, timeouts_in_row=s.timeouts)
        if s.deadline is not None and not over:
            c.deadline.FromMilliseconds(s.deadline)
        if s.turn_seq >= 0 and not over:
            c.turn_seq = s.turn_seq
        if s.away_since is not None:
            c.away_since.FromMilliseconds(s.away_since)
