"""The projector: game logs to public records, in order, exactly once, after any crash or restart;
and the game logs sharded over several streams."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from court_kit import jetstream as kjs
from court_kit import records as krec
from court_kit.settings import Settings
from court_rules.app import RulesApp
from court_rules.projector import DURABLE, OLD_DURABLE, Position, Projector, ProjectorApp
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

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

    async def no_ack() -> None:  # the first batches' messages stay unacknowledged: it "dies" before acking
        unacked.append(1)

    real_batch = first.projector._batch

    async def batch_without_acks(msgs: list[Any], stop: asyncio.Event) -> None:
        for m in msgs:
            m.ack = no_ack
        await real_batch(msgs, stop)

    first.projector._batch = batch_without_acks  # type: ignore[method-assign]
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


async def test_the_explicit_ack_durable_is_retired_after_the_ack_all_one_caught_up(replicas: Any) -> None:
    """An upgrade from the projector that acknowledged every record (durable ``court-projector``,
    explicit acks): the new one creates ``court-projector-all`` (ack all) starting right after the
    old durable's ack floor, publishes what the old one had not, and deletes the old durable once
    it has caught up. Every record is public once, in order, and nothing before the floor is
    delivered again."""
    rules = await replicas.start(projector=False)
    players = ["fay", "gus"]
    lobby = replicas.client(rules, "lobby", "service")
    gid = (await lobby.create_game("queens_court", players, {"players": 2})).game_id
    await _moves(replicas, rules, gid, players, 3, random.Random(5))
    stream = rules.store.stream_of(gid)
    js = rules.nc.jetstream()
    # the previous release's projector: its durable, explicit acks; it had projected records 0-2
    old = await js.pull_subscribe(
        krec.shard_subjects(0),
        durable=OLD_DURABLE,
        stream=stream,
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL),
    )
    previous = Projector(rules.store)
    fetched: list[Any] = []
    while len(fetched) < 3:
        fetched += await old.fetch(3 - len(fetched), timeout=5)
    for m in fetched:
        await previous.project(m.metadata.sequence.stream, krec.decode(m.data))
        await m.ack_sync()  # (a plain ack is not yet counted when the consumer info is read)
    await old.unsubscribe()
    floor = (await js.consumer_info(stream, OLD_DURABLE)).ack_floor.stream_seq
    assert floor == 3
    last = await _moves(replicas, rules, gid, players, 4, random.Random(6))
    app = await ProjectorApp.start(projector_settings(replicas.nats.url))
    try:
        async with EventLog(replicas.nats.url, "queens_court", gid) as public:
            await public.wait_until(
                lambda recs: bool(recs) and recs[-1].seq == last, what="every record public"
            )
            assert public.raw_ids == [f"{gid}-{s}" for s in range(last + 1)]
        info = await js.consumer_info(stream, DURABLE)
        assert info.config.ack_policy == AckPolicy.ALL
        assert info.config.opt_start_seq == floor + 1  # it carried on from the old durable's floor
        assert app.projector.projected == last + 1 - 3  # records 0-2 were never delivered again
        async with asyncio.timeout(15):
            while True:
                try:
                    await js.consumer_info(stream, OLD_DURABLE)
                except NotFoundError:
                    break  # retired
                await asyncio.sleep(0.1)
    finally:
        await app.close()
        await app.server.stop(None)  # type: ignore[attr-defined]


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
        assert info.config.subjects == [f"court.games.{shard}.*"] and info.state.messages >= finals[shard] + 1
        log = await kjs.direct_get_batch(app.nc, f"COURT_GAMES_{shard}", f"court.games.{shard}.{gid}")
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
