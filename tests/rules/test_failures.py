"""Failures: a replica dying mid-game, nats-server restarting, a crash between the log append
and the answer (the projector's own failures: test_projector.py)."""

from __future__ import annotations

import random
from typing import Any

import grpc
import pytest
from court_rules.application import Faults

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
    created = await replicas.client(a, "lobby", "service").create_game(
        "court_wars", players, {"players": 3, "turn_limit": 80}
    )
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
    created = await replicas.client(app, "lobby", "service").create_game(
        "the_court", players, {"mode": "burn"}
    )
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
    again = await replicas.client(app, "lobby", "service").create_game(
        "queens_court", ["a", "b"], {"players": 2}
    )
    assert again.view.seq == 0


@pytest.mark.slow
@pytest.mark.parametrize("where", ["mid_game", "last_move"])
async def test_crash_between_log_append_and_answer(replicas: Any, where: str) -> None:
    """The move survives (its record is in the log, the one write); the client's retry on another
    replica gets the first answer and applies nothing twice; the projector makes every record
    public once, the final one included when nobody touches the game again."""
    players = ["lu", "mo"]
    # the doomed replica's projector may die with the crashed move's record fetched, unacknowledged:
    # JetStream gives it to the survivor's projector after the durable's ack wait (30 s by default;
    # 2 here, set by the first projector, which creates the durable)
    quick = {"COURT_PROJECTOR_ACK_WAIT": "2"}
    probe = await replicas.start(quick)
    created = await replicas.client(probe, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    rng = random.Random(9)
    # for the last move: play the game once to learn its moves, then again (same seed) for real
    seq_of_crash = 6
    script: list[Any] = []
    if where == "last_move":
        script = await _script(replicas, probe, gid, players, rng)
        seq_of_crash = len(script)
        seed = (await replicas.client(probe, "root", "admin").history(gid)).seed
        created = await replicas.client(probe, "lobby", "service").create_game(
            "queens_court", players, {"players": 2}, seed=seed
        )
        gid = created.game_id
    await probe.kill()  # the doomed replica's own projector is the only one until it dies
    faults = CrashAfterAppend(seq_of_crash)
    doomed = await replicas.start(quick, faults=faults)
    clients = _clients(replicas, doomed, players, retries=0)
    async with (
        EventLog(replicas.nats.url, "queens_court", gid) as events,
        EventLog(replicas.nats.url, "queens_court", gid, full=True) as full,
    ):
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
        survivor = await replicas.start(quick)
        if where == "mid_game":
            # the client retries on another replica: the first answer, nothing applied twice
            seat, act, rid = crashed
            reply = await replicas.client(survivor, players[seat]).submit(gid, act, seat, request_id=rid)
            assert reply.seq == seq_of_crash
            final = await play_out(_clients(replicas, survivor, players), gid, rng)
            last = final.seq
        else:
            last = seq_of_crash  # nobody touches the game again: the projector publishes the end
        await events.wait_until(has_game_end(last), what="the crashed move's public record")
        await full.wait_until(has_game_end(last))
        assert_complete(events.events, last)
        assert_complete(full.events, last, public=False)
        assert events.raw_ids == [f"{gid}-{s}" for s in range(last + 1)]
    hist = await replicas.client(survivor, "root", "admin").history(gid)
    assert len(hist.moves) == last and hist.moves[seq_of_crash - 1].request_id == f"move-{seq_of_crash}"


async def _script(replicas: Any, app: Any, gid: str, players: list[str], rng: random.Random) -> list[Any]:
    """The actions of one whole random game (played on ``app``)."""
    await play_out(_clients(replicas, app, players), gid, rng)
    hist = await replicas.client(app, "root", "admin").history(gid)
    return [m.action for m in hist.moves]
