"""CreateGame(resume_from=...): a new game from another game's save point (Hearts: the start of
the current hand), with new seats; what the lobby's ResumeGame builds on."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest
from court_client import result_dict, view_dict
from court_contract import typed

from .helpers import play_out


async def _until(ready: Any) -> None:
    while not ready():
        await asyncio.sleep(0.01)


async def _code(coro: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await coro
    return info.value.code()


async def test_resume_a_hearts_game_from_its_save_point(replicas: Any, rules: Any) -> None:
    players = ["ana", "ben", "cy", "di"]
    lobby = replicas.client(rules, "lobby", "service")
    old = await lobby.create_game("hearts", players, {"limit": 40})
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    rng = random.Random(12)
    view = old.view
    # into the second hand, and a few moves more
    while typed.view_from_proto(view.view)["hand"] < 1 or typed.view_from_proto(view.view)["phase"] == "pass":
        seat = rng.choice(list(view.to_act))
        mine = await clients[seat].get_view(old.game_id, seat)
        view = (await clients[seat].submit(old.game_id, rng.choice(list(mine.legal_actions)), seat)).view
        assert not view.finished
    admin = replicas.client(rules, "root", "admin")
    before = await admin.history(old.game_id)
    # di does not come back: a bot takes the seat
    seats = ["ana", "ben", "cy", "bot:2"]
    new = await lobby.create_game("hearts", seats, request_id="resume-1", resume_from=old.game_id)
    nv = typed.view_from_proto(new.view.view)
    ov = typed.view_from_proto(view.view)
    assert new.game_id != old.game_id and new.view.seq == 0
    assert nv["hand"] == ov["hand"] and nv["totals"] == ov["totals"] and nv["phase"] == "pass"
    hist = await admin.history(new.game_id)
    assert hist.seed == before.seed and typed.options_from_proto(hist.options) == {"limit": 40}
    assert typed.event_from_proto(hist.created_events[0])["type"] == "GameStarted"
    log = await rules.store.records(new.game_id)  # the GameCreated record names where it came from
    assert log[0].body.created.resumed_from == old.game_id and log[0].body.created.save_json
    # the same hand is dealt again: ana holds what she held at the start of it
    ana_now = view_dict(await replicas.client(rules, "ana").get_view(new.game_id))
    assert len(ana_now["cards"]) == 13
    # the old game keeps its moves and is closed: finished, nobody to act, naming its continuation
    closed = await admin.history(old.game_id)
    assert len(closed.moves) == len(before.moves) and not closed.to_act
    assert closed.result.finished and result_dict(closed.result)["resumed_into"] == new.game_id
    # the new one plays to the end, the bot seat by the bot identity
    seat_clients = {0: clients[0], 1: clients[1], 2: clients[2], 3: replicas.client(rules, "bots", "bot")}
    final = await play_out(seat_clients, new.game_id, rng)
    assert final.finished
    # a retry answers the first answer
    again = await lobby.create_game("hearts", seats, request_id="resume-1", resume_from=old.game_id)
    assert again.game_id == new.game_id


async def test_resume_refusals(replicas: Any, rules: Any) -> None:
    lobby = replicas.client(rules, "lobby", "service", retries=0)
    qc = await lobby.create_game("queens_court", ["a", "b"], {"players": 2})
    hearts = await lobby.create_game("hearts", ["a", "b", "c", "d"])
    assert (
        await _code(lobby.create_game("queens_court", ["a", "b"], resume_from=qc.game_id))
        == grpc.StatusCode.INVALID_ARGUMENT
    )  # no save points in Queen's Court
    assert (
        await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], resume_from="gnosuch"))
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], resume_from=qc.game_id))
        == grpc.StatusCode.INVALID_ARGUMENT
    )  # another kind of game
    assert (
        await _code(
            lobby.create_game("hearts", ["a", "b", "c", "d"], {"limit": 50}, resume_from=hearts.game_id)
        )
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert (
        await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], seed=5, resume_from=hearts.game_id))
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    stranger = replicas.client(rules, "zed", retries=0)
    assert (
        await _code(
            stranger.create_game("hearts", ["zed", "bot:1", "bot:1", "bot:1"], resume_from=hearts.game_id)
        )
        == grpc.StatusCode.PERMISSION_DENIED
    )
    # not even a player who sat in the game: resuming is the lobby's (LobbyService.ResumeGame)
    assert (
        await _code(
            replicas.client(rules, "a", retries=0).create_game(
                "hearts", ["a", "bot:1", "bot:1", "bot:1"], resume_from=hearts.game_id
            )
        )
        == grpc.StatusCode.PERMISSION_DENIED
    )


async def test_a_player_cannot_read_the_hands_of_a_live_game_through_resume(
    replicas: Any, rules: Any
) -> None:
    """The hole: seat 0 of a live game resumed it with every seat their own and read the other hands.
    Only the lobby resumes, each person keeps their own seat, and the original is closed at once."""
    players = ["ann", "bo", "cid", "dee"]
    lobby = replicas.client(rules, "lobby", "service", retries=0)
    live = await lobby.create_game("hearts", players)
    gid = live.game_id
    ann = replicas.client(rules, "ann", retries=0)
    admin = replicas.client(rules, "root", "admin")
    before = await admin.history(gid)
    ann_move = (await ann.get_view(gid)).legal_actions[0]
    other = await replicas.start()  # holds the original in its cache
    ann_on_other = replicas.client(other, "ann", retries=0)
    assert not (await ann_on_other.get_view(gid)).finished
    code = grpc.StatusCode
    # the attack itself, and the admin role: refused, nothing created, nothing closed
    assert await _code(ann.create_game("hearts", ["ann"] * 4, resume_from=gid)) == code.PERMISSION_DENIED
    assert (
        await _code(
            replicas.client(rules, "root", "admin", retries=0).create_game("hearts", players, resume_from=gid)
        )
        == code.PERMISSION_DENIED
    )
    # the lobby with the people moved around, or a person in another person's seat: refused
    for seats in (
        ["bo", "ann", "cid", "dee"],
        ["ann", "ann", "cid", "dee"],
        ["ann", "bo", "cid"],
        ["ann", "bo", "cid", "dee", "bot:1"],
    ):
        assert await _code(lobby.create_game("hearts", seats, resume_from=gid)) == code.INVALID_ARGUMENT, (
            seats
        )
    after = await admin.history(gid)
    assert len(after.moves) == len(before.moves) and list(after.to_act) == list(before.to_act)
    assert not after.result.finished
    watched: list[Any] = []

    async def watch() -> None:
        async for u in ann_on_other.watch(gid, resume=False):
            watched.append(u)

    watcher = asyncio.create_task(watch())
    await asyncio.wait_for(_until(lambda: bool(watched)), 15)
    # a bot in a person's seat is fine (an account that is gone); the original closes in that step
    new = await lobby.create_game("hearts", ["ann", "bo", "cid", "bot:2"], resume_from=gid, request_id="r1")
    await asyncio.wait_for(watcher, 15)  # a watch of the original ends (on another replica too)
    assert [u.seq for u in watched] == [0]
    old_view = await ann.get_view(gid)
    assert old_view.finished and not old_view.to_act and not old_view.legal_actions
    assert result_dict(old_view.result)["resumed_into"] == new.game_id
    assert await _code(ann.submit(gid, ann_move)) == code.FAILED_PRECONDITION
    # a replica that had the original cached learns of the closing from the log
    assert (await ann_on_other.get_view(gid)).finished
    assert await _code(ann_on_other.submit(gid, ann_move)) == code.FAILED_PRECONDITION
    # no second playable copy: another resume of it is refused, the same one answers the first answer
    assert (
        await _code(lobby.create_game("hearts", players, resume_from=gid, request_id="r2"))
        == code.FAILED_PRECONDITION
    )
    again = await lobby.create_game("hearts", ["ann", "bo", "cid", "bot:2"], resume_from=gid, request_id="r1")
    assert again.game_id == new.game_id
    # in the copy, ann sees her own hand and no other seat's
    mine = await ann.get_view(new.game_id)
    assert mine.your_seat == 0 and len(view_dict(mine)["cards"]) == 13
    for seat in (1, 2, 3):
        assert await _code(ann.get_view(new.game_id, seat)) == code.PERMISSION_DENIED
    # and one that loads the original afresh
    third = await replicas.start()
    assert (await replicas.client(third, "ann").get_view(gid)).finished
