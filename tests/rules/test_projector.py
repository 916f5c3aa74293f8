"""The projector: game logs to public records, in order, exactly once, after any crash or restart;
and the game logs sharded over several streams."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit.settings import Settings
from court_rules.app import RulesApp
from court_rules.projector import DURABLE, Position, Projector, ProjectorApp
from nats.js.api import AckPolicy

from tests.fixtures import keys

from .conftest import settings_for
from .helpers import EventLog, assert_complete, has_game_end, play_out


def projector_settings(nats_url: str, **extra: str) -> Settings:
    return Settings.load(
        "projector",
        {},
        nats_url=nats_url,
        listen="127.0.0.1:0",
        metrics_listen="",
        env="test",
        extra=extra,
        **keys.overrides("projector"),
    )


async def _moves(replicas: Any, app: Any, gid: str, players: list[str], n: int, rng: random.Random) -> int:
    clients = {i: replicas.client(app, p) for i, p in enumerate(players)}
    view = await clients[0].get_view(gid)
    for _ in range(n):
        if view.finished:
            break
        seat = view.to_act[0]
        mine = await clients[seat].get_view(gid, seat)
        view = (await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)).view
    return view.seq


async def _public(nc: Any, game: str, gid: str) -> list[tuple[int, str]]:
    msgs = await kjs.direct_get_batch(nc, "COURT_EVENTS", krec.public_subject(game, gid))
    return [(int(m.headers["Court-Seq"]), m.headers["Nats-Msg-Id"]) for m in msgs]


@pytest.mark.slow
async def test_projector_killed_mid_stream_and_restarted_publishes_every_move_once_in_order(
    replicas: Any,
) -> None:
    """The projector dies while records flow, some of them published but not acknowledged (it
    dies between publish and ack): the restarted one, on the same durable, has them delivered
    again, finds them public, and the public stream ends with every move once, in order."""
    rules = await replicas.start(projector=False)
    players = ["ada", "bea", "cy"]
    lobby = replicas.client(rules, "lobby", "service")
    games = [(await lobby.create_game("queens_court", players, {"players": 3})).game_id for _ in range(3)]
    first = await ProjectorApp.start(projector_settings(replicas.nats.url, COURT_PROJECTOR_ACK_WAIT="1"))
    unacked: list[Any] = []

    def no_ack(
        msg: Any,
    ) -> None:  # the first projector's messages stay unacknowledged: it "dies" before acking
        unacked.append(msg)

    first.projector.acks.ack = no_ack  # type: ignore[method-assign]
    rng = random.Random(4)
    try:
        for gid in games:
            await _moves(replicas, rules, gid, players, 4, rng)
        while first.projector.projected < 5:
            async with asyncio.timeout(15):
                await first.projector.progress.wait()
    finally:
        await first.kill()
    assert unacked, "some published records were never acknowledged"
    # more moves while no projector runs
    for gid in games:
        await _moves(replicas, rules, gid, players, 6, rng)
    second = await ProjectorApp.start(projector_settings(replicas.nats.url, COURT_PROJECTOR_ACK_WAIT="1"))
    try:
        for gid in games:
            last = (await replicas.client(rules, "lobby", "service").get_view(gid)).seq
            async with EventLog(replicas.nats.url, "queens_court", gid) as public:
                await public.wait_until(
                    lambda recs, last=last: bool(recs) and recs[-1].seq == last, what="every record public"
                )
                assert_complete(public.events, last)
                assert public.raw_ids == [f"{gid}-{s}" for s in range(last + 1)]
    finally:
        await second.close()
        await second.server.stop(None)  # type: ignore[attr-defined]


async def test_a_republish_after_the_duplicate_window_is_refused_and_a_gap_is_filled(replicas: Any) -> None:
    """JetStream's de-duplication forgets a message id after its window; the projector does not
    rely on it: a record already public, published again under any id, is refused by the
    expected last subject sequence and recognised. A record whose predecessor is not public yet
    makes it read the predecessor from the log and publish it first."""
    rules = await replicas.start(projector=False)
    players = ["dee", "eve"]
    gid = (
        await replicas.client(rules, "lobby", "service").create_game("queens_court", players, {"players": 2})
    ).game_id
    last = await _moves(replicas, rules, gid, players, 3, random.Random(2))
    assert last == 3
    log = await rules.store.records(gid)
    app = await ProjectorApp.start(projector_settings(replicas.nats.url))
    try:
        app._stop.set()  # its own consumers stop: this test drives project() by hand
        await asyncio.wait_for(app._task, 10)  # type: ignore[arg-type]
        nc = app.nc
        fresh = Projector(app.store)
        if await _public(nc, "queens_court", gid):  # the consumers may have got some out before stopping
            await nc.jetstream().purge_stream(
                "COURT_EVENTS", subject=krec.public_subject("queens_court", gid)
            )
        # record 2 first: 0 and 1 are filled from the log, in order
        assert await fresh.project(log[2].sseq, log[2].body)
        assert await _public(nc, "queens_court", gid) == [(s, f"{gid}-{s}") for s in range(3)]
        # a projector with no memory (a restart long after the window) skips what is public
        again = Projector(app.store)
        assert not await again.project(log[1].sseq, log[1].body)
        # one whose memory is stale publishes, is refused by the expected sequence, and skips
        stale = Projector(app.store)
        pub = await kjs.direct_get_batch(nc, "COURT_EVENTS", krec.public_subject("queens_court", gid))
        stale.positions[gid] = Position(pub[0].seq, 0, False, log[0].sseq)  # it thinks only 0 is public
        assert not await stale.project(log[1].sseq, log[1].body)
        assert await stale.project(log[3].sseq, log[3].body)
        assert await _public(nc, "queens_court", gid) == [(s, f"{gid}-{s}") for s in range(4)]
    finally:
        await app.close()
        await app.server.stop(None)  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_two_projectors_at_once_store_every_record_once_in_order(replicas: Any) -> None:
    """Two rules replicas, each running its projector on the same durables (a rolling restart, or
    the default with several replicas): the public stream is still exactly once, in order."""
    a = await replicas.start()
    b = await replicas.start()
    players = ["fay", "gus"]
    lobby = replicas.client(a, "lobby", "service")
    games = [(await lobby.create_game("the_court", players, {"mode": "free_gift"})).game_id for _ in range(4)]

    async def play(gid: str, app: Any, seed: int) -> int:
        clients = {i: replicas.client(app, p) for i, p in enumerate(players)}
        return (await play_out(clients, gid, random.Random(seed))).seq

    finals = await asyncio.gather(*(play(g, (a, b)[i % 2], i) for i, g in enumerate(games)))
    for gid, last in zip(games, finals, strict=True):
        async with EventLog(replicas.nats.url, "the_court", gid) as public:
            await public.wait_until(has_game_end(last))
            assert_complete(public.events, last)
            assert public.raw_ids == [f"{gid}-{s}" for s in range(last + 1)]
    assert a.projector is not None and b.projector is not None
    assert a.projector.projected + b.projector.projected >= sum(f + 1 for f in finals)


@pytest.mark.slow
async def test_four_game_log_shards_on_one_server_play_games_on_every_one(replicas: Any) -> None:
    app = await RulesApp.start(settings_for(replicas.nats.url, extra={"COURT_GAME_STREAMS": "4"}))
    replicas.apps.append(app)
    assert app.store.shards == 4
    lobby = replicas.client(app, "lobby", "service")
    players = ["hal", "ivy"]
    games: dict[int, str] = {}
    n = 0
    while (
        len(games) < 4
    ):  # game ids come from an HMAC of the request id: make games until every shard has one
        gid = (
            await lobby.create_game("queens_court", players, {"players": 2}, request_id=f"shard-game-{n}")
        ).game_id
        games.setdefault(krec.shard_of(gid, 4), gid)
        n += 1
        assert n < 200, "the shard function leaves a shard unused"
    clients = {i: replicas.client(app, p) for i, p in enumerate(players)}
    finals = {}
    for shard, gid in games.items():
        finals[shard] = (await play_out(clients, gid, random.Random(shard))).seq
    js = app.store.js
    for shard, gid in games.items():
        info = await js.stream_info(f"COURT_GAMES_{shard}")
        assert (
            info.config.subjects == [f"court.games.{shard}.*.*"] and info.state.messages >= finals[shard] + 1
        )
        log = await kjs.direct_get_batch(app.nc, f"COURT_GAMES_{shard}", f"court.games.{shard}.{gid}.*")
        assert [int(m.headers["Court-Seq"]) for m in log] == list(range(finals[shard] + 1))
        async with EventLog(replicas.nats.url, "queens_court", gid) as public:
            await public.wait_until(has_game_end(finals[shard]))
            assert_complete(public.events, finals[shard])
    # a replica that never saw the games loads each from its shard
    other = await RulesApp.start(
        settings_for(replicas.nats.url, extra={"COURT_GAME_STREAMS": "4"}), projector=False
    )
    replicas.apps.append(other)
    for shard, gid in games.items():
        v = await replicas.client(other, "hal").get_view(gid, 0)
        assert v.finished and v.seq == finals[shard]


async def test_a_projector_dying_with_a_record_in_hand_loses_nothing_while_another_acknowledges(
    replicas: Any,
) -> None:
    """Two projectors share the durable (every rules replica runs one; deploy/ runs several
    court-projector pods). One holds a game's record (slow, working on it: in-progress acks keep
    it reserved) while the other projects and acknowledges a later record of another game; then
    the first dies without acknowledging. The held record is delivered again and made public: an
    acknowledgement of one projector never covers a record another was given (with ``AckPolicy.ALL``
    it did, and a game whose latest record was lost that way never showed its next turn: the bot
    service waits for that record, so the game froze)."""
    rules = await replicas.start(projector=False)
    lobby = replicas.client(rules, "lobby", "service")
    held_game = (await lobby.create_game("queens_court", ["hal", "ivy"], {"players": 2})).game_id
    holder = await ProjectorApp.start(
        projector_settings(replicas.nats.url, COURT_PROJECTOR_ACK_WAIT="2", COURT_PROJECTOR_BATCH="1")
    )
    in_hand = asyncio.Event()
    dead = asyncio.Event()

    async def hold(msgs: list[Any], stop: asyncio.Event) -> None:  # working on it, until it dies
        in_hand.set()
        while not dead.is_set():
            for m in msgs:
                await m.in_progress()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(dead.wait(), 0.5)

    holder.projector._batch = hold  # type: ignore[method-assign]
    other: ProjectorApp | None = None
    try:
        async with asyncio.timeout(20):
            await in_hand.wait()
        later_game = (await lobby.create_game("queens_court", ["jo", "kim"], {"players": 2})).game_id
        other = await ProjectorApp.start(projector_settings(replicas.nats.url, COURT_PROJECTOR_ACK_WAIT="2"))
        async with EventLog(replicas.nats.url, "queens_court", later_game) as public:
            await public.wait_until(lambda recs: bool(recs), what="the later game's creation public")
        assert await _public(rules.nc, "queens_court", held_game) == []  # still in the holder's hand
        dead.set()
        await holder.kill()
        async with EventLog(replicas.nats.url, "queens_court", held_game) as public:
            await public.wait_until(
                lambda recs: bool(recs), what="the held record public after the holder died"
            )
            assert public.raw_ids == [f"{held_game}-0"]
        info = await rules.nc.jetstream().consumer_info(rules.store.stream_of(held_game), DURABLE)
        assert info.config.ack_policy == AckPolicy.EXPLICIT
    finally:
        dead.set()
        with contextlib.suppress(Exception):
            await holder.kill()
        if other is not None:
            await other.close()
            await other.server.stop(None)  # type: ignore[attr-defined]


class _Puller:
    """A stand-in for ``court_kit.jetstream.OneShotPuller``: ``waited`` is how long the last
    request's first record took to come; ``next_batch`` records the delay it is given."""

    def __init__(self, waited: float):
        self.waited = waited
        self.delays: list[float] = []

    async def next_batch(self, timeout: float, *, delay: float = 0.0) -> list[str]:
        self.delays.append(delay)
        return ["a"]


