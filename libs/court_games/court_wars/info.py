"""The static facts of Court Wars (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from ..info import GameInfo

INFO = GameInfo(
    name="court_wars",
    title="Court Wars",
    min_seats=2,
    max_seats=4,
    options_message="court.games.v1.CourtWarsOptions",
    action_message="court.rules.v1.CourtWarsAction",
    event_kinds=(
        "GameStarted",
        "SetupCardDrawn",
        "GuardPlaced",
        "SetupPickLapsed",
        "SetupEnded",
        "Defended",
        "CardDrawn",
        "CardDiscarded",
        "CourtAttacked",
        "CourtDefeated",
        "CourtRevived",
        "AttackSkipped",
        "DrawAgainEnded",
        "DiscardPileTurned",
        "TurnPassed",
        "TurnEnded",
        "PlayerOut",
        "GameEnded",
    ),
)
