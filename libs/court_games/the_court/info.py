"""The static facts of The Court (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from ..info import GameInfo

INFO = GameInfo(
    name="the_court",
    title="The Court",
    min_seats=1,
    max_seats=2,
    options_message="court.games.v1.TheCourtOptions",
    action_message="court.rules.v1.TheCourtAction",
    event_kinds=(
        "GameStarted",
        "CardDrawn",
        "CardShown",
        "CardPlaced",
        "TowerStarted",
        "TowerClosed",
        "TowerSwept",
        "MoatBanked",
        "MoatDeployed",
        "MoatSealed",
        "CardOffered",
        "CardAccepted",
        "CardDeclined",
        "CardKept",
        "CardBurned",
        "CardDiscarded",
        "CardHandedOff",
        "CardsSwapped",
        "SwapVoted",
        "SwapVetoed",
        "TurnSkipped",
        "PlayerFinished",
        "GameEnded",
    ),
)