async def test_a_busy_log_s_next_request_waits_linger_and_a_quiet_log_s_goes_at_once() -> None:
    """While the log is busy (the last request's first record was there within ``linger`` s of
    asking) the next request waits ``linger``, so the records appended meanwhile join its batch
    (one write for them all: tests/kit/test_jetstream.py); after a quiet spell (the record came
    later than that) or before any record, it goes at once, so the next record is projected as
    soon as it is stored; linger 0 never waits."""
    projector = Projector(None, linger=0.05)  # type: ignore[arg-type]  # _next needs no store
    for waited, delay in ((0.001, 0.05), (0.3, 0.0), (float("inf"), 0.0)):
        puller = _Puller(waited)
        assert await projector._next(puller) == ["a"]  # type: ignore[arg-type]
        assert puller.delays == [delay], f"waited {waited}"
    never = _Puller(0.0)
    await Projector(None, linger=0)._next(never)  # type: ignore[arg-type]
    assert never.delays == [0.0]


async def test_the_durable_deleted_under_a_running_projector_is_made_again_and_nothing_lost(
    replicas: Any,
) -> None:
    """An operator deletes the projector's durable while the projector waits on it (its pull
    request is answered 409 "Consumer Deleted"; the next finds no consumer: 503). The projector
    attaches again, which makes the durable afresh from the log's start: every record already
    public is recognised and skipped, the moves made meanwhile are projected. A reader of the
    public stream sees every record once, in order, and no game stalls."""
    rules = await replicas.start(projector=False)
    players = ["kai", "lee"]
    gid = (
        await replicas.client(rules, "lobby", "service").create_game("queens_court", players, {"players": 2})
    ).game_id
    app = await ProjectorApp.start(projector_settings(replicas.nats.url))
    rng = random.Random(9)
    try:
        first = await _moves(replicas, rules, gid, players, 2, rng)
        async with EventLog(replicas.nats.url, "queens_court", gid) as public:
            await public.wait_until(lambda recs: bool(recs) and recs[-1].seq == first, what="2 moves public")
        skipped = app.projector.projected
        await rules.store.js.delete_consumer(rules.store.stream_of(gid), DURABLE)
        last = await _moves(replicas, rules, gid, players, 3, rng)
        async with EventLog(replicas.nats.url, "queens_court", gid) as public:
            await public.wait_until(
                lambda recs: bool(recs) and recs[-1].seq == last, what="the later moves public"
            )
            assert_complete(public.events, last)
            assert public.raw_ids == [f"{gid}-{s}" for s in range(last + 1)], "once, in order"
        assert app.projector.projected - skipped == last - first, "only the new records published"
        info = await rules.store.js.consumer_info(rules.store.stream_of(gid), DURABLE)
        assert info.config.ack_policy == AckPolicy.EXPLICIT, "made again as before"
    finally:
        await app.close()
        await app.server.stop(None)  # type: ignore[attr-defined]


