"""``make bench ONLY=web``: what court-web costs, side by side in one run.

One nats-server, one ``court-rules`` process and one ``court-web`` process in front of it, each
its own process as deployed (the edge's other upstreams are left away: only rules is called).

1. **A call through the edge against the same call straight over gRPC.** ``CALLERS`` concurrent
   callers (default 16, env ``BENCH_WEB_CALLERS``) each ask ``GetView`` of a game of their own
   for ``SECONDS`` (env ``BENCH_SECONDS``, default 6): once with a grpc.aio stub to court-rules,
   once with the generated Connect client (binary protobuf over HTTP/1.1, pyqwest) to court-web;
   each twice, alternating, so load on the shared machine falls on both. Printed: calls/s, p50 and
   p99 latency, and CPU per call of court-web, of court-rules (the same work either way) and of
   the driver. The edge's overhead per call is the difference in latency and its own CPU per call.
2. **WatchGame fan-out.** ``STREAMS`` (default 200, env ``BENCH_WEB_STREAMS``) spectators watch
   one game while the driver plays it at ``MOVES_PER_S`` (default 10, env ``BENCH_WEB_MOVES``):
   once as 200 Connect streams through court-web, once as 200 gRPC streams straight to
   court-rules. Printed: messages delivered, delivery latency p50/p99 (from the move's submit to
   its update in each stream) and CPU per delivered message of court-web and court-rules.
3. **The page** (tests/bench/web_page.py, the web client's own figures: transferred bytes of the
   page, JS and CSS gzipped; time to the first drawn table), when that module is present.

CPU is user + system time from /proc (tests/bench/service.py); figures vary with the machine's
load, so the ratios in one run are what to compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pyqwest
from court_client import options_proto
from court_kit.server import run_loop
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
from court_proto.court.rules.v1.rules_connect import RulesServiceClient

from tests.bench.service import LOOP, _await_serving, _cpu, _pct, _start
from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats, free_port

CALLERS = int(os.environ.get("BENCH_WEB_CALLERS", "16"))
STREAMS = int(os.environ.get("BENCH_WEB_STREAMS", "200"))
MOVES_PER_S = float(os.environ.get("BENCH_WEB_MOVES", "10"))
STREAMS_PER_CHANNEL = 50
SECONDS_W = float(os.environ.get("BENCH_SECONDS", "6"))
EDGE_SECRET = "bench-edge-secret-" + "x" * 32
PLAYER = "bench-web-player"
SPECTATOR = "bench-web-spectator"


@dataclass
class Phase:
    calls: int = 0
    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds over the phase, by process
    errors: int = 0

    def per(self, who: str, n: int | None = None) -> float:
        n = self.calls if n is None else n
        return self.cpu.get(who, 0.0) / n if n else float("nan")


def _start_web(rules_addr: str, state: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "COURT_WEB_ADDR": f"127.0.0.1:{port}",
        "COURT_METRICS_LISTEN": "",
        "COURT_LOG_LEVEL": "warning",
        "COURT_STATE_DIR": str(state),
        "COURT_ENV": "bench",
        "COURT_EVENT_LOOP": LOOP,
        "COURT_EDGE_SECRET": EDGE_SECRET,
        "COURT_RULES_ADDR": rules_addr,
        "COURT_WEB_RATE": "0",  # one driver address makes every call: no per-client limits here
        "COURT_WEB_MAX_STREAMS_PER_CLIENT": str(STREAMS + 10),
        "COURT_WEB_STATIC": str(state / "no-client"),
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "court-web")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, f"127.0.0.1:{port}"


async def _await_http(address: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await asyncio.to_thread(urllib.request.urlopen, f"http://{address}/healthz", None, 2)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)  # not listening yet


def _meta(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def _create_game(stub: Any, token: str, limit: int = 100) -> rules_pb2.CreateGameResponse:
    req = rules_pb2.CreateGameRequest(request_id=uuid.uuid4().hex, game="hearts", seats=[PLAYER] * 4)
    req.options.CopyFrom(options_proto("hearts", {"limit": limit}))
    return await stub.CreateGame(req, metadata=_meta(token), timeout=30)


class Cpu:
    def __init__(self, pids: dict[str, int]):
        self.pids = pids

    def now(self) -> dict[str, float]:
        out = {name: _cpu(pid) for name, pid in self.pids.items()}
        out["driver"] = time.process_time()
        return out

    @contextlib.contextmanager
    def over(self, phase: Phase) -> Any:
        before, t0 = self.now(), time.perf_counter()
        yield
        phase.elapsed = time.perf_counter() - t0
        after = self.now()
        phase.cpu = {k: after[k] - before[k] for k in before}


async def _unary(call: Any, games: list[str], cpu: Cpu) -> Phase:
    """``call(game_id)`` from CALLERS concurrent callers for SECONDS_W, after a second's warm-up."""
    phase = Phase()
    warm = time.perf_counter() + 1.0
    while time.perf_counter() < warm:
        await call(games[0])

    async def worker(gid: str, deadline: float) -> None:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            await call(gid)
            phase.latencies.append(time.perf_counter() - t0)
            phase.calls += 1

    with cpu.over(phase):
        deadline = time.perf_counter() + SECONDS_W
        await asyncio.gather(*(worker(g, deadline) for g in games))
    return phase


