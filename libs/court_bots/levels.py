"""Bot levels for every game: ``random``, ``heuristic`` and ``expert``.

Every level decides from one seat's view alone (the dict ``view(state, seat)``
returns, exactly what a human in that seat sees). Each game has an adapter
module ``court_bots.games.<game>`` providing:

* ``ADAPTER``: a ``court_bots.search.Adapter`` (determinize, horizon, utility,
  playout policy) used by the expert's search,
* ``heuristic(view, seat, sample, legal, rng) -> action``: the rules of thumb of
  a good player, where ``sample`` is one determinized state (only its public
  parts and the seat's own cards may matter to a fair heuristic) and ``legal``
  the seat's legal actions.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .search import ismcts

LEVELS: tuple[str, ...] = ("random", "heuristic", "expert")

# Per-level time budgets in milliseconds per decision (defaults; the bot service reads overrides
# from COURT_BOT_BUDGET_<LEVEL>_MS).
DEFAULT_BUDGET_MS: dict[str, float] = {"random": 5.0, "heuristic": 20.0, "expert": 22.0}

# The local Hearts table: the person is Brown Monkey; seats 1..3 are these bots (docs/rules/hearts.md).
HEARTS_PERSON_NAME = "Brown Monkey"
HEARTS_BOT_NAMES: tuple[str, ...] = ("Blue Otter", "Yellow Bird", "Red Fox")


class UnknownLevel(ValueError):
    pass


def adapter_module(game: str) -> ModuleType:
    return importlib.import_module(f"court_bots.games.{game}")


@dataclass(frozen=True, slots=True)
class Decision:
    action: Any
    level: str
    iterations: int = 0


def choose(
    game: str,
    view: Mapping[str, Any],
    seat: int,
    level: str,
    rng: random.Random,
    budget_ms: float | None = None,
    legal: Sequence[Any] | None = None,
) -> Decision:
    """The move ``level`` makes for ``seat`` from ``view``.

    ``legal``: the seat's legal actions (engine actions, in the engine's order) when the caller
    holds them already (the bot service: the rules service's list in the view). The heuristic of
    a game whose adapter module says ``HEURISTIC_READS_SAMPLE = False`` then decides from the view
    and that list alone, with no hidden cards sampled for it (the sampling was about half of such a
    decision's time) and so with none of ``rng`` spent on them.
    """
    if level not in LEVELS:
        raise UnknownLevel(f"unknown bot level {level!r}; levels: {', '.join(LEVELS)}")
    mod = adapter_module(game)
    if level == "heuristic" and legal is not None and not getattr(mod, "HEURISTIC_READS_SAMPLE", True):
        given = tuple(legal)
        if not given:
            raise ValueError(f"seat {seat} has no legal action in this view")
        if len(given) == 1:
            return Decision(given[0], level)
        return Decision(mod.heuristic(view, seat, None, given, rng), level)
    adapter = mod.ADAPTER
    sample = adapter.determinize(view, seat, rng)
    legal = adapter.game.legal_actions(sample, seat)
    if not legal:
        raise ValueError(f"seat {seat} has no legal action in this view")
    if len(legal) == 1:
        return Decision(legal[0], level)
    if level == "random":
        return Decision(legal[rng.randrange(len(legal))], level)
    if level == "heuristic":
        return Decision(mod.heuristic(view, seat, sample, legal, rng), level)
    budget = DEFAULT_BUDGET_MS["expert"] if budget_ms is None else budget_ms
    if hasattr(mod, "expert"):
        action, iters = mod.expert(view, seat, sample, legal, rng, budget)
        return Decision(action, level, iters)
    action, stats = ismcts(adapter, view, seat, rng, budget_ms=budget)
    return Decision(action, level, stats.iterations)
