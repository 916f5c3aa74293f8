"""Failures: a replica dying mid-game, nats-server restarting, a crash between the state write
and the event publish."""

from __future__ import annotations

import random
from typing import Any

import grpc
import pytest
from court_kit.errors import Unavailable
from court_rules.servicer import Faults

from .helpers import EventLog, assert_complete, has_game_end, play_out


class Crash(Exception):
    """Stands for the process dying at the injection point (the test then kills the replica)."""


class CrashAfterAppend(Faults):
    def __init__(self, at_seq: int):
        self.at_seq = at_seq
        self.fired = False

    def after_append(self, entry: Any, seq: int) -> None:
        if seq == self.at_seq and not self.fired:
            self.fired = True
            raise Crash(f"crash after appending move {seq} of {entry.game_id}")


def _clients(replicas: Any, app: Any, players: list[str], **kw: Any) -> dict[int, Any]:
    return {i: replicas.client(app, p, **kw) for i, p in enumerate(players)}


@pytest.mark.slow
async def test_replica_killed_mid_game_other_finishes(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    players = ["gil", "hal", "ida"]
    created = await replicas.client(a, "lobby", "service").create_game("court_wars", players,
                                                                       {"players": 3, "turn_limit": 80})
    gid = created.game_id
    rng = random.Random(3)
    on_a = _clients(replicas, a, players)
    async with EventLog(replicas.nats.url, "court_wars", gid) as events:
        # half the game on replica A
        view = created.view
        for _ in range(25):
            seat = view.to_act[0]
            mine = await on_a[seat].get_view(gid, seat)
            view = (await on_a[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)).view
        mid = view.seq
        await a.kill()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await replicas.client(a, players[0], retries=0).get_view(gid)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        # replica B, which never served this game, finishes it
        final = await play_out(_clients(replicas, b, players), gid, rng)
        assert final.seq > mid and final.finished
        await events.wait_until(has_game_end(final.seq))
        assert_complete(events.events, final.seq)
    hist = await replicas.client(b, "root", "admin").history(gid)
    assert [m.seq for m in hist.moves] == list(range(1, final.seq + 1))


@pytest.mark.slow
async def test_nats_restart_mid_game_service_recovers(replicas: Any) -> None:
    app = await replicas.start()
    players = ["jo", "kim"]
    created = await replicas.client(app, "lobby", "service").create_game("the_court", players,
                                                                         {"mode": "burn"})
    gid = created.game_id
    clients = _clients(replicas, app, players, retries=12, max_backoff=0.5)
    rng = random.Random(5)
    view = created.view
    for _ in range(10):
        seat = view.to_act[0]
        mine = await clients[seat].get_view(gid, seat)
        view = (await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)).view
    replicas.nats.restart()
    # the same service instance, its NATS connection re-established on its own, finishes the game
    final = await play_out(clients, gid, rng)
    assert final.finished and final.seq > 10
    async with EventLog(replicas.nats.url, "the_court", gid) as events:
        await events.wait_until(has_game_end(final.seq))
        assert_complete(events.events, final.seq)
    # and a new game works too
    again = await replicas.client(app, "lobby", "service").create_game("queens_court", ["a", "b"],
                                                                       {"players": 2})
    assert again.view.seq == 0


