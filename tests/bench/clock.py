"""Turn clock precision under load: how late a timeout is applied (docs/clock.md).

One nats-server and one ``court-rules`` process, as deployed. ``CLOCK_GAMES`` Hearts games
(default 40, env ``BENCH_CLOCK_GAMES``) whose four people never move, 5-second turns (shortened
to ``BENCH_CLOCK_SECOND_MS`` ms per second, default 200, through the dev setting
COURT_CLOCK_SECOND_MS: lateness does not depend on the turn's length), while ``GAMES`` bot-driven
games (default 32, env ``BENCH_GAMES``) keep the service busy the whole time (the load of
``tests.bench.service``'s bot driver). Each game's seats time out twice, then are played at once;
lateness = the clock move's record time minus its ``TurnTimedOut.deadline_ms`` (both server time),
read back from GetHistory. The tables start spread over one turn, so their deadlines do not all
fall in the same instant. Prints p50, p99 and max.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from court_client import RulesClient
from court_kit.structs import to_dict
from court_proto.court.rules.v1 import rules_pb2

from tests.bench.service import GAMES, Stats, _await_serving, _bot_driver, _pct
from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats, free_port

CLOCK_GAMES = int(os.environ.get("BENCH_CLOCK_GAMES", "40"))
SECOND_MS = int(os.environ.get("BENCH_CLOCK_SECOND_MS", "200"))
PEOPLE = 4


def _start_rules(nats_url: str, state_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "COURT_NATS_URL": nats_url, "COURT_LISTEN": f"127.0.0.1:{port}",
           "COURT_METRICS_LISTEN": "", **keys.env("rules"), "COURT_LOG_LEVEL": "warning",
           "COURT_STATE_DIR": str(state_dir), "COURT_ENV": "test", "COURT_CLOCK_SECOND_MS": str(SECOND_MS)}
    exe = Path(sys.executable).parent / "court-rules"
    log = open(state_dir.parent / "rules.log", "wb")  # noqa: SIM115 - the process writes it
    proc = subprocess.Popen([str(exe)], env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"127.0.0.1:{port}"


async def _measure(target: str) -> dict[str, Any]:
    async with RulesClient(target, keys.token("bench-lobby", "service")) as lobby:
        bots = RulesClient(lobby.channel, keys.token("bench-bots", "bot"))
        admin = RulesClient(lobby.channel, keys.token("bench-ops", "admin"))
        load = Stats()
        stop_at = time.perf_counter() + 3600
        loaders = [asyncio.create_task(_bot_driver(lobby, bots, stop_at, random.Random(i), load, i))
                   for i in range(GAMES)]
        await asyncio.sleep(1.0)  # the load is running
        clock = rules_pb2.TurnClock(turn_seconds=5, time_bank_seconds=0, autoplay_level="heuristic")
        games = []
        for i in range(CLOCK_GAMES):
            made = await lobby.create_game("hearts", [f"absent-{i}-{s}" for s in range(PEOPLE)], {"limit": 20},
                                           clock=clock)
            games.append(made.game_id)
            # spread the tables' deadlines over a turn, as tables that sat down at different times
            await asyncio.sleep(5 * SECOND_MS / 1000 / CLOCK_GAMES)
        late: list[float] = []
        t0 = time.perf_counter()
        pending = set(games)
        while pending:
            await asyncio.sleep(0.5)
            for gid in list(pending):
                hist = await admin.history(gid)
                if sum(m.kind == "timeout" for m in hist.moves) < 2 * PEOPLE:
                    continue
                pending.discard(gid)
                for m in hist.moves:
                    if m.kind != "timeout":
                        continue
                    out = [to_dict(e) for e in m.events]
                    deadline = next(e["deadline_ms"] for e in out if e["type"] == "TurnTimedOut")
                    late.append(m.time.ToMilliseconds() - deadline)
            if time.perf_counter() - t0 > 600:
                raise RuntimeError(f"{len(pending)} clock games did not time out within 10 minutes")
        elapsed = time.perf_counter() - t0
        moves_during = load.moves
        for t in loaders:
            t.cancel()
        await asyncio.gather(*loaders, return_exceptions=True)
        await bots.close()
        await admin.close()
    return {"late": late, "load_moves_per_s": moves_during / max(elapsed, 1e-9)}


async def run() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="court-bench-clock-"))
    nats = BinaryNats(tmp / "nats")
    nats.start()
    proc = None
    try:
        proc, target = _start_rules(nats.url, tmp / "state")
        try:
            await _await_serving(target, 60)
        except Exception:
            print((tmp / "rules.log").read_text()[-3000:], "exit:", proc.poll())
            raise
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
    print(f"turn clock: {len(late)} timeouts in {CLOCK_GAMES} games, while {GAMES} bot games ran "
          f"(~{r['load_moves_per_s']:.0f} moves/s of load)")
    print(f"  deadline -> applied move: p50 {_pct(late, 0.50):.0f} ms, p99 {_pct(late, 0.99):.0f} ms, "
          f"max {max(late):.0f} ms, min {min(late):.0f} ms")
