"""Court's rule engines: pure, deterministic, one package per game.

``<game>/engine.py`` is the engine the rules service runs (immutable states), ``<game>/fast.py`` the
same rules as a fast mutable model, which the bots search on (lockstep tests, tests/bots, play
random games on both in step), and ``<game>/info.py`` the game's static facts
(``info.GameInfo``: name, title, seat counts, messages, event kinds). The errors and ``Event`` are
``core``'s. Importing this package, the registry or a game's ``info`` loads no engine.
"""

from . import _form  # noqa: F401  (first: picks the compiled or the interpreted form)
from .info import GameInfo
from .registry import GAME_INFO, GAME_NAMES, GAMES, all_games, get_game

__all__ = ["GAMES", "GAME_INFO", "GAME_NAMES", "GameInfo", "all_games", "get_game"]
