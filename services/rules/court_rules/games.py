"""Games as event-sourced entries: the game log replayed through the engine.

A game's log is its full-information records (``court.events.v2.Record``, ``court_contract.records``):
``GameCreated`` at seq 0 (game, options, seed, seats, caller, request id, time, the opening
events), one ``MoveRecorded`` per accepted move (seat, typed action, caller, request id, time,
the move's events), and for a game resumed as another (or closed by the lobby, ``CloseGame``)
a last ``GameClosed``. A log whose only record is a ``GameClosed`` at seq 0 with no game name is
a *tombstone*: the lobby closed that game id before any creation reached the log (its start was
undone while its CreateGame was still in flight, or never sent), so a creation that comes later
loses the append race and answers FAILED_PRECONDITION with the reason (``ClosedBeforeCreated``),
never a playable game. Inside the
service a creation is also kept as a small dict (``create``: the keys ``game``, ``options``,
``seed``, ``seats``, ``by``, ``rid``, ``t``, and for a resumed game ``save``, ``resumed_from``).

State is the engine's replay of that log (the actions only: events are written for readers) (deterministic given the seed), so
any replica rebuilds any game, and a request id is found again in the log: a
retry on a cold replica still gets the first answer. ``GameCache`` keeps the
entries a replica has seen, each with the stream sequence of its last record,
so a move costs one JetStream write (the append), not a read and a write.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from court_contract import actions as kactions
from court_contract import records as krec
from court_contract import typed
from court_games.core import Event
from court_games.registry import get_game
from court_kit.checks import quote
from court_kit.errors import FailedPrecondition, InvalidArgument, NotFound
from court_proto.court.events.v2 import records_pb2

from . import clock as kclock
from .store import GameStore, Record

RECENT = 16  # states and events kept for the last moves (watchers, retries)
BOT_PREFIX = "bot:"


def start_game(module: ModuleType, options: Any, seed: int) -> tuple[Any, tuple[Event, ...]]:
    """A new state and the engine's opening events, whichever way the engine offers them."""
    if hasattr(module, "start"):
        state, events = module.start(options, seed)
        return state, tuple(events)
    state = module.new_game(options, seed)
    if hasattr(module, "initial_events"):
        return state, tuple(module.initial_events(state))
    return state, ()


def resume_game(module: ModuleType, save: dict[str, Any]) -> tuple[Any, tuple[Event, ...]]:
    """The state a save point describes and its opening events (the deal of the saved hand)."""
    state = module.resume(save)
    if hasattr(module, "initial_events"):
        return state, tuple(module.initial_events(state))
    return state, ()


def game_id_for(secret: str, sub: str, request_id: str) -> str:
    """Deterministic per (caller, request id), so a retried create finds its game; keyed by the
    id secret (COURT_ID_SECRET, its own secret: no token key), so nobody can predict another caller's game id."""
    digest = hmac.new(secret.encode(), f"{sub}\0{request_id}".encode(), hashlib.sha256).digest()
    return "g" + digest[:12].hex()


def winners_of(result: dict[str, Any]) -> list[int]:
    w = result.get("winners")
    if isinstance(w, list):
        return [int(x) for x in w]
    one = result.get("winner")
    return [int(one)] if isinstance(one, int) and not isinstance(one, bool) else []


class Move(NamedTuple):
    """One record of the log (but the creation). A named tuple, not a frozen dataclass: as
    immutable, built in a fifth of the time (one per move); equal when its first eight fields are
    (``due`` and ``clock`` are derived, not stored: not compared), never equal to a plain tuple."""

    seq: int
    seat: int
    action: dict[str, Any]  # canonical JSON, without "player"
    by: str
    rid: str
    t: int  # ms since the epoch
    kind: str = kclock.MOVE  # see clock.KINDS
    dl: tuple[tuple[int, int], ...] | None = None  # (seat, deadline ms) of the seats to act after it
    due: int | None = None  # when the clock has work after it (not stored)
    # the clock after it and its seat notes, as ``propose`` computed them (``commit`` reuses them)
    clock: tuple[kclock.Clock, tuple[str, ...]] | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Move) and self[:8] == other[:8]

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, Move) or self[:8] != other[:8]

    def __hash__(self) -> int:
        return hash(self[:8])

    @property
    def is_seat_record(self) -> bool:
        return self.kind in (kclock.SEAT_AWAY, kclock.SEAT_RETURNED)

    @property
    def autoplay(self) -> str:
        """MoveRecorded.autoplay: "" for the seat's own move, else "timeout" or "away"."""
        return "" if self.kind == kclock.MOVE else self.kind