async def _fanout(open_stream: Any, stub: Any, token: str, cpu: Cpu) -> Phase:
    """STREAMS spectators of one fresh game (``open_stream(game_id)`` -> async iterator of updates)
    while the driver plays it at MOVES_PER_S; delivery latency from each move's submit."""
    created = await _create_game(stub, token)
    gid = created.game_id
    submitted: dict[int, float] = {}
    phase = Phase()
    ready = asyncio.Semaphore(0)
    stop = asyncio.Event()

    async def spectator() -> None:
        stream = open_stream(gid)
        try:
            first = True
            async for update in stream:
                if first:  # the snapshot: this stream is open
                    first = False
                    ready.release()
                    continue
                at = submitted.get(update.seq)
                if at is not None:
                    phase.latencies.append(time.perf_counter() - at)
                    phase.calls += 1
                if stop.is_set():
                    break
        except Exception as exc:  # noqa: BLE001 - counted, the figures say how many
            if not stop.is_set():  # (the Connect client reports our own cancel at the end as an error)
                phase.errors += 1
                if phase.errors == 1:
                    print(f"a stream failed: {exc!r}", file=sys.stderr)
            if first:
                ready.release()
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()

    tasks = [asyncio.create_task(spectator()) for _ in range(STREAMS)]
    async with asyncio.timeout(120):
        for _ in range(STREAMS):
            await ready.acquire()
    view = created.view
    with cpu.over(phase):
        deadline = time.perf_counter() + SECONDS_W
        next_at = time.perf_counter()
        while time.perf_counter() < deadline and not view.finished:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            next_at += 1.0 / MOVES_PER_S
            if not view.HasField("your_seat") or view.your_seat not in view.to_act or not view.legal_actions:
                view = await stub.GetView(
                    rules_pb2.GetViewRequest(game_id=gid, seat=view.to_act[0]),
                    metadata=_meta(token),
                    timeout=30,
                )
            submitted[view.seq + 1] = time.perf_counter()
            reply = await stub.SubmitAction(
                rules_pb2.SubmitActionRequest(
                    game_id=gid,
                    request_id=uuid.uuid4().hex,
                    seat=view.your_seat,
                    action=view.legal_actions[0],
                ),
                metadata=_meta(token),
                timeout=30,
            )
            view = next((v for v in reply.next if v.legal_actions), reply.view)
        await asyncio.sleep(0.5)  # the last moves' updates on their way
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return phase


