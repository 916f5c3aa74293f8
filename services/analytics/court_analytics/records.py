"""The one place that knows the wire format of the public game records (``court.events.v2``).

Everything else in court-analytics works on ``Record``: one per event, in the shape the lake's
tables are built from. Stream ``COURT_EVENTS``, subjects ``court.events.<game>.<game_id>``, one
``court.events.v2.Record`` per message (docs/contract.md): a game step with its events. ``decode``
turns one into its event Records: for the creation a ``GameCreated`` (game, options, seats) first,
for a move an ``ActionApplied`` (seat, action_type) first, then the record's own events (their
public form, ``court_contract.records.events_of``); the last one of the message has ``end``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from court_contract import records as krec
from court_contract import typed

STREAM = krec.PUBLIC_STREAM
SUBJECTS = krec.PUBLIC_PREFIX + "*.*"


@dataclass(frozen=True)
class Record:
    game: str  # queens_court, hearts, the_court, court_wars
    game_id: str
    seq: int  # the move (0: the creation)
    index: int  # the event's place within its move
    time: datetime  # when the move was accepted (UTC)
    type: str  # GameCreated, ActionApplied, CardPlayed, ..., GameEnded
    payload: dict[str, Any]
    end: bool  # the last event of its move

    @property
    def key(self) -> tuple[str, int, int]:
        return self.game_id, self.seq, self.index


def decode(data: bytes, headers: dict[str, str] | None = None) -> list[Record]:
    """One stream message as its event Records (``ValueError`` when it is not a game record)."""
    rec = krec.decode(data)
    body = rec.WhichOneof("body")
    when = rec.time.ToDatetime(tzinfo=UTC) if rec.HasField("time") else datetime.fromtimestamp(0, UTC)
    payloads: list[dict[str, Any]] = []
    if body == "created":
        c = rec.created
        created: dict[str, Any] = {
            "type": "GameCreated",
            "game": rec.game,
            "options": typed.options_from_proto(c.options),
            "seats": list(c.seats),
            "online": c.online,  # the lobby's online game: rank points move
        }
        if c.resumed_from:
            created["resumed_from"] = c.resumed_from
        payloads.append(created)
    elif body == "move":
        applied: dict[str, Any] = {
            "type": "ActionApplied",
            "seat": int(rec.move.seat),
            "action_type": rec.move.action_type,
        }
        if rec.move.autoplay:
            applied["autoplay"] = rec.move.autoplay  # the turn clock played it
        payloads.append(applied)
    elif body == "seat_changed":
        pass  # a turn clock seat record: its events (SeatAway / SeatReturned, TurnStarted) only
    else:
        raise ValueError(f"a {body} record carries no events")
    payloads.extend(e.full() for e in krec.events_of(rec))
    last = len(payloads) - 1
    return [
        Record(
            game=rec.game,
            game_id=rec.game_id,
            seq=int(rec.seq),
            index=i,
            time=when,
            type=str(p["type"]),
            payload=p,
            end=i == last,
        )
        for i, p in enumerate(payloads)
    ]
