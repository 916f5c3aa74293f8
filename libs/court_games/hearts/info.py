"""The static facts of Hearts (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from typing import Final

from ..info import GameInfo

# the kinds of the events the engine emits (each the oneof case <game>_<kind in snake case> of
# court.games.v1.Event); the engine writes them through these names
GAME_STARTED: Final = "GameStarted"
HAND_DEALT: Final = "HandDealt"
PASS_CARDS_CHOSEN: Final = "PassCardsChosen"
CARDS_PASSED: Final = "CardsPassed"
PLAY_STARTED: Final = "PlayStarted"
CARD_PLAYED: Final = "CardPlayed"
HEARTS_BROKEN: Final = "HeartsBroken"
TRICK_TAKEN: Final = "TrickTaken"
HAND_ENDED: Final = "HandEnded"
GAME_ENDED: Final = "GameEnded"

INFO = GameInfo(
    name="hearts",
    title="Hearts",
    min_seats=4,
    max_seats=4,
    options_message="court.games.v1.HeartsOptions",
    action_message="court.rules.v1.HeartsAction",
    event_kinds=(
        GAME_STARTED,
        HAND_DEALT,
        PASS_CARDS_CHOSEN,
        CARDS_PASSED,
        PLAY_STARTED,
        CARD_PLAYED,
        HEARTS_BROKEN,
        TRICK_TAKEN,
        HAND_ENDED,
        GAME_ENDED,
    ),
)
