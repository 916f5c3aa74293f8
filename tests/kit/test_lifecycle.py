"""Lifecycle of the real service processes (their console scripts): SIGTERM at any moment, in-flight
calls finishing, readiness following NATS and the database (closed or hung), liveness steady, and
reconnect logs rate-limited. Every figure the tests see is printed (``-s`` shows them; the report
and docs/operations.md quote them)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_kit.health import LIVENESS
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats, free_port
from tests.fixtures.procs import STOP_LIMIT, Service

BIN = Path(sys.executable).parent
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
FLIP_LIMIT = 15.0  # seconds: a dependency gone to NOT_SERVING (and back)

pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    started: list[Service] = []

    def make(name: str, env: dict[str, str], **kw: Any) -> Service:
        s = Service(name, tmp_path, {**keys.env(name), **env}, **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        s.close()


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[BinaryNats]:
    server = BinaryNats(tmp_path / "nats")
    server.start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.proc.send_signal(signal.SIGCONT)
    server.stop()


class HealthWatch:
    """Watches one health name of a service; ``until(status)`` waits for it (event-driven)."""

    def __init__(self, channel: grpc.aio.Channel, name: str):
        self.call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=name))
        self.statuses: list[tuple[float, int]] = []

    async def until(self, status: int, timeout: float) -> float:
        """Seconds (monotonic clock) at which ``status`` was reported."""

        async def loop() -> float:
            while True:
                reply = await self.call.read()
                assert reply is not grpc.aio.EOF, "the health stream ended"
                self.statuses.append((time.monotonic(), reply.status))
                if reply.status == status:
                    return time.monotonic()

        return await asyncio.wait_for(loop(), timeout)

    def cancel(self) -> None:
        self.call.cancel()


@contextlib.asynccontextmanager
async def channel(address: str) -> AsyncIterator[grpc.aio.Channel]:
    ch = grpc.aio.insecure_channel(address)
    try:
        yield ch
    finally:
        await ch.close()


async def wait_serving(ch: grpc.aio.Channel, name: str = "", timeout: float = 60) -> None:
    reply = await health_pb2_grpc.HealthStub(ch).Check(
        health_pb2.HealthCheckRequest(service=name), wait_for_ready=True, timeout=timeout
    )
    assert reply.status == SERVING


async def status_of(ch: grpc.aio.Channel, name: str) -> int:
    return (
        await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
    ).status


def _opts(d: dict[str, Any]) -> Any:
    from court_contract import typed

    return typed.options_to_proto("queens_court", d)


# ---------------------------------------------------------------------------------------- signals


@pytest.mark.parametrize("service", ["rules", "bot", "ranking"])
def test_sigterm_while_waiting_for_nats_at_start_up_as_pid_1(spawn: Any, service: str) -> None:
    """A pod whose NATS is not there yet, stopped by Kubernetes: it used to ignore SIGTERM until
    the grace period ran out (PID 1, no handler installed yet); now it exits at once."""
    nowhere = f"nats://127.0.0.1:{free_port()}"
    s = spawn(service, {"COURT_NATS_URL": nowhere, "COURT_DATABASE_URL": ""}, pid1=True)
    s.wait_log("nats unreachable", 60)
    took, rc = s.terminate_and_time()
    print(f"\n{service}: SIGTERM while waiting for NATS, as PID 1: exited {rc} after {took:.2f}s")
    assert rc == 0 and took < STOP_LIMIT
    events = [x["event"] for x in s.logs()]
    assert events[-2:] == ["stopping during start-up", "stopped"]
    # nats-py retried every 250 ms meanwhile; the log says so once (it used to, four times a second)
    nats_lines = [e for e in events if "nats" in e]
    assert nats_lines == ["nats unreachable"], events


def test_sigterm_while_waiting_for_the_database_at_start_up(spawn: Any, tmp_path: Path) -> None:
    """The lobby waiting on a PostgreSQL server that accepts connections and never answers (a
    stalled proxy): SIGTERM still ends it within the limit."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes connections; nobody ever reads or answers
    try:
        url = f"postgresql+psycopg://court@127.0.0.1:{silent.getsockname()[1]}/court"
        s = spawn("lobby", {"COURT_DATABASE_URL": url, "COURT_ENV": "dev"}, pid1=True)
        deadline = time.monotonic() + 30
        while not any(
            "ESTAB" in line
            for line in subprocess.run(
                ["ss", "-tn", f"sport = :{silent.getsockname()[1]}"], capture_output=True, text=True
            ).stdout.splitlines()
        ):
            assert time.monotonic() < deadline and s.proc.poll() is None, s.log_path.read_text()[-2000:]
            time.sleep(0.02)  # no event says "connected"; ss shows the established connection
        took, rc = s.terminate_and_time()
        print(f"\nlobby: SIGTERM while its database hangs at start-up: exited {rc} after {took:.2f}s")
        assert took < STOP_LIMIT
    finally:
        silent.close()