@pytest.mark.slow
@pytest.mark.parametrize("where", ["mid_game", "last_move"])
async def test_crash_between_state_write_and_publish(replicas: Any, where: str) -> None:
    """The move survives (it is in the log) and its events are published by someone else:
    the next writer (mid-game) or the sweeper (after the last move nobody touches the game)."""
    players = ["lu", "mo"]
    probe = await replicas.start(sweep_ack_wait=1.0)
    created = await replicas.client(probe, "lobby", "service").create_game("queens_court", players,
                                                                           {"players": 2})
    gid = created.game_id
    rng = random.Random(9)
    # for the last move: play the game once to learn its moves, then again (same seed) for real
    seq_of_crash = 6
    script: list[Any] = []
    if where == "last_move":
        script = await _script(replicas, probe, gid, players, rng)
        seq_of_crash = len(script)
        seed = (await replicas.client(probe, "root", "admin").history(gid)).seed
        created = await replicas.client(probe, "lobby", "service").create_game("queens_court", players,
                                                                               {"players": 2}, seed=seed)
        gid = created.game_id
    faults = CrashAfterAppend(seq_of_crash)
    doomed = await replicas.start(sweep_ack_wait=1.0, faults=faults)
    clients = _clients(replicas, doomed, players, retries=0)
    async with EventLog(replicas.nats.url, "queens_court", gid) as events, \
            EventLog(replicas.nats.url, "queens_court", gid, full=True) as full:
        view = created.view
        crashed = None
        while view.seq < seq_of_crash:
            seat = view.to_act[0]
            mine = await clients[seat].get_view(gid, seat)
            act = script[mine.seq] if where == "last_move" else rng.choice(list(mine.legal_actions))
            rid = f"move-{mine.seq + 1}"
            try:
                view = (await clients[seat].submit(gid, act, seat, request_id=rid)).view
            except grpc.aio.AioRpcError as err:
                assert faults.fired and err.code() == grpc.StatusCode.INTERNAL
                crashed = (seat, act, rid)
                break
        assert crashed is not None
        await doomed.kill()
        survivor = await replicas.start(sweep_ack_wait=1.0)
        if where == "mid_game":
            # the client retries on another replica: the first answer, nothing applied twice
            seat, act, rid = crashed
            reply = await replicas.client(survivor, players[seat]).submit(gid, act, seat, request_id=rid)
            assert reply.seq == seq_of_crash
            final = await play_out(_clients(replicas, survivor, players), gid, rng)
            last = final.seq
        else:
            last = seq_of_crash  # nobody touches the game again: the sweeper must publish GameEnded
        await events.wait_until(has_game_end(last), what="the crashed move's events")
        await full.wait_until(has_game_end(last))
        assert_complete(events.events, last)
        assert_complete(full.events, last)
    hist = await replicas.client(survivor, "root", "admin").history(gid)
    assert len(hist.moves) == last and hist.moves[seq_of_crash - 1].request_id == f"move-{seq_of_crash}"


async def _script(replicas: Any, app: Any, gid: str, players: list[str], rng: random.Random) -> list[Any]:
    """The actions of one whole random game (played on ``app``)."""
    await play_out(_clients(replicas, app, players), gid, rng)
    hist = await replicas.client(app, "root", "admin").history(gid)
    return [m.action for m in hist.moves]


