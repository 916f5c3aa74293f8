"""The registry: every game's static facts (``<game>/info.py``) and, by its short name, its engine.

Every engine module satisfies ``GameModule``; services, bots and tests treat games alike through it.
Importing this module loads no engine (``get_game`` imports one when first asked), so the clients'
catalog reads the games' facts at start-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from court_base import quote

from .court_wars.info import INFO as COURT_WARS
from .hearts.info import INFO as HEARTS
from .info import GameInfo
from .queens_court.info import INFO as QUEENS_COURT
from .the_court.info import INFO as THE_COURT

if TYPE_CHECKING:
    from .core import Event

# In the order of the protos' per-game oneofs (GameOptions, GameResult, Action: field numbers 1..4).
GAMES: tuple[GameInfo, ...] = (QUEENS_COURT, HEARTS, THE_COURT, COURT_WARS)
GAME_NAMES: tuple[str, ...] = tuple(g.name for g in GAMES)
GAME_INFO: dict[str, GameInfo] = {g.name: g for g in GAMES}


class GameModule(Protocol):
    NAME: str
    SEAT_KEYS: frozenset[str]  # the view's keys that depend on the seat (seat_view's)

    def options_from_dict(self, d: Mapping[str, Any]) -> Any: ...
    def options_to_dict(self, options: Any) -> dict[str, Any]: ...
    def new_game(self, options: Any, seed: int, decks: Sequence[Sequence[str]] | None = None) -> Any: ...
    def start(
        self, options: Any, seed: int, decks: Sequence[Sequence[str]] | None = None
    ) -> tuple[Any, tuple[Event, ...]]: ...
    def to_act(self, state: Any) -> tuple[int, ...]: ...
    def current_player(self, state: Any) -> int | None: ...
    def legal_actions(self, state: Any, player: int | None = None) -> tuple[Any, ...]: ...
    def apply(
        self, state: Any, player: int, action: Any, emit: bool = True
    ) -> tuple[Any, tuple[Event, ...]]: ...
    def action_to_json(self, action: Any, player: int) -> dict[str, Any]: ...
    def action_from_json(self, d: Mapping[str, Any]) -> Any: ...
    def view(self, state: Any, seat: int | None) -> dict[str, Any]: ...
    def public_view(self, state: Any) -> dict[str, Any]: ...
    def seat_view(self, state: Any, seat: int | None) -> dict[str, Any]: ...
    def is_terminal(self, state: Any) -> bool: ...
    def result(self, state: Any) -> dict[str, Any]: ...
    def num_players(self, state: Any) -> int: ...


def get_game(name: str) -> ModuleType:
    """The engine module for ``name``; ``InvalidOptions`` names the known games."""
    if name not in GAME_INFO:
        from .core import InvalidOptions  # here, not at the top: the registry loads no engine code

        raise InvalidOptions(f"unknown game {quote(name)}; known games: {', '.join(GAME_NAMES)}")
    return importlib.import_module(f"court_games.{name}.engine")


def all_games() -> dict[str, ModuleType]:
    return {n: get_game(n) for n in GAME_NAMES}
