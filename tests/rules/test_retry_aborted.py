"""Retrying ABORTED is safe under the request-id contract (docs/contract.md, "Retries").

The rules service answers ABORTED only when the append of this attempt lost a race on the game's
log (another writer's record landed first) and, read again, the log holds nothing of this request
id: nothing of the call was applied. The client (``court_client.RulesClient``) retries ABORTED with
the same request id; the retry is judged on the new position and applied once, and every later
retry, on any replica, gets that first answer. Two writers race here on two replicas of one Hearts
game in its passing phase (every seat acts at once, so the loser's move stays legal).
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest


async def _rids(admin: Any, gid: str) -> list[str]:
    return [m.request_id for m in (await admin.history(gid)).moves]


async def test_a_writer_that_lost_the_race_retries_with_its_id_and_is_applied_once(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    reader = await replicas.start()  # reads go here: a read on A or B would refresh its cache
    players = ["ann", "ben", "cat", "dan"]
    created = await replicas.client(a, "lobby", "service").create_game("hearts", players, {"limit": 20})
    gid = created.game_id
    admin = replicas.client(reader, "root", "admin")
    assert sorted(created.view.to_act) == [0, 1, 2, 3], "the passing phase: every seat acts at once"
    # each seat's pass, chosen on the first position (the passes do not depend on one another);
    # A and B both cache the game at seq 0 on the way
    ann_view = await replicas.client(a, "ann").get_view(gid)
    ben_view = await replicas.client(b, "ben").get_view(gid)
    dan_view = await replicas.client(reader, "dan").get_view(gid)
    assert (ann_view.seq, ben_view.seq) == (0, 0)
    ann_move = await replicas.client(a, "ann").submit(gid, ann_view.legal_actions[0], request_id="ann-1")
    assert ann_move.seq == 1

    # 1. the answer itself, without the client's retry: B still holds seq 0, its append loses
    ben_once = replicas.client(b, "ben", retries=0)
    with pytest.raises(grpc.aio.AioRpcError) as lost:
        await ben_once.submit(gid, ben_view.legal_actions[0], request_id="ben-1")
    assert lost.value.code() == grpc.StatusCode.ABORTED
    assert "retry with the same request_id" in (lost.value.details() or "")
    assert await _rids(admin, gid) == ["ann-1"], "ABORTED: nothing of ben-1 was applied"
    # the retry with the same id is judged on the new position and applied, once
    again = await ben_once.submit(gid, ben_view.legal_actions[0], request_id="ben-1")
    assert again.seq == 2
    assert await _rids(admin, gid) == ["ann-1", "ben-1"]

    # 2. the client's own retry: A still holds seq 1 (ben-1 went through B); dan's first attempt
    # on A loses the race, the client sends it again with the same request id
    dan = replicas.client(a, "dan")
    moved = await dan.submit(gid, dan_view.legal_actions[0], request_id="dan-1")
    assert dan.attempts == 2, "one ABORTED attempt, then the retry that was applied"
    assert moved.seq == 3
    assert await _rids(admin, gid) == ["ann-1", "ben-1", "dan-1"]

    # every later retry of either id, on any replica, is the first answer and applies nothing
    for app in (a, b, reader):
        assert (
            await replicas.client(app, "ben").submit(gid, ben_view.legal_actions[0], request_id="ben-1")
        ).seq == 2
        late = await replicas.client(app, "dan").submit(gid, dan_view.legal_actions[0], request_id="dan-1")
        assert late.seq == 3 and late.view == moved.view
    assert await _rids(admin, gid) == ["ann-1", "ben-1", "dan-1"]
    # the same id with another action is refused: a retry is the same call, never a new one
    other = next(x for x in dan_view.legal_actions if x != dan_view.legal_actions[0])
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await replicas.client(b, "dan").submit(gid, other, request_id="dan-1")
    assert reused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert await _rids(admin, gid) == ["ann-1", "ben-1", "dan-1"]
