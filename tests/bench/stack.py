"""The whole stack's CPU per move under ``court simulate``, process by process, in one run.

``make bench ONLY=stack``. A private local stack (``court_cli.stack.LocalStack``, what ``court stack
up --free-ports`` starts: nats-server with JetStream and court-rules (its projector inside, as by
default), -ranking, -lobby, -bot and -analytics, each its own process, on SQLite in a temporary
state folder), then ``court simulate`` (``court_cli.simulate.simulate``, in this process)
plays ``BENCH_STACK_GAMES`` games (default 24, the four kinds in turn, random and heuristic bots)
with ``BENCH_STACK_CONCURRENCY`` players at once (default 8) through the public path.

Each process's CPU time (user + system, ``/proc/<pid>/stat``) is read when every player has signed
up (the sign-ups' password hashing is no cost per move) and again when the last game ends; divided
by the moves played in that window (every move of every game, bots' included). Printed side by
side: each process's CPU per move with its goal, the sum, moves/s, SubmitAction p50 and p99 (the
simulating players' own calls), this process's (the client's) CPU per move (not the stack's, not in
the sum), and the rules service alone: a short run of ``make bench ONLY=service``'s ``bot`` mode
(one SubmitAction per move, no other service; its projector process's CPU added, as court-rules
runs its projector inside here), ``BENCH_STACK_SERVICE=0`` to skip it.

The goals (issue 31): the sum at most 3 ms per move; no process above 1 ms except rules, at most
1.5 ms; moves/s at least 5 x the baseline (``BENCH_STACK_BASELINE``, default the run of
2026-12-05 before any change, docs/capacity.md); SubmitAction p99 at most 30 ms.

The machine is shared: the load average before and after is printed with the figures.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from court_cli.session import Endpoints
from court_cli.simulate import SimConfig, simulate
from court_cli.stack import LocalStack, StackConfig

GAMES = int(os.environ.get("BENCH_STACK_GAMES", "24"))
CONCURRENCY = int(os.environ.get("BENCH_STACK_CONCURRENCY", "8"))
BASELINE = float(os.environ.get("BENCH_STACK_BASELINE", "165.5") or 0)  # moves/s, main at c739968
SERVICE = os.environ.get("BENCH_STACK_SERVICE", "1") not in ("", "0")
# the processes in print order, and each one's goal in ms of CPU per move
GOALS = {"rules": 1.5, "ranking": 1.0, "bot": 1.0, "nats": 1.0, "analytics": 1.0, "lobby": 1.0}
LABEL = {"nats": "nats-server"}
SUM_GOAL_MS = 3.0
P99_GOAL_MS = 30.0
RATE_GOAL = 5.0  # x the baseline's moves/s


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _simulate(stack: LocalStack) -> dict[str, Any]:
    cfg = stack.config
    endpoints = Endpoints(
        rules=cfg.address("rules"),
        lobby=cfg.address("lobby"),
        ranking=cfg.address("ranking"),
        bot=cfg.address("bot"),
        nats_url=cfg.nats_url,
    )
    pids = stack.pids()
    updates = [0]
    mark: dict[str, Any] = {}

    def snapshot() -> dict[str, float]:
        out = {name: cpu_seconds(pid) for name, pid in pids.items()}
        out["client"] = time.process_time()
        return out

    def on_signed_up() -> None:
        mark.update(t=time.monotonic(), cpu=snapshot(), updates=updates[0])

    def on_move() -> None:
        updates[0] += 1

    sim = await simulate(
        endpoints,
        SimConfig(games=GAMES, concurrency=CONCURRENCY),
        on_move=on_move,
        on_signed_up=on_signed_up,
    )
    after, t1 = snapshot(), time.monotonic()
    if sim.failed:
        raise SystemExit(f"{len(sim.failed)} games failed: {sim.failed[:3]}")
    consumed = await _ranking_consumed(stack)
    # each watched update is one record; those before the mark were moves outside the window
    moves = max(1, sim.moves - mark["updates"])
    return {
        "sim": sim.summary(),
        "moves": moves,
        "seconds": t1 - mark["t"],
        "cpu_ms": {k: (after[k] - mark["cpu"][k]) * 1000 / moves for k in after},
        "ranking_consumed": consumed,
    }


async def _ranking_consumed(stack: LocalStack, timeout: float = 60.0) -> int:
    """The messages the ranking durable was handed, once it has acknowledged every one (a check
    that ranking did its work in the run, not only that it cost little)."""
    import nats
    from court_kit.natsauth import ensure_dev_users

    nc = await nats.connect(
        stack.config.nats_url,
        user="ranking",
        password=ensure_dev_users(stack.config.state_dir)["ranking"],
        inbox_prefix="_INBOX_ranking",
    )
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + timeout
        while True:
            info = await js.consumer_info("COURT_EVENTS", "ranking")
            if info.num_pending == 0 and info.num_ack_pending == 0:
                return int(info.delivered.consumer_seq)
            if time.monotonic() > deadline:
                raise SystemExit(f"ranking did not take every record within {timeout:.0f}s: {info}")
            await asyncio.sleep(0.2)  # the durable's state has no event to wait on
    finally:
        await nc.close()


def rules_alone() -> dict[str, float]:
    """A short run of ``make bench ONLY=service``'s bot mode: the rules server's and its projector's
    CPU per move, and moves/s, with no other service."""
    from court_kit.server import run_loop

    from tests.bench import service

    service.MODES = ("bot",)
    service.SECONDS = float(os.environ.get("BENCH_STACK_SERVICE_SECONDS", "4"))
    out = run_loop(service.run(), service.LOOP)
    st = out["services"]["bot"]
    return {"server_ms": st.cpu[0] * 1000, "projector_ms": st.cpu[3] * 1000, "rate": st.rate}


def measure() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="court-bench-stack-"))
    stack = LocalStack(StackConfig.from_env({}, free_ports=True, state_dir=tmp / "state"))
    try:
        stack.start(timeout=180)
        load0 = os.getloadavg()[0]
        run = asyncio.run(_simulate(stack))
        run["load"] = (load0, os.getloadavg()[0])
    finally:
        stack.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if SERVICE:
        run["alone"] = rules_alone()
    return run


def report(r: dict[str, Any]) -> list[str]:
    s, cpu = r["sim"], r["cpu_ms"]
    rate = r["moves"] / r["seconds"]
    ok = {True: "ok", False: "MISSED"}
    lines = [
        f"court simulate: {s['games']} games, {r['moves']} moves measured in {r['seconds']:.1f}s "
        f"(concurrency {CONCURRENCY}; load average {r['load'][0]:.1f} -> {r['load'][1]:.1f})",
        f"{'process':<14}{'CPU ms/move':>12}{'goal':>8}",
    ]
    for name, goal in GOALS.items():
        v = cpu.get(name, 0.0)
        lines.append(f"{LABEL.get(name, name):<14}{v:>12.2f}{goal:>8.2f}  {ok[v <= goal]}")
    total = sum(cpu.get(n, 0.0) for n in GOALS)
    lines.append(f"{'sum':<14}{total:>12.2f}{SUM_GOAL_MS:>8.2f}  {ok[total <= SUM_GOAL_MS]}")
    lines.append(f"ranking's durable: {r['ranking_consumed']} records handed over and acknowledged")
    lines.append(f"{'(client)':<14}{cpu['client']:>12.2f}      the simulating players, not in the sum")
    rate_line = f"moves/s {rate:.1f}"
    if BASELINE:
        rate_line += (
            f" = {rate / BASELINE:.2f} x the baseline {BASELINE:.1f} (goal >= {RATE_GOAL:.0f} x: "
            f"{ok[rate >= RATE_GOAL * BASELINE]})"
        )
    lines.append(rate_line)
    lines.append(
        f"SubmitAction p50 {s['submit_p50_ms']} ms, p99 {s['submit_p99_ms']} ms over {s['submits']} calls "
        f"(goal p99 <= {P99_GOAL_MS:.0f} ms: {ok[s['submit_p99_ms'] <= P99_GOAL_MS]})"
    )
    if "alone" in r:
        a = r["alone"]
        alone = a["server_ms"] + a["projector_ms"]
        lines.append(
            f"rules alone (make bench ONLY=service, bot mode, {a['rate']:.0f} moves/s): server "
            f"{a['server_ms']:.2f} + projector {a['projector_ms']:.2f} = {alone:.2f} ms/move; "
            f"in the stack rules {cpu.get('rules', 0.0):.2f} ms = {cpu.get('rules', 0.0) / alone:.1f} x, "
            f"the stack's sum {total:.2f} ms = {total / alone:.1f} x"
        )
    return lines


def main() -> None:
    print(
        f"the local stack (nats-server; court-rules with its projector, -ranking, -lobby, -bot, "
        f"-analytics), {GAMES} games of court simulate at concurrency {CONCURRENCY}"
    )
    for line in report(measure()):
        print(line)


if __name__ == "__main__":
    main()
