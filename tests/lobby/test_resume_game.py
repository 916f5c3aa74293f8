"""ResumeGame on the real stack (both databases): a Hearts game resumed from the start of its
current hand, in a new started lobby with the same seats; refusals; retries and other players'
calls answer the first resume."""

from __future__ import annotations

import random

import grpc
import pytest
from court_client import RulesClient
from court_contract import typed
from court_proto.court.lobby.v1 import lobby_pb2 as lpb

from tests.ranking.stack import Player, Stack, fails, rid
from tests.rules.helpers import view_after

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode
LOW_LIMIT = 1  # the game ends after its first hand


def resume(p: Player, game_id: str, request_id: str | None = None):
    return p.call("ResumeGame", lpb.ResumeGameRequest(request_id=request_id or rid(), game_id=game_id))


async def hearts_vs_bots(
    stack: Stack, host: Player, others: tuple[Player, ...] = (), limit: int = 100
) -> lpb.Lobby:
    lobby = await host.create_lobby("hearts", {"limit": limit}, online=False)
    for p in others:
        await p.join(lobby.lobby_id)
    for _ in range(4 - 1 - len(others)):
        await host.call(
            "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, level="heuristic")
        )
    return await host.start(lobby.lobby_id)


def bot_client(stack: Stack) -> RulesClient:
    client = RulesClient(stack.rules.address, stack.token("bots", "bot"))
    stack.closers.append(client.close)
    return client


async def test_a_hearts_game_resumes_at_the_start_of_its_hand(stack: Stack):
    ann, bob = await stack.player("Ann"), await stack.player("Bob")
    started = await hearts_vs_bots(stack, ann, (bob,))
    old_id = started.game_id
    assert [s.player_id for s in started.seats] == [ann.id, bob.id, "bot:heuristic", "bot:heuristic"]
    bots = bot_client(stack)
    clients = {0: ann.rules, 1: bob.rules, 2: bots, 3: bots}
    rng = random.Random(7)
    view = await ann.rules.get_view(old_id, 0)
    # into the second hand (hand 1), past its passing, and a few plays more
    plays_in_hand_1 = 0
    while (
        typed.view_from_proto(view.view)["hand"] < 1
        or typed.view_from_proto(view.view)["phase"] == "pass"
        or plays_in_hand_1 < 3
    ):
        if (
            typed.view_from_proto(view.view)["hand"] >= 1
            and typed.view_from_proto(view.view)["phase"] != "pass"
        ):
            plays_in_hand_1 += 1
        seat = rng.choice(list(view.to_act))
        mine = await clients[seat].get_view(old_id, seat)
        reply = await clients[seat].submit(old_id, rng.choice(list(mine.legal_actions)), seat)
        view = await view_after(clients[seat], old_id, seat, reply)
        assert not view.finished
    old_view = typed.view_from_proto(view.view)
    assert old_view["hand"] == 1

    first_rid = rid()
    new = await resume(bob, old_id, first_rid)
    assert new.resumed_from == old_id and new.game_id and new.game_id != old_id
    assert new.state == lpb.LOBBY_STATE_STARTED and new.host == bob.id and not new.online
    assert [s.player_id for s in new.seats] == [ann.id, bob.id, "bot:heuristic", "bot:heuristic"]
    bob_seat = next(s.seat for s in new.seats if s.player_id == bob.id)
    assert bob_seat == 1
    nv = await bob.rules.get_view(new.game_id, bob_seat)
    assert nv.your_seat == 1 and nv.seq == 0 and not nv.finished
    resumed = typed.view_from_proto(nv.view)
    assert resumed["hand"] == 1 and resumed["phase"] == "pass" and resumed["totals"] == old_view["totals"]
    assert len(resumed["cards"]) == 13

    # the same request again, another request id, and the other player: all the same new game
    assert await resume(bob, old_id, first_rid) == new
    assert (await resume(bob, old_id)).game_id == new.game_id
    assert (await resume(ann, old_id)).game_id == new.game_id
    # the old game is no longer listed; the new one is, for both players
    for p, seat in ((ann, 0), (bob, 1)):
        mine = (await p.call("ListMyGames", lpb.ListMyGamesRequest())).games
        assert [(g.game_id, g.seat) for g in mine] == [(new.game_id, seat)]
    # the resumed game plays on, bots' seats by the bot identity
    mine = await ann.rules.get_view(new.game_id, 0)
    seat = mine.to_act[0]
    own = await clients[seat].get_view(new.game_id, seat)
    assert (await clients[seat].submit(new.game_id, own.legal_actions[0], seat)).seq == 1


async def test_resume_refusals(stack: Stack):
    ann, cy = await stack.player("Ann"), await stack.player("Cy")
    await fails(C.NOT_FOUND, resume(ann, "no-such-game"), "no game")
    await fails(C.INVALID_ARGUMENT, ann.call("ResumeGame", lpb.ResumeGameRequest(game_id="x")), "request_id")
    hearts = await hearts_vs_bots(stack, ann)
    await fails(C.PERMISSION_DENIED, resume(cy, hearts.game_id), "did not sit")
    # a game without save points
    qc = await ann.create_lobby("queens_court", {"players": 2}, online=False)
    await ann.call(
        "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=qc.lobby_id, level="random")
    )
    qc = await ann.start(qc.lobby_id)
    await fails(C.FAILED_PRECONDITION, resume(ann, qc.game_id), "no save points")
    # an abandoned game
    await ann.call("AbandonGame", lpb.AbandonGameRequest(request_id=rid(), game_id=hearts.game_id))
    await fails(C.FAILED_PRECONDITION, resume(ann, hearts.game_id), "abandoned")
    # a finished game
    done = await hearts_vs_bots(stack, ann, limit=LOW_LIMIT)
    bots = bot_client(stack)
    clients = {0: ann.rules, 1: bots, 2: bots, 3: bots}
    rng = random.Random(3)
    view = await ann.rules.get_view(done.game_id, 0)
    while not view.finished:
        seat = rng.choice(list(view.to_act))
        mine = await clients[seat].get_view(done.game_id, seat)
        reply = await clients[seat].submit(done.game_id, rng.choice(list(mine.legal_actions)), seat)
        view = await view_after(clients[seat], done.game_id, seat, reply)
    await fails(C.FAILED_PRECONDITION, resume(ann, done.game_id), "finished")
    assert [g.game_id for g in (await ann.call("ListMyGames", lpb.ListMyGamesRequest())).games] == [
        qc.game_id
    ]


async def test_an_online_game_resumes_as_a_local_one(stack: Stack):
    ann = await stack.player("Ann")
    lobby = await ann.create_lobby("hearts", {}, online=True)
    for _ in range(3):
        await ann.call(
            "SetBotSeat", lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, level="expert")
        )
    started = await ann.start(lobby.lobby_id)
    new = await resume(ann, started.game_id)
    assert not new.online and new.ante == 0 and new.resumed_from == started.game_id
    assert [s.player_id for s in new.seats] == [ann.id] + ["bot:expert"] * 3
    view = typed.view_from_proto((await ann.rules.get_view(new.game_id, 0)).view)
    assert view["hand"] == 0 and view["phase"] == "pass"
    old = await ann.call("GetLobby", lpb.GetLobbyRequest(lobby_id=lobby.lobby_id))
    assert old.state == lpb.LOBBY_STATE_ABANDONED
