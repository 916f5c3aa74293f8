"""Hearts bots: level pairings, and our expert against OpenSpiel's C++ IS-MCTS.

``python -m tests.bench.bots_hearts`` (also run by ``make bench``). Hearts is scored per hand, so
every figure is **mean points per hand per seat** (lower is better; a hand hands out 26 points, or
78 when somebody shoots the moon), with a 95% confidence interval.

Duplicate deals, seats rotated: a *group* is four deals (hands 0-3 of a game: passing left,
across, right, none). Each group is played twice, side A in two seats and side B in the other two,
then with the seats swapped, on the same cards; the pair of seats cycles through {0,1}/{2,3},
{1,2}/{3,0} and {0,2}/{1,3} from group to group, so every side sits everywhere, next to and across
from each other. The confidence interval of the difference A - B is computed over the groups
(independent units; the duplicate design cancels most of the luck of the cards).

* Level pairings (``COURT_BENCH_GAMES`` hands per pairing, default 500): expert vs heuristic,
  expert vs random, heuristic vs random, all through ``court_bots.levels.choose`` with the default
  budgets.
* Against OpenSpiel (``COURT_BENCH_HANDS`` hands, default 400): our expert in two seats, OpenSpiel's
  ``pyspiel.ISMCTSBot`` (``COURT_BENCH_OS_SIMULATIONS`` simulations, default 500;
  ``RandomRolloutEvaluator(1)``, uct_c 2, unlimited world samples, max-visit final policy, as
  OpenSpiel's IS-MCTS example) in the other two, on OpenSpiel's
  ``hearts`` with ``qs_breaks_hearts=False`` (our rules for one hand; tests/games/
  test_hearts_openspiel.py). Each hand is one pyspiel state (the pass-direction chance action
  applied explicitly, then the deal) played in step with our engine: our moves are translated to
  OpenSpiel actions, OpenSpiel's bot's moves applied to our engine, and our bot decides from
  ``view(state, seat)`` of our engine's state.

  OpenSpiel's passing: ``ISMCTSBot.step`` crashes (segmentation fault, pyspiel 2.0.2) when it
  passes for any seat but the first, i.e. once another seat's pass is already in the state. The
  exchange is simultaneous in our rules and a seat's pass sees nothing but its own hand and the
  direction, so an OpenSpiel seat's three cards are chosen by the same bot on a relabelled copy of
  the deal in which that seat is seat 0 (same hand, same direction, nobody has passed yet); the
  chosen cards are then applied to the real state, seat 0's first, in OpenSpiel's order.

``COURT_BENCH_FIRST_GROUP`` (default 0) starts the OpenSpiel part at that duplicate group, so that
runs on separate machines or processes add up to one larger sample of different deals.

Times are per decision (milliseconds of wall clock, the whole ``choose`` call or ``bot.step``,
and the deciding thread's CPU time, which waiting for a core does not inflate); both cores run games
in parallel (``COURT_BENCH_WORKERS``), so the machine's load shows in the wall clock. On a busy
machine run with ``COURT_BOT_CLOCK=cpu``: the expert's budget then counts its own CPU time, so its
strength does not depend on the load (``court_bots.search.CLOCK``).

Issue 34's goals, printed as goal lines against OpenSpiel: the expert's p99 time per move at most
22 ms (``ok`` / ``MISSED``), and the expert beating IS-MCTS (``ok`` when the interval of the
difference lies below zero, ``not shown`` when it does not exclude zero, ``MISSED`` when it lies
above); the issue asks for it at 10,000 simulations (``COURT_BENCH_OS_SIMULATIONS=10000``).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from court_bots import levels
from court_games.hearts import engine as H

PAIRINGS: tuple[tuple[str, str], ...] = (
    ("expert", "heuristic"),
    ("expert", "random"),
    ("heuristic", "random"),
)
ARRANGEMENTS: tuple[tuple[int, ...], ...] = ((0, 1), (1, 2), (0, 2))  # side A's seats; side B the rest
HANDS_PER_GROUP = 4
OS_PASS_DIR = (1, 2, 3, 0)  # our hand % 4 -> OpenSpiel's pass-direction chance action
OS_SIMULATIONS_DEFAULT = 500
GOAL_P99_MS = 22.0  # issue 34: the expert's time per move at p99
OS_UCT_C = 2.0
OPENSPIEL = "openspiel"


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


OS_SIMULATIONS = _env_int("COURT_BENCH_OS_SIMULATIONS", OS_SIMULATIONS_DEFAULT)


def to_os(card: int) -> int:
    return (card % 13) * 4 + card // 13


def from_os(card: int) -> int:
    return (card % 4) * 13 + card // 4


@dataclass
class GroupResult:
    """One duplicate group: per hand, the points of side A's and side B's seats."""

    a_points: list[float] = field(default_factory=list)  # per hand: side A's mean points per seat
    b_points: list[float] = field(default_factory=list)
    moons: int = 0
    times: dict[str, list[float]] = field(default_factory=dict)  # ms per decision, by side name
    cpu: dict[str, list[float]] = field(default_factory=dict)  # the same, the thread's CPU ms
    iterations: list[int] = field(default_factory=list)  # our expert's search iterations (play)


def _decks(group: int, salt: str) -> list[list[str]]:
    rng = random.Random(f"hearts-bench-{salt}-{group}")
    decks = []
    for _ in range(HANDS_PER_GROUP):
        deck = list(H.CARDS)
        rng.shuffle(deck)
        decks.append(deck)
    return decks


def _record(res: GroupResult, side: str, ms: float, cpu_ms: float | None = None) -> None:
    res.times.setdefault(side, []).append(ms)
    if cpu_ms is not None:
        res.cpu.setdefault(side, []).append(cpu_ms)


class _Timer:
    """Wall clock and thread CPU time of one decision."""

    __slots__ = ("t0", "c0")

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.c0 = time.thread_time()

    def done(self, res: GroupResult, side: str) -> None:
        _record(res, side, (time.perf_counter() - self.t0) * 1000, (time.thread_time() - self.c0) * 1000)


def _score_hand(res: GroupResult, points: Sequence[int], a_seats: Sequence[int]) -> None:
    b_seats = [s for s in range(4) if s not in a_seats]
    res.a_points.append(sum(points[s] for s in a_seats) / len(a_seats))
    res.b_points.append(sum(points[s] for s in b_seats) / len(b_seats))
    res.moons += sorted(points) == [0, 26, 26, 26]


# ---------------------------------------------------------------------------------------------
# level against level


def play_levels(task: tuple[str, str, int]) -> GroupResult:
    a, b, group = task
    decks = _decks(group, f"{a}-{b}")
    res = GroupResult()
    arrangement = ARRANGEMENTS[group % len(ARRANGEMENTS)]
    for half in range(2):
        a_seats = arrangement if half == 0 else tuple(s for s in range(4) if s not in arrangement)
        seat_level = [a if s in a_seats else b for s in range(4)]
        rngs = [random.Random(f"bench-{a}-{b}-{group}-{half}-{s}") for s in range(4)]
        state = H.new_game(H.Options(limit=10_000), seed=group, decks=decks)
        while state.match.hand_no < HANDS_PER_GROUP:
            hand_no = state.match.hand_no
            seat = H.to_act(state)[0]
            level = seat_level[seat]
            timer = _Timer()
            decision = levels.choose("hearts", H.view(state, seat), seat, level, rngs[seat])
            timer.done(res, level)
            if level == "expert" and state.phase is H.Phase.PLAY and decision.iterations:
                res.iterations.append(decision.iterations)
            state, _ = H.apply(state, seat, decision.action, emit=False)
            if state.match.hand_no != hand_no:
                _score_hand(res, state.match.history[hand_no], a_seats)
    return res


# ---------------------------------------------------------------------------------------------
# our expert against OpenSpiel's IS-MCTS


class OpenSpielSide:
    """OpenSpiel's IS-MCTS bot for the OpenSpiel seats of one worker."""

    def __init__(self, seed: int):
        import pyspiel

        self.pyspiel = pyspiel
        self.game = pyspiel.load_game("hearts", {"qs_breaks_hearts": False})
        self.evaluator = pyspiel.RandomRolloutEvaluator(1, seed)
        self.bot = pyspiel.ISMCTSBot(
            seed,
            self.evaluator,
            OS_UCT_C,
            OS_SIMULATIONS,
            -1,
            pyspiel.ISMCTSFinalPolicyType.MAX_VISIT_COUNT,
            False,
            False,
        )

    def new_hand(self, hand_no: int, deck: Sequence[str]) -> Any:
        state = self.game.new_initial_state()
        state.apply_action(OS_PASS_DIR[hand_no % 4])
        for card in deck:
            state.apply_action(to_os(H.CARD_ID[card]))
        return state

    def choose_pass(
        self, hand_no: int, hands: Sequence[int], seat: int, timer: Callable[[float], None]
    ) -> list[int]:
        """``seat``'s three cards, chosen as seat 0 of a relabelled deal (see the module notes)."""
        state = self.game.new_initial_state()
        state.apply_action(OS_PASS_DIR[hand_no % 4])
        rotated = [H.ids_of(hands[(s + seat) % 4]) for s in range(4)]
        for i in range(52):
            state.apply_action(to_os(rotated[i % 4][i // 4]))
        picks = []
        for _ in range(H.PASS_SIZE):
            assert state.current_player() == 0
            t0 = time.perf_counter()
            action = self.bot.step(state)
            timer((time.perf_counter() - t0) * 1000)
            picks.append(from_os(action))
            state.apply_action(action)
        return picks

    def play(self, state: Any, timer: Callable[[float], None]) -> int:
        t0 = time.perf_counter()
        action = self.bot.step(state)
        timer((time.perf_counter() - t0) * 1000)
        return action


def play_openspiel(group: int) -> GroupResult:
    decks = _decks(group, "openspiel")
    res = GroupResult()
    side = OpenSpielSide(seed=1 + group)
    arrangement = ARRANGEMENTS[group % len(ARRANGEMENTS)]

    def os_timer(ms: float) -> None:
        _record(res, OPENSPIEL, ms)

    for half in range(2):
        ours = arrangement if half == 0 else tuple(s for s in range(4) if s not in arrangement)
        rngs = [random.Random(f"bench-openspiel-{group}-{half}-{s}") for s in range(4)]
        state = H.new_game(H.Options(limit=10_000), seed=group, decks=decks)
        for hand_no in range(HANDS_PER_GROUP):
            assert state.match.hand_no == hand_no
            theirs = side.new_hand(hand_no, decks[hand_no])
            if state.phase is H.Phase.PASS:
                passes: dict[int, list[int]] = {}
                dealt = state.hands
                for seat in range(4):
                    if seat not in ours:
                        passes[seat] = side.choose_pass(hand_no, dealt, seat, os_timer)
                for seat in ours:
                    passes[seat] = []
                    while seat in H.to_act(state):
                        timer = _Timer()
                        d = levels.choose("hearts", H.view(state, seat), seat, "expert", rngs[seat])
                        timer.done(res, "expert")
                        state, _ = H.apply(state, seat, d.action, emit=False)
                        passes[seat].append(d.action - H.PASS_CARD)
                for seat in range(4):
                    if seat not in ours:
                        for card in passes[seat]:
                            state, _ = H.apply(state, seat, H.PASS_CARD + card, emit=False)
                for seat in range(4):  # OpenSpiel passes seat by seat, seat 0 first
                    for card in passes[seat]:
                        theirs.apply_action(to_os(card))
            while state.match.hand_no == hand_no and not H.is_terminal(state):
                seat = H.to_act(state)[0]
                assert theirs.current_player() == seat, (theirs.current_player(), seat)
                if seat in ours:
                    timer = _Timer()
                    d = levels.choose("hearts", H.view(state, seat), seat, "expert", rngs[seat])
                    timer.done(res, "expert")
                    if d.iterations:
                        res.iterations.append(d.iterations)
                    card = d.action
                    theirs.apply_action(to_os(card))
                else:
                    action = side.play(theirs, os_timer)
                    card = from_os(action)
                    theirs.apply_action(action)
                state, _ = H.apply(state, seat, card, emit=False)
            assert theirs.is_terminal()
            points = state.match.history[hand_no]
            assert list(points) == [26 - int(r) for r in theirs.returns()], (points, theirs.returns())
            _score_hand(res, points, ours)
    return res


# ---------------------------------------------------------------------------------------------
# reporting


def _ci(xs: Sequence[float]) -> tuple[float, float]:
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, math.nan
    return m, 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _merge(
    results: Sequence[GroupResult],
) -> tuple[list[float], list[float], list[float], int, dict, list[int]]:
    a, b, diffs, moons, times, iters = [], [], [], 0, {}, []
    cpu: dict[str, list[float]] = {}
    for r in results:
        for k, v in r.cpu.items():
            cpu.setdefault(k, []).extend(v)
        a += r.a_points
        b += r.b_points
        diffs.append(statistics.fmean(r.a_points) - statistics.fmean(r.b_points))
        moons += r.moons
        for k, v in r.times.items():
            times.setdefault(k, []).extend(v)
        iters += r.iterations
    for k, v in cpu.items():
        times[f"{k} cpu"] = v
    return a, b, diffs, moons, times, iters


def _report(title: str, names: tuple[str, str], results: Sequence[GroupResult]) -> dict[str, Any]:
    a, b, diffs, moons, times, iters = _merge(results)
    (ma, ca), (mb, cb), (md, cd) = _ci(a), _ci(b), _ci(diffs)
    load = os.getloadavg()
    print(f"{title}: {len(a)} hands ({len(results)} duplicate groups), {moons} moons; load {load[0]:.1f}")
    print(f"  {names[0]:>10}: {ma:6.2f} ± {ca:4.2f} points/hand per seat")
    print(f"  {names[1]:>10}: {mb:6.2f} ± {cb:4.2f} points/hand per seat")
    print(f"  difference {names[0]} - {names[1]}: {md:+6.2f} ± {cd:4.2f} (per group, 95% CI)")
    for name in (n for k in names for n in (k, f"{k} cpu")):
        ts = times.get(name, [])
        if ts:
            print(
                f"  {name:>14} ms/move: mean {statistics.fmean(ts):6.2f}  median {_pct(ts, 0.5):6.2f}  "
                f"p99 {_pct(ts, 0.99):6.2f}  max {max(ts):6.2f}  ({len(ts)} decisions)"
            )
    if iters:
        print(
            f"  expert search iterations/move: mean {statistics.fmean(iters):.0f}  median {_pct(iters, 0.5):.0f}"
        )
    if names[1] == OPENSPIEL:
        for kind in ("", " cpu"):
            ts = times.get(f"expert{kind}", [])
            if ts:
                p99 = _pct(ts, 0.99)
                verdict = "ok" if p99 <= GOAL_P99_MS else "MISSED"
                print(f"  goal: expert p99{kind or ' wall'} <= {GOAL_P99_MS:.0f} ms: {p99:.1f} ms: {verdict}")
        verdict = "ok" if md + cd < 0 else "MISSED" if md - cd > 0 else "not shown"
        print(f"  goal: expert beats IS-MCTS ({OS_SIMULATIONS} simulations): {md:+.2f} ± {cd:.2f}: {verdict}")
    return {"hands": len(a), "a": (ma, ca), "b": (mb, cb), "diff": (md, cd), "moons": moons}


def _run(fn: Callable[[Any], GroupResult], tasks: list[Any], workers: int) -> list[GroupResult]:
    if workers <= 1:
        return [fn(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, tasks, chunksize=1))


def main() -> None:
    hands = _env_int("COURT_BENCH_GAMES", 500)
    os_hands = _env_int("COURT_BENCH_HANDS", 400)
    workers = _env_int("COURT_BENCH_WORKERS", 2)
    per_group = 2 * HANDS_PER_GROUP
    only = os.environ.get("COURT_BENCH_ONLY", "")  # "levels" or "openspiel" to run one part
    if only != "openspiel":
        for a, b in PAIRINGS:
            groups = max(1, math.ceil(hands / per_group))  # at least the hands asked for
            results = _run(play_levels, [(a, b, g) for g in range(groups)], workers)
            _report(f"{a} vs {b}", (a, b), results)
    if only != "levels":
        try:
            import pyspiel  # noqa: F401
        except ImportError:
            print("expert vs OpenSpiel IS-MCTS: skipped (pyspiel is not installed)")
            return
        groups = max(1, math.ceil(os_hands / per_group))
        first = _env_int("COURT_BENCH_FIRST_GROUP", 0)
        results = _run(play_openspiel, list(range(first, first + groups)), workers)
        _report(
            f"expert vs OpenSpiel IS-MCTS ({OS_SIMULATIONS} simulations, random rollouts)",
            ("expert", OPENSPIEL),
            results,
        )


if __name__ == "__main__":
    main()