async def test_sigterm_lets_an_in_flight_call_finish(spawn: Any, nats: BinaryNats) -> None:
    """A Suggest call (an expert searching for 3 s) in flight when SIGTERM arrives: it is answered,
    new calls are refused, and the process is gone within the limit."""
    rules = spawn("rules", {"COURT_NATS_URL": nats.url})
    metrics_port = free_port()
    bot = spawn(
        "bot",
        {
            "COURT_NATS_URL": nats.url,
            "COURT_RULES_ADDR": f"127.0.0.1:{rules.port}",
            "COURT_BOT_BUDGET_EXPERT_MS": "3000",
            "COURT_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
        },
    )
    md = (("authorization", f"Bearer {keys.token('ann', 'player')}"),)
    async with channel(rules.address) as rch, channel(bot.address) as bch:
        await wait_serving(rch)
        await wait_serving(bch)
        created = await rules_pb2_grpc.RulesServiceStub(rch).CreateGame(
            rules_pb2.CreateGameRequest(
                request_id="g1",
                game="queens_court",
                seats=["ann", "bot:random", "bot:random"],
                options=_opts({"players": 3}),
            ),
            metadata=(("authorization", f"Bearer {keys.token('lobby', 'service')}"),),
            timeout=30,
        )
        stub = bot_pb2_grpc.BotServiceStub(bch)
        t_call = time.monotonic()
        call = asyncio.ensure_future(
            stub.Suggest(
                bot_pb2.SuggestRequest(game_id=created.game_id, seat=0, level="expert"),
                metadata=md,
                timeout=30,
            )
        )
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        pattern = re.compile(r'court_grpc_in_flight\{method="/court.bot.v1.BotService/Suggest"\} 1\.0')
        while not pattern.search(
            await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
        ):
            assert not call.done(), call
            await asyncio.sleep(0.02)  # the in-flight gauge is the event; it is read over HTTP
        t_term = time.monotonic()
        os.kill(bot.proc.pid, signal.SIGTERM)
        answer = await call
        t_answer = time.monotonic()
        assert answer.action.WhichOneof("game") == "queens_court" and answer.seq == 0
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Suggest(
                bot_pb2.SuggestRequest(game_id=created.game_id, seat=0, level="random"),
                metadata=md,
                timeout=5,
            )
        assert info.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    rc = await asyncio.to_thread(bot.proc.wait, STOP_LIMIT + 5)
    t_exit = time.monotonic()
    print(
        f"\nbot: Suggest in flight {t_term - t_call:.2f}s before SIGTERM, answered {t_answer - t_term:.2f}s "
        f"after it; process gone {t_exit - t_term:.2f}s after SIGTERM (rc {rc})"
    )
    assert rc == 0 and t_exit - t_term < STOP_LIMIT
    took, rc = rules.terminate_and_time()
    print(f"rules: idle, SIGTERM to exit {took:.2f}s (rc {rc})")
    assert rc == 0 and took < STOP_LIMIT


# -------------------------------------------------------------------------------------- readiness


