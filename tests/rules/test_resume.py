"""CreateGame(resume_from=...): a new game from another game's save point (Hearts: the start of
the current hand), with new seats; what the lobby's ResumeGame builds on."""

from __future__ import annotations

import random
from typing import Any

import grpc
import pytest
from court_client import view_dict
from court_kit.structs import to_dict

from .helpers import play_out


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
    while to_dict(view.view)["hand"] < 1 or to_dict(view.view)["phase"] == "pass":
        seat = rng.choice(list(view.to_act))
        mine = await clients[seat].get_view(old.game_id, seat)
        view = (await clients[seat].submit(old.game_id, rng.choice(list(mine.legal_actions)), seat)).view
        assert not view.finished
    admin = replicas.client(rules, "root", "admin")
    before = await admin.history(old.game_id)
    # di does not come back: a bot takes the seat
    seats = ["ana", "ben", "cy", "bot:2"]
    new = await lobby.create_game("hearts", seats, request_id="resume-1", resume_from=old.game_id)
    nv = to_dict(new.view.view)
    ov = to_dict(view.view)
    assert new.game_id != old.game_id and new.view.seq == 0
    assert nv["hand"] == ov["hand"] and nv["totals"] == ov["totals"] and nv["phase"] == "pass"
    hist = await admin.history(new.game_id)
    assert hist.seed == before.seed and to_dict(hist.options) == {"limit": 40}
    created = to_dict(hist.created_events[0])
    assert created["type"] == "GameCreated" and created["resumed_from"] == old.game_id
    # the same hand is dealt again: ana holds what she held at the start of it
    ana_now = view_dict(await replicas.client(rules, "ana").get_view(new.game_id))
    assert len(ana_now["cards"]) == 13
    # the old game is untouched and the new one plays to the end, the bot seat by the bot identity
    assert len((await admin.history(old.game_id)).moves) == len(before.moves)
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
    assert await _code(lobby.create_game("queens_court", ["a", "b"], resume_from=qc.game_id)) \
        == grpc.StatusCode.INVALID_ARGUMENT  # no save points in Queen's Court
    assert await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], resume_from="gnosuch")) \
        == grpc.StatusCode.NOT_FOUND
    assert await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], resume_from=qc.game_id)) \
        == grpc.StatusCode.INVALID_ARGUMENT  # another kind of game
    assert await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], {"limit": 50},
                                         resume_from=hearts.game_id)) == grpc.StatusCode.INVALID_ARGUMENT
    assert await _code(lobby.create_game("hearts", ["a", "b", "c", "d"], seed=5, resume_from=hearts.game_id)) \
        == grpc.StatusCode.INVALID_ARGUMENT
    stranger = replicas.client(rules, "zed", retries=0)
    assert await _code(stranger.create_game("hearts", ["zed", "bot:1", "bot:1", "bot:1"],
                                            resume_from=hearts.game_id)) == grpc.StatusCode.PERMISSION_DENIED
    # a player who sat in the game may resume it as a local game
    local = await replicas.client(rules, "a").create_game("hearts", ["a", "bot:1", "bot:1", "bot:1"],
                                                          resume_from=hearts.game_id)
    assert local.view.your_seat == 0
