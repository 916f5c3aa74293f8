"""Information-set search over any engine, working from one seat's view only.

Single-observer information-set MCTS (Cowling, Powley & Whitehouse 2012): each
iteration samples a full state consistent with what the bot's seat can see
(``adapter.determinize(view, seat, rng)``), walks one shared tree keyed by
actions using UCB with availability counts (a child only competes in the
iterations where it is legal), expands one node, plays out with the adapter's
playout policy up to the adapter's horizon (end of the hand or round) and backs
up the adapter's utility for the seat that chose each move.

Nothing here reads a real game state: the only input is the view, so the
bot's decisions cannot depend on hidden cards (the fairness property the
tests check).
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


def _clock_from_env() -> Callable[[], float]:
    """The clock the bots' budgets count on: the wall clock, or with ``COURT_BOT_CLOCK=cpu`` the
    deciding thread's CPU time (the benches use it to measure strength on a busy machine, where a
    process waiting for a core would otherwise lose its search time)."""
    name = os.environ.get("COURT_BOT_CLOCK", "wall")
    if name == "wall":
        return time.perf_counter
    if name == "cpu":
        return time.thread_time
    raise ValueError(f"COURT_BOT_CLOCK is 'wall' or 'cpu', not {name!r}")


CLOCK: Callable[[], float] = _clock_from_env()


class Adapter(Protocol):
    """What search needs of one game, all computed from a view."""

    game: Any  # the engine module

    def determinize(self, view: Mapping[str, Any], seat: int, rng: random.Random) -> Any:
        """A full engine state consistent with ``view`` (hidden cards sampled)."""

    def horizon(self, root: Any, state: Any) -> bool:
        """True when a playout from ``root`` may stop at ``state`` (e.g. the hand ended)."""

    def utility(self, root: Any, state: Any, seat: int) -> float:
        """How good ``state`` is for ``seat``, in [0, 1]."""

    def playout_action(self, state: Any, player: int, legal: tuple[Any, ...], rng: random.Random) -> Any:
        """The playout policy's choice (random, or a cheap rule of thumb)."""


@dataclass(slots=True)
class Node:
    player: int = -1  # the seat whose action led here
    visits: int = 0
    avail: int = 0
    reward: float = 0.0
    children: dict[Any, Node] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchStats:
    iterations: int
    elapsed_ms: float
    visits: dict[Any, int]


def ismcts(
    adapter: Adapter,
    view: Mapping[str, Any],
    seat: int,
    rng: random.Random,
    *,
    iterations: int | None = None,
    budget_ms: float | None = None,
    exploration: float = 0.7,
    clock: Callable[[], float] = CLOCK,
) -> tuple[Any, SearchStats]:
    """The action for ``seat`` after SO-ISMCTS from ``view``.

    Stops after ``iterations`` or ``budget_ms`` (whichever comes first; at
    least one is required, and at least one iteration always runs).
    """
    if iterations is None and budget_ms is None:
        raise ValueError("give iterations or budget_ms")
    game = adapter.game
    start = clock()
    deadline = start + budget_ms / 1000.0 if budget_ms is not None else math.inf
    root = Node()
    root_legal: tuple[Any, ...] | None = None
    done = 0
    while True:
        det = adapter.determinize(view, seat, rng)
        if root_legal is None:
            root_legal = game.legal_actions(det, seat)
            if len(root_legal) == 1:
                return root_legal[0], SearchStats(0, (clock() - start) * 1000, {root_legal[0]: 0})
        state = det
        node = root
        path = [root]
        first = True
        # selection and expansion
        while not game.is_terminal(state) and not adapter.horizon(det, state):
            acting = game.to_act(state)
            player = seat if first and seat in acting else acting[0]
            legal = root_legal if first else game.legal_actions(state, player)
            first = False
            children = node.children
            untried = [a for a in legal if a not in children]
            if untried:
                action = untried[rng.randrange(len(untried))] if len(untried) > 1 else untried[0]
                child = Node(player=player)
                children[action] = child
                for a in legal:
                    if a in children:
                        children[a].avail += 1
                state, _ = game.apply(state, player, action, emit=False)
                node = child
                path.append(child)
                break
            best, best_score = None, -math.inf
            for a in legal:
                ch = children[a]
                ch.avail += 1
                score = ch.reward / ch.visits + exploration * math.sqrt(math.log(ch.avail) / ch.visits)
                if score > best_score:
                    best, best_score = a, score
            node = children[best]
            state, _ = game.apply(state, player, best, emit=False)
            path.append(node)
        # playout
        while not game.is_terminal(state) and not adapter.horizon(det, state):
            acting = game.to_act(state)
            player = acting[0]
            legal = game.legal_actions(state, player)
            state, _ = game.apply(
                state, player, adapter.playout_action(state, player, legal, rng), emit=False
            )
        # backpropagation
        cache: dict[int, float] = {}
        for n in path[1:]:
            n.visits += 1
            if n.player not in cache:
                cache[n.player] = adapter.utility(det, state, n.player)
            n.reward += cache[n.player]
        done += 1
        if (iterations is not None and done >= iterations) or clock() >= deadline:
            break
    assert root_legal is not None
    visits = {a: (root.children[a].visits if a in root.children else 0) for a in root_legal}
    best = max(root_legal, key=lambda a: (visits[a], root.children[a].reward if a in root.children else 0.0))
    return best, SearchStats(done, (clock() - start) * 1000, visits)