def create_of(rec: records_pb2.Record) -> dict[str, Any]:
    """A GameCreated record as the creation dict ``GameEntry`` takes."""
    c = rec.created
    out: dict[str, Any] = {
        "k": "c",
        "game": rec.game,
        "options": typed.options_from_proto(c.options),
        "seed": int(c.seed),
        "seats": list(c.seats),
        "by": c.created_by,
        "rid": c.request_id,
        "t": krec.time_ms(rec),
    }
    if c.save_json:
        out["save"] = json.loads(c.save_json)
    if c.resumed_from:
        out["resumed_from"] = c.resumed_from
    if c.HasField("clock"):
        out["clock"] = krec.clock_from_proto(c.clock)
    if c.online:
        out["online"] = True
    return out


def is_tombstone(rec: records_pb2.Record) -> bool:
    """Whether ``rec`` is a tombstone: a game id closed before any creation (no game, seq 0)."""
    return rec.WhichOneof("body") == "closed" and rec.seq == 0 and not rec.game


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A game id CloseGame closed before it was created: the first and only record of its log."""

    game_id: str
    reason: str
    by: str
    rid: str
    t: int  # ms since the epoch
    sseq: int

    @classmethod
    def of(cls, rec: Record) -> Tombstone:
        c = rec.body.closed
        return cls(rec.body.game_id, c.reason, c.by, c.request_id, krec.time_ms(rec.body), rec.sseq)

    def text(self) -> str:
        return f"game {self.game_id} was closed before it was created and will never start: {self.reason}"


class ClosedBeforeCreated(FailedPrecondition):
    """The game id holds a tombstone: nothing to view, play or create under it (no seats, no cards)."""

    def __init__(self, tomb: Tombstone):
        super().__init__(tomb.text())
        self.tomb = tomb


class GameEntry:
    """One game as this replica knows it (up to stream sequence ``last_sseq``)."""

    def __init__(self, game_id: str, create: dict[str, Any], sseq: int):
        if create.get("k") != "c":
            raise ValueError(f"game {game_id}: the log does not start with a creation record")
        self.game_id = game_id
        self.game: str = create["game"]
        self.module = get_game(self.game)
        self.options_dict: dict[str, Any] = create["options"]
        self.options = self.module.options_from_dict(self.options_dict)
        # every view carries them (court.games.v1.GameOptions, serialized once)
        self.options_bytes = typed.options_to_proto(self.game, self.options_dict).SerializeToString()
        self.seed: int = create["seed"]
        self.seats: tuple[str, ...] = tuple(create["seats"])
        self.created_by: str = create["by"]
        self.created_rid: str = create["rid"]
        self.created_t: int = create["t"]
        self.online: bool = bool(create.get("online"))  # the lobby's online game (public)
        self.save: dict[str, Any] | None = create.get("save")  # set when resumed from another game
        self.resumed_from: str | None = create.get("resumed_from")
        self.state, opening = self._start()
        n = self.module.num_players(self.state)
        if n != len(self.seats):
            raise InvalidArgument(
                f"{self.game} with these options seats {n} players; got {len(self.seats)} seats"
            )
        self.clock_record: dict[str, Any] | None = create.get("clock")
        self.clock_settings = kclock.Settings.from_record(self.clock_record)
        self.humans = tuple(i for i, s in enumerate(self.seats) if not s.startswith(BOT_PREFIX))
        # the clock after every seq, and the seat events of that record (index: seq)
        self.clocks: list[tuple[kclock.Clock, tuple[str, ...]]] = [
            (
                kclock.opening(
                    self.clock_settings, n, self.module.to_act(self.state), self.created_t, self.humans
                ),
                (),
            )
        ]
        # set once the game is closed: the game that resumed this one, or "" for a game the lobby
        # closed (CloseGame, ``closed_reason`` saying why); either way it is then over
        self.closed_into: str | None = None
        # recent positions' views, by (seq, closed, seat), and WatchGame updates, by ("update", seq,
        # closed, seat, snapshot): court_rules.views.game_view and update_bytes
        self.views: dict[tuple[Any, ...], Any] = {}
        self.closed_reason = ""
        self.closed_by: tuple[str, str, int] = ("", "", 0)
        self.seq = 0
        self.last_sseq = sseq
        self.moves: list[Move] = []
        self.requests: dict[tuple[str, str], int] = {(self.created_by, self.created_rid): 0}
        self.lock = asyncio.Lock()
        self.recent: OrderedDict[int, tuple[Any, tuple[Event, ...]]] = OrderedDict()
        # written once per game (move_record_bytes): the records' head, their seats to act per set
        # of seats, the TurnStarted event per set of seats (service_events) and its record bytes
        # (by the event's id: each is kept alive in _turns)
        self.head = krec.record_head(self.game, game_id)
        self._acting: dict[tuple[int, ...], bytes] = {}
        self._turns: dict[tuple[int, ...], Event] = {}
        self._known: dict[int, bytes] = {}
        self._remember(0, self.state, self.service_events(0, None, opening))

    def _start(self) -> tuple[Any, tuple[Event, ...]]:
        if self.save is not None:
            return resume_game(self.module, self.save)
        return start_game(self.module, self.options, self.seed)

    # ---------------------------------------------------------------- reading

    @property
    def finished(self) -> bool:
        return self.closed_into is not None or self.module.is_terminal(self.state)

    def closed_text(self) -> str:
        """Why a closed game refuses moves (FAILED_PRECONDITION's message)."""
        if self.closed_into:
            return f"game {self.game_id} was resumed as game {self.closed_into} and is over: play on there"
        return f"game {self.game_id} was closed and is over: {self.closed_reason}"

    def closed_at(self, seq: int) -> bool:
        """Whether the position after ``seq`` is closed (a resumed game's last one)."""
        return self.closed_into is not None and seq == self.seq

    def to_act(self, state: Any = None) -> tuple[int, ...]:
        if state is None and self.closed_into is not None:
            return ()
        return tuple(self.module.to_act(self.state if state is None else state))

    def seats_of(self, sub: str) -> list[int]:
        return [i for i, s in enumerate(self.seats) if s == sub]

    def bot_seats(self) -> list[int]:
        return [i for i, s in enumerate(self.seats) if s.startswith(BOT_PREFIX)]

    # ---------------------------------------------------------------- turn clock

    @property
    def clock(self) -> kclock.Clock:
        """The seats' clocks as of the last record."""
        return self.clocks[self.seq][0]

    def clock_at(self, seq: int) -> kclock.Clock:
        return self.clocks[seq][0]

    def next_due(self) -> int | None:
        """When the clock next has something to do here (ms since the epoch), or None."""
        if self.finished:
            return None
        return kclock.next_due(self.clock, self.to_act(), self.humans)

    def deadlines_at(self, seq: int) -> tuple[tuple[int, int], ...]:
        """(seat, deadline ms) of the seats to act after ``seq`` (none without a clock)."""
        if not self.clock_settings.on or seq >= len(self.clocks):
            return ()
        return tuple(sorted(kclock.deadlines(self.clocks[seq][0]).items()))

    def _advance(self, move: Move, prev_state: Any, state: Any) -> tuple[kclock.Clock, tuple[str, ...]]:
        return self._advance_at(move.seq, move.seat, move.t, move.kind, move.dl, prev_state, state)

    def _advance_at(
        self,
        seq: int,
        seat: int,
        t: int,
        kind: str,
        dl: tuple[tuple[int, int], ...] | None,
        prev_state: Any,
        state: Any,
    ) -> tuple[kclock.Clock, tuple[str, ...]]:
        """The clock after record ``seq`` (``seat``, time ``t``, ``kind``, its recorded deadlines
        ``dl``) and its seat notes."""
        clk, notes = kclock.advance(
            self.clock_settings,
            self.clocks[seq - 1][0],
            self.module.to_act(prev_state),
            self.module.to_act(state),
            seq,
            t,
            seat,
            kind,
            dict(dl) if dl is not None else None,
            self.humans,
        )
        return clk, tuple(notes) if notes else ()

    def _apply_move(self, state: Any, move: Move, emit: bool) -> tuple[Any, tuple[Event, ...]]:
        if move.is_seat_record:
            return state, ()
        state, engine = self.module.apply(
            state, move.seat, self.module.action_from_json(move.action), emit=emit
        )
        return state, tuple(engine)

    # ---------------------------------------------------------------- events

    def service_events(
        self,
        seq: int,
        move: Move | None,
        engine: Sequence[Event],
        state: Any = None,
        clock: tuple[kclock.Clock, tuple[str, ...]] | None = None,
    ) -> tuple[Event, ...]:
        """A record's events: the engine's, then the service's ``TurnStarted`` (or ``GameEnded``
        for an engine that emits none) (docs/contract.md). The creation and the move themselves
        are the record's body (GameCreated, MoveRecorded, SeatChanged), not events.

        Turn clock (docs/clock.md): a move the clock made on a timeout starts with
        ``TurnTimedOut``; ``SeatReturned`` comes first for a seat back from away, ``SeatAway``
        after the move that marked it; ``TurnStarted`` lists the deadlines and the away seats."""
        state = self.state if state is None else state
        clk, notes = self.clocks[seq] if clock is None else clock
        out: list[Event] = []
        seat_record = move is not None and move.is_seat_record
        if move is not None:
            if seat_record:
                for note in notes:
                    out.append(Event(note, {"seat": move.seat, "player": self.seats[move.seat]}))
            else:
                if move.kind == kclock.TIMEOUT:
                    prev = self.clocks[seq - 1][0][move.seat]
                    out.append(
                        Event(
                            "TurnTimedOut",
                            {
                                "seat": move.seat,
                                "turn_seq": max(0, prev.turn_seq),
                                "deadline_ms": prev.deadline or 0,
                            },
                        )
                    )
                if "SeatReturned" in notes:
                    out.append(Event("SeatReturned", {"seat": move.seat, "player": self.seats[move.seat]}))
        out.extend(engine)
        if notes and move is not None and not seat_record and "SeatAway" in notes:
            out.append(Event("SeatAway", {"seat": move.seat, "player": self.seats[move.seat]}))
        if self.module.is_terminal(state):
            if not any(e.type == "GameEnded" for e in engine):
                result = self.module.result(state)
                out.append(Event("GameEnded", {"result": result, "winners": winners_of(result)}))
        else:
            acting = tuple(self.module.to_act(state))
            dls = kclock.deadlines(clk) if self.clock_settings.on else None
            away = [i for i, x in enumerate(clk) if x.away_since is not None]
            if dls or away:
                turn: dict[str, Any] = {"to_act": list(acting), "players": [self.seats[i] for i in acting]}
                if dls:
                    turn["deadlines"] = [{"seat": i, "deadline_ms": dls[i]} for i in acting if i in dls]
                if away:
                    turn["away"] = away
                out.append(Event("TurnStarted", turn))
            else:
                out.append(self._turns.get(acting) or self._turn_started(acting))
        return tuple(out)

    def _turn_started(self, acting: tuple[int, ...]) -> Event:
        """The ``TurnStarted`` of a position whose seats ``acting`` are to act with no deadline and
        no seat away: one event per set of seats for the whole game, its record bytes converted
        once (``move_record_bytes`` reads them from ``_known``)."""
        e = Event("TurnStarted", {"to_act": list(acting), "players": [self.seats[i] for i in acting]})
        self._known[id(e)] = krec.event_to_proto(self.game, e).SerializeToString()
        self._turns[acting] = e
        return e

    # ---------------------------------------------------------------- records

    def created_record(self) -> records_pb2.Record:
        """The game's full GameCreated record (seq 0)."""
        state, events = self.at(0)
        acting = self.module.to_act(state)
        return krec.created_record(
            self.game,
            self.game_id,
            self.created_t,
            seats=self.seats,
            options=self.options_dict,
            seed=self.seed,
            by=self.created_by,
            request_id=self.created_rid,
            events=events,
            to_act=acting,
            finished=self.module.is_terminal(state),
            resumed_from=self.resumed_from,
            save=self.save,
            clock=self.clock_record,
            deadlines=self.deadlines_at(0),
            online=self.online,
        )

    def move_record(
        self, move: Move, state: Any, events: Sequence[Event], action: Any = None
    ) -> records_pb2.Record:
        """The full MoveRecorded record of ``move`` (``action``: its typed proto, when at hand), or
        the SeatChanged record of a seat record."""
        finished = self.module.is_terminal(state)
        acting = () if finished else self.module.to_act(state)
        dl = move.dl or ()
        if move.is_seat_record:
            return krec.seat_record(
                self.game,
                self.game_id,
                move.seq,
                move.t,
                seat=move.seat,
                kind=move.kind,
                by=move.by,
                request_id=move.rid,
                events=events,
                to_act=acting,
                seats=self.seats,
                finished=finished,
                deadlines=dl,
            )
        typed = action if action is not None else kactions.from_json(self.game, move.action)
        return krec.move_record(
            self.game,
            self.game_id,
            move.seq,
            move.t,
            seat=move.seat,
            action=typed,
            action_type=str(move.action.get("type", "")),
            by=move.by,
            request_id=move.rid,
            events=events,
            to_act=acting,
            seats=self.seats,
            finished=finished,
            autoplay=move.autoplay,
            deadlines=dl,
        )

    def move_record_bytes(
        self, move: Move, state: Any, events: Sequence[Event], action: Any = None
    ) -> tuple[bytes, list[bytes]]:
        """``move_record(...)`` serialized, and the record's events each serialized (full form; none
        for a seat record): ``court_contract.records.move_record_bytes``, the record's head and
        its seats to act written once per game and position kind, a ``TurnStarted`` of
        ``service_events``'s memo converted once."""
        if move.is_seat_record:
            return self.move_record(move, state, events).SerializeToString(), []
        finished = self.module.is_terminal(state)
        acting = b""
        if not finished:
            to_act = tuple(self.module.to_act(state))
            acting = self._acting.get(to_act)  # type: ignore[assignment]
            if acting is None:
                acting = self._acting[to_act] = krec.acting_bytes(to_act, self.seats)
        game = self.game
        known = self._known
        events_bytes = [known.get(id(e)) or typed.event_to_proto(game, e).SerializeToString() for e in events]
        typed_action = action if action is not None else kactions.from_json(game, move.action)
        data = krec.move_record_bytes(
            self.head,
            move.seq,
            move.t,
            acting,
            finished,
            seat=move.seat,
            action=typed_action.SerializeToString(),
            action_type=str(move.action.get("type", "")),
            by=move.by,
            request_id=move.rid,
            events=events_bytes,
            autoplay=move.autoplay,
            deadlines=move.dl or (),
        )
        return data, events_bytes

    def closed_record(self, into: str, by: str, rid: str, t: int, reason: str = "") -> records_pb2.Record:
        return krec.closed_record(
            self.game, self.game_id, self.seq, t, into=into, by=by, request_id=rid, reason=reason
        )

    def records(self) -> list[records_pb2.Record]:
        """The game's whole full log as records (the archive; replays the engine once)."""
        out = [self.created_record()]
        for seq, state, events in self.replay(0, self.seq):
            out.append(self.move_record(self.moves[seq - 1], state, events))
        if self.closed_into is not None:
            out.append(self.closed_record(self.closed_into, *self.closed_by, reason=self.closed_reason))
        return out

    # ---------------------------------------------------------------- writing

    def propose(
        self,
        seat: int,
        action: Any,
        action_json: dict[str, Any],
        by: str,
        rid: str,
        t: int,
        kind: str = kclock.MOVE,
    ) -> tuple[Move, Any, tuple[Event, ...]]:
        """The move, new state and events of ``action`` (IllegalAction propagates); commits nothing.
        ``action`` is None for a seat record (``kind`` seat_away / seat_returned)."""
        if action is None:
            state, engine = self.state, ()
        else:
            state, engine = self.module.apply(self.state, seat, action)
        seq = self.seq + 1
        clk = self._advance_at(seq, seat, t, kind, None, self.state, state)
        dl = tuple(sorted(kclock.deadlines(clk[0]).items())) if self.clock_settings.on else None
        due = (
            None
            if self.module.is_terminal(state)
            else kclock.next_due(clk[0], self.module.to_act(state), self.humans)
        )
        move = Move(seq, seat, action_json, by, rid, t, kind, dl, due, clk)
        return move, state, self.service_events(move.seq, move, engine, state, clk)

    def commit(self, move: Move, state: Any, events: tuple[Event, ...], sseq: int) -> None:
        assert move.seq == self.seq + 1, "moves commit in order"
        # propose's clock: computed from this very position (the entry's lock is held from the
        # proposal to the commit, and the seq check above holds), so not a second time
        self.clocks.append(move.clock if move.clock is not None else self._advance(move, self.state, state))
        self.state = state
        self.seq = move.seq
        self.last_sseq = sseq
        self.moves.append(move)
        self.requests[(move.by, move.rid)] = move.seq
        self._remember(move.seq, state, events)

    def apply_record(self, rec: Record, *, emit: bool = True) -> None:
        """Apply a record another replica wrote (``ValueError`` when it does not follow on)."""
        b = rec.body
        kind = b.WhichOneof("body")
        if kind == "closed" and self.closed_into is None:
            self.close(
                b.closed.into, rec.sseq, (b.closed.by, b.closed.request_id, krec.time_ms(b)), b.closed.reason
            )
            return
        if self.closed_into is not None or kind not in ("move", "seat_changed") or b.seq != self.seq + 1:
            raise ValueError(
                f"game {self.game_id}: record {b.seq!r} ({kind}) does not follow move {self.seq}"
            )
        dl = tuple((int(d.seat), int(d.deadline_ms)) for d in b.deadlines) if self.clock_settings.on else None
        if kind == "seat_changed":
            sc = b.seat_changed
            if sc.kind not in (kclock.SEAT_AWAY, kclock.SEAT_RETURNED):
                raise ValueError(
                    f"game {self.game_id}: record {b.seq} has an unknown seat change {sc.kind!r}"
                )
            move = Move(int(b.seq), int(sc.seat), {}, sc.by, sc.request_id, krec.time_ms(b), sc.kind, dl)
            state, engine = self.state, ()
        else:
            m = b.move
            mkind = m.autoplay or kclock.MOVE
            if mkind not in (kclock.MOVE, kclock.TIMEOUT, kclock.AWAY_PLAY):
                raise ValueError(f"game {self.game_id}: record {b.seq} has an unknown autoplay {mkind!r}")
            action = self.module.action_from_json(kactions.to_json(m.action))
            canonical = {k: v for k, v in self.module.action_to_json(action, 0).items() if k != "player"}
            move = Move(int(b.seq), int(m.seat), canonical, m.by, m.request_id, krec.time_ms(b), mkind, dl)
            state, engine = self.module.apply(self.state, move.seat, action, emit=emit)
        clk = self._advance(move, self.state, state)
        self.clocks.append(clk)
        events = self.service_events(move.seq, move, engine, state, clk) if emit else ()
        self.state = state
        self.seq = move.seq
        self.last_sseq = rec.sseq
        self.moves.append(move)
        self.requests[(move.by, move.rid)] = move.seq
        if emit:
            self._remember(move.seq, state, events)

    def close(self, into: str, sseq: int, by: tuple[str, str, int] = ("", "", 0), reason: str = "") -> None:
        """The game was resumed as game ``into``, or (``into`` empty) closed for ``reason`` (its
        closing record is at stream sequence ``sseq``; ``by``: caller, request id, time of the
        closing record)."""
        self.closed_into = into
        self.closed_reason = reason
        self.closed_by = by
        self.last_sseq = sseq

    def _remember(self, seq: int, state: Any, events: tuple[Event, ...]) -> None:
        self.recent[seq] = (state, events)
        while len(self.recent) > RECENT:
            self.recent.popitem(last=False)

    # ---------------------------------------------------------------- replay

    def replay(
        self, after: int = -1, upto: int | None = None
    ) -> Iterator[tuple[int, Any, tuple[Event, ...]]]:
        """(seq, state after it, its events) for every seq in (after, upto], recent ones from memory."""
        upto = self.seq if upto is None else upto
        if all(s in self.recent for s in range(after + 1, upto + 1)):
            for s in range(after + 1, upto + 1):
                st, ev = self.recent[s]
                yield s, st, ev
            return
        state, opening = self._start()
        if after < 0:
            yield 0, state, self.service_events(0, None, opening, state)
        for move in self.moves[:upto]:
            emit = move.seq > after
            state, engine = self._apply_move(state, move, emit)
            if emit:
                yield move.seq, state, self.service_events(move.seq, move, engine, state)

    def at(self, seq: int) -> tuple[Any, tuple[Event, ...]]:
        """The state after ``seq`` and that record's events."""
        if seq in self.recent:
            return self.recent[seq]
        for _s, st, ev in self.replay(seq - 1, seq):
            return st, ev
        raise AssertionError(f"seq {seq} is not in game {self.game_id}")


class GameCache:
    """The games this replica has loaded, least recently used first out."""

    def __init__(self, store: GameStore, capacity: int = 20_000):
        self.store = store
        self.capacity = capacity
        self._entries: OrderedDict[str, GameEntry] = OrderedDict()
        self._loading: dict[str, asyncio.Future[GameEntry]] = {}
        self._tombs: OrderedDict[str, Tombstone] = OrderedDict()  # final: nothing follows one

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, game_id: str) -> GameEntry | None:
        return self._entries.get(game_id)

    def put(self, entry: GameEntry) -> None:
        self._entries[entry.game_id] = entry
        self._entries.move_to_end(entry.game_id)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def drop(self, game_id: str) -> None:
        self._entries.pop(game_id, None)

    def bury(self, tomb: Tombstone) -> None:
        self._tombs[tomb.game_id] = tomb
        while len(self._tombs) > self.capacity:
            self._tombs.popitem(last=False)

    def cached(self, game_id: str) -> GameEntry | None:
        """The cached entry (``get`` without a coroutine, for a game this replica holds), or None:
        not cached, or a tombstone (``get`` then loads it, or raises)."""
        entry = self._entries.get(game_id)
        if entry is None or game_id in self._tombs:
            return None
        self._entries.move_to_end(game_id)
        return entry

    async def get(self, game_id: str) -> GameEntry:
        """The cached entry, or the game loaded from its log (``NotFound`` when it has none,
        ``ClosedBeforeCreated`` when it holds a tombstone)."""
        tomb = self._tombs.get(game_id)
        if tomb is not None:
            raise ClosedBeforeCreated(tomb)
        entry = self.cached(game_id)
        if entry is not None:
            return entry
        pending = self._loading.get(game_id)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[GameEntry] = asyncio.get_running_loop().create_future()
        self._loading[game_id] = fut
        try:
            entry = await self._load(game_id)
            self.put(entry)
            fut.set_result(entry)
            return entry
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it
            raise
        finally:
            del self._loading[game_id]

    async def existing(self, game_id: str) -> GameEntry:
        """The entry of a game whose log is known to hold a record (an append just lost the race
        to it). A load this replica began before that record landed (a CloseGame's look, say)
        answers ``NotFound``, and a concurrent ``get`` shares that answer: look again."""
        for _ in range(20):
            try:
                return await self.get(game_id)
            except NotFound:
                await asyncio.sleep(0.01)
        return await self.get(game_id)

    async def _load(self, game_id: str) -> GameEntry:
        if not valid_game_id(game_id):
            raise NotFound(f"no game {quote(game_id)}")
        records = await self.store.records(game_id)
        if not records:
            raise NotFound(f"no game {quote(game_id)}")
        first = records[0].body
        if is_tombstone(first):
            tomb = Tombstone.of(records[0])
            self.bury(tomb)
            raise ClosedBeforeCreated(tomb)
        if first.WhichOneof("body") != "created":
            raise ValueError(f"game {game_id}: the log does not start with a GameCreated record")
        entry = GameEntry(game_id, create_of(first), records[0].sseq)
        rest = records[1:]
        for i, rec in enumerate(rest):
            entry.apply_record(rec, emit=i >= len(rest) - RECENT)
        if records[0].archived:
            entry.last_sseq = records[-1].sseq
        return entry

    async def refresh(self, entry: GameEntry) -> bool:
        """Apply records written since ``entry.last_sseq`` (the caller holds ``entry.lock``).
        Returns whether anything changed."""
        records = await self.store.records(entry.game_id, entry.last_sseq)
        for rec in records:
            entry.apply_record(rec)
        return bool(records)

    async def fresh(self, game_id: str) -> GameEntry:
        """The entry, brought up to date with the log (one read when already current)."""
        entry = await self.get(game_id)
        last = await self.store.last_sseq(game_id)
        if last is not None and last[0] > entry.last_sseq:
            async with entry.lock:
                if last[0] > entry.last_sseq:
                    await self.refresh(entry)
        return entry


def valid_game_id(game_id: str) -> bool:
    return 0 < len(game_id) <= 64 and all(c.isalnum() or c in "-_" for c in game_id)
