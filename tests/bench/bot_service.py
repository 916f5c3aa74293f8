"""Bot decision latency through the bot service, per game and level, against the level budgets.

A real nats-server and the rules service (``python -m court_rules``) run as their own processes on
loopback, the bot service in this process (so its decision timings can be read), with the
production budgets (``court_bots.levels.DEFAULT_BUDGET_MS``, or COURT_BOT_BUDGET_<LEVEL>_MS).

* ``suggest``: hot-seat games (every seat one benchmark player) are played to the end on the
  bot's own suggestions: at every position the player asks ``Suggest`` at the level under test
  and plays the answer, so the positions are the ones that level reaches. Per game and level:
  the bot's thinking time as the service measures it (``decide``: the figure the budget bounds,
  also the ``court_bot_decision_seconds`` histogram) and the whole ``Suggest`` call as the client
  sees it (``rpc``: the view read from the rules service, the decision, the answer), median and
  p99 in milliseconds.
* ``turns``: one all-bot game per game (every level at the table) played by the turn consumer:
  moves per second end to end (TurnStarted event, view, decision, submit, next event) and the
  per-level p99 of the decisions it made.

The figure to watch is ``decide p99`` (wall clock) against ``budget``: it must stay under it.
``cpu p99`` is the deciding thread's CPU time: when the wall figure is far above it, the process
waited for a core (a loaded machine) or for the GIL (this process also runs the rules service),
not the bot thinking too long. The load average printed with the table says which.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from court_bot.app import BotApp
from court_bot.config import BotConfig
from court_bots.levels import LEVELS
from court_client import RulesClient
from court_games.registry import GAME_NAMES
from court_kit import logging as klog
from court_kit.settings import Settings
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats

SAMPLES = 150  # suggestions per game and level
OPTIONS: dict[str, tuple[dict[str, Any], int]] = {
    "queens_court": ({"players": 4}, 4),
    "hearts": ({"limit": 50}, 4),
    "the_court": ({"mode": "free_gift"}, 2),
    "court_wars": ({"players": 3, "turn_limit": 60}, 3),
}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def settings(service: str, nats_url: str, **kw: Any) -> Settings:
    # the environment's COURT_BOT_* settings apply (budgets, decision threads); the rest is ours
    return Settings.load(
        service,
        None,
        nats_url=nats_url,
        listen="127.0.0.1:0",
        metrics_listen="",
        env="bench",
        **{**keys.overrides(service), **kw},
    )


async def suggest_samples(
    bot: BotApp, rules: RulesClient, hint: Any, token_md: Any, game: str, level: str, samples: int
) -> tuple[list[tuple[float, float]], list[float]]:
    options, n = OPTIONS[game]
    bot.decider.recent[(game, level)].clear()
    rpc: list[float] = []
    games = 0
    while len(rpc) < samples:
        created = await rules.create_game(game, ["bench"] * n, options, request_id=f"{game}-{level}-{games}")
        games += 1
        view = created.view
        gid = created.game_id
        while not view.finished and len(rpc) < samples:
            seat = view.to_act[0]
            t0 = time.perf_counter()
            reply = await hint.Suggest(
                bot_pb2.SuggestRequest(game_id=gid, seat=seat, level=level), metadata=token_md, timeout=10
            )
            rpc.append(time.perf_counter() - t0)
            played = await rules.submit(gid, reply.action, seat)
            # the views of the seats now to act come with the answer (every seat is ours)
            view = played.next[0] if played.next else played.view
    decide = list(bot.decider.recent[(game, level)])
    return decide, rpc


async def turn_game(stack_bot: BotApp, lobby: RulesClient, game: str) -> tuple[int, float, dict[str, float]]:
    options, n = OPTIONS[game]
    for lv in LEVELS:
        stack_bot.decider.recent[(game, lv)].clear()
    seats = [f"bot:{LEVELS[::-1][i % len(LEVELS)]}" for i in range(n)]
    t0 = time.perf_counter()
    created = await lobby.create_game(game, seats, options, request_id=f"turns-{game}")
    final = None
    async for update in lobby.watch(created.game_id):
        if update.view.finished:
            final = update.view
            break
    elapsed = time.perf_counter() - t0
    assert final is not None
    p99 = {
        lv: pct([w for w, _c in stack_bot.decider.recent[(game, lv)]], 0.99) * 1000
        for lv in LEVELS
        if stack_bot.decider.recent[(game, lv)]
    }
    return final.seq, elapsed, p99


async def run(samples: int = SAMPLES) -> None:
    games = [g for g in GAME_NAMES if importlib.util.find_spec(f"court_bots.games.{g}") is not None]
    with tempfile.TemporaryDirectory() as tmp:
        nats = BinaryNats(Path(tmp) / "nats")
        nats.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                await measure(stack, nats.url, games, samples)
        finally:
            nats.stop()


class RulesProcess:
    """``python -m court_rules`` in its own process, as deployed (not sharing the bot's GIL)."""

    def __init__(self, nats_url: str):
        env = {
            **os.environ,
            "COURT_NATS_URL": nats_url,
            "COURT_LISTEN": "127.0.0.1:0",
            "COURT_METRICS_LISTEN": "",
            **keys.env("rules"),
            "COURT_ENV": "bench",
            "COURT_LOG_LEVEL": "info",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "court_rules"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.address = ""

    def wait_listening(self, timeout: float = 30.0) -> str:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        for line in self.proc.stderr:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("event") == "rules service listening":
                self.address = f"127.0.0.1:{rec['port']}"
                # keep draining its log so it never blocks on a full pipe
                threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
                return self.address
            if time.monotonic() > deadline:
                break
        raise RuntimeError("court-rules did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def measure(stack: contextlib.AsyncExitStack, nats_url: str, games: list[str], samples: int) -> None:
    """Everything started here is stopped by ``stack``, however the run ends."""
    rules = RulesProcess(nats_url)
    stack.callback(rules.stop)
    rules_addr = await asyncio.to_thread(rules.wait_listening)
    bot_settings = settings("bot", nats_url, rules_addr=rules_addr)
    config = BotConfig.from_settings(bot_settings)
    suggest_bot = await BotApp.start(
        bot_settings, config=BotConfig.from_settings(bot_settings, consume=False)
    )
    stack.push_async_callback(suggest_bot.kill)
    player = RulesClient(rules_addr, keys.token("bench", "player"))
    stack.push_async_callback(player.close)
    channel = grpc.aio.insecure_channel(suggest_bot.address)
    stack.push_async_callback(channel.close)
    hint = bot_pb2_grpc.BotServiceStub(channel)
    md = (("authorization", f"Bearer {keys.token('bench', 'player')}"),)
    print(
        f"suggest: {samples} positions per game and level, budgets {config.budgets_ms} ms; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"{'game':<13}{'level':<10}{'budget':>7}{'decide p50':>12}{'decide p99':>12}{'cpu p99':>9}"
        f"{'rpc p50':>9}{'rpc p99':>9}  p99 < budget"
    )
    for game in games:
        for level in LEVELS:
            decide, rpc = await suggest_samples(suggest_bot, player, hint, md, game, level, samples)
            budget = config.budgets_ms[level]
            wall = [w for w, _c in decide]
            d50, d99 = statistics.median(wall) * 1000, pct(wall, 0.99) * 1000
            c99 = pct([c for _w, c in decide], 0.99) * 1000
            r50, r99 = statistics.median(rpc) * 1000, pct(rpc, 0.99) * 1000
            print(
                f"{game:<13}{level:<10}{budget:>7.1f}{d50:>12.2f}{d99:>12.2f}{c99:>9.2f}{r50:>9.2f}"
                f"{r99:>9.2f}  {'yes' if d99 < budget else 'NO'}"
            )
    turn_bot = await BotApp.start(bot_settings, config=config)
    stack.push_async_callback(turn_bot.kill)
    lobby = RulesClient(rules_addr, keys.token("lobby", "service"))
    stack.push_async_callback(lobby.close)
    print("turns: one all-bot game per game, levels round the table")
    for game in games:
        moves, elapsed, p99 = await turn_game(turn_bot, lobby, game)
        levels = ", ".join(f"{lv} p99 {ms:.1f} ms" for lv, ms in p99.items())
        print(f"{game:<13}{moves:>5} moves in {elapsed:6.2f} s = {moves / elapsed:7.1f} moves/s; {levels}")


def main() -> None:
    klog.configure_logging("bench", "console", "warning")
    asyncio.run(run())


if __name__ == "__main__":
    main()
