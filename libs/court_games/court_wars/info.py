"""The static facts of Court Wars (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from typing import Final

from ..info import GameInfo

# the kinds of the events the engine emits (each the oneof case <game>_<kind in snake case> of
# court.games.v1.Event); the engine writes them through these names
GAME_STARTED: Final = "GameStarted"
SETUP_CARD_DRAWN: Final = "SetupCardDrawn"
GUARD_PLACED: Final = "GuardPlaced"
SETUP_PICK_LAPSED: Final = "SetupPickLapsed"
SETUP_ENDED: Final = "SetupEnded"
DEFENDED: Final = "Defended"
CARD_DRAWN: Final = "CardDrawn"
CARD_DISCARDED: Final = "CardDiscarded"
COURT_ATTACKED: Final = "CourtAttacked"
COURT_DEFEATED: Final = "CourtDefeated"
COURT_REVIVED: Final = "CourtRevived"
ATTACK_SKIPPED: Final = "AttackSkipped"
DRAW_AGAIN_ENDED: Final = "DrawAgainEnded"
DISCARD_PILE_TURNED: Final = "DiscardPileTurned"
TURN_PASSED: Final = "TurnPassed"
TURN_ENDED: Final = "TurnEnded"
PLAYER_OUT: Final = "PlayerOut"
GAME_ENDED: Final = "GameEnded"

INFO = GameInfo(
    name="court_wars",
    title="Court Wars",
    min_seats=2,
    max_seats=4,
    options_message="court.games.v1.CourtWarsOptions",
    action_message="court.rules.v1.CourtWarsAction",
    event_kinds=(
        GAME_STARTED,
        SETUP_CARD_DRAWN,
        GUARD_PLACED,
        SETUP_PICK_LAPSED,
        SETUP_ENDED,
        DEFENDED,
        CARD_DRAWN,
        CARD_DISCARDED,
        COURT_ATTACKED,
        COURT_DEFEATED,
        COURT_REVIVED,
        ATTACK_SKIPPED,
        DRAW_AGAIN_ENDED,
        DISCARD_PILE_TURNED,
        TURN_PASSED,
        TURN_ENDED,
        PLAYER_OUT,
        GAME_ENDED,
    ),
)
