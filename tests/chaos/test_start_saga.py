"""The lobby -> ranking link broken in the middle of the start saga (issue 33).

The whole online stack in process (tests/ranking/stack.py: real nats-server, rules, ranking and
lobby on a fresh PostgreSQL database) with the fault-injecting proxy (tests/chaos/proxy.py) between
the lobby and the ranking service, so every ranking call of the lobby (RegisterGame, which takes the
antes, and AbandonGame, which refunds them) crosses it. For each fault, two people open an online
Queen's Court lobby with an ante; the fault is set, the host asks StartGame, and the fault is healed
as soon as it has hit a ranking call (the proxy's own counters say so):

* ``partition``: the link down both ways (open connections reset, new ones refused);
* ``stall``: connections accepted, nothing forwarded until the heal (then what was held goes on);
* ``cut request``: the lobby's next bytes to ranking (RegisterGame's request) cut mid-message;
* ``cut answer``: ranking's next bytes to the lobby cut mid-message, on the connection a first
  start warmed: what ranking sends while the lobby waits on RegisterGame (its answer, or an HTTP/2
  frame just ahead of it; the proxy does not tell which);
* ``drop answers``: ranking's answers silently lost (one way) while its requests still arrive.

What a player sees: StartGame answers the started lobby (a game id), or UNAVAILABLE saying to retry
with the same request id, whose retry answers the started lobby; never a second game or a second
charge. The outcomes are printed. Then both people abandon the game with the same fault on the link
(the refund crosses it), and heal: the lobby's abandon sweep finishes it.

Checked after each: the lobby started one game with that id (its rules view exists); each person's
ante was charged exactly once and refunded exactly once (ledger entries read through the ranking
API, tests/chaos/history.check_ledger, balances back to the grant); at the end ``court admin audit``
(the console script) is clean.

The lobby's per-call deadline to ranking (court_lobby.clients.CALL_TIMEOUT, 15 s) is 2 s here so
that a lost answer costs seconds; the saga's sweep runs every 0.2 s (FAST_SAGA).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_lobby import clients as lobby_clients
from court_lobby.app import LobbyApp
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_rules.app import RulesApp

from tests.chaos.history import admin_audit, check_ledger, read_ledger
from tests.chaos.proxy import DOWN, UP, Proxy
from tests.lobby.test_stakes import eventually, qc_lobby
from tests.ranking.stack import Player, Stack, rid
from tests.storage.db import backend_url

pytestmark = [pytest.mark.integration]

ANTE = 100
OPENING = 1000
C = grpc.StatusCode


def _hit(proxy: Proxy, fault: str) -> Callable[[], int]:
    """A counter of the proxy that grows once ``fault`` has hit a ranking call."""
    return {
        "partition": lambda: proxy.refused,
        "stall": lambda: proxy.bytes[UP],
        "cut request": lambda: proxy.cuts,
        "cut answer": lambda: proxy.cuts,
        "drop answers": lambda: proxy.dropped[DOWN],
    }[fault]


def _set(proxy: Proxy, fault: str) -> None:
    if fault == "partition":
        proxy.partition()
    elif fault == "stall":
        proxy.stall()
    elif fault == "cut request":
        proxy.cut_mid_message(UP)
    elif fault == "cut answer":
        proxy.cut_mid_message(DOWN)
    elif fault == "drop answers":
        proxy.drop(DOWN)


FAULTS = ("partition", "stall", "cut request", "cut answer", "drop answers")


@pytest.fixture
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Stack, Proxy]]:
    monkeypatch.setattr(lobby_clients, "CALL_TIMEOUT", 2.0)
    for db in backend_url("postgresql", tmp_path):
        s = Stack(tmp_path, db)
        proxy: Proxy | None = None
        try:
            s.nats.start()
            s.rules = await RulesApp.start(s.settings("rules"))
            s.ranking = await s.start_ranking()
            proxy = await Proxy(int(s.ranking.address.rsplit(":", 1)[1]), "lobby>ranking").start()
            s.lobby = await LobbyApp.start(s.settings("lobby", ranking_addr=proxy.address))
            s.lobby_channel = s.channel(s.lobby.address)
            s.ranking_channel = s.channel(s.ranking.address)
            yield s, proxy
        finally:
            if proxy is not None:
                await proxy.close()
            await s.close()


async def _until_answered(call: Callable[[], Any], seen: list[str]) -> Any:
    """``call`` (its request id fixed) as a client makes it: retried on UNAVAILABLE or
    DEADLINE_EXCEEDED with the same request id; every answer's code is noted in ``seen``."""
    deadline = time.monotonic() + 90
    while True:
        try:
            answer = await call()
            seen.append("OK")
            return answer
        except grpc.aio.AioRpcError as err:
            seen.append(f"{err.code().name}: {err.details()}")
            if err.code() not in (C.UNAVAILABLE, C.DEADLINE_EXCEEDED) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _with_fault(proxy: Proxy, fault: str, call: Callable[[], Any], seen: list[str]) -> Any:
    """Set ``fault``, make ``call`` (retried as a client does), heal once the fault has hit."""
    hit = _hit(proxy, fault)
    before = hit()
    _set(proxy, fault)
    task = asyncio.ensure_future(_until_answered(call, seen))
    try:
        await eventually(lambda: _true(hit() > before or task.done()), f"{fault} hitting a ranking call", 60)
    finally:
        proxy.heal()
    return await task


