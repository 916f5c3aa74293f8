"""CancelLobby (issue 12's refund on cancel), end to end on SQLite and PostgreSQL with the real services.

* An open lobby: the host alone cancels it; it closes with the reason every member reads; a retried
  cancel (same request id, 50 at once) answers the same; nothing else can happen to it after.
* A lobby caught starting, at each step of the start saga: the start is undone, every ante taken is
  refunded once (keyed by the game id), a game the rules service already created is abandoned in
  ranking so it can never pay out, the pending StartGame answers FAILED_PRECONDITION with the reason,
  retries of both calls answer the same; the ledger audit passes after each.
* StartGame and CancelLobby sent at the same moment: exactly one of "started, antes taken once,
  cancel refused" or "closed, every ante back, start refused".
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from court_contract import actions as kactions
from court_lobby.saga import Faults
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_rules.app import RulesApp

from tests.ranking.stack import Stack, fails, rid

from .test_stakes import ANTE, balances, clean_audit, eventually, fifty, full_table, qc_lobby

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode


def cancel(lobby_id: str, reason: str = "", request_id: str | None = None) -> lpb.CancelLobbyRequest:
    return lpb.CancelLobbyRequest(request_id=request_id or rid(), lobby_id=lobby_id, reason=reason)


async def test_the_host_cancels_an_open_lobby_and_every_member_reads_why(stack: Stack):
    players, lid = await full_table(stack)
    host, guest = players[0], players[1]
    await fails(C.PERMISSION_DENIED, guest.call("CancelLobby", cancel(lid)), "only the lobby's host")
    await fails(C.INVALID_ARGUMENT, host.call("CancelLobby", cancel(lid, "x" * 201)), "at most 200")
    await fails(C.NOT_FOUND, host.call("CancelLobby", cancel("no-such-lobby")), "no lobby")
    seen = await guest.call("GetLobby", lpb.GetLobbyRequest(lobby_id=lid))
    assert seen.state == lpb.LOBBY_STATE_OPEN and not seen.start_error  # the refused calls changed nothing

    req = cancel(lid, "Cy has to go")
    done = await fifty(lambda: host.call("CancelLobby", req))  # 50 retries at once: one effect, one answer
    assert done.state == lpb.LOBBY_STATE_CLOSED and done.start_error == "cancelled by the host: Cy has to go"
    for p in players:
        seen = await p.call("GetLobby", lpb.GetLobbyRequest(lobby_id=lid))
        assert (seen.state, seen.start_error) == (
            lpb.LOBBY_STATE_CLOSED,
            "cancelled by the host: Cy has to go",
        )
    listed = await host.call("ListLobbies", lpb.ListLobbiesRequest(game="queens_court"))
    assert lid not in [x.lobby_id for x in listed.lobbies]
    again = await host.call("CancelLobby", req)  # later: the same answer
    assert again.SerializeToString(deterministic=True) == done.SerializeToString(deterministic=True)
    await fails(
        C.FAILED_PRECONDITION, host.call("CancelLobby", cancel(lid)), "only an open or starting lobby"
    )
    said = await fails(C.FAILED_PRECONDITION, host.start(lid), "was cancelled by the host: Cy has to go;")
    assert "already started" not in said, said  # no game was ever started here
    await fails(
        C.FAILED_PRECONDITION,
        players[2].call("LeaveLobby", lpb.LeaveLobbyRequest(request_id=rid(), lobby_id=lid)),
        "no longer open",
    )
    assert await balances(players) == [1000] * 3
    await clean_audit(stack)


class CancelAt(Faults):
    """At ``step`` of the start saga the host cancels the lobby (its own call, answered later); the
    saga goes on once the cancel's mark is on the lobby row."""

    def __init__(self, stack: Stack, host: Any, step: str, reason: str):
        self.stack, self.host, self.step, self.reason = stack, host, step, reason
        self.request = cancel("", reason)
        self.task: asyncio.Task | None = None
        self.game_id = ""

    async def _maybe(self, step: str, info: Any) -> None:
        if step != self.step or self.task is not None:
            return
        self.request.lobby_id, self.game_id = info.id, info.game_id
        self.task = asyncio.create_task(self.host.call("CancelLobby", self.request))

        async def marked() -> bool:
            row = await asyncio.to_thread(self.stack.lobby.store.lobby, info.id)
            return bool(row.start_error and row.start_error.startswith("cancelling: "))

        await eventually(marked, "the cancel's mark on the starting lobby")

    async def before_antes(self, info: Any) -> None:
        await self._maybe("before_antes", info)

    async def after_antes(self, info: Any) -> None:
        await self._maybe("after_antes", info)

    async def after_game(self, info: Any) -> None:
        await self._maybe("after_game", info)


