"""CloseGame: the lobby closes a game whose lobby was cancelled (its antes refunded), for good.

The closed game refuses moves (FAILED_PRECONDITION naming why), every view (any replica, a cold
one too) answers finished with nobody to act and the reason, watches end, the log and the public
stream end with one GameClosed record (the reason public, who and which request id not), and a
retry, 50 duplicates or another close change nothing. Refusals change nothing.

A game id closed before any creation reached its log (the lobby undid a start whose CreateGame
was still in flight, or never sent) gets a tombstone: every later CreateGame of that id, on any
replica, answers FAILED_PRECONDITION with the reason (never a playable game whose antes are back),
and nothing about it is public or playable. A close and a create racing end in exactly one of:
the game created and then closed, or the tombstone and every create refused.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import grpc
import pytest
from court_client import result_dict
from court_contract import records as krec
from court_proto.court.rules.v1 import rules_pb2
from court_rules import projector

from tests.fixtures.nats import consumer_drained

from .helpers import EventLog, view_after

C = grpc.StatusCode
REASON = "its lobby's start was undone (cancelled by the host: wrong table); every ante is refunded"


async def _code(coro: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await coro
    return info.value.code(), info.value.details() or ""


async def _until(ready: Any) -> None:
    while not ready():
        await asyncio.sleep(0.01)


async def test_the_lobby_closes_a_live_game_for_good(replicas: Any, rules: Any) -> None:
    lobby = replicas.client(rules, "lobby", "service")
    created = await lobby.create_game(
        "queens_court", ["ann", "bob", "bot:random"], {"players": 3}, request_id="start-1"
    )
    gid = created.game_id
    seat = created.view.to_act[0]
    mover = replicas.client(rules, ["ann", "bob", "bot:random"][seat], "bot" if seat == 2 else "player")
    mine = await mover.get_view(gid, seat)
    first = await mover.submit(gid, mine.legal_actions[0], seat)
    after = await view_after(mover, gid, seat, first)
    other = await replicas.start()  # holds the game in its cache, as it stood before the close
    on_other = {p: replicas.client(other, p, retries=0) for p in ("ann", "bob")}
    assert not (await on_other["ann"].get_view(gid)).finished
    watched: list[Any] = []

    async def watch() -> None:
        async for u in on_other["bob"].watch(gid, resume=False):
            watched.append(u)

    watcher = asyncio.create_task(watch())
    await asyncio.wait_for(_until(lambda: bool(watched)), 15)

    async with (
        EventLog(replicas.nats.url, "queens_court", gid) as public,
        EventLog(replicas.nats.url, "queens_court", gid, full=True) as full,
    ):
        answers = await asyncio.gather(
            *[lobby.close_game(gid, REASON, request_id="close-1") for _ in range(50)]
        )
        assert len({a.SerializeToString(deterministic=True) for a in answers}) == 1  # one answer
        closed = answers[0]
        assert closed.closed_now and closed.view.finished and not closed.view.to_act
        assert closed.view.result.closed_reason == REASON and not closed.view.result.winners
        assert not closed.view.HasField("your_seat")  # the spectator's view: no hand
        await public.wait_until(
            lambda rs: any(r.WhichOneof("body") == "closed" for r in rs), what="the closing"
        )
        await full.wait_until(
            lambda rs: any(r.WhichOneof("body") == "closed" for r in rs), what="the closing"
        )
        await asyncio.sleep(0.3)  # nothing else follows it (a second closing record would be here by now)
    for log, hidden in ((public, False), (full, True)):
        assert [(r.seq, r.WhichOneof("body")) for r in log.events] == [
            (0, "created"),
            (1, "move"),
            (1, "closed"),
        ]
        last = log.events[-1]
        assert last.finished and not last.to_act and last.closed.reason == REASON and not last.closed.into
        assert (last.closed.by, last.closed.request_id) == (("lobby", "close-1") if hidden else ("", ""))

    # it refuses moves, everywhere, naming why; views say it is over
    await asyncio.wait_for(watcher, 15)  # the watch on the other replica ended
    assert [u.seq for u in watched] == [1]  # the snapshot; then the stream ended (OK), as for a resumed game
    nxt = after.to_act[0] if after.to_act else None
    assert nxt is not None
    for app in (rules, other, await replicas.start()):  # the one that closed it, a stale cache, a cold one
        sub = ["ann", "bob", "bot:random"][nxt]
        client = replicas.client(app, sub if nxt != 2 else "bots", "bot" if nxt == 2 else "player", retries=0)
        view = await client.get_view(gid, nxt)
        assert view.finished and not view.to_act and not view.legal_actions
        assert result_dict(view.result)["closed_reason"] == REASON
        code, msg = await _code(client.submit(gid, mine.legal_actions[0], nxt))
        assert (
            code == C.FAILED_PRECONDITION
            and "was closed and is over" in msg
            and "cancelled by the host" in msg
        )
    history = await replicas.client(rules, "root", "admin").history(gid)
    assert len(history.moves) == 1 and history.result.finished and history.result.closed_reason == REASON

    # a retry later, another request id, another replica: the closed view, nothing appended
    again = await lobby.close_game(gid, REASON, request_id="close-1")
    assert again.SerializeToString(deterministic=True) == closed.SerializeToString(deterministic=True)
    second = await replicas.client(other, "lobby", "service").close_game(
        gid, "another reason", request_id="close-2"
    )
    assert not second.closed_now and second.view.result.closed_reason == REASON
    records = await rules.store.records(gid)
    assert [r.body.WhichOneof("body") for r in records] == ["created", "move", "closed"]
    # no resume of a closed game either
    code, msg = await _code(lobby.create_game("queens_court", ["ann", "bob", "bot:random"], resume_from=gid))
    assert code == C.INVALID_ARGUMENT  # Queen's Court has no save points: refused before anything else


async def test_close_game_refusals_change_nothing(replicas: Any, rules: Any) -> None:
    lobby = replicas.client(rules, "lobby", "service", retries=0)
    live = await lobby.create_game("hearts", ["ann", "bob", "cy", "di"])
    gid = live.game_id
    ann = replicas.client(rules, "ann", retries=0)
    for client, reason, rid_, game, want, match in (
        (ann, REASON, "c1", gid, C.PERMISSION_DENIED, "only the lobby closes games"),
        (replicas.client(rules, "root", "admin", retries=0), REASON, "c1", gid, C.PERMISSION_DENIED, "lobby"),
        (replicas.client(rules, "bots", "bot", retries=0), REASON, "c1", gid, C.PERMISSION_DENIED, "lobby"),
        (lobby, "", "c1", gid, C.INVALID_ARGUMENT, "reason is required"),
        (lobby, "   ", "c1", gid, C.INVALID_ARGUMENT, "reason is required"),
        (lobby, "x" * 201, "c1", gid, C.INVALID_ARGUMENT, "1 to 200 characters"),
        (lobby, REASON, "", gid, C.INVALID_ARGUMENT, "request_id is required"),
        # an id no CreateGame can ever use (not the 'g' + 24 hex shape): nothing to close, no tombstone
        (lobby, REASON, "c1", "not-a-game-id", C.NOT_FOUND, "no game"),
    ):
        call = (
            client.close_game(game, reason, request_id=rid_)
            if rid_
            else client._call(
                client.stub.CloseGame, rules_pb2.CloseGameRequest(game_id=game, reason=reason), frozenset()
            )
        )
        code, msg = await _code(call)
        assert code == want and match in msg, (code, msg)
    view = await ann.get_view(gid)
    assert not view.finished and view.to_act and not view.result.closed_reason
    assert [r.body.WhichOneof("body") for r in await rules.store.records(gid)] == ["created"]

    # a finished game: nothing to close
    qc = await lobby.create_game("queens_court", ["bot:random", "bot:random"], {"players": 2})
    bots = replicas.client(rules, "bots", "bot", retries=0)
    view = qc.view
    while not view.finished:
        seat = view.to_act[0]
        mine = await bots.get_view(qc.game_id, seat)
        view = await view_after(
            bots, qc.game_id, seat, await bots.submit(qc.game_id, mine.legal_actions[0], seat)
        )
    code, msg = await _code(lobby.close_game(qc.game_id, REASON, request_id="c9"))
    assert code == C.FAILED_PRECONDITION and "finished" in msg
    assert (await bots.get_view(qc.game_id)).result.winners  # still the game's own end


SEATS = ["ann", "bob", "bot:random"]


async def _create(client: Any, gid: str) -> Any:
    """The lobby's saga step: the fixed game id and seed, the saga's request id."""
    return await client.create_game(
        "queens_court", SEATS, {"players": 3}, seed=42, request_id=f"lobby-start-{gid}", game_id=gid
    )


async def _projector_idle(app: Any) -> None:
    """Until the projector has acknowledged every game-log record (so anything it publishes is out)."""
    await consumer_drained(app.nc.jetstream(), krec.game_stream(0), projector.DURABLE, timeout=10)


async def test_a_game_closed_before_it_was_created_never_starts_and_shows_nothing(
    replicas: Any, rules: Any
) -> None:
    gid = "g" + secrets.token_hex(12)
    other = await replicas.start()
    lobby_a = replicas.client(rules, "lobby", "service", retries=0)
    lobby_b = replicas.client(other, "lobby", "service", retries=0)
    everything = EventLog(replicas.nats.url, "queens_court", gid)
    everything.subject = f"{krec.PUBLIC_PREFIX}*.{gid}"  # any game's public subject of this id
    async with everything, EventLog(replicas.nats.url, "queens_court", gid, full=True) as full:
        closed = await lobby_a.close_game(gid, REASON, request_id=f"lobby-close-{gid}")
        # closed: finished, nobody to act, the reason; no game, no seats, no hand, no options
        assert closed.closed_now and closed.game_id == gid
        v = closed.view
        assert v.finished and not v.to_act and not v.seats and not v.game and not v.HasField("your_seat")
        assert v.result.finished and v.result.closed_reason == REASON and not v.result.winners
        assert not v.HasField("view") and not v.HasField("options") and not v.legal_actions

        # the saga's CreateGame landing afterwards, on either replica (the one that closed it, a cold
        # one), any number of times: refused with the reason, never a game
        for client in (
            lobby_b,
            lobby_a,
            lobby_b,
            replicas.client(await replicas.start(), "lobby", "service"),
        ):
            code, msg = await _code(_create(client, gid))
            assert code == C.FAILED_PRECONDITION, (code, msg)
            assert "was closed before it was created" in msg and "cancelled by the host" in msg
        # a player (a seat the game would have had), any read or act: the same refusal, nothing else
        ann = replicas.client(other, "ann", retries=0)
        for call in (ann.get_view(gid), ann.legal_actions(gid), ann.get_view(gid, 0)):
            code, msg = await _code(call)
            assert code == C.FAILED_PRECONDITION and "was closed before it was created" in msg
        code, _ = await _code(_first(ann.watch(gid, resume=False)))
        assert code == C.FAILED_PRECONDITION
        code, _ = await _code(replicas.client(other, "root", "admin", retries=0).history(gid))
        assert code == C.FAILED_PRECONDITION

        # retries and other closes: the same closed answer, nothing appended
        again = await lobby_b.close_game(gid, REASON, request_id=f"lobby-close-{gid}")
        assert again.SerializeToString(deterministic=True) == closed.SerializeToString(deterministic=True)
        late = await lobby_b.close_game(gid, "another reason", request_id="close-2")
        assert not late.closed_now and late.view.result.closed_reason == REASON

        # the log: the tombstone alone, seq 0, no game; the public stream: nothing at all
        await full.wait_until(lambda rs: len(rs) >= 1, what="the tombstone")
        await _projector_idle(rules)
        await asyncio.sleep(0.2)
        assert [(r.seq, r.WhichOneof("body"), r.game) for r in full.events] == [(0, "closed", "")]
        assert full.events[0].closed.reason == REASON and not full.events[0].closed.into
        assert everything.events == []
    records = await rules.store.records(gid)
    assert [(r.body.seq, r.body.WhichOneof("body")) for r in records] == [(0, "closed")]
    # the projector went on past it: a later game is public as usual
    live = await lobby_a.create_game("queens_court", SEATS, {"players": 3})
    async with EventLog(replicas.nats.url, "queens_court", live.game_id) as public:
        await public.wait_until(lambda rs: len(rs) >= 1, what="the next game's creation")


async def _first(stream: Any) -> Any:
    async for u in stream:
        return u
    return None


async def test_create_and_close_racing_on_two_replicas_end_in_one_outcome(replicas: Any, rules: Any) -> None:
    other = await replicas.start()
    lobbies = [replicas.client(app, "lobby", "service") for app in (rules, other)]
    outcomes = {"created then closed": 0, "closed before created": 0}

    async def later(delay: float, call: Any) -> Any:
        await asyncio.sleep(delay)
        return await call

    for n in range(16):
        gid = "g" + secrets.token_hex(12)
        # the creates' head start: they win at first; the closes' head start (the create still in
        # flight, or sent late) from round 8 on, growing, so both outcomes are raced
        lag = 0.0 if n < 8 else 0.003 * (n - 7)
        calls = []
        for lb in lobbies:
            for _ in range(2):
                calls += [
                    later(lag, _create(lb, gid)),
                    lb.close_game(gid, REASON, request_id=f"lobby-close-{gid}"),
                ]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        creates = answers[0::2]
        closes = answers[1::2]
        assert all(isinstance(c, rules_pb2.CloseGameResponse) for c in closes), closes
        assert len({c.view.game for c in closes}) == 1  # every close saw the same thing
        records = [r.body for r in await rules.store.records(gid)]
        cold = replicas.client(await replicas.start(), "ann", retries=0)
        if closes[0].view.game:  # the creation won: one game, then its closing record; it is over
            outcomes["created then closed"] += 1
            assert all(isinstance(c, rules_pb2.CreateGameResponse) for c in creates), creates
            assert len({c.game_id for c in creates}) == 1
            assert [(r.seq, r.WhichOneof("body")) for r in records] == [(0, "created"), (0, "closed")]
            view = await cold.get_view(gid)
            assert view.finished and not view.to_act and view.result.closed_reason == REASON
        else:  # the tombstone won: every create refused, no game ever
            outcomes["closed before created"] += 1
            for c in creates:
                assert isinstance(c, grpc.aio.AioRpcError), c
                assert c.code() == C.FAILED_PRECONDITION and "closed before it was created" in (
                    c.details() or ""
                )
            assert [(r.seq, r.WhichOneof("body"), r.game) for r in records] == [(0, "closed", "")]
            code, _ = await _code(cold.get_view(gid))
            assert code == C.FAILED_PRECONDITION
        # either way exactly one close closed it (closed_now is the close request's own: all share it)
        assert len({c.SerializeToString(deterministic=True) for c in closes}) == 1
        assert sum(1 for r in records if r.WhichOneof("body") == "closed") == 1
    print(f"\ncreate/close races: {outcomes}")
    assert all(outcomes.values()), outcomes  # both were raced
