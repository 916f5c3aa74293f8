"""The static facts of The Court (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from typing import Final

from ..info import GameInfo

# the kinds of the events the engine emits (each the oneof case <game>_<kind in snake case> of
# court.games.v1.Event); the engine writes them through these names
GAME_STARTED: Final = "GameStarted"
CARD_DRAWN: Final = "CardDrawn"
CARD_SHOWN: Final = "CardShown"
CARD_PLACED: Final = "CardPlaced"
TOWER_STARTED: Final = "TowerStarted"
TOWER_CLOSED: Final = "TowerClosed"
TOWER_SWEPT: Final = "TowerSwept"
MOAT_BANKED: Final = "MoatBanked"
MOAT_DEPLOYED: Final = "MoatDeployed"
MOAT_SEALED: Final = "MoatSealed"
CARD_OFFERED: Final = "CardOffered"
CARD_ACCEPTED: Final = "CardAccepted"
CARD_DECLINED: Final = "CardDeclined"
CARD_KEPT: Final = "CardKept"
CARD_BURNED: Final = "CardBurned"
CARD_DISCARDED: Final = "CardDiscarded"
CARD_HANDED_OFF: Final = "CardHandedOff"
CARDS_SWAPPED: Final = "CardsSwapped"
SWAP_VOTED: Final = "SwapVoted"
SWAP_VETOED: Final = "SwapVetoed"
TURN_SKIPPED: Final = "TurnSkipped"
PLAYER_FINISHED: Final = "PlayerFinished"
GAME_ENDED: Final = "GameEnded"

INFO = GameInfo(
    name="the_court",
    title="The Court",
    min_seats=1,
    max_seats=2,
    options_message="court.games.v1.TheCourtOptions",
    action_message="court.rules.v1.TheCourtAction",
    event_kinds=(
        GAME_STARTED,
        CARD_DRAWN,
        CARD_SHOWN,
        CARD_PLACED,
        TOWER_STARTED,
        TOWER_CLOSED,
        TOWER_SWEPT,
        MOAT_BANKED,
        MOAT_DEPLOYED,
        MOAT_SEALED,
        CARD_OFFERED,
        CARD_ACCEPTED,
        CARD_DECLINED,
        CARD_KEPT,
        CARD_BURNED,
        CARD_DISCARDED,
        CARD_HANDED_OFF,
        CARDS_SWAPPED,
        SWAP_VOTED,
        SWAP_VETOED,
        TURN_SKIPPED,
        PLAYER_FINISHED,
        GAME_ENDED,
    ),
)
