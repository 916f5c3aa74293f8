"""Queen's Court bots: expert vs heuristic vs random, whole games, seats rotated.

``python -m tests.bench.bots_queens_court`` (also run by ``make bench``).

Each pairing A vs B plays ``COURT_BENCH_GAMES`` games (default 500) through
``court_bots.levels.choose`` with the default budgets. Games come in duplicate sets: one seed (the
same deck for every round r) is played once with A in each seat, B in all the others, so a set of a
2-player table is two games with the seats swapped. Printed for A: the game win rate (par 1/n), the
share of rounds won (a round shared by k counts 1/k; par 1/n), each with a 95% confidence interval
computed over the sets (independent units), and per level the median and p99 milliseconds per
decision (wall clock of the whole ``choose`` call, forced single-move decisions left out) with the
expert's median search iterations. ``COURT_BENCH_QC_PLAYERS`` sets the table size (default 2),
``COURT_BENCH_WORKERS`` the processes (default 2; the machine's load shows in the times).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from court_bots import levels
from court_games.queens_court import engine as qc

PAIRINGS: tuple[tuple[str, str], ...] = (
    ("expert", "heuristic"),
    ("expert", "random"),
    ("heuristic", "random"),
)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


@dataclass
class SetResult:
    """One duplicate set: A's games won and round shares, per seating."""

    games: int = 0
    a_wins: float = 0.0
    rounds: int = 0
    a_round_share: float = 0.0
    times: dict[str, list[float]] = field(default_factory=dict)
    iterations: list[int] = field(default_factory=list)


def play_set(task: tuple[str, str, int, int]) -> SetResult:
    a, b, players, seed = task
    res = SetResult()
    for a_seat in range(players):
        seat_level = [a if s == a_seat else b for s in range(players)]
        rngs = [random.Random(f"qc-bench-{a}-{b}-{seed}-{a_seat}-{s}") for s in range(players)]
        state = qc.new_game(qc.Options(players=players, starter=seed % players), seed)
        while not qc.is_terminal(state):
            seat = state.to_move
            level = seat_level[seat]
            forced = len(qc.legal_actions(state)) == 1
            t0 = time.perf_counter()
            decision = levels.choose(qc.NAME, qc.view(state, seat), seat, level, rngs[seat])
            ms = (time.perf_counter() - t0) * 1000
            if not forced:
                res.times.setdefault(level, []).append(ms)
                if level == "expert":
                    res.iterations.append(decision.iterations)
            state, _ = qc.apply(state, seat, decision.action, emit=False)
        res.games += 1
        res.a_wins += state.winner == a_seat
        for r in state.rounds:
            res.rounds += 1
            if a_seat in r.winners:
                res.a_round_share += 1 / len(r.winners)
    return res


def _mean_ci(values: list[float]) -> tuple[float, float]:
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, math.nan
    return m, 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def report(a: str, b: str, players: int, results: list[SetResult]) -> None:
    games = sum(r.games for r in results)
    win, win_ci = _mean_ci([r.a_wins / r.games for r in results])
    share, share_ci = _mean_ci([r.a_round_share / r.rounds for r in results])
    rounds = sum(r.rounds for r in results)
    print(f"{a} vs {b}, {players} players: {games} games ({len(results)} duplicate sets), {rounds} rounds")
    print(
        f"  {a} game win rate {win:.3f} ± {win_ci:.3f}   round share {share:.3f} ± {share_ci:.3f}"
        f"   (par {1 / players:.3f})"
    )
    for level in (a, b):
        times = sorted(t for r in results for t in r.times.get(level, []))
        if not times:
            continue
        line = (
            f"  {level:9s} ms per decision: median {statistics.median(times):.2f}, "
            f"p99 {_pct(times, 0.99):.2f}, max {times[-1]:.2f} ({len(times)} decisions)"
        )
        if level == "expert":
            iters = [i for r in results for i in r.iterations]
            line += f", median {statistics.median(iters):.0f} iterations"
        print(line, flush=True)


def main() -> None:
    games = _env_int("COURT_BENCH_GAMES", 500)
    players = _env_int("COURT_BENCH_QC_PLAYERS", 2)
    workers = _env_int("COURT_BENCH_WORKERS", 2)
    sets = max(1, round(games / players))
    print(f"Queen's Court bots: budgets {levels.DEFAULT_BUDGET_MS} ms", flush=True)
    with ProcessPoolExecutor(workers) as pool:
        for a, b in PAIRINGS:
            tasks = [(a, b, players, 1_000 + s) for s in range(sets)]
            results = list(pool.map(play_set, tasks, chunksize=1))
            report(a, b, players, results)


if __name__ == "__main__":
    main()
