"""The Court solitaire: how far a deeper search without sight of the deck order gets (issue 34).

Analysis only, like ``the_court_ceiling.py``: never a bot, not part of ``make bench``.

In solitaire the only hidden information is the ORDER of the cards still in the deck; what they are
is known. So the game is a Markov decision process whose chance node at each draw is "a uniform
card of the remaining multiset". Every method the expert tried (``bots_the_court``'s docstring)
improves one step over the heuristic: rollouts with a fixed base policy. This tool searches
deeper, on that MDP, on the compiled simulator (``court_games.the_court.fast.Sim``):

* ``uct``: UCT with chance nodes keyed by the drawn rank. Each simulation copies the root table,
  shuffles the remaining deck afresh (which is drawing each next card uniformly from the remaining
  multiset as it goes: the search never sees the true order, the root deck is put in a fixed
  sorted order first), descends the tree by UCB1 over the placements (at inner nodes only the
  ``--width`` placements the heuristic's evaluation likes best, its choice first), adds one node
  and plays the rest with the heuristic (``rollout``). The value is the expert's solitaire
  utility (a smooth step at 56 plus a small linear score term). The root plays its most visited
  placement.
* ``nested``: nested rollouts, one level above the expert: each root candidate is played in
  ``--outer`` shuffled decks to the end by a player that itself chooses every later placement by
  ``--inner`` heuristic rollouts of its ``--width`` best candidates (common random numbers).

Every deal is the bench's (``bots_the_court.DEAL_SEED0`` + i, the same engine construction), and
the shipped expert plays it too, exactly as ``bots_the_court`` does (``play``: its default budget,
with ``COURT_BOT_CLOCK=cpu`` for figures that do not depend on the load), so the two are paired:
deals won by the search only, by the expert only.

``python -m tests.bench.the_court_deep --method uct --sims 2000 --deals 0:100 --procs 2``
prints one line per deal and the totals with Wilson 95% intervals. What it measured on the
goal's deals (no gain over the expert at up to 8,000 simulations, about 1 s of CPU a decision) is
in ``bots_the_court``'s docstring.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from multiprocessing import Pool
from typing import Any

from court_bots.games import the_court as bot
from court_games.the_court import engine as g
from court_games.the_court import fast as F

from tests.bench.bots_the_court import DEAL_SEED0, play, wilson

TARGET = g.TARGETS["solitaire"]


def utility(score: int) -> float:
    return bot.utility_of_scores("solitaire", [score], 0)


def hide_order(s: F.Sim) -> F.Sim:
    """``s`` with its deck in a fixed order: only the composition is left to the search."""
    s = s.copy()
    s.players[0].deck.sort()
    return s


# --------------------------------------------------------------------------- UCT on the MDP


class Node:
    """A decision: the table and the card to place, reached by the placements and drawn ranks on
    its path. ``stats[a]`` = [visits, total value]; ``kids[(a, rank)]`` the next decision."""

    __slots__ = ("acts", "stats", "kids", "n")

    def __init__(self, acts: list[tuple[int, int]]):
        self.acts = acts
        self.stats = {a: [0, 0.0] for a in acts}
        self.kids: dict[tuple[tuple[int, int], str], Node] = {}
        self.n = 0


def _node(s: F.Sim, width: int | None) -> Node:
    acts = s.legal(0)
    if len(acts) > 1:
        acts = bot.by_evaluation(s, 0, acts)
        if width is not None:
            acts = acts[:width]
    return Node(acts)


def uct(root: F.Sim, sims: int, rng: random.Random, c: float, width: int) -> tuple[int, int]:
    root = hide_order(root)
    top = _node(root, None)
    if len(top.acts) == 1:
        return top.acts[0]
    for _ in range(sims):
        s = root.copy()
        rng.shuffle(s.players[0].deck)
        node = top
        path: list[tuple[Node, tuple[int, int]]] = []
        while True:
            if len(node.acts) == 1:
                a = node.acts[0]
            else:
                a = node.acts[0]
                best = -math.inf
                logn = math.log(node.n + 1)
                for b in node.acts:  # unvisited first, in the heuristic's order
                    n, w = node.stats[b]
                    if n == 0:
                        a = b
                        break
                    v = w / n + c * math.sqrt(logn / n)
                    if v > best:
                        best, a = v, b
            path.append((node, a))
            s.apply(0, a)
            if s.phase == F.P_OVER:
                break
            key = (a, s.pending[0][0][0])
            child = node.kids.get(key)
            if child is None:
                node.kids[key] = _node(s, width)
                bot.rollout(s)
                break
            node = child
        u = utility(s.players[0].score)
        for nd, a in path:
            nd.n += 1
            st = nd.stats[a]
            st[0] += 1
            st[1] += u
    return max(top.acts, key=lambda a: top.stats[a][0])


# --------------------------------------------------------------------------- nested rollouts


def _best_of(
    s: F.Sim, width: int, decks: int, finish: Callable[[F.Sim], object], rng: random.Random
) -> tuple[int, int]:
    """The best of the heuristic's ``width`` best candidates over ``decks`` shuffles of the
    remaining cards, each candidate played to the end by ``finish`` (common random numbers; ties to
    the heuristic's order)."""
    acts = s.legal(0)
    if len(acts) == 1:
        return acts[0]
    acts = bot.by_evaluation(s, 0, acts)[:width]
    sums = [0.0] * len(acts)
    for _ in range(decks):
        base = s.copy()
        rng.shuffle(base.players[0].deck)
        for i, a in enumerate(acts):
            t = base.copy()
            t.apply(0, a)
            finish(t)
            sums[i] += utility(t.players[0].score)
    return acts[max(range(len(acts)), key=lambda i: (sums[i], -i))]


def one_step(s: F.Sim, inner: int, width: int, rng: random.Random) -> tuple[int, int]:
    """The expert's rule without its clock: the best of ``width`` candidates over ``inner``
    shuffled decks rolled out by the heuristic."""
    return _best_of(s, width, inner, bot.rollout, rng)


def nested(root: F.Sim, outer: int, inner: int, width: int, rng: random.Random) -> tuple[int, int]:
    """One level above ``one_step``: each candidate played to the end in ``outer`` shuffled decks
    by a player choosing every placement by ``one_step``."""

    def finish(t: F.Sim) -> None:
        while t.phase != F.P_OVER:
            t.apply(0, one_step(t, inner, width, rng))

    return _best_of(hide_order(root), width, outer, finish, rng)


# --------------------------------------------------------------------------- the runs


def play_deep(task: tuple[int, dict[str, Any]]) -> tuple[int, int, int, float, int, list[str]]:
    """One deal by the search: (deal, its score, the expert's score, CPU seconds, decisions with a
    choice, the decisions where it left the heuristic's choice, as text)."""
    deal, opt = task
    rng = random.Random(f"deep-{deal}-{opt['method']}")
    st = g.new_game(g.Options("solitaire"), DEAL_SEED0 + deal)
    s = F.sim_from_state(st)
    cpu = 0.0
    choices = 0
    changed: list[str] = []
    while s.phase != F.P_OVER:
        acts = s.legal(0)
        if len(acts) == 1:
            s.apply(0, acts[0])
            continue
        c0 = time.thread_time()
        if opt["method"] == "uct":
            a = uct(s, opt["sims"], rng, opt["c"], opt["width"])
        else:
            a = nested(s, opt["outer"], opt["inner"], opt["width"], rng)
        cpu += time.thread_time() - c0
        choices += 1
        h = bot.choose(s, 0)
        if a != h:
            pl = s.players[0]
            changed.append(
                f"{s.pending[0][0]} towers={[t[-1] + ':' + str(v) for t, v in zip(pl.towers, pl.tv, strict=True)]}"
                f" moat={pl.moat} left={len(pl.deck)} heur={h} deep={a}"
            )
        s.apply(0, a)
    expert_score = play(("solitaire", deal, ("expert",)))[3][0]
    return deal, s.players[0].score, expert_score, cpu, choices, changed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", choices=("uct", "nested"), default="uct")
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--c", type=float, default=0.5)
    ap.add_argument("--width", type=int, default=3)
    ap.add_argument("--outer", type=int, default=16)
    ap.add_argument("--inner", type=int, default=8)
    ap.add_argument("--deals", default="0:100", help="first:end (bench deal numbers)")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.deals.split(":"))
    opt = vars(a)
    print(f"# {' '.join(sys.argv[1:])}", flush=True)
    rows = []
    with Pool(a.procs) as pool:
        for row in pool.imap_unordered(play_deep, [(d, opt) for d in range(lo, hi)]):
            deal, sc, ex, cpu, ch, changed = row
            rows.append(row)
            print(
                f"deal {deal}: deep {sc} expert {ex} cpu {cpu:.1f}s ({1000 * cpu / max(1, ch):.0f} ms a choice)"
                f" {len(changed)} of {ch} off the heuristic",
                flush=True,
            )
            if a.verbose:
                for line in changed:
                    print("   ", line, flush=True)
    n = len(rows)
    dw = sum(r[1] >= TARGET for r in rows)
    ew = sum(r[2] >= TARGET for r in rows)
    only_d = sum(r[1] >= TARGET > r[2] for r in rows)
    only_e = sum(r[2] >= TARGET > r[1] for r in rows)

    def pct(k: int) -> str:
        p, low, high = wilson(k, n)
        return f"{100 * p:5.1f}% [{100 * low:5.1f}, {100 * high:5.1f}]"

    mean_d = sum(r[1] for r in rows) / n
    mean_e = sum(r[2] for r in rows) / n
    cpu = sum(r[3] for r in rows) / max(1, sum(r[4] for r in rows))
    print(f"deep   wins {dw}/{n} {pct(dw)} mean score {mean_d:.1f}; {1000 * cpu:.0f} ms CPU a choice")
    print(f"expert wins {ew}/{n} {pct(ew)} mean score {mean_e:.1f}")
    print(f"paired: won only by deep {only_d}, only by the expert {only_e}")


if __name__ == "__main__":
    main()
