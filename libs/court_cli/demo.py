"""What ``make run`` shows: a Queen's Court game of bots, watched live as a spectator.

Everything goes through the public gRPC APIs with ordinary player accounts; no privileged token:

* a "Demo Autopilot" account creates a private local lobby for four, seats three bots (the bot
  service plays them) and starts it. The lobby seats its host, so the host's seat is played by
  the autopilot: on each of its turns it asks the bot service's ``Suggest`` for a move (the same
  bot, reading only that seat's view) and submits it, keeping pace with the screen;
* a "Demo Watcher" account, seated nowhere, watches through ``WatchGame`` and so sees the
  spectator's view (no hands), drawn by ``Spectator``.

The accounts' passwords are kept in ``<state>/demo.json``. A game left unfinished (Ctrl-C) is
found again through the lobby's ``ListMyGames`` on the next start and played on from where it
stopped: the game lives in JetStream, the lobby's records in SQLite, both under ``<state>/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from court_proto.court.rules.v1 import rules_pb2
from rich.console import Console

from .session import CliError, Court, Endpoints, explain
from .watch import Spectator

DEMO_FILE = "demo.json"
DEMO_GAME = "queens_court"
DEMO_OPTIONS = {"players": 4}
ACCOUNTS = {"host": "Demo Autopilot", "watcher": "Demo Watcher"}
DEMO_TURN_SECONDS = 30  # a turn clock, so the screen shows a countdown (docs/clock.md)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save(path: Path, data: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)


async def demo_account(endpoints: Endpoints, state_dir: Path, role: str) -> Court:
    """Signed in as the demo's ``role`` account, created on the first run."""
    path = state_dir / DEMO_FILE
    data = _load(path)
    court = Court(endpoints)
    known = data.get(role)
    if known:
        try:
            court.adopt(await court.lobby.login(known["name"], known["password"]))
            return court
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.UNAUTHENTICATED:
                await court.close()
                raise CliError(explain(err, "lobby", endpoints.lobby)) from None
    password = secrets.token_urlsafe(18)
    for name in (ACCOUNTS[role], *(f"{ACCOUNTS[role]} {secrets.token_hex(2)}" for _ in range(5))):
        try:
            auth = await court.lobby.create_account(name, password)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.ALREADY_EXISTS:
                continue
            await court.close()
            raise CliError(explain(err, "lobby", endpoints.lobby)) from None
        court.adopt(auth)
        data[role] = {"name": name, "password": password, "player_id": auth.account.player_id}
        _save(path, data)
        return court
    await court.close()
    raise CliError("could not create a demo account: every name tried is taken")


async def find_or_start_game(host: Court, level: str) -> tuple[str, bool]:
    """The host's unfinished demo game (``True``: resumed), or a new one started through the lobby."""
    mine = await host.call(host.lobby.my_games)
    for g in mine.games:
        if g.game == DEMO_GAME:
            return g.game_id, True
    room = await host.call(
        host.lobby.create_lobby,
        DEMO_GAME,
        DEMO_OPTIONS,
        online=False,
        private=True,
        turn_seconds=DEMO_TURN_SECONDS,
        time_bank_seconds=0,
    )
    for _ in range(len(room.seats) - 1):
        room = await host.call(host.lobby.set_bot, room.lobby_id, level)
    room = await host.call(host.lobby.start, room.lobby_id)
    return room.game_id, False


async def autopilot(host: Court, game_id: str, spectator: Spectator, level: str) -> None:
    """Play the host's seat with the bot service's suggestions, never ahead of the screen."""
    async for update in host.rules.watch(game_id):
        view = update.view
        if view.finished:
            return
        seat = view.your_seat
        if seat not in view.to_act or not view.legal_actions:
            continue
        await spectator.wait_shown(view.seq)
        try:
            hint = await host.bot.suggest(game_id, seat, level, timeout=10, view=view)
            act = hint.action
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.FAILED_PRECONDITION:
                continue  # the position moved on meanwhile
            act = view.legal_actions[0]  # the bot service is away: any legal move keeps the demo going
        try:
            await host.rules.submit(game_id, act, seat, request_id=f"demo-{game_id}-{view.seq}")
        except grpc.aio.AioRpcError as err:
            if err.code() not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
                raise


async def run_demo(
    endpoints: Endpoints,
    state_dir: Path,
    console: Console,
    fancy: bool,
    *,
    pace: float,
    games: int,
    level: str = "heuristic",
    footer: str = "",
    on_game: Callable[[str, bool], None] | None = None,
) -> None:
    """Play ``games`` demo games one after another (0: until stopped)."""
    host = await demo_account(endpoints, state_dir, "host")
    watcher = await demo_account(endpoints, state_dir, "watcher")
    try:
        played = 0
        while games == 0 or played < games:
            if played:  # tokens live an hour and the stack may run for days: fresh ones for each game
                await host.close()
                await watcher.close()
                host = await demo_account(endpoints, state_dir, "host")
                watcher = await demo_account(endpoints, state_dir, "watcher")
            game_id, resumed = await find_or_start_game(host, level)
            if on_game is not None:
                on_game(game_id, resumed)
            if resumed:
                view: rules_pb2.GameView = await host.call(host.rules.get_view, game_id)
                console.print(f"Resuming the demo game {game_id} (Queen's Court, saved at move {view.seq}).")
            else:
                console.print(
                    f"New demo game {game_id}: Queen's Court for four, three bots and the autopilot "
                    "(bot hints), watched as a spectator."
                )
            spectator = Spectator(console, fancy, pace=pace, title="Demo: Queen's Court", footer=footer)
            pilot = asyncio.create_task(autopilot(host, game_id, spectator, level))
            try:
                await spectator.run(watcher, game_id)
            finally:
                if not pilot.done():
                    pilot.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pilot
            played += 1
            if games == 0 or played < games:
                console.print("Next demo game in a few seconds…")
                await asyncio.sleep(5)
    finally:
        await host.close()
        await watcher.close()
