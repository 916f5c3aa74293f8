"""The one place that knows the wire format of the public game records (today ``court.events.v1``).

Everything else in court-analytics works on ``Record``. Moving to the typed records of
``court.events.v2`` changes this module only: ``STREAM``/``SUBJECTS`` and ``decode``.

v1 (protos/court/events/v1/README.md): stream ``COURT_EVENTS``, subjects
``court.events.<game>.<game_id>.<type>``, one ``GameEvent`` per message, its payload a Struct
(numbers as doubles, all integral), ``Court-End: 1`` on the last event of each move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from court_kit.structs import to_dict
from court_proto.court.events.v1 import events_pb2

STREAM = "COURT_EVENTS"
SUBJECTS = "court.events.>"
END_HEADER = "Court-End"


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


def _ints(v: Any) -> Any:
    """Struct numbers arrive as doubles; all of ours are integers."""
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return int(v)
    if isinstance(v, list):
        return [_ints(x) for x in v]
    if isinstance(v, dict):
        return {k: _ints(x) for k, x in v.items()}
    return v


def decode(data: bytes, headers: dict[str, str] | None) -> Record:
    """One stream message as a Record (``ValueError`` when it is not one)."""
    try:
        ev = events_pb2.GameEvent.FromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ValueError(f"not a court.events.v1.GameEvent: {exc}") from None
    if not ev.game_id or not ev.type:
        raise ValueError("a GameEvent without game_id or type")
    when = ev.time.ToDatetime(tzinfo=UTC) if ev.HasField("time") else datetime.fromtimestamp(0, UTC)
    return Record(game=ev.game, game_id=ev.game_id, seq=int(ev.seq), index=int(ev.index), time=when, type=ev.type,
                  payload=_ints(to_dict(ev.payload)), end=bool((headers or {}).get(END_HEADER)))
