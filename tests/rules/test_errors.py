"""Every status code of the rules service, each leaving the game exactly as it was."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from court_client import RulesClient, action, action_json, view_dict
from court_kit.tokens import Signer, issue_token
from court_proto.court.rules.v1 import actions_pb2, rules_pb2

from tests.fixtures import keys

PLAYERS = ["alice", "bob", "carol"]


async def _code(coro: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await coro
    return info.value.code(), info.value.details()


@pytest.fixture
async def table(replicas: Any, rules: Any) -> dict[str, Any]:
    lobby = replicas.client(rules, "lobby", "service")
    created = await lobby.create_game("queens_court", PLAYERS, {"players": 3})
    c = {p: replicas.client(rules, p, retries=0) for p in PLAYERS}
    admin = replicas.client(rules, "root", "admin")
    return {"gid": created.game_id, "lobby": lobby, "admin": admin, **c}


async def _snapshot(t: dict[str, Any]) -> tuple[int, dict, list]:
    h = await t["admin"].history(t["gid"])
    return len(h.moves), view_dict(await t["admin"].get_view(t["gid"])), [list(m.events) for m in h.moves]


async def test_unauthenticated(replicas: Any, rules: Any, table: dict[str, Any]) -> None:
    gid = table["gid"]
    before = await _snapshot(table)
    for bad in ["", "not-a-jwt", issue_token(Signer.generate("court-lobby"), "alice", "player"),
                issue_token(keys.LOBBY, "alice", "player", ttl=10, now=time.time() - 3600)]:
        c = RulesClient(rules.address, bad, retries=0)
        replicas.clients.append(c)
        code, msg = await _code(c.get_view(gid))
        assert code == grpc.StatusCode.UNAUTHENTICATED, msg
        legal = (await table["alice"].get_view(gid)).legal_actions
        code, msg = await _code(c.submit(gid, legal[0]))
        assert code == grpc.StatusCode.UNAUTHENTICATED and msg
    # no metadata at all
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await table["alice"].stub.GetView(rules_pb2.GetViewRequest(game_id=gid))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "authorization" in info.value.details()
    assert await _snapshot(table) == before


async def test_invalid_argument(replicas: Any, rules: Any, table: dict[str, Any]) -> None:
    gid, alice = table["gid"], table["alice"]
    before = await _snapshot(table)
    lobby0 = replicas.client(rules, "lobby", "service", retries=0)
    for coro, needle in [
        (lobby0.create_game("poker", PLAYERS), "unknown game"),
        (lobby0.create_game("queens_court", PLAYERS, {"players": 9}), "players"),
        (lobby0.create_game("queens_court", PLAYERS, {"colour": "red"}), "unknown option"),
        (lobby0.create_game("queens_court", ["a", "b"], {"players": 3}), "seats 3 players"),
        (lobby0.create_game("queens_court", ["a", "", "c"], {"players": 3}), "seat id"),
        (lobby0.create_game("queens_court", PLAYERS, {"players": 3}, request_id=""), "request_id"),
    ]:
        if needle == "request_id":
            req = rules_pb2.CreateGameRequest(game="queens_court", seats=PLAYERS)
            coro.close()
            coro = lobby0.stub.CreateGame(req, metadata=lobby0.metadata())
        code, msg = await _code(coro)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (needle, code, msg)
        assert needle in msg, (needle, msg)
    legal = (await alice.get_view(gid)).legal_actions
    assert legal
    for req, needle in [
        (rules_pb2.SubmitActionRequest(game_id=gid, action=legal[0]), "request_id"),
        (rules_pb2.SubmitActionRequest(game_id=gid, request_id="r1"), "action is required"),
        (rules_pb2.SubmitActionRequest(game_id=gid, request_id="r2", action=action("hearts", {"type": "play",
                                                                                               "card": "2C"})),
         "hearts action"),
        (rules_pb2.SubmitActionRequest(game_id=gid, request_id="r3", action=action(
            "queens_court", {"type": "play", "card": "ZZ", "target": 0, "pile": "left"})), "unknown card"),
        (rules_pb2.SubmitActionRequest(game_id=gid, request_id="r4", action=actions_pb2.Action(
            queens_court=actions_pb2.QueensCourtAction())), "no action type"),
        (rules_pb2.SubmitActionRequest(game_id=gid, request_id="r5", seat=7, action=legal[0]), "seat 7"),
    ]:
        code, msg = await _code(alice.stub.SubmitAction(req, metadata=alice.metadata()))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (needle, code, msg)
        assert needle in msg, (needle, msg)
    assert await _snapshot(table) == before


async def test_failed_precondition(table: dict[str, Any]) -> None:
    gid, alice, bob = table["gid"], table["alice"], table["bob"]
    before = await _snapshot(table)
    view = await alice.get_view(gid)
    assert list(view.to_act) == [0]
    # bob plays alice's legal move form in his own seat: not his turn
    code, msg = await _code(bob.submit(gid, view.legal_actions[0]))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and msg
    # alice plays a card she does not hold
    # (in the first half any held card may go on any pile, so a card missing from the legal list is not held)
    cards = [r + s for s in "CDHS" for r in "23456789TJQKA"]
    missing = next(c for c in cards if c not in {action_json(a)["card"] for a in view.legal_actions})
    code, msg = await _code(alice.submit(gid, action("queens_court", {"type": "play", "card": missing, "target": 0,
                                                                      "pile": "left"})))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and msg
    assert await _snapshot(table) == before


async def test_not_found(table: dict[str, Any]) -> None:
    alice, admin = table["alice"], table["admin"]
    before = await _snapshot(table)
    legal = (await alice.get_view(table["gid"])).legal_actions
    for coro in [alice.get_view("gnosuchgame"), alice.legal_actions("gnosuchgame"),
                 alice.submit("gnosuchgame", legal[0]), admin.history("gnosuchgame"),
                 alice.get_view("bad id with spaces")]:
        code, msg = await _code(coro)
        assert code == grpc.StatusCode.NOT_FOUND, msg
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in alice.watch("gnosuchgame", resume=False):
            pass
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert await _snapshot(table) == before


async def test_permission_denied(replicas: Any, rules: Any, table: dict[str, Any]) -> None:
    gid, alice, bob, lobby = table["gid"], table["alice"], table["bob"], table["lobby"]
    before = await _snapshot(table)
    legal = (await alice.get_view(gid)).legal_actions
    bot = replicas.client(rules, "bots", "bot", retries=0)
    analytics = replicas.client(rules, "bi", "analytics", retries=0)
    mallory = replicas.client(rules, "mallory", retries=0)
    checks = [
        bob.submit(gid, legal[0], seat=0),  # alice's seat
        bob.get_view(gid, seat=0),
        bob.legal_actions(gid, seat=0),
        mallory.submit(gid, legal[0]),  # no seat at all
        mallory.legal_actions(gid),
        bot.submit(gid, legal[0], seat=0),  # a human seat
        analytics.submit(gid, legal[0], seat=0),
        lobby.submit(gid, legal[0], seat=0),
        alice.history(gid),  # full information: admin/analytics only
        lobby.history(gid),
        alice.create_game("queens_court", ["alice", "bob"], {"players": 2}),  # seats another person
        alice.create_game("queens_court", ["alice", "bot:1"], {"players": 2}, seed=42),  # chooses the seed
        bot.create_game("queens_court", ["bot:1", "bot:2"], {"players": 2}),
    ]
    for coro in checks:
        code, msg = await _code(coro)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (code, msg)
        assert msg
    assert await _snapshot(table) == before
    # what the roles may do: a local game, a spectator view, the analytics history
    local = await alice.create_game("queens_court", ["alice", "bot:1"], {"players": 2})
    assert local.view.your_seat == 0
    spectator = await mallory.get_view(gid)
    assert not spectator.HasField("your_seat") and not spectator.legal_actions
    assert (await analytics.history(gid)).game_id == gid


async def test_aborted_on_a_lost_race(replicas: Any, rules: Any, table: dict[str, Any]) -> None:
    gid = table["gid"]
    other = await replicas.start(sweep_delay=0.2)
    alice_a = replicas.client(rules, "alice", retries=0)
    alice_b = replicas.client(other, "alice", retries=0)
    view = await alice_a.get_view(gid)
    await alice_b.get_view(gid)  # both replicas hold the game at seq 0
    first, second = view.legal_actions[0], view.legal_actions[-1]
    await alice_b.submit(gid, first, request_id="win")
    on_b = {"gid": gid, "admin": replicas.client(other, "root", "admin")}  # reads through A would refresh A
    before = await _snapshot(on_b)
    # replica A still believes alice is to act: its append loses the race
    code, msg = await _code(alice_a.submit(gid, second, request_id="lose"))
    assert code == grpc.StatusCode.ABORTED and "retry" in msg
    assert await _snapshot(on_b) == before
    # the retry (same request id) is judged on the new position: no longer alice's turn
    code, msg = await _code(alice_a.submit(gid, second, request_id="lose"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert await _snapshot(table) == before