async def _true(value: bool) -> bool:
    return value


async def test_a_broken_lobby_ranking_link_mid_start_charges_and_refunds_each_ante_once(
    stack: tuple[Stack, Proxy], tmp_path: Path
) -> None:
    s, proxy = stack
    people: list[Player] = []
    antes: dict[str, dict[str, int]] = {}
    outcomes: list[str] = []
    # a first start with no fault: the lobby's connection to ranking is open from here on
    warm = [await s.player("Warm Ann"), await s.player("Warm Ben")]
    lobby = await warm[0].call("CreateLobby", qc_lobby(ANTE, players=2))
    await warm[1].join(lobby.lobby_id)
    started = await warm[0].start(lobby.lobby_id)
    people += warm
    antes[started.game_id] = {p.id: ANTE for p in warm}
    games = [(started.game_id, warm)]
    for fault in FAULTS:
        pair = [await s.player(f"{fault} Ann"), await s.player(f"{fault} Ben")]
        people += pair
        lobby = await pair[0].call("CreateLobby", qc_lobby(ANTE, players=2))
        await pair[1].join(lobby.lobby_id)
        request = lpb.StartGameRequest(request_id=rid(), lobby_id=lobby.lobby_id)
        seen: list[str] = []
        started = await _with_fault(proxy, fault, lambda r=request, p=pair: p[0].call("StartGame", r), seen)
        # what the host sees: the started lobby, perhaps after UNAVAILABLE answers it retried
        assert started.state == lpb.LOBBY_STATE_STARTED and started.game_id, (fault, seen)
        assert all(x == "OK" or x.startswith("UNAVAILABLE") for x in seen), (fault, seen)
        if len(seen) > 1:
            assert "same request_id" in seen[0], (fault, seen)
        again = await pair[0].call("StartGame", request)  # the answer is kept for the request id
        assert again.game_id == started.game_id
        view = await pair[0].rules.get_view(started.game_id)
        assert not view.finished and len(view.seats) == 2
        assert [await p.balance() for p in pair] == [OPENING - ANTE] * 2, fault
        antes[started.game_id] = {p.id: ANTE for p in pair}
        games.append((started.game_id, pair))
        outcomes.append(f"{fault}: StartGame answered {' -> '.join(x.split(':')[0] for x in seen)}")

    # every game abandoned by both people, the refund crossing the faulty link, then healed
    for (gid, pair), fault in zip(games[1:], FAULTS, strict=True):
        await pair[0].call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=gid))
        last = lpb.AbandonGameRequest(request_id=rid(), game_id=gid)
        seen = []
        gone = await _with_fault(proxy, fault, lambda r=last, p=pair: p[1].call("AbandonGame", r), seen)
        assert gone.state == lpb.LOBBY_STATE_ABANDONED, (fault, seen)
        outcomes.append(
            f"{fault}: the last AbandonGame answered {' -> '.join(x.split(':')[0] for x in seen)}"
        )
    gid, pair = games[0]
    for p in pair:
        await p.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=gid))

    async def refunded() -> bool:
        return [await p.balance() for p in people] == [OPENING] * len(people)

    await eventually(refunded, "every ante refunded", 60)
    entries, balances = await read_ledger(s.ranking.address, [(p.id, p.token) for p in people])
    found = check_ledger(entries, balances, {p.id: OPENING for p in people}, antes, {})
    for gid, pair in games:  # charged once and refunded once, each (check_ledger: at most once)
        for p in pair:
            notes = sorted(e.note for e in entries if e.game_id == gid and e.player_id == p.id)
            assert notes == ["ante_paid", "ante_refunded"], (gid, p.name, notes)
    found += await admin_audit(s.ranking.address, s.lobby.address, tmp_path / "cfg", s.token("ops", "admin"))
    print(
        "\nlobby>ranking faults mid-saga: "
        + "; ".join(outcomes)
        + f"; proxy: {proxy.cuts} cut, {proxy.refused} refused"
    )
    assert found == []
