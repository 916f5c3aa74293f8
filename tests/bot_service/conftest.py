"""Fixtures for the bot service: a real nats-server, a real rules service and bot replicas on port 0."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_bot.app import BotApp
from court_bot.config import BotConfig
from court_client import RulesClient
from court_games.registry import GAME_NAMES
from court_kit.settings import Settings
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2
from court_rules.app import RulesApp

from tests.fixtures import keys
from tests.fixtures.nats import make_nats

# Test budgets: shorter than production so whole games stay quick; the bench measures the real ones.
TEST_BUDGETS = {"random": 5.0, "heuristic": 20.0, "expert": 15.0}
ACK_WAIT = 1.0  # seconds before a dead replica's turn goes to another one

# one option set per game (seat counts follow the options)
GAMES: list[tuple[str, dict[str, Any], int]] = [
    ("queens_court", {"players": 3}, 3),
    ("hearts", {"limit": 20}, 4),
    ("the_court", {"mode": "free_gift"}, 2),
    ("court_wars", {"players": 3, "turn_limit": 60}, 3),
]


def has_adapter(game: str) -> bool:
    return importlib.util.find_spec(f"court_bots.games.{game}") is not None


def adapter_games() -> list[str]:
    return [g for g in GAME_NAMES if has_adapter(g)]


def qc(level: str) -> str:
    """A Queen's Court bot seat at ``level`` if this build has the adapter, else ``bot:random``.

    The service tests that use these are about turns, replicas and redelivery, not the level.
    """
    return f"bot:{level if has_adapter('queens_court') else 'random'}"


def bot_seats(game: str, n: int) -> list[str]:
    """Every level the build plays ``game`` at, round the table (random only without an adapter)."""
    levels = ["expert", "heuristic", "random"] if has_adapter(game) else ["random"]
    return [f"bot:{levels[i % len(levels)]}" for i in range(n)]


def token(sub: str, role: str = "player", ttl: float = 3600) -> str:
    return keys.token(sub, role, ttl)


def settings_for(service: str, nats_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "nats_url": nats_url,
        "listen": "127.0.0.1:0",
        "metrics_listen": "",
        **keys.overrides(service),
        "env": "test",
        "shutdown_grace": 1.0,
        **overrides,
    }
    return Settings.load(service, {}, **values)


class BotClient:
    """The BotService stub with one caller's token."""

    def __init__(self, address: str, tok: str | None):
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = bot_pb2_grpc.BotServiceStub(self.channel)
        self.token = tok

    async def suggest(
        self,
        game_id: str,
        seat: int | None = None,
        level: str = "",
        *,
        timeout: float | None = 10.0,
        view: rules_pb2.GameView | None = None,
    ) -> bot_pb2.SuggestResponse:
        req = bot_pb2.SuggestRequest(game_id=game_id, level=level)
        if seat is not None:
            req.seat = seat
        if view is not None:
            req.view.CopyFrom(view)
        md = (("authorization", f"Bearer {self.token}"),) if self.token is not None else ()
        return await self.stub.Suggest(req, metadata=md, timeout=timeout)

    async def close(self) -> None:
        await self.channel.close()


