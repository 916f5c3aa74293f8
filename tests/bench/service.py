"""Rules-service throughput through gRPC, against this machine's ceiling for the same stack.

One nats-server (JetStream, file store) and the ``court-rules`` process, exactly as deployed;
``GAMES`` concurrent games (default 64, env ``BENCH_GAMES``), each driven by a scripted random
player for ``SECONDS`` (env ``BENCH_SECONDS``). Two drivers:

* ``bot``: every seat is a bot seat and the driver holds the bot identity, so each submit's reply
  carries the next seat's view and legal actions: one RPC per move, like the ceiling;
* ``players``: one player token per seat; each move is GetView (the next seat's legal actions)
  then SubmitAction: two RPCs per move.

The ceiling: a bare grpc.aio handler doing one JetStream publish per call (tests/bench/_ceiling.py),
in its own process, driven with the same concurrency. The figure to watch is
``ratio = service moves/s / ceiling calls/s`` (goal >= 0.8; a read-modify-write per move reaches
about 0.6).

Beside it, the floor of the event contract: the same bare handler, also storing the two events
every move has at least (public and full, on their own subjects, end markers last), so the share
of the ceiling that a move's required writes alone leave is measured in the same run; and the
events the service actually stored per move.
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

import grpc
from court_client import RulesClient
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nats import connect as nats_connect

from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats, free_port

GAMES = int(os.environ.get("BENCH_GAMES", "64"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
# short games keep creation in the mix without dominating it
FLOOR_EVENTS = 2  # every move publishes ActionApplied and TurnStarted (or GameEnded), at least
GAME_MIX = [("hearts", {"limit": 20}, 4), ("queens_court", {"players": 3}, 3),
            ("court_wars", {"players": 2, "turn_limit": 80}, 2), ("the_court", {"mode": "burn"}, 2)]


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


async def _await_serving(target: str, timeout: float = 20.0) -> None:
    async with grpc.aio.insecure_channel(target) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), wait_for_ready=True, timeout=timeout)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


class Stats:
    def __init__(self) -> None:
        self.moves = 0
        self.latencies: list[float] = []
        self.games = 0
        self.elapsed = 0.0
        self.events = 0.0


async def _bot_driver(lobby: RulesClient, client: RulesClient, deadline: float, rng: random.Random, stats: Stats,
                      k: int) -> None:
    while time.perf_counter() < deadline:
        game, options, n = GAME_MIX[(k + stats.games) % len(GAME_MIX)]
        created = await lobby.create_game(game, [f"bot:{i}" for i in range(n)], options)
        gid = created.game_id
        stats.games += 1
        views = {}
        for s in created.view.to_act:
            views[s] = await client.get_view(gid, s)
        while views and time.perf_counter() < deadline:
            seat = rng.choice(sorted(views))
            act = rng.choice(list(views[seat].legal_actions))
            t0 = time.perf_counter()
            reply = await client.submit(gid, act, seat)
            stats.latencies.append(time.perf_counter() - t0)
            stats.moves += 1
            if reply.view.finished:
                break
            del views[seat]
            for v in (reply.view, *reply.next):
                if v.your_seat in v.to_act and v.legal_actions:
                    views[v.your_seat] = v
            for s in reply.view.to_act:  # simultaneous phases: seats whose view we do not hold yet
                if s not in views:
                    views[s] = await client.get_view(gid, s)


async def _player_driver(lobby: RulesClient, deadline: float, rng: random.Random, stats: Stats, k: int) -> None:
    clients: dict[str, RulesClient] = {}
    while time.perf_counter() < deadline:
        game, options, n = GAME_MIX[(k + stats.games) % len(GAME_MIX)]
        players = [f"p{k}-{i}" for i in range(n)]
        for p in players:
            if p not in clients:
                clients[p] = RulesClient(lobby.channel, keys.token(p, "player"))
        created = await lobby.create_game(game, players, options)
        gid = created.game_id
        stats.games += 1
        to_act = list(created.view.to_act)
        while to_act and time.perf_counter() < deadline:
            seat = rng.choice(to_act)
            c = clients[players[seat]]
            t0 = time.perf_counter()
            mine = await c.get_view(gid, seat)
            reply = await c.submit(gid, rng.choice(list(mine.legal_actions)), seat)
            stats.latencies.append(time.perf_counter() - t0)
            stats.moves += 1
            to_act = [] if reply.view.finished else list(reply.view.to_act)


async def _measure_service(target: str, mode: str, nats_url: str) -> Stats:
    stats = Stats()
    rng = random.Random(mode)
    async with RulesClient(target, keys.token("bench-lobby", "service")) as lobby:
        bots = RulesClient(lobby.channel, keys.token("bench-bots", "bot"))
        # warm up (caches, channels), then measure
        warm = time.perf_counter() + 1.0
        await asyncio.gather(*(_bot_driver(lobby, bots, warm, random.Random(i), Stats(), i) for i in range(4)))
        before = await _stored(nats_url, "COURT_EVENTS")
        deadline = time.perf_counter() + SECONDS
        t0 = time.perf_counter()
        if mode == "bot":
            await asyncio.gather(*(_bot_driver(lobby, bots, deadline, random.Random(rng.random()), stats, i)
                                   for i in range(GAMES)))
        else:
            await asyncio.gather(*(_player_driver(lobby, deadline, random.Random(rng.random()), stats, i)
                                   for i in range(GAMES)))
        stats.elapsed = time.perf_counter() - t0
    # public events stored per move, the games' creation included (each has as many full ones)
    stats.events = (await _stored(nats_url, "COURT_EVENTS") - before) / max(1, stats.moves)
    return stats


async def _stored(nats_url: str, stream: str) -> int:
    nc = await nats_connect(nats_url)
    try:
        return int((await nc.jetstream().stream_info(stream)).state.messages)
    finally:
        await nc.close()


async def _measure_ceiling(target: str) -> tuple[float, list[float]]:
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(target) as ch:
        call = ch.unary_unary("/bench.Ceiling/Call")
        payload = b"x" * 120  # about a SubmitActionRequest
        deadline = time.perf_counter() + 1.0
        while time.perf_counter() < deadline:
            await call(payload)
        count = 0
        deadline = time.perf_counter() + SECONDS

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                await call(payload)
                latencies.append(time.perf_counter() - t0)
                count += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(GAMES)))
        return count / (time.perf_counter() - t0), latencies


def _start_rules(nats_url: str, state_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "COURT_NATS_URL": nats_url, "COURT_LISTEN": f"127.0.0.1:{port}",
           "COURT_METRICS_LISTEN": "", **keys.env("rules"), "COURT_LOG_LEVEL": "warning",
           "COURT_STATE_DIR": str(state_dir), "COURT_ENV": "bench"}
    exe = Path(sys.executable).parent / "court-rules"
    proc = subprocess.Popen([str(exe)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"127.0.0.1:{port}"


async def run() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="court-bench-"))
    nats = BinaryNats(tmp / "nats")
    nats.start()
    procs: list[subprocess.Popen[Any]] = []
    try:
        ceiling = subprocess.Popen([sys.executable, "-m", "tests.bench._ceiling", nats.url], stdout=subprocess.PIPE)
        procs.append(ceiling)
        floor = subprocess.Popen([sys.executable, "-m", "tests.bench._ceiling", nats.url, str(FLOOR_EVENTS)],
                                 stdout=subprocess.PIPE)
        procs.append(floor)
        assert ceiling.stdout is not None and floor.stdout is not None
        ceiling_target = f"127.0.0.1:{int(ceiling.stdout.readline())}"
        floor_target = f"127.0.0.1:{int(floor.stdout.readline())}"
        rules, target = _start_rules(nats.url, tmp / "state")
        procs.append(rules)
        await _await_serving(target)
        out: dict[str, Any] = {}
        # alternate the measurements so load on the machine affects both alike; CPU time per
        # operation of the server process is the steadier figure on a busy machine
        assert nats.proc is not None
        npid = nats.proc.pid

        def cpus(server: int) -> tuple[float, float, float]:
            """CPU seconds so far of (the server under test, this driving process, nats-server)."""
            return _cpu(server), time.process_time(), _cpu(npid)

        def per_op(a: tuple[float, ...], b: tuple[float, ...], ops: float) -> tuple[float, ...]:
            return tuple((y - x) / max(1.0, ops) for x, y in zip(a, b, strict=True))

        bare: dict[str, list[tuple[float, list[float], tuple[float, ...], tuple[float, ...]]]] = {
            "ceiling": [], "floor": []}

        async def measure_bare() -> None:
            """One run of each bare handler: (rate, latencies, CPU seconds before, after)."""
            for name, proc, tgt in (("ceiling", ceiling, ceiling_target), ("floor", floor, floor_target)):
                before = cpus(proc.pid)
                rate, lat = await _measure_ceiling(tgt)
                bare[name].append((rate, lat, before, cpus(proc.pid)))

        await measure_bare()
        s0 = cpus(rules.pid)
        bot = await _measure_service(target, "bot", nats.url)
        s1 = cpus(rules.pid)
        await measure_bare()
        s2 = cpus(rules.pid)
        players = await _measure_service(target, "players", nats.url)
        s3 = cpus(rules.pid)
        for name, runs in bare.items():
            out[name] = sum(r[0] for r in runs) / len(runs)
            calls = sum(r[0] for r in runs) * SECONDS
            out[f"{name}_cpu"] = tuple(sum(col) for col in zip(*(per_op(a, b, calls) for _, _, a, b in runs),
                                                               strict=True))
        out["ceiling_p50"] = _pct([x for r in bare["ceiling"] for x in r[1]], 0.5)
        # warm-up moves are not counted in a service run's CPU: a slight overestimate
        for name, st, a, b in (("bot", bot, s0, s1), ("players", players, s2, s3)):
            out[name] = {"moves_s": st.moves / st.elapsed, "p50": _pct(st.latencies, 0.5),
                         "p99": _pct(st.latencies, 0.99), "games": st.games, "moves": st.moves,
                         "cpu": per_op(a, b, st.moves), "events_per_move": st.events}
        return out
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        nats.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    r = asyncio.run(run())
    ceiling = r["ceiling"]
    print(f"rules service, {GAMES} concurrent games, {SECONDS:.0f}s per measurement, "
          f"{os.cpu_count()} CPUs (client, service and nats-server share them)")
    def cpu(c: tuple[float, ...], unit: str) -> str:
        return (f"CPU us/{unit}: server {c[0] * 1e6:.0f}, driver {c[1] * 1e6:.0f}, nats-server {c[2] * 1e6:.0f}, "
                f"total {sum(c) * 1e6:.0f}")

    print(f"  ceiling (bare grpc.aio handler + 1 JetStream publish): {ceiling:8.0f} calls/s  "
          f"p50 {r['ceiling_p50'] * 1000:.2f} ms  {cpu(r['ceiling_cpu'], 'call')}")
    print(f"  floor of a move's writes (the same + {FLOOR_EVENTS} events, public and full): {r['floor']:8.0f} calls/s  "
          f"ratio floor/ceiling {r['floor'] / ceiling:.2f}  {cpu(r['floor_cpu'], 'call')}")
    for name, label in (("bot", "bot identity, 1 RPC per move"), ("players", "a token per seat, 2 RPCs per move")):
        s = r[name]
        print(f"  service ({label}): {s['moves_s']:8.0f} moves/s  submit p50 {s['p50'] * 1000:.2f} ms  "
              f"p99 {s['p99'] * 1000:.2f} ms  ({s['moves']} moves, {s['games']} games)  "
              f"ratio service/ceiling {s['moves_s'] / ceiling:.2f}")
        print(f"      {cpu(s['cpu'], 'move')}"
              + f"; events per move {s['events_per_move']:.2f}, each stored public and full")
    print("  goal: ratio >= 0.8 for the 1-RPC driver (a read-modify-write per move reaches about 0.6)")


if __name__ == "__main__":
    main()