@pytest.mark.slow
async def test_a_publish_failing_part_way_is_repaired_in_the_background(replicas: Any) -> None:
    """NATS stores the first events of a move and then fails: the move stands, the reply is OK, and
    the replica republishes the whole move on its own (no further move, no sweeper needed)."""
    app = await replicas.start(sweep_delay=3600)  # the sweeper stays out of this
    original = app.store.publish_events
    armed = {"left": 2}

    async def flaky(messages: list[Any]) -> None:
        if armed["left"] and len(messages) > 2 and any(".ActionApplied" in m[0] for m in messages):
            armed["left"] -= 1
            await original(messages[: len(messages) // 2])  # a prefix gets in, then the connection fails
            raise Unavailable("injected: the publish failed part-way")
        await original(messages)

    app.store.publish_events = flaky
    players = ["nu", "xi"]
    created = await replicas.client(app, "lobby", "service").create_game("queens_court", players, {"players": 2})
    gid = created.game_id
    c = replicas.client(app, "nu")
    async with EventLog(replicas.nats.url, "queens_court", gid) as public, \
            EventLog(replicas.nats.url, "queens_court", gid, full=True) as full:
        view = await c.get_view(gid, 0)
        reply = await c.submit(gid, view.legal_actions[0], 0)
        assert reply.seq == 1 and armed["left"] < 2
        await public.wait_until(lambda evs: any(e.seq == 1 and e.type == "TurnStarted" for e in evs))
        await full.wait_until(lambda evs: any(e.seq == 1 and e.type == "TurnStarted" for e in evs))
        assert_complete(public.events, 1)
        assert_complete(full.events, 1)


@pytest.mark.slow
async def test_a_lost_middle_event_leaves_no_end_marker_and_the_next_replica_repairs_it(replicas: Any) -> None:
    """A publish loses one message of a move and stores the next ones (as a stream leader change can),
    then its replica dies before repairing: no end marker vouches for the move, so the replica that
    loads the game next republishes it, and every event of every move is stored exactly once."""
    doomed = await replicas.start(sweep_delay=3600)  # the sweeper stays out of this
    publisher = doomed.store.publisher
    original = publisher.publish_all
    lost: list[str] = []

    async def lossy(messages: Any, **kw: Any) -> Any:
        if not lost and any(".ActionApplied" in m[0] for m in messages):
            kept = [m for i, m in enumerate(messages) if i != 1]
            lost.append(messages[1][2]["Nats-Msg-Id"])
            await original(kept, **kw)
            raise Unavailable("injected: one message lost, the others stored")
        return await original(messages, **kw)

    publisher.publish_all = lossy
    doomed.outbox._schedule_repair = lambda entry: None  # it dies before its background repair runs
    players = ["pi", "rho"]
    created = await replicas.client(doomed, "lobby", "service").create_game("queens_court", players, {"players": 2})
    gid = created.game_id
    view = await replicas.client(doomed, "pi").get_view(gid, 0)
    reply = await replicas.client(doomed, "pi").submit(gid, view.legal_actions[0], 0)
    assert reply.seq == 1 and lost, "the move stands although its events are incomplete"
    # the streams hold move 1's other events but no end marker for it: nobody may take it as complete
    assert await doomed.store.last_complete_event_seq("queens_court", gid) == (0, 0)
    await doomed.kill()

    survivor = await replicas.start(sweep_delay=3600)
    await replicas.client(survivor, "pi").get_view(gid, 0)  # loading the game checks its events
    async with EventLog(replicas.nats.url, "queens_court", gid) as public, \
            EventLog(replicas.nats.url, "queens_court", gid, full=True) as full:
        for log in (public, full):
            await log.wait_until(lambda evs: any(e.seq == 1 and e.type == "TurnStarted" for e in evs),
                                 what="move 1's events, republished")
            keys = [(e.seq, e.index) for e in log.events]
            assert len(keys) == len(set(keys)), "no event is stored twice"
            assert sorted(keys) == [(s, i) for s in (0, 1) for i in range(max(k[1] for k in keys if k[0] == s) + 1)]
        assert lost[0] in public.raw_ids + full.raw_ids



async def test_sweeper_survives_an_empty_fetch(rules: Any) -> None:
    """A pull fetch can end on a status message (408 Request Timeout, 409 Leadership Change) with
    no record at all; nats-py then returns ``[]``. The sweeper used to raise IndexError on it
    (``msgs[-1]``): a warning, its subscription dropped and re-made, a second's pause, every time.
    Now an empty batch checks nothing and the same subscription fetches again at once."""
    import asyncio

    from court_rules import outbox as outbox_mod

    class EmptyFirst:
        def __init__(self, real: Any):
            self.real, self.calls, self.second = real, 0, asyncio.Event()

        async def fetch(self, batch: int, timeout: float) -> list[Any]:
            self.calls += 1
            if self.calls == 1:
                return []
            self.second.set()
            return await self.real.fetch(batch, timeout=timeout)

        async def unsubscribe(self) -> None:
            await self.real.unsubscribe()

    await rules._stop_background()  # stop the app's own sweeper; run one whose first fetch is empty
    js = rules.store.js
    real_pull = js.pull_subscribe
    subs: list[EmptyFirst] = []
    first_sub = asyncio.Event()

    async def pull_subscribe(*a: Any, **kw: Any) -> Any:
        subs.append(EmptyFirst(await real_pull(*a, **kw)))
        first_sub.set()
        return subs[-1]

    warnings: list[str] = []
    real_warning = outbox_mod.log.warning
    js.pull_subscribe = pull_subscribe  # type: ignore[method-assign]
    outbox_mod.log.warning = lambda msg, **kw: warnings.append(msg)  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(rules.outbox.run_sweeper(stop, delay=0.0))
    try:
        await asyncio.wait_for(first_sub.wait(), 10)
        await asyncio.wait_for(subs[0].second.wait(), 10)
        assert len(subs) == 1 and warnings == [], (len(subs), warnings)
    finally:
        stop.set()
        outbox_mod.log.warning = real_warning  # type: ignore[method-assign]
        js.pull_subscribe = real_pull  # type: ignore[method-assign]
        await asyncio.wait_for(task, 10)
