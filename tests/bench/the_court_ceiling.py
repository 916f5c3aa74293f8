"""The Court solitaire's clairvoyant ceiling: how many deals can be won at all.

A player who sees the whole deck order (never a bot: analysis only) plays each deal perfectly: an
exact search over every legal placement at every draw, on the engine's fast model
(``court_games.the_court.fast``: legal moves, scoring and the game's end all come from it), with
the positions memoized on what matters for the rest of the game (cards drawn, each open tower's top
card and value, the Moat's ranks; the score so far only adds). Prints, per deal, the best final
score, and the share of deals where it reaches the target (56).

``python -m tests.bench.the_court_ceiling [N] [SEED0]`` (default 20 deals from the solitaire
bench's first deal, ``tests.bench.bots_the_court.DEAL_SEED0``). Slow: a minute of CPU or more
a deal, and a few deals need tens of millions of positions; not part of ``make bench``.

On the solitaire bench's deals (issue 34) the ceiling is 76.7% (287 of 374 deals solved reach
56); the expert wins about 65% of them (``bots_the_court``'s docstring).
"""

from __future__ import annotations

import sys
import time

from court_games.the_court import engine as g
from court_games.the_court import fast as F

from tests.bench.bots_the_court import DEAL_SEED0


def best_score(state: g.State) -> int:
    """The highest final score reachable from solitaire ``state`` knowing the deck order."""
    memo: dict[tuple[object, ...], int] = {}

    def key(s: F.Sim) -> tuple[object, ...]:
        pl = s.players[0]
        tops = sorted(zip((t[-1][0] for t in pl.towers), pl.tv, strict=True))
        return (len(pl.deck), tuple(tops), tuple(sorted(c[0] for c in pl.moat)))

    def gain(s: F.Sim) -> int:  # the best score still to be made from ``s``
        if s.phase == F.P_OVER:
            return 0
        k = key(s)
        v = memo.get(k)
        if v is None:
            base = s.players[0].score
            v = -(10**9)
            for a in s.legal(0):
                after = s.copy()
                after.apply(0, a)
                v = max(v, after.players[0].score - base + gain(after))
            memo[k] = v
        return v

    sim = F.sim_from_state(state)
    return sim.players[0].score + gain(sim)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    seed0 = int(sys.argv[2]) if len(sys.argv) > 2 else DEAL_SEED0
    target = g.TARGETS["solitaire"]
    won = 0
    start = time.perf_counter()
    for deal in range(seed0, seed0 + n):
        score = best_score(g.new_game(g.Options("solitaire"), deal))
        won += score >= target
        print(f"deal {deal}: best score {score}", flush=True)
    print(
        f"clairvoyant: {won}/{n} deals reach {target} ({100 * won / n:.1f}%); {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