async def run() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="court-bench-web-"))
    nats = BinaryNats(tmp / "nats")
    nats.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        rules, rules_addr = _start("rules", nats.url, tmp / "state")
        procs.append(rules)
        await _await_serving(rules_addr)
        web, web_addr = _start_web(rules_addr, tmp / "web")
        procs.append(web)
        await _await_http(web_addr)
        assert nats.proc is not None
        cpu = Cpu({"web": web.pid, "rules": rules.pid, "nats": nats.proc.pid})
        token = keys.token(PLAYER, "player", ttl=3600)
        watcher = keys.token(SPECTATOR, "player", ttl=3600)
        url = f"http://{web_addr}"
        out: dict[str, Any] = {}
        async with grpc.aio.insecure_channel(rules_addr) as ch:
            stub = rules_pb2_grpc.RulesServiceStub(ch)
            games = [(await _create_game(stub, token)).game_id for _ in range(CALLERS)]
            http = pyqwest.Client()
            connect = RulesServiceClient(url, http_client=http)
            auth = {"authorization": f"Bearer {token}"}

            async def direct(gid: str) -> Any:
                return await stub.GetView(
                    rules_pb2.GetViewRequest(game_id=gid, seat=0), metadata=_meta(token)
                )

            async def edge(gid: str) -> Any:
                return await connect.get_view(rules_pb2.GetViewRequest(game_id=gid, seat=0), headers=auth)

            runs: dict[str, list[Phase]] = {"direct": [], "edge": []}
            for _ in range(2):
                runs["direct"].append(await _unary(direct, games, cpu))
                runs["edge"].append(await _unary(edge, games, cpu))
            out["unary"] = runs

            # a gRPC server takes COURT_MAX_STREAMS (100) concurrent streams per connection: the
            # direct streams are spread over connections of STREAMS_PER_CHANNEL each
            channels = [
                grpc.aio.insecure_channel(rules_addr, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(-(-STREAMS // STREAMS_PER_CHANNEL))
            ]
            spread = itertools.count()

            def grpc_stream(gid: str) -> Any:
                ch = channels[(next(spread) // STREAMS_PER_CHANNEL) % len(channels)]
                return rules_pb2_grpc.RulesServiceStub(ch).WatchGame(
                    rules_pb2.WatchGameRequest(game_id=gid), metadata=_meta(watcher)
                )

            def connect_stream(gid: str) -> Any:
                return connect.watch_game(
                    rules_pb2.WatchGameRequest(game_id=gid), headers={"authorization": f"Bearer {watcher}"}
                )

            try:
                out["fanout"] = {
                    "direct": await _fanout(grpc_stream, stub, token, cpu),
                    "edge": await _fanout(connect_stream, stub, token, cpu),
                }
            finally:
                for c in channels:
                    await c.close()
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
            if p.poll() is None:
                p.kill()
        nats.stop()


def _merge(phases: list[Phase]) -> Phase:
    m = Phase()
    for p in phases:
        m.calls += p.calls
        m.latencies += p.latencies
        m.elapsed += p.elapsed
        m.errors += p.errors
        for k, v in p.cpu.items():
            m.cpu[k] = m.cpu.get(k, 0.0) + v
    return m


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:8.0f} µs"


def report(r: dict[str, Any]) -> list[str]:
    d, e = _merge(r["unary"]["direct"]), _merge(r["unary"]["edge"])
    lines = [
        f"GetView from {CALLERS} concurrent callers, {SECONDS_W:.0f} s x 2 each, alternating "
        f"(court-rules, court-web: one process each; cores: {os.cpu_count()})",
        f"{'':34}{'calls/s':>9}{'p50':>12}{'p99':>12}{'web CPU/call':>15}{'rules CPU/call':>16}{'driver CPU/call':>17}",
    ]
    for name, p in (("gRPC straight to court-rules", d), ("Connect through court-web", e)):
        lines.append(
            f"{name:34}{p.calls / p.elapsed:9,.0f}{_us(_pct(p.latencies, 0.5)):>12}{_us(_pct(p.latencies, 0.99)):>12}"
            f"{_us(p.per('web')):>15}{_us(p.per('rules')):>16}{_us(p.per('driver')):>17}"
        )
    lines.append(
        f"the edge adds per call: p50 {(_pct(e.latencies, 0.5) - _pct(d.latencies, 0.5)) * 1e3:.2f} ms, "
        f"p99 {(_pct(e.latencies, 0.99) - _pct(d.latencies, 0.99)) * 1e3:.2f} ms, "
        f"{e.per('web') * 1e6:.0f} µs of court-web CPU ({e.per('web') / max(e.per('rules'), 1e-12):.2f}x "
        f"court-rules' own CPU per call); throughput {e.calls / e.elapsed / (d.calls / d.elapsed):.2f}x direct"
    )
    fd, fe = r["fanout"]["direct"], r["fanout"]["edge"]
    lines.append(
        f"WatchGame fan-out: {STREAMS} spectators of one game, {MOVES_PER_S:g} moves/s for {SECONDS_W:.0f} s"
    )
    lines.append(
        f"{'':34}{'delivered':>10}{'errors':>8}{'p50':>12}{'p99':>12}{'web CPU/msg':>14}{'rules CPU/msg':>15}"
    )
    for name, p in (("gRPC streams straight to rules", fd), ("Connect streams through court-web", fe)):
        lines.append(
            f"{name:34}{p.calls:10,}{p.errors:8}{_us(_pct(p.latencies, 0.5)):>12}{_us(_pct(p.latencies, 0.99)):>12}"
            f"{_us(p.per('web')):>14}{_us(p.per('rules')):>15}"
        )
    if fe.calls:
        lines.append(
            f"court-web per delivered message: {fe.per('web') * 1e6:.0f} µs CPU "
            f"({fe.cpu.get('web', 0) / fe.elapsed * 100:.0f}% of a core for {fe.calls / fe.elapsed:,.0f} messages/s)"
        )
    return lines


def main() -> None:
    r = run_loop(run(), LOOP)
    print("\n".join(report(r)))
    # The page's own figures (the web client: bytes transferred, JS and CSS gzipped; time to the
    # first drawn table) come from tests/bench/web_page.py, printed here in the same run.
    if importlib.util.find_spec("tests.bench.web_page") is not None:
        importlib.import_module("tests.bench.web_page").main()
    else:
        print("page figures: tests/bench/web_page.py is not in this tree (the web client's bench)")


if __name__ == "__main__":
    main()