async def _archived(nc: Any, gid: str, timeout: float = 30.0) -> Any:
    """The game's archive entry (``GameLog``), once the projector has written it."""
    from court_proto.court.events.v2 import records_pb2

    async with asyncio.timeout(timeout):
        while (m := await kjs.direct_get_last(nc, "COURT_GAMES_ARCHIVE", f"court.archive.{gid}")) is None:
            await asyncio.sleep(0.05)  # the archive write has no event a client can wait on
    return records_pb2.GameLog.FromString(m.data)


async def test_a_game_seen_whole_is_archived_from_memory_and_one_seen_in_part_from_the_log(
    replicas: Any,
) -> None:
    """A projector that made every record of a game public, from its creation on, archives the
    finished game from the records it kept (no read of the log: one message per move fewer); the
    archive is the log, record for record, with the last record's log sequence. The fault: the
    projector killed in mid-game and another started; the new one never saw the game's beginning,
    so it reads the log back at the end, and that archive is the log too."""
    rules = await replicas.start(projector=False)
    players = ["gil", "hal"]
    lobby = replicas.client(rules, "lobby", "service")
    whole, part = [
        (await lobby.create_game("queens_court", players, {"players": 2})).game_id for _ in range(2)
    ]
    first = await ProjectorApp.start(projector_settings(replicas.nats.url, COURT_PROJECTOR_ACK_WAIT="1"))
    rng = random.Random(11)
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    final = await play_out(clients, whole, rng)
    await _moves(replicas, rules, part, players, 5, rng)
    got = await _archived(rules.nc, whole)
    assert first.projector.archived_from_memory == 1
    log = await kjs.direct_get_batch(rules.nc, "COURT_GAMES_0", f"court.games.0.{whole}.*")
    assert [r.SerializeToString() for r in got.records] == [m.data for m in log]
    assert got.last_sseq == log[-1].seq and len(got.records) == final.seq + 1
    async with asyncio.timeout(15):
        while (await _public(rules.nc, "queens_court", part))[-1:] != [(5, f"{part}-5")]:
            await asyncio.sleep(0.05)
    await first.kill()
    second = await ProjectorApp.start(projector_settings(replicas.nats.url, COURT_PROJECTOR_ACK_WAIT="1"))
    try:
        final = await play_out(clients, part, rng)
        got = await _archived(rules.nc, part)
        assert second.projector.archived_from_memory == 0, "it never saw the game's beginning"
        log = await kjs.direct_get_batch(rules.nc, "COURT_GAMES_0", f"court.games.0.{part}.*")
        assert [r.SerializeToString() for r in got.records] == [m.data for m in log]
        assert got.last_sseq == log[-1].seq and len(got.records) == final.seq + 1
    finally:
        await second.close()
        await second.server.stop(None)  # type: ignore[attr-defined]


