"""Turn clock precision under load: how late a timeout is applied (docs/clock.md).

One nats-server and one ``court-rules`` process, as deployed. ``CLOCK_GAMES`` Hearts games
(default 40, env ``BENCH_CLOCK_GAMES``) whose four people never move, 5-second turns without a
bank (shortened to ``BENCH_CLOCK_SECOND_MS`` ms per clock second, default 200, through the
development setting COURT_CLOCK_SECOND_MS: how late a timeout lands does not depend on the turn's
length), while ``LOAD_GAMES`` bot-driven games (default 32, env ``BENCH_CLOCK_LOAD``) keep the
service busy the whole time (``tests.bench.service``'s bot driver: one SubmitAction after another,
as fast as the service answers). Each clock game's seats time out twice, then are away and played
at once (more load, of the clock's own).

Lateness = the clock move's record time minus its ``TurnTimedOut.deadline_ms`` (both server time:
the rules service's clock), read back from GetHistory once every seat of a game has timed out
twice; the service's ``court_rules_clock_lateness_seconds`` histogram measures the same. Printed:
p50, p99, max and min (a timeout applied early would be negative: the run fails on one, and on a
turn timed out twice).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from court_client import RulesClient, event_dict
from court_proto.court.games.v1 import events_pb2

from tests.bench.service import Stats, _await_serving, _bot_driver, _pct, _start
from tests.bench.slim import SlimRules
from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats

CLOCK_GAMES = int(os.environ.get("BENCH_CLOCK_GAMES", "40"))
LOAD_GAMES = int(os.environ.get("BENCH_CLOCK_LOAD", "32"))
SECOND_MS = int(os.environ.get("BENCH_CLOCK_SECOND_MS", "200"))
PEOPLE = 4
TIMEOUTS_PER_SEAT = 2  # then the seat is away: the clock plays it at once, no deadline to miss
LIMIT_S = 600.0


def _lateness(hist: Any) -> list[float]:
    """Deadline to applied move (ms) of each of a game's timeouts; checks each turn timed out once."""
    out: list[float] = []
    turns: set[tuple[int, int]] = set()
    for m in hist.moves:
        if m.kind != "timeout":
            continue
        first = event_dict(m.events[0])
        if first["type"] != "TurnTimedOut":
            raise AssertionError(
                f"game {hist.game_id} move {m.seq}: a timeout move opens with {first['type']}"
            )
        turn = (first["seat"], first["turn_seq"])
        if turn in turns:
            raise AssertionError(f"game {hist.game_id}: seat {turn[0]}'s turn {turn[1]} timed out twice")
        turns.add(turn)
        late = m.time.ToMilliseconds() - first["deadline_ms"]
        if late < 0:
            raise AssertionError(f"game {hist.game_id} move {m.seq}: a timeout applied {-late} ms early")
        out.append(float(late))
    return out


async def _measure(target: str) -> dict[str, Any]:
    async with RulesClient(target, keys.token("bench-lobby", "service")) as lobby:
        bots = SlimRules(RulesClient(lobby.channel, keys.token("bench-bots", "bot")))
        admin = RulesClient(lobby.channel, keys.token("bench-ops", "admin"))
        load = Stats()
        stop_at = time.perf_counter() + 3600
        loaders = [
            asyncio.create_task(_bot_driver(lobby, bots, stop_at, random.Random(i), load, i))
            for i in range(LOAD_GAMES)
        ]
        await asyncio.sleep(2.0)  # the load is running
        clock = events_pb2.TurnClock(turn_seconds=5, time_bank_seconds=0, autoplay_level="heuristic")
        games = []
        for i in range(CLOCK_GAMES):
            made = await lobby.create_game(
                "hearts", [f"absent-{i}-{s}" for s in range(PEOPLE)], {"limit": 20}, clock=clock
            )
            games.append(made.game_id)
        late: list[float] = []
        t0 = time.perf_counter()
        moves_before = load.moves
        pending = set(games)
        while pending:
            await asyncio.sleep(0.5)
            for gid in list(pending):
                hist = await admin.history(gid)
                if sum(m.kind == "timeout" for m in hist.moves) < TIMEOUTS_PER_SEAT * PEOPLE:
                    continue
                pending.discard(gid)
                late.extend(_lateness(hist))
            if time.perf_counter() - t0 > LIMIT_S:
                raise RuntimeError(f"{len(pending)} clock games did not time out within {LIMIT_S:.0f} s")
        elapsed = time.perf_counter() - t0
        load_moves = load.moves - moves_before
        for t in loaders:
            t.cancel()
        await asyncio.gather(*loaders, return_exceptions=True)
        await admin.close()
    return {
        "late": late,
        "elapsed": elapsed,
        "load_moves_per_s": load_moves / max(elapsed, 1e-9),
        "load": os.getloadavg()[0],
    }


async def run() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="court-bench-clock-"))
    nats = BinaryNats(tmp / "nats")
    nats.start()
    proc = None
    try:
        proc, target = _start(
            "rules", nats.url, tmp / "state", COURT_ENV="test", COURT_CLOCK_SECOND_MS=str(SECOND_MS)
        )
        await _await_serving(target, timeout=120.0)  # a busy shared machine starts it slowly
        return await _measure(target)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        nats.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    r = asyncio.run(run())
    late = r["late"]
    print(
        f"turn clock: {len(late)} timeouts in {CLOCK_GAMES} Hearts games ({SECOND_MS} ms clock seconds), "
        f"in {r['elapsed']:.0f} s while {LOAD_GAMES} bot games ran (~{r['load_moves_per_s']:.0f} moves/s of "
        f"load; load average {r['load']:.1f})"
    )
    print(
        f"  deadline -> applied move: p50 {_pct(late, 0.50):.0f} ms, p99 {_pct(late, 0.99):.0f} ms, "
        f"max {max(late):.0f} ms, min {min(late):.0f} ms"
    )


if __name__ == "__main__":
    main()
