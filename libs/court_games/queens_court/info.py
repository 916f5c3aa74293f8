"""The static facts of Queen's Court (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from typing import Final

from ..info import GameInfo

# the kinds of the events the engine emits (each the oneof case <game>_<kind in snake case> of
# court.games.v1.Event); the engine writes them through these names
GAME_STARTED: Final = "GameStarted"
ROUND_DEALT: Final = "RoundDealt"
HAND_DEALT: Final = "HandDealt"
CARD_PLAYED: Final = "CardPlayed"
CARDS_DRAWN: Final = "CardsDrawn"
PILE_LOCKED: Final = "PileLocked"
SECOND_HALF_STARTED: Final = "SecondHalfStarted"
ROUND_ENDED: Final = "RoundEnded"
GAME_ENDED: Final = "GameEnded"

INFO = GameInfo(
    name="queens_court",
    title="Queen's Court",
    min_seats=2,
    max_seats=4,
    options_message="court.games.v1.QueensCourtOptions",
    action_message="court.rules.v1.QueensCourtAction",
    event_kinds=(
        GAME_STARTED,
        ROUND_DEALT,
        HAND_DEALT,
        CARD_PLAYED,
        CARDS_DRAWN,
        PILE_LOCKED,
        SECOND_HALF_STARTED,
        ROUND_ENDED,
        GAME_ENDED,
    ),
)