@pytest.mark.parametrize(
    ("step", "ranked"), [("before_antes", "void"), ("after_antes", "abandoned"), ("after_game", "abandoned")]
)
async def test_a_cancel_racing_the_start_saga_refunds_every_ante_once_and_closes_the_lobby(
    stack: Stack, step: str, ranked: str
):
    players, lid = await full_table(stack)
    host = players[0]
    hook = CancelAt(stack, host, step, "wrong table")
    stack.lobby.starter.faults = hook
    start = lpb.StartGameRequest(request_id=rid(), lobby_id=lid)
    msg = await fails(
        C.FAILED_PRECONDITION, host.call("StartGame", start), "cancelled by the host: wrong table"
    )
    assert hook.task is not None
    closed = await hook.task
    assert (closed.state, closed.start_error, closed.game_id) == (
        lpb.LOBBY_STATE_CLOSED,
        "cancelled by the host: wrong table",
        "",
    )
    seen = await players[2].call("GetLobby", lpb.GetLobbyRequest(lobby_id=lid))
    assert (seen.state, seen.start_error) == (lpb.LOBBY_STATE_CLOSED, "cancelled by the host: wrong table")
    assert await balances(players) == [1000] * 3  # taken (after the antes) and refunded once, or never taken

    # the game id the saga fixed: ranking holds it as never paid out, whatever the rules service did
    kinds = sorted(
        e.reason for e in await asyncio.to_thread(stack.ranking.store.entries_of_game, hook.game_id)
    )
    assert (await asyncio.to_thread(stack.ranking.store.game_status, hook.game_id)) == ranked
    if ranked == "void":
        assert kinds == []  # cancelled before the antes: nothing taken, and a late registration takes nothing
    else:
        assert kinds == ["ante_paid"] * 3 + ["ante_refunded"] * 3
    if (
        step == "after_game"
    ):  # the rules service created it: closed there, so it takes no move; it stays unranked
        await assert_closed(players, hook.game_id)

    # retries of both calls, with their own request ids, answer the same
    assert await fails(C.FAILED_PRECONDITION, host.call("StartGame", start)) == msg
    again = await host.call("CancelLobby", hook.request)
    assert again.SerializeToString(deterministic=True) == closed.SerializeToString(deterministic=True)
    await clean_audit(stack)


async def assert_closed(players: list[Any], game_id: str) -> None:
    """The rules service's game is closed: every seat's view says so and why, a move is refused."""
    for p in players:
        view = await p.rules.get_view(game_id)
        assert view.game_id == game_id and view.finished and not view.to_act and not view.legal_actions
        assert "cancelled by the host" in view.result.closed_reason and not view.result.winners
        move = kactions.from_json("queens_court", {"type": "play", "card": "5H", "target": 0, "pile": "left"})
        msg = await fails(C.FAILED_PRECONDITION, p.rules.submit(game_id, move, view.your_seat), "was closed")
        assert "every ante is refunded" in msg


class RulesDownAtCancel(CancelAt):
    """After the game was created the rules service goes away; then the host cancels."""

    def __init__(self, stack: Stack, host: Any, reason: str):
        super().__init__(stack, host, "after_game", reason)
        self.rules_address = ""

    async def after_game(self, info: Any) -> None:
        if self.task is None:
            self.rules_address = self.stack.rules.address
            await self.stack.rules.kill()
        await super().after_game(info)