class BotProcess:
    """The ``court-bot`` console script as a child process (a replica that can really be SIGKILLed)."""

    def __init__(self, env: dict[str, str]):
        script = Path(sys.executable).parent / "court-bot"
        assert script.exists(), "court-bot is not installed: run `make setup`"
        self.proc = subprocess.Popen(
            [str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.port = 0
        self.log = b""

    def wait_listening(self, timeout: float = 30.0) -> int:
        """Block until the process logs that it listens (its JSON log line names the port)."""
        import json

        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log.splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("event") == "bot service listening":
                    self.port = int(rec["port"])
                    return self.port
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"court-bot did not start: {self.log.decode(errors='replace')[-3000:]}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                self.log += os.read(fd, 65536)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit code (its log is read to the end)."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.stderr is not None
        self.log += self.proc.stderr.read()
        return self.proc.wait(timeout)

    def close(self) -> None:
        self.kill()
        if self.proc.stderr:
            self.proc.stderr.close()


class Stack:
    """One test's services: a rules replica, bot replicas, clients; everything closed at the end."""

    def __init__(self, nats: Any):
        self.nats = nats
        self.rules: RulesApp | None = None
        self.bots: list[BotApp] = []
        self.processes: list[BotProcess] = []
        self.clients: list[Any] = []

    async def start_rules(self, **settings: Any) -> RulesApp:
        self.rules = await RulesApp.start(settings_for("rules", self.nats.url, **settings))
        return self.rules

    async def start_bot(
        self, name: str = "", *, settings: dict[str, Any] | None = None, **config: Any
    ) -> BotApp:
        """A bot replica; ``settings`` override the environment's, ``config`` the bot's own (BotConfig)."""
        values = {"rules_addr": self.rules.address} if self.rules is not None else {}
        values.update(settings or {})
        settings_obj = settings_for("bot", self.nats.url, **values)
        kw = {k: config.pop(k) for k in ("faults", "adapters") if k in config}
        cfg = BotConfig.from_settings(
            settings_obj,
            **{"budgets_ms": dict(TEST_BUDGETS), "ack_wait": ACK_WAIT, "retry_delay": 1.0, **config},
        )
        app = await BotApp.start(settings_obj, config=cfg, name=name or f"bot{len(self.bots)}", **kw)
        self.bots.append(app)
        return app

    async def start_bot_process(self, **env: str) -> BotProcess:
        assert self.rules is not None
        full = {
            **os.environ,
            "COURT_NATS_URL": self.nats.url,
            "COURT_LISTEN": "127.0.0.1:0",
            "COURT_RULES_ADDR": self.rules.address,
            **keys.env("bot"),
            "COURT_ENV": "test",
            "COURT_METRICS_LISTEN": "",
            "COURT_BOT_ACK_WAIT": str(ACK_WAIT),
            "COURT_LOG_FORMAT": "json",
            "COURT_LOG_LEVEL": "info",  # wait_listening reads the JSON log
            "COURT_BOT_BUDGET_EXPERT_MS": str(TEST_BUDGETS["expert"]),
            **env,
        }
        p = BotProcess(full)
        self.processes.append(p)
        await asyncio.to_thread(p.wait_listening)
        return p

    def rules_client(self, sub: str, role: str = "player", **kw: Any) -> RulesClient:
        assert self.rules is not None
        c = RulesClient(self.rules.address, token(sub, role), **kw)
        self.clients.append(c)
        return c

    def bot_client(
        self, app: BotApp, sub: str | None, role: str = "player", *, raw: str | None = None
    ) -> BotClient:
        c = BotClient(
            app.address, raw if raw is not None else (token(sub, role) if sub is not None else None)
        )
        self.clients.append(c)
        return c

    async def close(self) -> None:
        for c in self.clients:
            await c.close()
        for p in self.processes:
            p.close()
        for app in self.bots:  # abrupt is fine here (and quick); graceful stops have their own test
            try:
                await app.kill()
            except Exception:  # noqa: BLE001 - already killed
                pass
        if self.rules is not None:
            await self.rules.stop(0)


@pytest.fixture
def nats_server(tmp_path: Path) -> Any:
    server = make_nats(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def bare_stack(nats_server: Any) -> AsyncIterator[Stack]:
    """NATS only: the test starts the services in the order it wants."""
    s = Stack(nats_server)
    yield s
    await s.close()


@pytest.fixture
async def stack(bare_stack: Stack) -> Stack:
    await bare_stack.start_rules()
    return bare_stack


async def wait_finished(client: RulesClient, game_id: str, timeout: float = 60.0) -> rules_pb2.GameView:
    """Watch the game (as ``client`` sees it) until its final move; no polling, no sleeps."""

    async def watch() -> rules_pb2.GameView:
        last = None
        async for update in client.watch(game_id):
            last = update.view
            if update.view.finished:
                return update.view
        assert last is not None
        return last

    try:
        return await asyncio.wait_for(watch(), timeout)
    except TimeoutError:
        view = await client.get_view(game_id)
        raise AssertionError(
            f"game {game_id} did not finish within {timeout}s (at move {view.seq}, "
            f"to act {list(view.to_act)})"
        ) from None


async def wait_seq(client: RulesClient, game_id: str, seq: int, timeout: float = 30.0) -> rules_pb2.GameView:
    """Watch until the game has reached move ``seq`` (or ended)."""

    async def watch() -> rules_pb2.GameView:
        async for update in client.watch(game_id):
            if update.view.seq >= seq or update.view.finished:
                return update.view
        raise AssertionError("the watch ended early")

    return await asyncio.wait_for(watch(), timeout)
