"""Two replicas on one NATS racing on one game; retry storms with repeated request ids."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest
from court_client import action_json

from .helpers import EventLog, assert_complete, has_game_end


async def _fresh_views(clients: list[Any], gid: str, seat: int) -> Any:
    """Both replicas read the game (so both caches hold the latest position); returns one view."""
    views = await asyncio.gather(*(c.get_view(gid, seat) for c in clients))
    assert len({v.seq for v in views}) == 1
    return views[0]


@pytest.mark.slow
async def test_two_replicas_race_on_every_move(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    players = ["ann", "ben"]
    created = await replicas.client(a, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    on = {(p, r): replicas.client(app, p, retries=0) for p in players for r, app in (("a", a), ("b", b))}
    rng = random.Random(7)
    winners = {"a": 0, "b": 0}
    accepted_rids: list[str] = []
    async with EventLog(replicas.nats.url, "queens_court", gid) as events:
        view = created.view
        races = 0
        while not view.finished:
            seat = view.to_act[0]
            p = players[seat]
            view = await _fresh_views([on[(p, "a")], on[(p, "b")]], gid, seat)
            legal = list(view.legal_actions)
            moves = {"a": rng.choice(legal), "b": rng.choice(legal)}
            rids = {r: f"race{races}-{r}" for r in "ab"}
            results = await asyncio.gather(
                *(on[(p, r)].submit(gid, moves[r], seat, request_id=rids[r]) for r in "ab"),
                return_exceptions=True,
            )
            ok = [r for r, res in zip("ab", results, strict=True) if not isinstance(res, Exception)]
            lost = [res for res in results if isinstance(res, Exception)]
            assert len(ok) == 1, f"exactly one of two racing submits wins: {results}"
            assert len(lost) == 1 and isinstance(lost[0], grpc.aio.AioRpcError)
            assert lost[0].code() == grpc.StatusCode.ABORTED, lost[0].details()
            winners[ok[0]] += 1
            accepted_rids.append(rids[ok[0]])
            view = results["ab".index(ok[0])].view
            races += 1
        assert races > 20 and winners["a"] > 0 and winners["b"] > 0, winners
        hist = await replicas.client(b, "root", "admin").history(gid)
        assert [m.seq for m in hist.moves] == list(range(1, races + 1)), "no gaps, no duplicates"
        assert [m.request_id for m in hist.moves] == accepted_rids
        await events.wait_until(has_game_end(races))
        assert_complete(events.events, races)


@pytest.mark.slow
async def test_retry_storm_applies_each_move_once(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    players = ["cat", "dan", "eve", "fay"]
    created = await replicas.client(a, "lobby", "service").create_game("hearts", players, {"limit": 10})
    gid = created.game_id
    clients = {(p, r): replicas.client(app, p, retries=3) for p in players for r, app in (("a", a), ("b", b))}
    rng = random.Random(11)
    view = created.view
    moves = 0
    while not view.finished and moves < 120:
        seat = rng.choice(list(view.to_act))
        p = players[seat]
        mine = await clients[(p, "a")].get_view(gid, seat)
        act = rng.choice(list(mine.legal_actions))
        rid = f"storm-{moves}"
        # eight identical submits at once, spread over both replicas
        replies = await asyncio.gather(
            *(clients[(p, "ab"[i % 2])].submit(gid, act, seat, request_id=rid) for i in range(8))
        )
        first = replies[0].SerializeToString()
        assert all(r.SerializeToString() == first for r in replies), "every retry gets the first answer"
        assert replies[0].seq == mine.seq + 1
        # and a late retry on either replica still does
        again = await clients[(p, "b")].submit(gid, act, seat, request_id=rid)
        assert again.SerializeToString() == first
        # the same id for a different action is refused, not applied
        other = [x for x in mine.legal_actions if x != act]
        if other:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await clients[(p, "a")].submit(gid, other[0], seat, request_id=rid)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        view = replies[0].view
        moves += 1
    # a replica that never saw the game answers a retry from the log alone
    cold = await replicas.start()
    hist = await replicas.client(cold, "root", "admin").history(gid)
    assert len(hist.moves) == moves
    assert [m.request_id for m in hist.moves] == [f"storm-{i}" for i in range(moves)]
    last = hist.moves[-1]
    late = await replicas.client(cold, players[last.seat]).submit(
        gid, last.action, last.seat, request_id=last.request_id
    )
    assert late.seq == moves and action_json(last.action)["type"] in ("play", "pass", "pass_card")
    assert len((await replicas.client(cold, "root", "admin").history(gid)).moves) == moves


async def test_create_game_is_idempotent(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    lobby_a = replicas.client(a, "lobby", "service")
    first = await lobby_a.create_game("hearts", ["w", "x", "y", "z"], {"limit": 30}, request_id="start-1")
    # concurrent and late retries, on both replicas, get the first answer: the same game, the same seed
    again = await asyncio.gather(
        *(
            replicas.client(app, "lobby", "service").create_game(
                "hearts", ["w", "x", "y", "z"], {"limit": 30}, request_id="start-1"
            )
            for app in (a, b, a, b)
        )
    )
    assert all(r.SerializeToString() == first.SerializeToString() for r in again)
    w = replicas.client(a, "w")
    view = await w.get_view(first.game_id)
    await w.submit(first.game_id, view.legal_actions[0])
    cold = await replicas.start()
    late = await replicas.client(cold, "lobby", "service").create_game(
        "hearts", ["w", "x", "y", "z"], {"limit": 30}, request_id="start-1"
    )
    assert late.SerializeToString() == first.SerializeToString(), "even after moves, on a cold replica"
    hist = await replicas.client(cold, "root", "admin").history(first.game_id)
    assert len(hist.moves) == 1
    # the same request id from another caller is another game
    other = await replicas.client(a, "lobby2", "service").create_game(
        "hearts", ["w", "x", "y", "z"], request_id="start-1"
    )
    assert other.game_id != first.game_id
    # a player's local game: the same request id again, the same game and the same (their) seat
    mine = [
        await replicas.client(app, "w").create_game(
            "queens_court", ["bot:1", "w"], {"players": 2}, request_id="local"
        )
        for app in (a, b)
    ]
    assert mine[0].game_id == mine[1].game_id and mine[0].view.your_seat == mine[1].view.your_seat == 1
