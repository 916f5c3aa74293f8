"""WatchGame: one update per move, across replicas, resumable from a sequence number."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest
from court_client import view_dict
from court_kit.errors import Unavailable
from court_kit.tokens import Identity
from court_proto.court.rules.v1 import rules_pb2
from court_rules import application, games
from court_rules.views import update_bytes

from .helpers import count_refreshes, play_out


async def _collect(client: Any, gid: str, seat: int | None, after: int | None, out: list[Any]) -> None:
    async for u in client.watch(gid, seat, after_seq=after, resume=False):
        out.append(u)


async def _moves(clients: dict[int, Any], gid: str, rng: random.Random, n: int) -> None:
    """``n`` random legal moves, each by the first seat to act."""
    for _ in range(n):
        view = await clients[0].get_view(gid)
        seat = view.to_act[0]
        mine = await clients[seat].get_view(gid, seat)
        await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)


async def _until(ready: Any) -> None:
    while not ready():
        await asyncio.sleep(0.01)


async def test_watchers_on_another_replica_see_every_move(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    players = ["nia", "oz"]
    created = await replicas.client(a, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    seat_updates: list[Any] = []
    spectator_updates: list[Any] = []
    tasks = [
        asyncio.create_task(_collect(replicas.client(b, "nia"), gid, None, None, seat_updates)),
        asyncio.create_task(_collect(replicas.client(b, "stranger"), gid, None, None, spectator_updates)),
    ]
    # play only once both watchers hold their snapshot (of seq 0): a watch sees the game from the
    # position it finds, so a move made before the stream opened would not come as an update
    await asyncio.wait_for(_until(lambda: bool(seat_updates and spectator_updates)), 15)
    final = await play_out({i: replicas.client(a, p) for i, p in enumerate(players)}, gid, random.Random(1))
    await asyncio.wait_for(asyncio.gather(*tasks), 15)  # both streams end after the final move
    for updates, seat in ((seat_updates, 0), (spectator_updates, None)):
        seqs = [u.seq for u in updates]
        assert seqs == list(range(final.seq + 1)), "a snapshot, then one update per move, in order"
        assert not updates[0].events and all(u.events for u in updates[1:])
        assert updates[-1].view.finished
        for u in updates:
            assert u.view.HasField("your_seat") == (seat is not None)
            if seat is not None:
                assert u.view.your_seat == seat
    # (tests/rules/test_leaks.py checks every spectator update against the engine's hidden cards)
    assert view_dict(spectator_updates[-1].view) == view_dict(await replicas.client(a, "x").get_view(gid))


async def test_watchers_on_the_movers_replica_never_read_the_log(replicas: Any) -> None:
    """A watcher on the replica that takes the moves is woken by each append as it is committed,
    in process (the replica's NATS connection has ``no_echo``: nats-server does not send it its
    own appends), and reads nothing from the log (it would otherwise read once for every other
    move, make bench's watch mode). Every update still comes once, in order."""
    a = await replicas.start()
    players = ["uma", "vic"]
    created = await replicas.client(a, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    refreshes = count_refreshes(a)
    echoed: list[Any] = []  # wakes that came from nats-server (none: the connection has no_echo)
    real_saw = a.application.wakes._saw

    def saw(subject: str, msg: Any) -> None:
        if not isinstance(msg, application._LocalWake):
            echoed.append(msg)
        real_saw(subject, msg)

    a.application.wakes._saw = saw  # type: ignore[method-assign]
    updates: dict[int, list[Any]] = {0: [], 1: []}
    tasks = [
        asyncio.create_task(_collect(replicas.client(a, p), gid, i, None, updates[i]))
        for i, p in enumerate(players)
    ]
    await asyncio.wait_for(_until(lambda: all(updates.values())), 15)
    clients = {i: replicas.client(a, p) for i, p in enumerate(players)}
    final = await play_out(clients, gid, random.Random(5))
    await asyncio.wait_for(asyncio.gather(*tasks), 15)
    for got in updates.values():
        assert [u.seq for u in got] == list(range(final.seq + 1))
    assert final.seq > 10, final.seq
    assert refreshes == [], f"the watchers read the log {len(refreshes)} times for {final.seq} moves"
    assert echoed == [], "the replica's own appends wake its watchers in process, not through nats-server"


async def test_watch_resumes_from_a_sequence_number(replicas: Any, rules: Any) -> None:
    players = ["pia", "quy"]
    created = await replicas.client(rules, "lobby", "service").create_game(
        "the_court", players, {"mode": "mutual_swap"}
    )
    gid = created.game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    rng = random.Random(2)
    view = created.view
    for _ in range(8):
        seat = view.to_act[0]
        mine = await clients[seat].get_view(gid, seat)
        view = (await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)).view
    # a watcher that saw up to move 3 reconnects: it gets moves 4..8, each with its events, then live ones
    got: list[Any] = []
    task = asyncio.create_task(_collect(clients[1], gid, 1, 3, got))
    final = await play_out(clients, gid, rng)
    await asyncio.wait_for(task, 15)
    assert [u.seq for u in got] == list(range(4, final.seq + 1))
    history = await replicas.client(rules, "root", "admin").history(gid)
    for u in got:
        assert len(u.events) == len(history.moves[u.seq - 1].events)
    # a watch of a finished game from its last seq ends at once; an earlier seq replays the rest
    assert [u async for u in clients[0].watch(gid, after_seq=final.seq)] == []
    tail = [u.seq async for u in clients[0].watch(gid, after_seq=final.seq - 2)]
    assert tail == [final.seq - 1, final.seq]


async def test_client_watch_resumes_after_its_replica_dies(replicas: Any) -> None:
    a = await replicas.start()
    b = await replicas.start()
    players = ["ray", "sol"]
    created = await replicas.client(a, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    # the watcher's channel dies with replica A; the SDK reconnects (here: to B) from the last seq seen
    watcher = replicas.client(a, "ray", retries=50, max_backoff=0.05)
    got: list[int] = []

    async def watch() -> None:
        async for u in watcher.watch(gid):
            got.append(u.seq)
            if u.seq == 3:
                await a.kill()
                watcher.channel = grpc.aio.insecure_channel(b.address)
                watcher.stub = type(watcher.stub)(watcher.channel)

    task = asyncio.create_task(watch())
    await asyncio.wait_for(_until(lambda: bool(got)), 15)  # the snapshot (seq 0) first
    final = await play_out({i: replicas.client(b, p) for i, p in enumerate(players)}, gid, random.Random(4))
    await asyncio.wait_for(task, 15)
    assert got == list(range(final.seq + 1)), "no move missed or repeated across the reconnect"


async def test_streams_opened_as_a_move_lands_miss_and_repeat_nothing(replicas: Any, rules: Any) -> None:
    """The snapshot and the follow join without a gap: a stream opened while a move lands gets its
    snapshot at the position it found, then every later move exactly once, in order."""
    players = ["uma", "vic"]
    created = await replicas.client(rules, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    watchers = [replicas.client(rules, f"w{i}") for i in range(8)]
    rng = random.Random(5)
    last = 6
    streams = 90
    got: list[list[int]] = [[] for _ in range(streams)]

    async def follow(i: int) -> None:
        async for u in watchers[i % len(watchers)].watch(gid, resume=False):
            got[i].append(u.seq)
            if u.seq >= last:
                return

    tasks = []
    for n in range(1, last + 1):
        view = await clients[0].get_view(gid)
        seat = view.to_act[0]
        mine = await clients[seat].get_view(gid, seat)
        # a batch of streams opens while move n is submitted
        tasks += [
            asyncio.create_task(follow(i)) for i in range((n - 1) * streams // last, n * streams // last)
        ]
        # one turn of the loop: the batch's calls go out before the move's, so the server is still
        # opening them (reading the snapshot, subscribing) when the move lands; otherwise the
        # server may take the move's call first and every stream of the batch opens after it
        await asyncio.sleep(0)
        await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)
        await asyncio.wait_for(_until(lambda n=n: all(got[i] for i in range(n * streams // last))), 30)
    # a stream that missed the last move would wait for it for ever: give them a bound, then judge
    _done, pending = await asyncio.wait(tasks, timeout=30)
    for t in pending:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for seqs in got:
        assert seqs == list(range(seqs[0], last + 1)), f"a stream saw {seqs}: every seq once, in order"
    # the batches did open on both sides of their move (the race was exercised)
    firsts = [seqs[0] for seqs in got]
    assert any(
        firsts[i] == n - 1
        for n in range(1, last + 1)
        for i in range((n - 1) * streams // last, n * streams // last)
    )


async def test_watchers_of_one_game_share_one_subscription_and_each_sees_every_update(
    replicas: Any, rules: Any
) -> None:
    """N WatchGame streams of one game on one replica hold one NATS subscription between them
    (``application.Wakes``): all of them get every update, in order, the same updates; one cancelling
    its stream leaves the others undisturbed; one joining while a move lands gets neither a gap nor
    a repeat; the subscription goes once the last watcher has left."""
    players = ["wen", "xia"]
    created = await replicas.client(rules, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    subject = rules.store.subject(gid)

    def subscriptions() -> int:  # the replica's NATS subscriptions on the game's log subject
        return sum(1 for sub in rules.nc._subs.values() if sub.subject == subject)

    n = 5
    got: list[list[Any]] = [[] for _ in range(n + 1)]
    tasks = [
        asyncio.create_task(_collect(replicas.client(rules, f"spectator{i}"), gid, None, None, got[i]))
        for i in range(n)
    ]
    await asyncio.wait_for(_until(lambda: all(got[i] for i in range(n))), 15)
    assert len(rules.application.wakes) == 1, "one shared subscription for the game"
    assert subscriptions() == 1
    rng = random.Random(7)
    await _moves(clients, gid, rng, 2)
    await asyncio.wait_for(_until(lambda: all(len(got[i]) == 3 for i in range(n))), 15)
    # watcher 0 goes away; the others keep the subscription and every update
    tasks[0].cancel()
    await asyncio.gather(tasks[0], return_exceptions=True)
    await asyncio.wait_for(_until(lambda: len(rules.application.wakes._games[subject][1]) == n - 1), 15)
    assert subscriptions() == 1
    # one more watcher joins while a move is being submitted
    view = await clients[0].get_view(gid)
    seat = view.to_act[0]
    mine = await clients[seat].get_view(gid, seat)
    late = asyncio.create_task(_collect(replicas.client(rules, "spectator-late"), gid, None, None, got[n]))
    await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)
    tasks.append(late)
    final = await play_out(clients, gid, rng)
    await asyncio.wait_for(asyncio.gather(*tasks[1:]), 15)  # every stream ends after the final move
    assert [u.seq for u in got[0]] == [0, 1, 2], "the cancelled watcher saw what came before it left"
    for i in range(1, n):
        assert [u.seq for u in got[i]] == list(range(final.seq + 1))
        assert got[i] == got[1], "every watcher of the same seat (here: spectators) gets the same updates"
    late_seqs = [u.seq for u in got[n]]
    assert late_seqs == list(range(late_seqs[0], final.seq + 1)) and late_seqs[0] in (2, 3)
    assert got[n][1:] == got[1][late_seqs[0] + 1 :], "the follow after its snapshot: the same updates"
    # the last watcher gone: no subscription left
    await asyncio.wait_for(_until(lambda: len(rules.application.wakes) == 0 and subscriptions() == 0), 15)


async def test_spectators_share_one_update_per_move_with_no_hand_and_a_seat_gets_its_own(
    replicas: Any, rules: Any
) -> None:
    """Every spectator's stream of a game is served one update per move, built once
    (``views.update_bytes``, memoised by position and seat): it carries no hand and no private
    event part; a seat's own stream gets its own update (its hand), never the spectators', and
    a spectator never gets a seat's."""
    players = ["yan", "zed"]
    created = await replicas.client(rules, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    got: list[list[Any]] = [[], [], []]
    tasks = [
        asyncio.create_task(_collect(replicas.client(rules, "spec-a"), gid, None, None, got[0])),
        asyncio.create_task(_collect(replicas.client(rules, "spec-b"), gid, None, None, got[1])),
        asyncio.create_task(_collect(clients[0], gid, 0, None, got[2])),
    ]
    await asyncio.wait_for(_until(lambda: all(got)), 15)
    await _moves(clients, gid, random.Random(3), 3)
    await asyncio.wait_for(_until(lambda: all(len(g) == 4 for g in got)), 15)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert got[0] == got[1], "the spectators got the same updates"
    for u in got[0]:
        assert not u.view.HasField("your_seat") and "hand" not in view_dict(u.view)
        assert all(not e.HasField("owner") for e in u.events)
    for u in got[2]:
        assert u.view.your_seat == 0 and view_dict(u.view)["hand"]
    # built once per position for the spectators, apart from the seat's, in the game's memo
    entry = rules.application.cache.peek(gid)
    spectators = [k for k in entry.views if k[0] == "update" and k[3] is None]
    seats = [k for k in entry.views if k[0] == "update" and k[3] == 0]
    assert spectators and seats
    for k in spectators:
        assert not rules_pb2.GameUpdate.FromString(entry.views[k]).view.HasField("your_seat")


async def _after_a_nats_restart(replicas: Any, apps: Any, move: Any) -> Any:
    """nats-server restarted under ``apps`` (core NATS loses what is published while a connection is
    down); once they are connected again, ``move()`` (retried while JetStream is not serving the
    streams yet): its result."""
    await asyncio.to_thread(replicas.nats.restart)
    async with asyncio.timeout(30):
        while not all(app.nc.is_connected for app in apps):
            await asyncio.sleep(0.05)
    for _attempt in range(100):
        try:
            return await move()
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.2)
    raise AssertionError("no move was accepted after nats-server restarted")


async def test_views_beside_a_watcher_read_no_log_and_still_show_every_move(
    replicas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GetView on a replica that follows the game's wakes already (a watcher there) answers from
    its entry without reading the log (``Wakes.current``): the person who asks for a view or a hint
    watches the game. Moves are made on another replica; after each, once the watcher here has its
    update, GetView here shows that move and reads nothing. A replica with no watcher reads the log
    for every view. The fault: nats-server restarted under both replicas (core NATS loses what is
    published while a connection is down): the replica with the watcher reads the log again for its
    views, and sees the moves made meanwhile, until its watcher's next read of the log."""
    monkeypatch.setattr(application, "WATCH_POLL", 120.0)  # no poll of the log by the watcher here
    a = await replicas.start()
    b = await replicas.start()
    players = ["pia", "quin"]
    gid = (
        await replicas.client(b, "lobby", "service").create_game("queens_court", players, {"players": 2})
    ).game_id
    reads: dict[str, int] = {"a": 0, "b": 0}
    for name, app in (("a", a), ("b", b)):
        real = app.store.last_sseq

        async def counting(game_id: str, real: Any = real, name: str = name) -> Any:
            reads[name] += 1
            return await real(game_id)

        app.store.last_sseq = counting  # type: ignore[method-assign]
    updates: list[Any] = []
    watcher = asyncio.create_task(_collect(replicas.client(a, "pia"), gid, 0, None, updates))
    await asyncio.wait_for(_until(lambda: bool(updates)), 15)
    on_a = {i: replicas.client(a, p) for i, p in enumerate(players)}
    on_b = {i: replicas.client(b, p) for i, p in enumerate(players)}
    rng = random.Random(7)

    async def move_on_b() -> int:
        view = await on_b[0].get_view(gid, 0)
        seat = view.to_act[0]
        mine = await on_b[seat].get_view(gid, seat)
        reply = await on_b[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)
        return int(reply.seq)

    for _ in range(6):
        seq = await move_on_b()
        await asyncio.wait_for(_until(lambda seq=seq: updates[-1].seq == seq), 15)
        before = reads["a"]
        for seat in (0, 1):
            assert (await on_a[seat].get_view(gid, seat)).seq == seq, "the move made on the other replica"
        assert reads["a"] == before, "no read of the log beside the watcher"
    assert a.application.unread_views >= 12
    assert reads["b"] >= 2 * 6, "b has no watcher: every view there reads the log"

    seq = await _after_a_nats_restart(replicas, (a, b), move_on_b)
    before = reads["a"]
    assert (await on_a[0].get_view(gid, 0)).seq == seq, "after the reconnect the view comes from the log"
    assert reads["a"] == before + 1
    watcher.cancel()


def _count_log_reads(app: Any, gate: Any = None) -> list[str]:
    """Every read of a game's last log record on ``app`` (``GameStore.last_sseq``), by game id;
    ``gate(game_id)``, when given, is awaited before each read (a fault test holds a read there)."""
    reads: list[str] = []
    real = app.store.last_sseq

    async def counting(game_id: str) -> Any:
        reads.append(game_id)
        if gate is not None:
            await gate(game_id)
        return await real(game_id)

    app.store.last_sseq = counting
    return reads


async def test_watchers_joining_a_game_together_share_one_read_of_its_log(
    replicas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streams that open on a game together (its players, as it starts) cost the replica one
    read of the game's log between them, not one each (``RulesApplication._watched``): the first
    reads, the others wait for that read and start from the entry it brought up to date. A watcher
    that joins later, while the replica follows the game's wakes, reads nothing. Every stream still
    gets its snapshot and every update, in order. The fault: nats-server restarted under the
    replica (core NATS loses what is published while a connection is down): the next watcher to
    join reads the log again, and sees the move made meanwhile."""
    monkeypatch.setattr(application, "WATCH_POLL", 120.0)  # no poll of the log by the watchers
    a = await replicas.start()
    b = await replicas.start()
    players = ["ada", "bo", "cy"]
    gid = (
        await replicas.client(b, "lobby", "service").create_game("queens_court", players, {"players": 3})
    ).game_id
    reads = _count_log_reads(a)
    n = 4  # the three seats and a spectator, all at once
    got: list[list[Any]] = [[] for _ in range(n + 2)]
    tasks = [
        asyncio.create_task(
            _collect(
                replicas.client(a, players[i] if i < 3 else "eve"), gid, i if i < 3 else None, None, got[i]
            )
        )
        for i in range(n)
    ]
    await asyncio.wait_for(_until(lambda: all(got[i] for i in range(n))), 15)
    assert reads == [gid], f"{n} streams opened together read the log {len(reads)} times"
    assert a.application.unread_watches == n - 1
    on_b = {i: replicas.client(b, p) for i, p in enumerate(players)}
    rng = random.Random(11)
    await _moves(on_b, gid, rng, 3)
    await asyncio.wait_for(_until(lambda: all(len(got[i]) == 4 for i in range(n))), 15)
    # a spectator joining later reads nothing either, and starts from the latest move
    tasks.append(asyncio.create_task(_collect(replicas.client(a, "fay"), gid, None, None, got[n])))
    await asyncio.wait_for(_until(lambda: bool(got[n])), 15)
    assert got[n][0].seq == 3 and reads == [gid]
    # the fault: a reconnect; the next watcher reads the log and sees the move made meanwhile
    await _after_a_nats_restart(replicas, (a, b), lambda: _moves(on_b, gid, rng, 1))
    tasks.append(asyncio.create_task(_collect(replicas.client(a, "gus"), gid, None, None, got[n + 1])))
    await asyncio.wait_for(_until(lambda: bool(got[n + 1])), 15)
    assert reads == [gid, gid], "after the reconnect a new watcher reads the log"
    assert got[n + 1][0].seq == 4, "its snapshot shows the move made while the connection was down"
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for i in range(n):
        assert [u.seq for u in got[i][:4]] == [0, 1, 2, 3], "a snapshot, then every update in order"
        assert got[i][0].view.HasField("your_seat") == (i < 3)


async def test_a_watcher_waiting_on_a_shared_read_that_fails_reads_the_log_itself(
    replicas: Any, rules: Any
) -> None:
    """The fault: the read of the log a second watcher waits for (the first watcher's) fails
    (JetStream did not answer). The first stream ends UNAVAILABLE, as before; the second does not
    inherit that failure: it reads the log itself and gets its snapshot."""
    gid = (
        await replicas.client(rules, "lobby", "service").create_game(
            "queens_court", ["hal", "ivy"], {"players": 2}
        )
    ).game_id
    held = asyncio.Event()
    release = asyncio.Event()

    async def gate(game_id: str) -> None:
        if not held.is_set():  # the first read: held, then failed
            held.set()
            await release.wait()
            raise Unavailable("the game store is unavailable (read: JetStreamUnavailable)")

    reads = _count_log_reads(rules, gate)
    first: list[Any] = []
    second: list[Any] = []
    t1 = asyncio.create_task(_collect(replicas.client(rules, "hal"), gid, 0, None, first))
    await asyncio.wait_for(held.wait(), 15)
    t2 = asyncio.create_task(_collect(replicas.client(rules, "ivy"), gid, 1, None, second))
    subject = rules.store.subject(gid)
    wakes = rules.application.wakes
    await asyncio.wait_for(_until(lambda: len(wakes._games.get(subject, ((), ()))[1]) == 2), 15)
    assert wakes.reading(subject) is not None and reads == [gid], "the second waits on the first's read"
    release.set()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await asyncio.wait_for(t1, 15)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    await asyncio.wait_for(_until(lambda: bool(second)), 15)
    assert reads == [gid, gid] and second[0].seq == 0 and second[0].view.your_seat == 1
    t2.cancel()
    await asyncio.gather(t2, return_exceptions=True)
    assert not first


async def test_a_watcher_told_of_a_move_its_read_does_not_show_yet_looks_again(
    replicas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wake names the move's sequence number, but this replica's first read of the log does not
    show it yet (a stream follower still catching up). The watcher reads the log again every
    ``BEHIND_POLL`` rather than waiting for the next move or the next poll (``WATCH_POLL``, set to
    two minutes here): the person watching sees the move within moments."""
    monkeypatch.setattr(application, "WATCH_POLL", 120.0)
    a = await replicas.start()
    b = await replicas.start()
    players = ["pia", "quin"]
    gid = (
        await replicas.client(a, "lobby", "service").create_game("queens_court", players, {"players": 2})
    ).game_id
    updates: list[Any] = []
    watcher = asyncio.create_task(_collect(replicas.client(b, "pia"), gid, 0, None, updates))
    await asyncio.wait_for(_until(lambda: bool(updates)), 15)
    cache = b.application.cache
    real = cache.refresh
    lagging = {"reads": 1}

    async def lagging_refresh(entry: Any) -> bool:
        if lagging["reads"]:
            lagging["reads"] -= 1
            return False  # this read of the log does not show the move yet
        return bool(await real(entry))

    monkeypatch.setattr(cache, "refresh", lagging_refresh)
    await _moves({i: replicas.client(a, p) for i, p in enumerate(players)}, gid, random.Random(5), 1)
    await asyncio.wait_for(_until(lambda: len(updates) >= 2), 15)
    assert lagging["reads"] == 0, "the first read after the wake was the lagging one"
    assert [u.seq for u in updates] == [0, 1]
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)


async def test_a_watchers_wakes_come_in_order_and_a_wait_ends_at_its_timeout() -> None:
    """``application.Wake``, what ``Wakes`` hands each watcher: wakes put before or during a wait
    come out in order; a wait with nothing put ends with ``TimeoutError`` (the watcher then reads
    the log: its poll); a wait cancelled (the stream closed) leaves nothing behind, and the next
    wait gets what is put after it."""
    wake = application.Wake()
    wake.put_nowait("a")
    wake.put_nowait("b")
    assert [await wake.get(5.0), await wake.get(5.0)] == ["a", "b"]
    waiting = asyncio.ensure_future(wake.get(5.0))
    await asyncio.sleep(0)  # the waiter is registered
    wake.put_nowait("c")
    wake.put_nowait("d")
    assert await asyncio.wait_for(waiting, 5) == "c"
    assert await wake.get(5.0) == "d"
    with pytest.raises(TimeoutError):
        await wake.get(0.01)
    waiting = asyncio.ensure_future(wake.get(5.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert wake._waiter is None
    wake.put_nowait("e")
    assert await wake.get(5.0) == "e"


async def test_a_watchers_wait_ends_at_its_own_timeout_with_one_timer_kept_across_waits() -> None:
    """``application.Wake`` keeps one timer across waits (none armed per move): a short wait after
    a long one that a wake ended still times out at its own time, not the long one's; a long wait
    after a short one is not ended by the short one's timer (it moves on to the long wait's end);
    ``close`` (the watcher gone) stops the timer."""
    loop = asyncio.get_running_loop()
    wake = application.Wake()
    waiting = asyncio.ensure_future(wake.get(60.0))
    await asyncio.sleep(0)
    wake.put_nowait("a")
    assert await asyncio.wait_for(waiting, 5) == "a"
    began = loop.time()
    with pytest.raises(TimeoutError):
        await wake.get(0.05)
    assert 0.04 <= loop.time() - began < 5  # its own 0.05 s, not what is left of the 60 s wait's
    waiting = asyncio.ensure_future(wake.get(0.05))
    await asyncio.sleep(0)
    wake.put_nowait("b")
    assert await asyncio.wait_for(waiting, 5) == "b"
    stale = wake._timer_at  # the 0.05 s wait's timer, still armed
    waiting = asyncio.ensure_future(wake.get(60.0))
    await asyncio.wait_for(_until(lambda: wake._timer_at > stale), 5)  # it fired and moved on
    assert not waiting.done()
    wake.put_nowait("c")
    assert await asyncio.wait_for(waiting, 5) == "c"
    assert wake._timer is not None
    wake.close()
    assert wake._timer is None


async def test_a_watcher_that_falls_behind_gets_every_update_once_in_order_and_only_its_seats(
    replicas: Any, rules: Any
) -> None:
    """A watcher whose stream is not read while moves land (a slow client: its handler waits on the
    write) falls behind its game's entry: when it reads again it catches up, from the entry's recent
    positions while it is at most ``games.RECENT`` records behind and by replaying the game's moves
    beyond that, and gets every update once, in order, each exactly the update a watcher of the
    same seat that kept up got (its own seat's view and events: no other seat's hand)."""
    players = ["ria", "sol"]
    created = await replicas.client(rules, "lobby", "service").create_game(
        "queens_court", players, {"players": 2}
    )
    gid = created.game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    app = rules.application
    codec = app.codec
    live: list[Any] = []
    task = asyncio.create_task(_collect(clients[0], gid, 0, None, live))
    await asyncio.wait_for(_until(lambda: bool(live)), 15)
    ident = Identity(sub=players[0], role="player", exp=2**40)
    lagging = app.watch(ident, gid, 0, None)
    got: list[bytes] = []

    async def take(n: int) -> None:
        for _ in range(n):
            p = await asyncio.wait_for(lagging.__anext__(), 15)
            got.append(update_bytes(p.entry, codec, p.state, p.seq, p.seat, p.events))

    await take(1)  # the snapshot
    rng = random.Random(11)
    behind = {"recent": 3, "replayed": games.RECENT + 4}
    for lag in behind.values():
        await _moves(clients, gid, rng, lag)  # not read meanwhile: the watcher lags `lag` records
        assert app.cache.peek(gid).seq == len(got) - 1 + lag
        await take(lag)
    final = await play_out(clients, gid, rng)
    await take(final.seq + 1 - len(got))
    with pytest.raises(StopAsyncIteration):  # the game is over: the stream ends
        await asyncio.wait_for(lagging.__anext__(), 15)
    await asyncio.wait_for(task, 15)
    updates = [rules_pb2.GameUpdate.FromString(b) for b in got]
    assert [u.seq for u in updates] == list(range(final.seq + 1)), "every update once, in order"
    assert sum(behind.values()) + 1 < final.seq, final.seq
    assert updates == live, "the same updates as the watcher that kept up"
    for u in updates:
        assert u.view.HasField("your_seat") and u.view.your_seat == 0, "seat 0's view, no other seat's"
        assert all(not e.HasField("owner") for e in u.events), "events in their public or own form"
    # (test_leaks.py checks a seat's updates against the engine's hidden cards, for watchers that keep up)
