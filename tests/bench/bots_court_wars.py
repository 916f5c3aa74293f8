"""Court Wars bots: every pairing of levels over full games, and a 4-player table.

``python -m tests.bench.bots_court_wars`` (also run by ``make bench``). Two-player pairings
(expert v heuristic, expert v random, heuristic v random) play ``COURT_BENCH_GAMES`` games each
(default 500), the seats alternating between games; the 3- and 4-player tables seat one expert with
heuristic bots, the expert's seat rotating (``COURT_BENCH_GAMES_MULTI`` games each, default
``COURT_BENCH_GAMES`` / 2). Default options (jokers, strict guards, turn limit 500); the printed
count of games ended at the turn limit shows whether the bots bring games to an end. A game won
counts 1, a shared win 1/k of it. Printed: each side's win rate with a 95% confidence interval
(normal approximation; for the 4-player table the expert's rate against the 25% of an equal
player), the mean game length in turns, and the median and 99th percentile of the time per
decision of each level (decisions with more than one legal action, at the default budgets:
``DEFAULT_BUDGET_MS``). Games run in parallel over ``COURT_BENCH_PROCS`` processes (default 2).

Issue 34's goal: the expert scores at least 1.5 x par (an equal player's 1/n) at 3 and 4 seats,
also with a *passive* seat at the table: the 3- and 4-player tables are played twice, once against
heuristic bots only and once with one of them replaced by a passive player (the heuristic's choice
among the actions that are not attacks: a player who never attacks, who did well against an
all-bot table in issue 3). Each table prints a goal line, ``ok`` when the lower end of the 95%
interval clears 1.5 x par, ``not shown`` when only the mean does, ``MISSED`` otherwise.
``COURT_BENCH_ONLY=multi`` plays the multi-player tables only, ``=pairs`` the pairings only,
``=passive`` the tables with a passive seat only, ``=active`` the others. ``COURT_BENCH_FIRST_MULTI``
(default 0) starts those tables at that game: a slice of a longer run, seats and seeds as in it;
``COURT_BENCH_SEATS=3`` (or ``4``; default ``3,4``) plays the tables of that many seats only.
The expert there (court_bots.games.court_wars): the two-ply expectimax, its own utility a win
model (``W_EXPERT_MULTI``, a conditional logit fitted on heuristic games) while the others are
modelled with the heuristic's weights. Bench seeds, ``COURT_BOT_CLOCK=cpu``, ``nice -n 15`` (expert's
win share; before = one weight set for all, ``W_MULTI``, from earlier runs; after = ``W_EXPERT_MULTI``
on games 0-149, then on games 150-838 of the same seeds and tables (689 a table), then all 839):

    table               before   games 0-149     games 150-838   all 839 games
    3 seats             41.7%    55.3% +- 8.0%   49.1% +- 3.7%   50.2% +- 3.4% (1.51 x par: not shown)
    4 seats             29.2%    41.3% +- 7.9%   41.5% +- 3.7%   41.5% +- 3.3% (1.66 x par: ok)
    3, a passive seat   31-43%   47.3% +- 8.0%   47.9% +- 3.7%   47.8% +- 3.4% (1.43 x par: missed)
    4, a passive seat   21-31%   37.3% +- 7.7%   37.0% +- 3.6%   37.1% +- 3.3% (1.48 x par: missed)

The expert's thread CPU per decision over games 150-838: median 5.4 ms, p99 20.1 ms (its budget, 22 ms
x ``BUDGET_SHARE``, counts CPU time here). With a passive seat the long games are the expert's loss:
at the turn limit (208 of the 689 games at 3 seats, 283 at 4) it wins 25.0% and 15.2%, the heuristics
most of them; by elimination 57.8% and 52.2%. Tried on other seeds, without a gain: the limit's
tiebreak blended into the expert's own utility over its last 10 or 30 rounds (paired endgames from
turn 360, 38 and 47 positions: 3 seats +0.0 +- 7.3 and +1.3 +- 10.6 points, 4 seats +1.1 +- 6.2 and
-3.2 +- 8.5), also over the last 100 rounds, and a reply model that takes the next player as passive
half of the time (10 full games a table each: no sign of a gain). Tried after (games 0-99 of the
passive tables, same settings): that reply model again, the next player's reply valued half as the
heuristic's and half as its best non-attack: 3 seats 51.0% against 51.0% unchanged (+0.0 +- 8.3
points, 100 games, not paired: the games part at the first different move), 4 seats 41.0% against
39.0% (+2.0 +- 11.4), its CPU p99 22.3 ms against 20.3; and, from turn 300 of games 0-53 continued
both ways from the same position and draw order, the expert's own utility blended linearly into
``W_MULTI`` over turns 300-400 (a court worth 40: the limit counts standing courts first), which lost
6.5 +- 6.3 points at 3 seats and 3.8 +- 5.1 at 4 (54 and 53 games; 19 and 32 ended at the limit,
the expert winning 18% and 19% of them, against 20% of 15 and 15% of 27 unchanged). A model of
each opponent from its own past moves needed what the view did not show (who attacked): hence
the next step.

2026-12-05, each opponent modelled from the table (issue 34): the view now shows each seat's
count of the attacks it has made (``players[].attacks``: every attack is made in front of the
table), and at 3-4 seats the expert models a seat with no attack once every seat has had
``QUIET_AFTER`` (20) turns as one that never attacks (``quiet_seats``: its reply is its best
Defend, no kill of its is credited). First the upper bound, on other seeds (games 2000+ of the
3-seat passive table, ``COURT_BOT_CLOCK=cpu``, ``nice -n 15``, paired by seed): the expert told
the passive seat by name 81.0% against 55.6% unchanged (+25.4 +- 13.9 points, 63 games); then the
count as shipped, 87.5% against 55.0% (+32.5 +- 16.1, 40 games). The bench's seeds, the passive
tables (load average 3-15 on 2 cores, the same settings):

    table               before (above)   games 0-149      games 150-838    all 839 games
    3, a passive seat   47.8% +- 3.4%    81.3% +- 6.2%    81.6% +- 2.9%    81.5% +- 2.6% (2.45 x par: ok)
    4, a passive seat   37.1% +- 3.3%    67.3% +- 7.5%    67.1% +- 3.5%    67.1% +- 3.2% (2.68 x par: ok)

The passive seat now wins 2.7% and 1.9% (3 seats, games 0-149 and 150-838) and 6.7% and 6.4%
(4 seats). At the turn limit (74 of the 839 games at 3 seats, 222 at 4) the expert wins 41.9% and
31.5% (before, games 150-838: 25.0% and 15.2%), by elimination 85.4% and 79.9%. The expert's
thread CPU per decision over games 150-838 of both tables: median 5.7 ms, p99 19.5 ms, 171 of
206k decisions above 22 ms (games 0-149: p99 19.3 ms and 20.3 ms).
The tables without a passive seat are unchanged: there every heuristic seat attacks early (in
heuristic-only 3-4 seat games all 280 seats of 80 attacked within 17 of their turns), and in 24
expert games against heuristics only (3 and 4 seats, seeds beside the bench's) the expert never
found a quiet seat in any of its 2,056 decisions, so it decided as before (with no quiet seat its
search is the same code path). Games 0-149 of the bench's active tables, rerun with a log of the
quiet seats: none in any of the 300 games; the expert won 51.3% +- 8.0% at 3 seats and 43.3% +-
7.9% at 4 (the same games before: 55.3% and 41.3%; its search stops on a CPU budget, so a rerun
does not replay the same games move for move), expert CPU p99 18.9 and 20.1 ms. Not tried, for
lack of time: refitting ``W_EXPERT_MULTI`` on tables with a passive seat (a first fit on 16
heuristic games of those tables weighs a court far above its guards: the limit counts courts first).

On a busy machine run with ``COURT_BOT_CLOCK=cpu``: the bots' budgets then count the deciding
thread's CPU time (``court_bots.search.CLOCK``), so a process waiting for a core keeps its search.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import statistics
import time
from typing import Any

from court_bots.levels import choose
from court_games.court_wars import engine as cw

GAME = "court_wars"
PAIRINGS: list[tuple[str, str]] = [("expert", "heuristic"), ("expert", "random"), ("heuristic", "random")]
PASSIVE = "passive"  # the heuristic that never attacks (module notes); a bench-only player
GOAL_PAR = 1.5  # issue 34: the expert at least 1.5 x par at 3 and 4 seats


def _passive(view: dict[str, Any], p: int, rng: random.Random) -> Any:
    """The heuristic's choice among the actions that are not attacks (all of them when only attacks
    are legal)."""
    from court_bots.games import court_wars as bot

    legal = cw.legal_actions(bot.determinize(view, p, rng), p)
    calm = tuple(a for a in legal if a[0] != cw.ATTACK) or legal
    return bot.heuristic(view, p, None, calm, rng)


def play(args: tuple[dict[str, Any], tuple[str, ...], int]) -> dict[str, Any]:
    """One full game: ``levels[s]`` plays seat ``s``; the scores and per-level decision times."""
    options, levels, seed = args
    opts = cw.options_from_dict(options)
    state = cw.new_game(opts, seed)
    rng = random.Random(f"bench-{seed}-{'-'.join(levels)}")
    times: dict[str, list[float]] = {lv: [] for lv in set(levels)}
    cpu: dict[str, list[float]] = {lv: [] for lv in set(levels)}  # the same, the thread's CPU ms
    while not cw.is_terminal(state):
        p = state.player
        view = cw.view(state, p)
        many = len(cw.legal_actions(state, p)) > 1
        t0, c0 = time.perf_counter(), time.thread_time()
        action = (
            _passive(view, p, rng) if levels[p] == PASSIVE else choose(GAME, view, p, levels[p], rng).action
        )
        dt, dc = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
        if many:
            times[levels[p]].append(dt)
            cpu[levels[p]].append(dc)
        state, _ = cw.apply(state, p, action, emit=False)
    w = state.winners
    return {
        "scores": [1.0 / len(w) if s in w else 0.0 for s in range(len(levels))],
        "times": times,
        "cpu": cpu,
        "turns": state.turns,
        "end": state.end,
    }


def ci95(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    m = sum(xs) / n
    sd = statistics.pstdev(xs) if n > 1 else 0.0
    return m, 1.96 * sd / math.sqrt(n)


def summarize(title: str, results: list[dict[str, Any]], focus: list[tuple[str, list[float]]]) -> None:
    print(
        f"{title}: {len(results)} games, mean {statistics.mean(r['turns'] for r in results):.0f} turns, "
        f"{sum(r['end'] == 'turn_limit' for r in results)} at the turn limit"
    )
    for name, xs in focus:
        m, h = ci95(xs)
        print(f"  {name:<24} win rate {m:6.1%} ± {h:5.1%}")


def goal_line(n: int, xs: list[float]) -> None:
    m, h = ci95(xs)
    goal = GOAL_PAR / n
    verdict = "ok" if m - h >= goal else "not shown" if m >= goal else "MISSED"
    print(
        f"  goal: expert >= {GOAL_PAR} x par = {goal:.1%}: {m:.1%} ± {h:.1%} ({m * n:.2f} x par): {verdict}"
    )


def timing(all_results: list[dict[str, Any]]) -> None:
    times: dict[str, list[float]] = {}
    for r in all_results:
        for key, suffix in (("times", ""), ("cpu", " cpu")):
            for lv, ts in r[key].items():
                times.setdefault(lv + suffix, []).extend(ts)
    print(
        "time per decision (ms, decisions with a choice; cpu: the deciding thread's CPU time; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):"
    )
    for lv in (n for k in ("random", "heuristic", PASSIVE, "expert") for n in (k, f"{k} cpu")):
        ts = sorted(times.get(lv, []))
        if ts:
            p99 = ts[min(len(ts) - 1, int(0.99 * len(ts)))]
            print(
                f"  {lv:<14} n={len(ts):>7}  median {statistics.median(ts):6.2f}  p99 {p99:6.2f}  max {ts[-1]:6.2f}"
            )


def main() -> None:
    games = int(os.environ.get("COURT_BENCH_GAMES", "500"))
    games_multi = int(os.environ.get("COURT_BENCH_GAMES_MULTI", str(max(6, games // 2))))
    first = int(os.environ.get("COURT_BENCH_FIRST_MULTI", "0"))
    procs = int(os.environ.get("COURT_BENCH_PROCS", "2"))
    everything: list[dict[str, Any]] = []
    only = os.environ.get("COURT_BENCH_ONLY", "")  # "pairs", "multi" or "passive" to run one part
    seats = [int(x) for x in os.environ.get("COURT_BENCH_SEATS", "3,4").split(",")]
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        for a, b in PAIRINGS if only not in ("multi", "passive", "active") else ():
            jobs = [({}, (a, b) if g % 2 == 0 else (b, a), 10_000 + g) for g in range(games)]
            res = pool.map(play, jobs, chunksize=4)
            everything += res
            sa = [r["scores"][g % 2] for g, r in enumerate(res)]
            sb = [r["scores"][1 - g % 2] for g, r in enumerate(res)]
            seat0 = [r["scores"][0] for r in res]  # not ``first``: the tables below start there
            summarize(f"{a} v {b} (2 players)", res, [(a, sa), (b, sb), ("seat 0 (either level)", seat0)])
        for n, passive in ((3, False), (4, False), (3, True), (4, True)) if only != "pairs" else ():
            if (only == "passive" and not passive) or (only == "active" and passive) or n not in seats:
                continue
            jobs = []
            for g in range(first, first + games_multi):
                seat = g % n
                # the passive player sits after the expert, then across, ...: every seat in turn
                quiet = (seat + 1 + (g // n) % (n - 1)) % n if passive else -1
                jobs.append(
                    (
                        {"players": n},
                        tuple(
                            "expert" if s == seat else PASSIVE if s == quiet else "heuristic"
                            for s in range(n)
                        ),
                        20_000 + 1000 * n + g,
                    )
                )
            res = pool.map(play, jobs, chunksize=2)
            everything += res
            ex = [r["scores"][j[1].index("expert")] for r, j in zip(res, jobs, strict=True)]
            others = f"{n - 2} heuristic and a passive player" if passive else f"{n - 1} heuristic"
            focus = [("expert", ex)]
            if passive:
                focus.append(
                    ("passive", [r["scores"][j[1].index(PASSIVE)] for r, j in zip(res, jobs, strict=True)])
                )
            summarize(
                f"expert v {others} ({n} players, expert's seat rotating; an equal player wins {1 / n:.0%})",
                res,
                focus,
            )
            goal_line(n, ex)
    timing(everything)


if __name__ == "__main__":
    main()