async def test_a_cancel_with_the_rules_service_away_refunds_only_once_the_game_is_closed(stack: Stack):
    """The cancel's undoing cannot close the game (the rules service is down): nothing is refunded,
    the lobby stays starting (cancelling); once the rules service is back the sweep closes the game,
    then refunds every ante once. A live game with its antes back never exists."""
    players, lid = await full_table(stack)
    host = players[0]
    hook = RulesDownAtCancel(stack, host, "wrong table")
    stack.lobby.starter.faults = hook
    start = lpb.StartGameRequest(request_id=rid(), lobby_id=lid)
    starting = asyncio.create_task(host.call("StartGame", start))
    await eventually(lambda: _marked(stack, lid), "the cancel's mark", timeout=60)
    drives = stack.lobby.starter.drives
    for _ in range(3):  # sweeps (every 0.2 s) and the waiting callers try again and again meanwhile
        await asyncio.sleep(1.0)
        info = await asyncio.to_thread(stack.lobby.store.lobby, lid)
        assert info.status == "starting" and info.game_id == hook.game_id, info
        assert await balances(players) == [1000 - ANTE] * 3  # the game may still be live: nothing back yet
        kinds = [e.reason for e in await asyncio.to_thread(stack.ranking.store.entries_of_game, hook.game_id)]
        assert kinds == ["ante_paid"] * 3
    assert stack.lobby.starter.drives == drives  # no drive ended the saga

    stack.rules = await RulesApp.start(stack.settings("rules", listen=hook.rules_address))
    await eventually(
        lambda: _status(stack.lobby.store, lid, ("cancelled",)), "the sweep undoing the start", timeout=60
    )
    assert hook.task is not None
    closed = await _answer(hook.task, host, "CancelLobby", hook.request)
    assert (closed.state, closed.start_error) == (
        lpb.LOBBY_STATE_CLOSED,
        "cancelled by the host: wrong table",
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _answer(starting, host, "StartGame", start)
    assert err.value.code() == C.FAILED_PRECONDITION and "cancelled by the host" in (
        err.value.details() or ""
    )
    await assert_closed(players, hook.game_id)
    assert await balances(players) == [1000] * 3
    kinds = sorted(
        e.reason for e in await asyncio.to_thread(stack.ranking.store.entries_of_game, hook.game_id)
    )
    assert kinds == ["ante_paid"] * 3 + ["ante_refunded"] * 3
    assert (await asyncio.to_thread(stack.ranking.store.game_status, hook.game_id)) == "abandoned"
    await clean_audit(stack)


async def _marked(stack: Stack, lobby_id: str) -> bool:
    row = await asyncio.to_thread(stack.lobby.store.lobby, lobby_id)
    return bool(row.start_error and row.start_error.startswith("cancelling: "))


async def _answer(task: asyncio.Task, player: Any, method: str, request: Any) -> Any:
    """The call's answer; one that gave up waiting (UNAVAILABLE) is retried as a client would: the
    same request id."""
    try:
        return await task
    except grpc.aio.AioRpcError as err:
        if err.code() != C.UNAVAILABLE:
            raise
    return await player.call(method, request)


async def test_start_game_and_cancel_lobby_sent_together_end_in_exactly_one_outcome(stack: Stack):
    """No fault hook: the two calls race as two clients would send them. The cancel goes out at
    once, once the lobby is starting, once ranking holds the game, and after the start's answer
    (the last must be refused: the game has started)."""
    players, lid = await full_table(stack)
    started_games = 0
    outcomes = []
    store, ranking = stack.lobby.store, stack.ranking.store
    host = players[0]
    for when in ("at_once", "starting", "registered", "after"):
        if outcomes:
            lobby = await players[0].call("CreateLobby", qc_lobby())
            for p in players[1:]:
                await p.join(lobby.lobby_id)
            lid = lobby.lobby_id

        async def cancel_when(lid: str = lid, when: str = when) -> Any:
            if when == "starting":
                await eventually(lambda: _status(store, lid, ("starting", "started")), "the lobby starting")
            elif when == "registered":

                async def registered() -> bool:
                    info = await asyncio.to_thread(store.lobby, lid)
                    return info.status == "started" or bool(
                        info.game_id and await asyncio.to_thread(ranking.game_status, info.game_id)
                    )

                await eventually(registered, "ranking holding the game")
            return await host.call("CancelLobby", cancel(lid, f"cancel {when}"))

        if when == "after":
            s = await host.start(lid)
            c = await asyncio.gather(cancel_when(), return_exceptions=True)
            c = c[0]
        else:
            s, c = await asyncio.gather(host.start(lid), cancel_when(), return_exceptions=True)
        info = await asyncio.to_thread(store.lobby, lid)
        if isinstance(s, lpb.Lobby):
            assert isinstance(c, grpc.aio.AioRpcError) and c.code() == C.FAILED_PRECONDITION, c
            assert "started" in (c.details() or "")
            assert s.state == lpb.LOBBY_STATE_STARTED and info.status == "started"
            assert (await asyncio.to_thread(ranking.game_status, s.game_id)) == "active"
            started_games += 1
            outcomes.append((when, "started"))
        else:
            assert isinstance(s, grpc.aio.AioRpcError) and s.code() == C.FAILED_PRECONDITION, s
            assert isinstance(c, lpb.Lobby) and c.state == lpb.LOBBY_STATE_CLOSED, c
            # the start lost to the cancel: it says so, whether the lobby was still open when the
            # start read it or the cancel committed between that read and the start's update
            assert info.status == "cancelled" and "was cancelled by the host" in (s.details() or ""), s
            outcomes.append((when, "cancelled"))
        assert await balances(players) == [1000 - ANTE * started_games] * 3, outcomes
        await clean_audit(stack)
    assert outcomes[-1] == ("after", "started")
    print("outcomes:", outcomes)


async def _status(store: Any, lobby_id: str, statuses: tuple[str, ...]) -> bool:
    return (await asyncio.to_thread(store.lobby, lobby_id)).status in statuses


async def test_court_lobby_cancel_closes_the_hosts_lobby_and_prints_why(stack: Stack, tmp_path):
    """The CLI as a host uses it: signed in with `court login`, `court lobby cancel LOBBY --reason`."""
    import subprocess
    import sys
    from pathlib import Path

    players, lid = await full_table(stack)
    court = str(Path(sys.executable).parent / "court")
    env = {
        "COURT_RANKING_ADDR": stack.ranking.address,
        "COURT_LOBBY_ADDR": stack.lobby.address,
        "COURT_RULES_ADDR": stack.rules.address,
        "COURT_CONFIG_DIR": str(tmp_path / "cfg"),
        "PATH": "/usr/bin:/bin",
    }

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([court, "--plain", *args], env=env, capture_output=True, text=True, timeout=120)

    def as_player(name: str) -> None:
        signed = run("login", name, "--password", "correct horse battery")
        assert signed.returncode == 0, signed.stdout + signed.stderr

    await asyncio.to_thread(as_player, players[1].name)
    refused = await asyncio.to_thread(run, "lobby", "cancel", lid)
    assert refused.returncode != 0 and "only the lobby's host" in refused.stdout + refused.stderr
    await asyncio.to_thread(as_player, players[0].name)
    done = await asyncio.to_thread(run, "lobby", "cancel", lid, "--reason", "see you tomorrow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cancelled by the host: see you tomorrow" in done.stdout, done.stdout
    seen = await players[2].call("GetLobby", lpb.GetLobbyRequest(lobby_id=lid))
    assert (seen.state, seen.start_error) == (
        lpb.LOBBY_STATE_CLOSED,
        "cancelled by the host: see you tomorrow",
    )
