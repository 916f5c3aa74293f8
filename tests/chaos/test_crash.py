"""Every NATS server killed at once (SIGKILL) while moves are being acknowledged (issue 33).

A 3-server NATS cluster with R3 streams and ``sync_interval: always`` (as deploy/base/nats/nats.conf
sets it) and one rules replica; four Queen's Court games whose two people the test plays through
the rules service, every move recorded in tests/chaos/history.py's History. Once 40 moves are
acknowledged, all three nats-server processes are killed with SIGKILL in the same instant, while a
move is on its way (submitted, not yet answered); then they are started again on their stores. The rules replica reconnects by itself
and the people play on (their client retries a move whose answer was lost, with the same request
id) until at least 20 more moves are acknowledged (some hundreds, seen). Then every game's log is read and checked against the history:
every move acknowledged before or after the crash is in its log exactly once, at its seq; a move
whose outcome the person never learnt is in it once or not at all; no gap; the public projection is
the log's redaction. Seen: 40 moves acknowledged before the crash, 407 after, one move of unknown
outcome (not applied), 451 records checked, 0 anomalies; 16 s.

What this does not show: what an operating-system crash or a power cut loses. A killed process
leaves what it wrote in the kernel's page cache, which the kernel writes out whatever the fsync
policy, so this test would pass with NATS's default ``sync_interval`` too; it shows that no
acknowledged move lives only in a nats-server's own memory (a process crash of every server at
once loses none), and that the cluster and the rules service recover from it. Losing the page
cache needs a virtual machine to crash, or a block device that drops unsynced writes
(device-mapper's dm-flakey / dm-log-writes); neither is available here (no VM, no /dev/mapper in
this container), so the fsync policy's promise (deploy/README.md, "Durability") rests on
Jepsen's analysis and the ``make bench ONLY=service`` measurements, not on a test.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import nats
import pytest
from court_client import RulesClient
from court_client.rules import action_json
from court_rules.app import RulesApp

from tests.chaos.cluster import NatsCluster, wait_jetstream
from tests.chaos.history import History, check_games, read_game, unknown_applied
from tests.fixtures import keys
from tests.rules.conftest import settings_for

pytestmark = [pytest.mark.slow, pytest.mark.integration]

GAMES = 4
BEFORE, AFTER = 40, 20  # moves acknowledged before the crash, and after it
PEOPLE = ("ann", "ben")


@pytest.fixture
async def crashable(tmp_path: Path) -> AsyncIterator[tuple[NatsCluster, RulesApp]]:
    cluster = NatsCluster(tmp_path / "nats", jetstream="  sync_interval: always")
    cluster.start()
    app: RulesApp | None = None
    try:
        await wait_jetstream(cluster.urls)
        app = await RulesApp.start(settings_for(cluster.urls, stream_replicas=3))
        yield cluster, app
    finally:
        if app is not None:
            await app.stop(0)
        cluster.stop()


async def test_every_nats_server_killed_at_once_loses_no_acknowledged_move(
    crashable: tuple[NatsCluster, RulesApp],
) -> None:
    cluster, app = crashable
    lobby = RulesClient(app.address, keys.token("lobby", "service"))
    players = {p: RulesClient(app.address, keys.token(p, "player"), retries=6, timeout=5) for p in PEOPLE}
    history = History()
    acked = [0]
    progress = asyncio.Event()
    stop = asyncio.Event()
    rng = random.Random(33)

    async def play(gid: str) -> None:
        """Both seats of one game, as their two people would: look, move, look again."""
        attempt = 0
        while not stop.is_set():
            try:
                seen = await lobby.get_view(gid)
                if seen.finished:
                    return
                seat = seen.to_act[0]
                view = await players[PEOPLE[seat]].get_view(gid, seat)
            except grpc.aio.AioRpcError:
                continue  # NATS away: the client gave up; look again
            if seat not in view.to_act or not view.legal_actions:
                continue
            act = rng.choice(list(view.legal_actions))
            attempt += 1
            rid = f"crash-{gid}-{view.seq}-{seat}-{attempt}"
            op = history.invoke(PEOPLE[seat], gid, rid, seat, action_json(act))
            try:
                reply = await players[PEOPLE[seat]].submit(gid, act, seat, request_id=rid)
            except grpc.aio.AioRpcError as err:
                if err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
                    history.refused(op, err.code().name)
                else:
                    history.unknown(op, f"{err.code().name}: {err.details()}")
                continue
            history.ok(op, reply.view.seq)
            acked[0] += 1
            progress.set()

    async def until(n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while acked[0] < n:
            assert time.monotonic() < deadline, f"{acked[0]} moves acknowledged, waiting for {n}"
            progress.clear()
            try:
                await asyncio.wait_for(progress.wait(), deadline - time.monotonic())
            except TimeoutError:
                pass

    try:
        gids = [(await lobby.create_game("queens_court", list(PEOPLE))).game_id for _ in range(GAMES)]
        tasks = [asyncio.create_task(play(g)) for g in gids]
        await until(BEFORE, 120)
        deadline = time.monotonic() + 30
        while not any(op.complete is None for op in history.ops):  # the kill lands on a move on its way
            assert time.monotonic() < deadline, "no move in flight"
            await asyncio.sleep(0)  # let the players' tasks run on to their next submit
        in_flight = sum(1 for op in history.ops if op.complete is None)
        for node in cluster.nodes:  # SIGKILL, all three before any restarts
            assert node.proc is not None
            node.proc.kill()
        for node in cluster.nodes:
            node.kill()  # reaps it
        at_crash = acked[0]
        cluster.start()
        await wait_jetstream(cluster.urls)
        await until(at_crash + AFTER, 180)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        nc = await nats.connect(cluster.urls.split(","))
        try:
            logs = [await read_game(nc, "queens_court", g) for g in gids]
        finally:
            await nc.close()
        found = check_games(logs, history)
        applied, not_applied = unknown_applied(logs, history)
        counts = history.counts()
        print(
            f"\ncrash: {at_crash} moves acknowledged before every nats-server was killed ({in_flight} in "
            f"flight), {acked[0] - at_crash} after; {len(history.ops)} operations {dict(counts)} "
            f"(unknown: {applied} applied, {not_applied} not); {sum(len(g.entries) for g in logs)} records "
            f"checked; {len(found)} anomalies"
        )
        assert found == []
    finally:
        stop.set()
        await lobby.close()
        for c in players.values():
            await c.close()