async def test_readiness_follows_nats_closed_or_hung_liveness_does_not(spawn: Any, nats: BinaryNats) -> None:
    """court-rules: NATS stopped with SIGSTOP (connections stay open, nothing answers) and NATS
    killed: readiness turns NOT_SERVING within 15 s both times and SERVING again when NATS is
    back; ``liveness`` stays SERVING throughout; the outage costs a handful of log lines, not
    several a second."""
    rules = spawn("rules", {"COURT_NATS_URL": nats.url})
    async with channel(rules.address) as ch:
        await wait_serving(ch)
        ready = HealthWatch(ch, "")
        named = HealthWatch(ch, "court.rules.v1.RulesService")
        live = HealthWatch(ch, LIVENESS)
        await ready.until(SERVING, 10)
        await named.until(SERVING, 10)
        await live.until(SERVING, 10)
        figures = []
        # 1. hung: SIGSTOP
        assert nats.proc is not None
        t0 = time.monotonic()
        nats.proc.send_signal(signal.SIGSTOP)
        t_down = await ready.until(NOT_SERVING, FLIP_LIMIT)
        await named.until(NOT_SERVING, FLIP_LIMIT)
        assert await status_of(ch, LIVENESS) == SERVING
        t1 = time.monotonic()
        nats.proc.send_signal(signal.SIGCONT)
        t_up = await ready.until(SERVING, FLIP_LIMIT)
        figures.append(("hung (SIGSTOP)", t_down - t0, t_up - t1))
        # 2. closed: killed, restarted on the same port and store
        lines_before = len(rules.logs())
        t0 = time.monotonic()
        nats.kill()
        t_down = await ready.until(NOT_SERVING, FLIP_LIMIT)
        assert await status_of(ch, LIVENESS) == SERVING
        # stay down a while: a flood would show (nats-py retries every 250 ms)
        await asyncio.sleep(5)  # the outage's length is the point here, not a wait for something
        down_lines = [x for x in rules.logs()[lines_before:]]
        t1 = time.monotonic()
        nats.start()
        t_up = await ready.until(SERVING, FLIP_LIMIT)
        figures.append(("closed (killed)", t_down - t0, t_up - t1))
        outage = t1 - t0
        assert await status_of(ch, LIVENESS) == SERVING
        assert all(s == SERVING for _, s in live.statuses), live.statuses
        ready.cancel()
        named.cancel()
        live.cancel()
    for what, down, up in figures:
        print(f"\nrules, NATS {what}: NOT_SERVING after {down:.1f}s, SERVING {up:.1f}s after NATS came back")
        assert down < FLIP_LIMIT and up < FLIP_LIMIT
    print(
        f"rules: {len(down_lines)} log lines in {outage:.1f}s of NATS outage: "
        f"{sorted({x['event'] for x in down_lines})}"
    )
    assert len(down_lines) <= 8, [x["event"] for x in down_lines]
    took, rc = rules.terminate_and_time()
    print(f"rules: SIGTERM to exit {took:.2f}s")
    assert rc == 0 and took < STOP_LIMIT


class Proxy:
    """A TCP proxy to PostgreSQL that can stop forwarding (connections stay open: a hang)."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.forwarding = asyncio.Event()
        self.forwarding.set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await r.read(65536):
                    await self.forwarding.wait()
                    w.write(data)
                    await w.drain()
            with contextlib.suppress(Exception):
                w.close()

        with contextlib.suppress(BaseException):
            await asyncio.gather(pump(reader, uw), pump(ur, writer))

    async def close(self) -> None:
        self.forwarding.set()
        if self.server is not None:
            self.server.close()


async def test_readiness_follows_a_hung_database(spawn: Any) -> None:
    """court-lobby on PostgreSQL through a proxy that stops forwarding: readiness turns
    NOT_SERVING within 15 s (no connection is closed: only a timeout can tell), back to SERVING
    when the proxy forwards again; liveness stays SERVING."""
    pg = os.environ.get("COURT_TEST_POSTGRES_URL")
    if not pg:  # a skipped backend would pass for a tested one (tests/storage/db.py does the same)
        pytest.fail(
            "COURT_TEST_POSTGRES_URL is not set: make test starts a PostgreSQL server and sets it",
            pytrace=False,
        )
    from sqlalchemy.engine import make_url

    u = make_url(pg)
    proxy = Proxy((u.host or "127.0.0.1", u.port or 5432))
    await proxy.start()
    db = f"court_ready_{os.getpid()}_{free_port()}"
    import psycopg

    with psycopg.connect(
        u.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
    ) as admin:
        admin.execute(f"CREATE DATABASE {db}")
    url = u.set(drivername="postgresql+psycopg", host="127.0.0.1", port=proxy.port, database=db)
    lobby = spawn(
        "lobby", {"COURT_DATABASE_URL": url.render_as_string(hide_password=False), "COURT_ENV": "dev"}
    )
    try:
        async with channel(lobby.address) as ch:
            await wait_serving(ch)
            ready = HealthWatch(ch, "")
            await ready.until(SERVING, 10)
            t0 = time.monotonic()
            proxy.forwarding.clear()
            t_down = await ready.until(NOT_SERVING, FLIP_LIMIT)
            assert await status_of(ch, LIVENESS) == SERVING
            t1 = time.monotonic()
            proxy.forwarding.set()
            t_up = await ready.until(SERVING, FLIP_LIMIT)
            ready.cancel()
        print(
            f"\nlobby, PostgreSQL hung: NOT_SERVING after {t_down - t0:.1f}s, SERVING {t_up - t1:.1f}s after it "
            "answered again"
        )
        took, rc = lobby.terminate_and_time()
        print(f"lobby: SIGTERM to exit {took:.2f}s")
        assert rc == 0 and took < STOP_LIMIT
    finally:
        await proxy.close()
