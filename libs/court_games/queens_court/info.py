"""The static facts of Queen's Court (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from ..info import GameInfo

INFO = GameInfo(
    name="queens_court",
    title="Queen's Court",
    min_seats=2,
    max_seats=4,
    options_message="court.games.v1.QueensCourtOptions",
    action_message="court.rules.v1.QueensCourtAction",
    event_kinds=(
        "GameStarted",
        "RoundDealt",
        "HandDealt",
        "CardPlayed",
        "CardsDrawn",
        "PileLocked",
        "SecondHalfStarted",
        "RoundEnded",
        "GameEnded",
    ),
)
