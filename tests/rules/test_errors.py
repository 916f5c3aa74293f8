"""Every status code of the rules service, each leaving the game exactly as it was."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from court_client import RulesClient, action, action_json, view_dict
from court_contract import typed
from court_kit.keys import Signer, issue_token
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
    for bad in [
        "",
        "not-a-jwt",
        issue_token(Signer.generate("court-lobby"), "alice", "player"),
        issue_token(keys.LOBBY, "alice", "player", ttl=10, now=time.time() - 3600),
    ]:
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
        (
            lobby0.stub.CreateGame(
                rules_pb2.CreateGameRequest(
                    request_id="other-game",
                    game="queens_court",
                    seats=PLAYERS,
                    options=typed.options_to_proto("hearts", {"limit": 50}),
                ),
                metadata=lobby0.metadata(),
            ),
            "the options are for hearts but the game is queens_court",
        ),
        (
            lobby0.stub.CreateGame(
                rules_pb2.CreateGameRequest(
                    request_id="newer-option",
                    game="queens_court",
                    seats=PLAYERS,
                    options=typed.GameOptions.FromString(bytes([0x0A, 5, 0x08, 3, 0xB8, 0x06, 1])),
                ),  # players 3, field 103: 1
                metadata=lobby0.metadata(),
            ),
            "unknown option(s) for queens_court: field number(s) 103",
        ),
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
        (
            rules_pb2.SubmitActionRequest(
                game_id=gid, request_id="r2", action=action("hearts", {"type": "play", "card": "2C"})
            ),
            "hearts action",
        ),
        (
            rules_pb2.SubmitActionRequest(
                game_id=gid,
                request_id="r3",
                action=action("queens_court", {"type": "play", "card": "ZZ", "target": 0, "pile": "left"}),
            ),
            "unknown card",
        ),
        (
            rules_pb2.SubmitActionRequest(
                game_id=gid,
                request_id="r4",
                action=actions_pb2.Action(queens_court=actions_pb2.QueensCourtAction()),
            ),
            "no action type",
        ),
        (rules_pb2.SubmitActionRequest(game_id=gid, request_id="r5", seat=7, action=legal[0]), "seat 7"),
    ]:
        code, msg = await _code(alice.stub.SubmitAction(req, metadata=alice.metadata()))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (needle, code, msg)
        assert needle in msg, (needle, msg)
    # an option the game does not have cannot be sent at all: the client names it
    with pytest.raises(typed.TypedError, match="QueensCourtOptions has no field for the key.*'colour'"):
        await lobby0.create_game("queens_court", PLAYERS, {"colour": "red"})
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
    code, msg = await _code(
        alice.submit(
            gid, action("queens_court", {"type": "play", "card": missing, "target": 0, "pile": "left"})
        )
    )
    assert code == grpc.StatusCode.FAILED_PRECONDITION and msg
    assert await _snapshot(table) == before


async def test_not_found(table: dict[str, Any]) -> None:
    alice, admin = table["alice"], table["admin"]
    before = await _snapshot(table)
    legal = (await alice.get_view(table["gid"])).legal_actions
    for coro in [
        alice.get_view("gnosuchgame"),
        alice.legal_actions("gnosuchgame"),
        alice.submit("gnosuchgame", legal[0]),
        admin.history("gnosuchgame"),
        alice.get_view("bad id with spaces"),
    ]:
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
    other = await replicas.start()
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


async def test_out_of_range_input_is_invalid_argument(
    replicas: Any, rules: Any, table: dict[str, Any]
) -> None:
    """Input the engines never see a legal form of (open enums, seat counts, page tokens, nesting)
    is INVALID_ARGUMENT with a reason, never INTERNAL or UNKNOWN."""
    gid, alice = table["gid"], table["alice"]
    before = await _snapshot(table)
    lobby0 = replicas.client(rules, "lobby", "service", retries=0)
    legal = action_json((await alice.get_view(gid)).legal_actions[0])
    pile7 = actions_pb2.Action(
        queens_court=actions_pb2.QueensCourtAction(
            play=actions_pb2.QueensCourtPlay(card=legal["card"], target=legal["target"], pile=7)
        )
    )
    code, msg = await _code(alice.submit(gid, pile7))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "pile 7" in msg, (code, msg)
    court = await lobby0.create_game("the_court", ["alice", "bob"], {"mode": "shared"})
    source9 = actions_pb2.Action(
        the_court=actions_pb2.TheCourtAction(draw=actions_pb2.TheCourtDraw(source=9))
    )
    code, msg = await _code(alice.submit(court.game_id, source9, seat=0))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "source 9" in msg, (code, msg)
    for game, seats, options in [
        ("hearts", ["a"], {}),
        ("hearts", ["a", "b", "c"], {}),
        ("the_court", ["a"], {"mode": "mutual_swap"}),
        ("the_court", ["a", "b"], {"mode": "solitaire"}),
    ]:
        code, msg = await _code(lobby0.create_game(game, seats, options))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "seats" in msg, (game, seats, code, msg)
    # (options are typed per game, court.games.v1.GameOptions: no request message nests without bound)
    assert await _snapshot(table) == before


HUGE = 5 * 1024 * 1024  # characters; the server takes messages up to 8 MiB


async def test_huge_input_gets_its_real_status_and_a_short_quote(
    replicas: Any, rules: Any, table: dict[str, Any]
) -> None:
    """A 5 MB field comes back as its real status with a short quote, not RESOURCE_EXHAUSTED (the
    whole input echoed into the status trailer would pass gRPC's metadata limit)."""
    gid, alice = table["gid"], table["alice"]
    before = await _snapshot(table)
    lobby0 = replicas.client(rules, "lobby", "service", retries=0)
    big = "Z" * HUGE
    legal = action_json((await alice.get_view(gid)).legal_actions[0])
    huge_card = action("queens_court", {**legal, "card": big})
    for coro, expected in [
        (alice.get_view(big), grpc.StatusCode.NOT_FOUND),  # game id
        (alice.submit(big, action("queens_court", legal)), grpc.StatusCode.NOT_FOUND),
        (alice.submit(gid, huge_card), grpc.StatusCode.INVALID_ARGUMENT),  # card
        (lobby0.create_game(big, PLAYERS), grpc.StatusCode.INVALID_ARGUMENT),  # game name
        (lobby0.create_game("the_court", ["alice", "bob"], {"mode": big}), grpc.StatusCode.INVALID_ARGUMENT),
        (
            lobby0.create_game("queens_court", ["alice", big, "carol"], {"players": 3}),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),  # seat id
    ]:
        code, msg = await _code(coro)
        assert code == expected, (code, msg[:200])
        assert len(msg) < 600 and "ZZZZ" in msg, msg[:700]
    # past the server's 8 MiB limit a request never reaches the service: gRPC says so plainly
    code, msg = await _code(alice.get_view("Z" * 9 * 1024 * 1024))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in msg, (code, msg[:200])
    assert await _snapshot(table) == before


async def test_actions_are_stored_in_canonical_form(replicas: Any, rules: Any, table: dict[str, Any]) -> None:
    """A card sent as "qd" is the move "QD" in the log, the history and the published events."""
    gid, alice, admin = table["gid"], table["alice"], table["admin"]
    legal = action_json((await alice.get_view(gid)).legal_actions[0])
    sent = {**legal, "card": legal["card"].lower()}
    assert sent != legal
    reply = await alice.submit(gid, action("queens_court", sent), request_id="lower")
    history = await admin.history(gid)
    assert action_json(history.moves[0].action) == legal
    log = await rules.store.records(gid)
    assert action_json(log[1].body.move.action) == legal, "the log record holds the canonical action"
    played = typed.event_from_proto(history.moves[0].events[0])
    assert played["type"] == "CardPlayed" and played["card"] == legal["card"]
    # a retry in either spelling is the same move
    again = await alice.submit(gid, action("queens_court", legal), request_id="lower")
    assert again.seq == reply.seq == 1
    assert len((await admin.history(gid)).moves) == 1


async def test_an_action_read_before_is_still_refused_in_a_game_of_another_kind(
    replicas: Any, rules: Any, table: dict[str, Any]
) -> None:
    """SubmitAction reads an action it has read before (the very bytes) from its memo, not again
    (``ActionCodec.parsed``): a Queen's Court action accepted in its game, then sent as the same
    bytes to a Hearts game, is still refused there as another game's action (INVALID_ARGUMENT,
    the Hearts game unchanged), and sent again as a new move in its own game once it no longer
    fits the position, it is judged on that position (refused, the game unchanged)."""
    gid, alice = table["gid"], table["alice"]
    view = await alice.get_view(gid)
    seat = view.to_act[0]
    mover = table[PLAYERS[seat]]
    played = (await mover.get_view(gid, seat)).legal_actions[0]
    await mover.submit(gid, played, seat)
    known = rules.application.codec.parsed(played.SerializeToString())
    assert known is not None and known[0] == "queens_court", "the accepted action is in the memo"
    hearts = (await table["lobby"].create_game("hearts", [*PLAYERS, "dave"], {"limit": 20})).game_id
    before = view_dict(await table["admin"].get_view(hearts))
    code, msg = await _code(table[PLAYERS[0]].submit(hearts, played, 0))
    assert (
        code == grpc.StatusCode.INVALID_ARGUMENT and "a queens_court action was sent to a hearts game" in msg
    )
    assert view_dict(await table["admin"].get_view(hearts)) == before
    before = await _snapshot(table)
    code, msg = await _code(mover.submit(gid, played, seat))
    assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION), (code, msg)
    assert await _snapshot(table) == before