async def _three_games(replicas: Any, seed: int) -> tuple[Any, list[str], list[str], random.Random]:
    """A rules replica with no projector of its own and three new queens_court games: (the replica,
    the players, the game ids, a seeded random source for their moves)."""
    rules = await replicas.start(projector=False)
    players = ["ida", "jon"]
    lobby = replicas.client(rules, "lobby", "service")
    gids = [(await lobby.create_game("queens_court", players, {"players": 2})).game_id for _ in range(3)]
    return rules, players, gids, random.Random(seed)


async def test_several_games_in_a_batch_are_published_in_rounds_and_a_refused_one_judged_again(
    replicas: Any,
) -> None:
    """A batch holding several games' records (``Projector._games``): each game's records public
    once and in order, most published in rounds (each game's next record at once, then the acks)
    rather than a task per game. The fault: a game's position in memory is stale (another projector
    moved its public subject on), so its round's publish is refused (wrong last sequence); that
    record is judged again on the full path (the position read back) and made public, once, and
    the other games' records of the batch are unaffected."""
    rules, players, gids, rng = await _three_games(replicas, 5)
    seqs = {g: await _moves(replicas, rules, g, players, 4, rng) for g in gids}
    projector = Projector(rules.store, durable="rounds")
    psub = await projector._attach(0)
    stop = asyncio.Event()

    async def project_all(n: int) -> None:
        msgs = await psub.fetch(n, timeout=5)
        assert len(msgs) == n
        await projector._batch(msgs, stop)

    async def public_of(g: str) -> list[tuple[int, str]]:
        return await _public(rules.nc, "queens_court", g)

    await project_all(sum(s + 1 for s in seqs.values()))
    for g in gids:
        assert await public_of(g) == [(i, f"{g}-{i}") for i in range(seqs[g] + 1)]
    total = sum(s + 1 for s in seqs.values())
    assert projector.pipelined == total - 3, "every record but each game's first (its position unknown)"
    stale = gids[1]
    more = {g: await _moves(replicas, rules, g, players, 2, rng) for g in gids}
    pos = projector.positions[stale]
    projector.positions[stale] = Position(pos.pub_sseq - 1, pos.seq, pos.closed, pos.log_sseq)
    before = projector.pipelined
    added = sum(more[g] - seqs[g] for g in gids)
    await project_all(added)
    for g in gids:
        assert await public_of(g) == [(i, f"{g}-{i}") for i in range(more[g] + 1)], "once, in order"
    assert projector.pipelined - before == added - 1, "all but the refused one, judged again"
    assert projector.positions[stale].pub_sseq > pos.pub_sseq, "its position read back"
    async with asyncio.timeout(5):  # every message acknowledged (acks leave lazily: within 20 ms)
        while (await rules.store.js.consumer_info(krec.game_stream(0), "rounds")).num_ack_pending:
            await asyncio.sleep(0.02)
    await psub.unsubscribe()


