"""Court's rule engines: pure, deterministic, one module per game."""

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
