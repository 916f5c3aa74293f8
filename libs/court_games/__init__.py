"""Court's rule engines: pure, deterministic, one module per game.

Beside each engine ``games/<game>.py``, ``games/<game>_fast.py`` holds the same rules as a fast
mutable model (built from an engine state), which the bots search on; lockstep tests
(tests/bots) play 1,000 random games per game on both in step."""

from . import _form  # noqa: F401  (first: picks the compiled or the interpreted form)
from .core import Event, GameError, IllegalAction, InvalidAction, InvalidOptions, InvalidVector, NotYourTurn
from .registry import GAME_NAMES, all_games, get_game

__all__ = [
    "GAME_NAMES",
    "Event",
    "GameError",
    "IllegalAction",
    "InvalidAction",
    "InvalidOptions",
    "InvalidVector",
    "NotYourTurn",
    "all_games",
    "get_game",
]