async def test_a_round_s_publish_that_fails_or_whose_ack_is_lost_is_projected_once_after_all(
    replicas: Any,
) -> None:
    """The faults of ``Projector._games``' rounds at the NATS boundary: one game's publish fails
    at once (the connection refused it: nothing sent), another game's ack never comes (its public
    record was stored; the ack lost, as with a slow or restarting nats-server). Each is judged
    again on the full path: the first published then, the second found public already (its
    position read back); every record public once, in order, every message acknowledged."""
    import nats.errors

    rules, players, gids, rng = await _three_games(replicas, 8)
    seqs = {g: await _moves(replicas, rules, g, players, 2, rng) for g in gids}
    store = rules.store
    store.timeout = 0.5  # the lost ack's wait
    projector = Projector(store, durable="faults")
    psub = await projector._attach(0)
    stop = asyncio.Event()
    await projector._batch(await psub.fetch(sum(s + 1 for s in seqs.values()), timeout=5), stop)
    more = {g: await _moves(replicas, rules, g, players, 1, rng) for g in gids}
    refused, lost = gids[0], gids[1]
    real = store.publisher.publish
    faults = {refused: 1, lost: 1}

    async def publish(subject: str, data: bytes, headers: Any = None) -> Any:
        gid = subject.rsplit(".", 1)[1]
        if faults.get(gid):
            faults[gid] -= 1
            if gid == refused:
                raise nats.errors.ConnectionClosedError
            await real(subject, data, headers)  # stored; its ack never reaches the projector
            return asyncio.get_running_loop().create_future()
        return await real(subject, data, headers)

    store.publisher.publish = publish  # type: ignore[method-assign]
    before = projector.pipelined
    await projector._batch(await psub.fetch(sum(more[g] - seqs[g] for g in gids), timeout=5), stop)
    assert faults == {refused: 0, lost: 0}
    assert projector.pipelined - before == 1, "only the third game's went through in the round"
    for g in gids:
        public = await _public(rules.nc, "queens_court", g)
        assert public == [(i, f"{g}-{i}") for i in range(more[g] + 1)], "once, in order"
    async with asyncio.timeout(5):
        while (await store.js.consumer_info(krec.game_stream(0), "faults")).num_ack_pending:
            await asyncio.sleep(0.02)
    await psub.unsubscribe()
