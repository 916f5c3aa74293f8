"""The static facts of Hearts (``court_games.info.GameInfo``): the one place its name, title, seat counts,
messages and event kinds are written."""

from __future__ import annotations

from ..info import GameInfo

INFO = GameInfo(
    name="hearts",
    title="Hearts",
    min_seats=4,
    max_seats=4,
    options_message="court.games.v1.HeartsOptions",
    action_message="court.rules.v1.HeartsAction",
    event_kinds=(
        "GameStarted",
        "HandDealt",
        "PassCardsChosen",
        "CardsPassed",
        "PlayStarted",
        "CardPlayed",
        "HeartsBroken",
        "TrickTaken",
        "HandEnded",
        "GameEnded",
    ),
)
