"""The turn clock of one game, derived from its log (docs/clock.md).

Every record of a game with a clock carries ``"dl"``: the deadline (server time, ms since the epoch)
of every seat to act after it. A seat's turn starts with the record after which it is to act and
was not before (in simultaneous phases each seat to act has its own deadline); its deadline is the
record's time + the turn + the seat's bank, so the bank is spent before the turn times out. When
the seat acts, the time it took beyond the turn comes off its bank; a timeout empties the bank.

Record kinds (``Move.kind``): ``move`` (the seat's own action), ``timeout`` (the clock played the
seat when its deadline passed), ``away`` (the clock played an away seat, at once), ``seat_away`` /
``seat_returned`` (a seat record, no action: ``LeaveSeat`` or the lobby's ``AbandonGame``, and
``ReturnToSeat``). Two timeouts in a row mark a seat away; any accepted action of the seat's own
(a move or ``ReturnToSeat``) brings it back.

``SeatState`` values are immutable; ``advance`` is the one transition, used both when a replica
writes a record and when it replays one, so every replica derives the same clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

MOVE, TIMEOUT, AWAY_PLAY, SEAT_AWAY, SEAT_RETURNED = "move", "timeout", "away", "seat_away", "seat_returned"
KINDS = (MOVE, TIMEOUT, AWAY_PLAY, SEAT_AWAY, SEAT_RETURNED)
AWAY_AFTER = 2  # timeouts in a row that mark a seat away
CLOCK_BY = "court:clock"  # the `by` of moves the clock made


@dataclass(frozen=True, slots=True)
class Settings:
    turn_ms: int = 0
    bank_ms: int = 0
    level: str = "heuristic"
    abandon_ms: int = 0
    turn_s: int = 0
    bank_s: int = 0
    abandon_s: int = 0

    @property
    def on(self) -> bool:
        return self.turn_ms > 0

    @classmethod
    def from_record(cls, d: dict[str, Any] | None) -> Settings:
        if not d:
            return NO_CLOCK
        return cls(
            int(d["turn_ms"]),
            int(d["bank_ms"]),
            str(d["level"]),
            int(d.get("abandon_ms", 0)),
            int(d.get("turn_s", 0)),
            int(d.get("bank_s", 0)),
            int(d.get("abandon_s", 0)),
        )


NO_CLOCK = Settings()


class SeatState(NamedTuple):
    # built positionally on the hot path (advance, _turns: every move), not with ``_replace``,
    # which costs several times more: keep the field order. A named tuple, not a frozen dataclass:
    # as immutable, built in a tenth of the time (make bench: two per move)
    bank_ms: int
    turn_seq: int = -1  # the record that started the seat's current turn (-1: not to act)
    turn_t: int = 0  # that record's time
    deadline: int | None = None  # ms since the epoch, while to act with a clock
    timeouts: int = 0  # in a row
    away_since: int | None = None

    @property
    def away(self) -> bool:
        return self.away_since is not None


Clock = tuple[SeatState, ...]


def opening(
    settings: Settings, seats: int, to_act: Sequence[int], t: int, humans: Sequence[int] | None = None
) -> Clock:
    empty = SeatState(settings.bank_ms)
    return _turns(settings, tuple(empty for _ in range(seats)), (), to_act, 0, t, None, None, None, humans)


def advance(
    settings: Settings,
    clock: Clock,
    prev_to_act: Sequence[int],
    to_act: Sequence[int],
    seq: int,
    t: int,
    seat: int,
    kind: str,
    recorded: dict[int, int] | None = None,
    humans: Sequence[int] | None = None,
) -> tuple[Clock, list[str]]:
    """The clock after record ``seq`` (time ``t``, by/for ``seat``, of ``kind``), and the seat
    events it implies, in order: ``"SeatReturned"`` (before the move), ``"SeatAway"`` (after)."""
    s = clock[seat]
    notes: list[str] = []
    restart: int | None = None
    if kind == MOVE:
        bank = s.bank_ms
        if settings.on and s.turn_seq >= 0:
            bank = max(0, bank - max(0, t - (s.turn_t + settings.turn_ms)))
        if s.away:
            notes.append("SeatReturned")
        if (bank, 0, None) != (s.bank_ms, s.timeouts, s.away_since):  # a bot's move changes none
            s = SeatState(bank, s.turn_seq, s.turn_t, s.deadline, 0, None)
    elif kind == TIMEOUT:
        s = s._replace(bank_ms=0, timeouts=s.timeouts + 1)
        if s.timeouts >= AWAY_AFTER and not s.away:
            s = s._replace(away_since=t)
            notes.append("SeatAway")
    elif kind == SEAT_AWAY:
        if not s.away:
            s = s._replace(away_since=t)
            notes.append("SeatAway")
    elif kind == SEAT_RETURNED:
        if s.away:
            notes.append("SeatReturned")
        s = s._replace(timeouts=0, away_since=None)
        restart = seat  # a fresh turn from now if the seat is to act
    elif kind != AWAY_PLAY:
        raise ValueError(f"unknown record kind {kind!r}")
    out = list(clock)
    out[seat] = s
    acted = seat if kind in (MOVE, TIMEOUT, AWAY_PLAY) else None
    return _turns(settings, tuple(out), prev_to_act, to_act, seq, t, acted, restart, recorded, humans), notes


def _turns(
    settings: Settings,
    clock: Clock,
    prev: Sequence[int],
    to_act: Sequence[int],
    seq: int,
    t: int,
    acted: int | None,
    restart: int | None,
    recorded: dict[int, int] | None = None,
    humans: Sequence[int] | None = None,
) -> Clock:
    """Turn starts and ends: a seat to act now that was not (or that just acted, or came back)
    starts a turn at this record; a seat no longer to act has none. Only the seats of ``humans``
    (every seat when None) get a deadline: a bot seat has no clock (the bot service plays it, and
    nothing would happen at its deadline), so none is recorded, shown or sent for it."""
    out = list(clock)
    now = set(to_act)
    for i, s in enumerate(out):
        if i not in now:
            if s.turn_seq >= 0:
                out[i] = SeatState(s.bank_ms, -1, 0, None, s.timeouts, s.away_since)
            continue
        if i in prev and i != acted and i != restart and s.turn_seq >= 0:
            continue  # still to act: the same turn (a simultaneous phase)
        clocked = settings.on and (humans is None or i in humans)
        deadline = t + settings.turn_ms + s.bank_ms if clocked else None
        if clocked and recorded is not None and i in recorded:
            deadline = recorded[i]  # the log is the authority (older logs recorded bot seats' too)
        out[i] = SeatState(s.bank_ms, seq, t, deadline, s.timeouts, s.away_since)
    return tuple(out)


def deadlines(clock: Clock) -> dict[int, int]:
    """Every seat's deadline (seats to act with a clock)."""
    return {i: s.deadline for i, s in enumerate(clock) if s.deadline is not None}


def due(clock: Clock, to_act: Sequence[int], humans: Sequence[int], now: int) -> list[tuple[int, str]]:
    """(seat, kind) of every human seat the clock must play now: away seats at once, others when
    their deadline has passed."""
    out = []
    for i in to_act:
        if i not in humans:
            continue
        s = clock[i]
        if s.away:
            out.append((i, AWAY_PLAY))
        elif s.deadline is not None and now >= s.deadline:
            out.append((i, TIMEOUT))
    return out


def next_due(clock: Clock, to_act: Sequence[int], humans: Sequence[int]) -> int | None:
    """When the clock next has something to do in this position (ms since the epoch), or None."""
    times = []
    for i in to_act:
        if i not in humans:
            continue
        s = clock[i]
        if s.away:
            times.append(s.turn_t)
        elif s.deadline is not None:
            times.append(s.deadline)
    return min(times) if times else None


def request_id(game_id: str, turn_seq: int, seat: int) -> str:
    """The one request id of the clock's move for ``seat`` in the turn started at ``turn_seq``."""
    return f"clock-{game_id}-{turn_seq}-{seat}"
