"""The bot service end to end: real nats-server, real rules service, bot replicas on port 0.

Waits are on events (the rules service's WatchGame stream, the replicas' turn journals, test hooks),
each with a timeout; nothing sleeps to wait.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import urllib.request
from typing import Any

import grpc
import pytest
from court_bot.app import SERVICE_NAME
from court_bot.turns import BOT_PREFIX, DURABLE, STREAM, Faults, Outcome, Turn, request_id
from court_bot.upstream import BOT_SUB
from court_bots.levels import LEVELS
from court_client import action_json
from court_contract import records as krec
from court_proto.court.events.v2 import records_pb2
from court_proto.court.rules.v1 import rules_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nats.js.api import AckPolicy, DeliverPolicy
from prometheus_client import REGISTRY

from tests.fixtures.nats import free_port
from tests.fixtures.play import play_randomly

from .conftest import (
    ACK_WAIT,
    GAMES,
    Stack,
    adapter_games,
    bot_seats,
    has_adapter,
    qc,
    wait_finished,
    wait_seq,
)

GAME_IDS = [g[0] for g in GAMES]
SHARED_ACK_WAIT = 30.0  # s: well past any stall of a loaded machine (test_two_replicas_share_the_work...)


async def history(stack: Stack, game_id: str) -> rules_pb2.GetHistoryResponse:
    return await stack.rules_client("root", "admin").history(game_id)


def assert_each_bot_move_once(
    hist: rules_pb2.GetHistoryResponse, *, all_bots: bool
) -> list[rules_pb2.HistoryMove]:
    """Every bot move carries the request id of the position it was decided at, and no id twice.

    In an all-bot game nothing else can move in between, so each bot move was decided at the
    position just before it: a move played twice would show up as two moves of one position.
    """
    moves = list(hist.moves)
    assert [m.seq for m in moves] == list(range(1, len(moves) + 1))
    bots = [m for m in moves if m.player == BOT_SUB]
    rids = [m.request_id for m in bots]
    assert len(rids) == len(set(rids)), "no bot request id is used twice"
    for m in bots:
        assert hist.seats[m.seat].startswith(BOT_PREFIX), f"the bot played seat {m.seat}, not a bot seat"
        prefix = f"bot-{hist.game_id}-"
        assert m.request_id.startswith(prefix) and m.request_id.endswith(f"-{m.seat}")
        if all_bots:
            assert m.request_id == request_id(hist.game_id, m.seq - 1, m.seat)
    return bots


async def play_seat_randomly(
    player: Any, gid: str, seat: int, rng: random.Random, timeout: float = 120
) -> tuple[rules_pb2.GameView, int]:
    """Play ``seat`` with random legal moves, watching the game as a client does, to its end: the
    final view and how many moves the seat made (``tests.fixtures.play.play_randomly``), within
    ``timeout`` seconds."""
    return await asyncio.wait_for(play_randomly(player, gid, seat, rng), timeout)


def decisions(game: str, level: str) -> float:
    return (
        REGISTRY.get_sample_value("court_bot_decision_seconds_count", {"game": game, "level": level}) or 0.0
    )


# ---------------------------------------------------------------------------------------------- health


async def test_health_and_reflection_answer(stack: Stack) -> None:
    bot = await stack.start_bot(settings={"reflection": True})  # COURT_REFLECTION=on (off outside dev)
    async with grpc.aio.insecure_channel(bot.address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for name in ("", SERVICE_NAME):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

        refl = reflection_pb2_grpc.ServerReflectionStub(ch)
        names: list[str] = []
        async for r in refl.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        ):
            names += [s.name for s in r.list_services_response.service]
        assert SERVICE_NAME in names
        await bot.health.enter_graceful_shutdown()
        reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


# ---------------------------------------------------------------------------------------------- whole games


@pytest.mark.slow
@pytest.mark.parametrize(("game", "options", "n"), GAMES, ids=GAME_IDS)
async def test_all_bot_game_plays_to_the_end(stack: Stack, game: str, options: dict, n: int) -> None:
    bot = await stack.start_bot()
    seats = bot_seats(game, n)
    levels = sorted({s[len(BOT_PREFIX) :] for s in seats})
    before = {lv: decisions(game, lv) for lv in levels}
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game(game, seats, options)
    final = await wait_finished(lobby, created.game_id, timeout=120)
    assert final.finished and final.result.finished
    hist = await history(stack, created.game_id)
    bots = assert_each_bot_move_once(hist, all_bots=True)
    assert len(bots) == final.seq > 0
    # the journal is written after the ack, a moment after the final move
    await bot.journal.wait_for(
        lambda hs: sum(h.game_id == created.game_id and h.outcome is Outcome.PLAYED for h in hs) >= final.seq
    )
    played = [h for h in bot.journal.played() if h.game_id == created.game_id]
    assert sorted(h.seq for h in played) == list(range(final.seq)), "one played turn per position"
    for lv in levels:  # every level at the table decided, and the decision histogram saw it
        assert decisions(game, lv) > before[lv], f"no {lv} decision recorded for {game}"


@pytest.mark.slow
@pytest.mark.parametrize("game", sorted({"queens_court", "hearts", *adapter_games()}))
async def test_human_plays_against_bots(stack: Stack, game: str) -> None:
    options, n = {g: (o, k) for g, o, k in GAMES}[game]
    await stack.start_bot()
    seats = ["alice", *bot_seats(game, n - 1)]
    alice = stack.rules_client("alice", retries=0)
    created = await alice.create_game(game, seats, options)
    gid = created.game_id
    final, mine = await play_seat_randomly(alice, gid, 0, random.Random(game))
    assert final.finished
    hist = await history(stack, gid)
    bots = assert_each_bot_move_once(hist, all_bots=False)
    humans = [m for m in hist.moves if m.player == "alice"]
    assert len(humans) == mine > 0 and all(m.seat == 0 for m in humans)
    assert len(bots) + len(humans) == final.seq and bots


# ---------------------------------------------------------------------------------------------- replicas


@pytest.mark.slow
async def test_two_replicas_share_the_work_and_play_each_turn_once(stack: Stack) -> None:
    # No replica dies here, so no turn is due to be delivered twice: the consumer's ack wait is
    # long. With the tests' ACK_WAIT (1 s) a loaded machine that runs nothing of this process for
    # a second (seen: 1.1 s with no CPU time taken, the stack's one event loop stopped) makes
    # JetStream redeliver a turn still in a replica's hands (its in-progress acks could not go
    # out) and two handlers play it: the rules service applies the move once (one request id), but
    # both journals say played. The redelivery paths have their own tests.
    a = await stack.start_bot("a", concurrency=2, ack_wait=SHARED_ACK_WAIT)
    b = await stack.start_bot("b", concurrency=2, ack_wait=SHARED_ACK_WAIT)
    lobby = stack.rules_client("lobby", "service")
    gids = []
    for i in range(4):
        created = await lobby.create_game(
            "queens_court",
            ["bot:random", qc("heuristic"), "bot:random", "bot:random"],
            {"players": 4},
            request_id=f"share-{i}",
        )
        gids.append(created.game_id)
    finals = await asyncio.gather(*(wait_finished(lobby, g, timeout=120) for g in gids))
    total = 0
    for gid, final in zip(gids, finals, strict=True):
        assert final.finished
        bots = assert_each_bot_move_once(await history(stack, gid), all_bots=True)
        assert len(bots) == final.seq
        total += final.seq

    def count(hs: list) -> int:
        return sum(h.outcome is Outcome.PLAYED for h in hs)

    await asyncio.wait_for(
        asyncio.gather(
            a.journal.wait_for(lambda hs: count(hs) + count(b.journal.entries) >= total),
            b.journal.wait_for(lambda hs: count(hs) + count(a.journal.entries) >= total),
        ),
        15,
    )
    played = [(h.game_id, h.seq) for app in (a, b) for h in app.journal.played()]
    assert len(played) == len(set(played)) == total, "each turn played by exactly one replica"
    assert a.journal.played() and b.journal.played(), "both replicas took turns"


@pytest.mark.slow
async def test_replica_killed_mid_game_the_other_finishes(stack: Stack) -> None:
    # replica A is a real process, alone at first, so it holds the game when it dies
    a = await stack.start_bot_process(COURT_BOT_CONCURRENCY="2")
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game("queens_court", [qc("expert")] * 4, {"players": 4})
    gid = created.game_id
    reached = await wait_seq(lobby, gid, 6)
    assert not reached.finished
    b = await stack.start_bot("b")
    a.kill()  # SIGKILL: no ack, no drain, possibly mid-turn
    final = await wait_finished(lobby, gid, timeout=60)
    assert final.finished
    bots = assert_each_bot_move_once(await history(stack, gid), all_bots=True)
    assert len(bots) == final.seq
    await b.journal.wait_for(lambda hs: any(h.game_id == gid and h.seq == final.seq - 1 for h in hs))
    b_played = {h.seq for h in b.journal.played() if h.game_id == gid}
    assert b_played and max(b_played) == final.seq - 1, "the surviving replica played the end of the game"


@pytest.mark.slow
async def test_nats_restart_mid_game(stack: Stack) -> None:
    bot = await stack.start_bot()
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", [qc("expert")] * 4, {"players": 4})).game_id
    reached = await wait_seq(lobby, gid, 5)
    assert not reached.finished
    await asyncio.to_thread(stack.nats.restart)  # same port, same store: JetStream keeps streams and consumer
    final = await wait_finished(lobby, gid, timeout=90)
    assert final.finished
    assert len(assert_each_bot_move_once(await history(stack, gid), all_bots=True)) == final.seq
    assert max(h.seq for h in bot.journal.played() if h.game_id == gid) >= reached.seq
    # what the players see: the game goes on after the restart, each position played once (a turn
    # whose ack the restart lost comes again and is found stale, not played a second time)
    await bot.journal.wait_for(
        lambda hs: sum(h.game_id == gid and h.outcome is Outcome.PLAYED for h in hs) >= final.seq
    )
    assert sorted(h.seq for h in bot.journal.played() if h.game_id == gid) == list(range(final.seq))


def consumer_errors() -> float:
    return REGISTRY.get_sample_value("court_bot_errors_total", {"kind": "consumer"}) or 0.0


async def test_consumer_deleted_under_a_running_replica(stack: Stack) -> None:
    """The shared consumer deleted mid-game (by hand, a restore): the replica's open pull request
    ends (409 Consumer Deleted), it attaches again and re-creates ``court-bot`` from the ack floor
    it read last, not from the stream's start or COURT_BOT_CATCHUP back. What a player sees: the
    bots pause about a second and play the game to its end, each move once; the records delivered
    again are found stale, none played twice. Before, the replica asked the missing consumer again
    and again (thousands of requests a second) and the game stopped for good."""
    bot = await stack.start_bot()
    consumer = bot.consumer
    consumer.floor_every = 0.2  # (5 s in service) the floor read often: the game is short
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", [qc("expert")] * 4, {"players": 4})).game_id
    reached = await wait_seq(lobby, gid, 8)
    assert not reached.finished
    await bot.journal.wait_for(lambda _: consumer.floor > 0)
    js = consumer.js
    errors = consumer_errors()
    await js.delete_consumer(STREAM, DURABLE)
    last = (await js.stream_info(STREAM)).state.last_seq
    assert not (await lobby.get_view(gid)).finished, "deleted mid-game"
    final = await wait_finished(lobby, gid, timeout=90)
    assert final.finished
    assert len(assert_each_bot_move_once(await history(stack, gid), all_bots=True)) == final.seq
    await bot.journal.wait_for(
        lambda hs: sum(h.game_id == gid and h.outcome is Outcome.PLAYED for h in hs) >= final.seq
    )
    played = [h.seq for h in bot.journal.played() if h.game_id == gid]
    assert sorted(played) == list(range(final.seq)), "each position played once, none twice"
    info = await js.consumer_info(STREAM, DURABLE)
    assert info.config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE
    assert 1 < info.config.opt_start_seq <= last + 1, "re-created where it left off"
    assert 1 <= consumer_errors() - errors <= 3, "attached again at once, without spinning"


async def test_sigterm_stops_court_bot_gracefully(stack: Stack) -> None:
    proc = await stack.start_bot_process()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proc.port}") as ch:
        reply = await health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    code = await asyncio.to_thread(proc.terminate)
    assert code == 0
    events = [json.loads(line).get("event") for line in proc.log.splitlines() if line.startswith(b"{")]
    assert "shutting down" in events and "stopped" in events[events.index("shutting down") :]


class CrashAfterSubmit(Faults):
    """The replica's first submit succeeds, then it 'hangs' before acking (until the test kills it)."""

    def __init__(self) -> None:
        self.submitted = asyncio.Event()
        self.turn: Turn | None = None

    async def after_submit(self, turn: Turn, seat: int, reply: rules_pb2.SubmitActionResponse) -> None:
        if self.turn is None:
            self.turn = turn
            self.submitted.set()
            await asyncio.Event().wait()  # never acks: the test kills this replica here


@pytest.mark.slow
async def test_turn_redelivered_after_a_crash_does_not_play_twice(stack: Stack) -> None:
    crash = CrashAfterSubmit()
    a = await stack.start_bot("a", concurrency=1, faults=crash)
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game("queens_court", [qc("heuristic")] * 3, {"players": 3})
    gid = created.game_id
    await asyncio.wait_for(crash.submitted.wait(), 30)
    assert crash.turn is not None and crash.turn.seq == 0
    b = await stack.start_bot("b")
    await a.kill()  # the turn of move 0 was played but never acked
    final = await wait_finished(lobby, gid, timeout=60)
    # JetStream hands the un-acked turn to B after ack_wait; B finds the game moved on and drops it
    await b.journal.wait_for(lambda hs: any(h.game_id == gid and h.seq == 0 for h in hs), timeout=30)
    redelivered = [h for h in b.journal.entries if h.game_id == gid and h.seq == 0]
    # each redelivery is dropped as stale; on a loaded machine B may take longer than ack_wait (1 s)
    # to ack the first, and JetStream hands it over once more: stale again, never played
    assert redelivered and all(h.outcome is Outcome.STALE and h.delivered >= 2 for h in redelivered), [
        (h.outcome, h.delivered) for h in redelivered
    ]
    bots = assert_each_bot_move_once(await history(stack, gid), all_bots=True)
    assert len(bots) == final.seq and bots[0].request_id == request_id(gid, 0, bots[0].seat)


class Barrier(Faults):
    """Holds every handler after it decided until ``parties`` have decided (same position, both ready)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_here = asyncio.Event()

    async def before_submit(self, turn: Turn, seat: int) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.all_here.set()
        await self.all_here.wait()


async def first_turn_event(stack: Stack, game: str, game_id: str) -> tuple[records_pb2.Record, int]:
    """The game's first public record (its creation: the first turn) as JetStream stored it, once
    the projector has published it, and its stream sequence."""
    js = stack.rules.nc.jetstream()
    sub = await js.subscribe(
        krec.public_subject(game, game_id), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    try:
        msg = await sub.next_msg(timeout=15)
    finally:
        await sub.unsubscribe()
    return krec.decode(msg.data), msg.metadata.sequence.stream


@pytest.mark.parametrize("level", LEVELS if has_adapter("queens_court") else ["random"])
async def test_two_handlers_of_one_position_play_it_once(stack: Stack, level: str) -> None:
    barrier = Barrier(2)
    app = await stack.start_bot("manual", consume=False, faults=barrier)  # no consumer: we deliver by hand
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game("queens_court", [f"bot:{level}"] * 3, {"players": 3})
    gid = created.game_id
    event, _ = await first_turn_event(stack, "queens_court", gid)
    turn = Turn.from_record(event)
    assert turn.seq == 0 and turn.bot_seats()
    # the same delivery twice at once (as when JetStream redelivers while the first is still working)
    results = await asyncio.wait_for(
        asyncio.gather(app.handler.handle(turn, 1), app.handler.handle(turn, 2)), 30
    )
    assert barrier.arrived == 2, "both handlers decided at the same position"
    assert {h.outcome for h in results} <= {Outcome.PLAYED, Outcome.DUPLICATE}
    assert any(h.outcome is Outcome.PLAYED for h in results)
    hist = await history(stack, gid)
    assert len(hist.moves) == 1, "the position was played once"
    assert hist.moves[0].request_id == request_id(gid, 0, turn.to_act[0])
    # and a third delivery, after the fact, finds the turn stale
    late = await app.handler.handle(turn, 3)
    assert late.outcome is Outcome.STALE
    assert len((await history(stack, gid)).moves) == 1


async def test_the_shared_consumer_is_durable_and_explicit_ack(stack: Stack) -> None:
    bot = await stack.start_bot()
    await asyncio.wait_for(bot.consumer.attached.wait(), 15)
    info = await bot.nc.jetstream().consumer_info(STREAM, DURABLE)
    assert info.config.durable_name == DURABLE
    assert info.config.filter_subject == "court.events.*.*"
    assert AckPolicy(info.config.ack_policy) is AckPolicy.EXPLICIT
    assert info.config.ack_wait == pytest.approx(1.0)
    # a replica started with another COURT_BOT_ACK_WAIT updates the shared consumer
    other = await stack.start_bot(ack_wait=2.5)
    await asyncio.wait_for(other.consumer.attached.wait(), 15)
    info = await bot.nc.jetstream().consumer_info(STREAM, DURABLE)
    assert info.config.ack_wait == pytest.approx(2.5)


class HoldBeforeSubmit(Faults):
    def __init__(self) -> None:
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def before_submit(self, turn: Turn, seat: int) -> None:
        self.holding.set()
        await self.release.wait()


async def test_graceful_stop_finishes_the_turn_in_hand(stack: Stack) -> None:
    hold = HoldBeforeSubmit()
    a = await stack.start_bot("a", concurrency=1, faults=hold)
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", ["bot:random"] * 2, {"players": 2})).game_id
    await asyncio.wait_for(hold.holding.wait(), 15)
    stopping = asyncio.create_task(a.stop(grace=10))
    await asyncio.wait_for(a.consumer._stopping.wait(), 5)  # the stop has begun: no new turns are taken
    hold.release.set()
    await asyncio.wait_for(stopping, 15)
    assert [(h.seq, h.outcome) for h in a.journal.entries] == [(0, Outcome.PLAYED)], "one turn, played, acked"
    assert (await lobby.get_view(gid)).seq == 1
    # the rest of the game is still in JetStream for the next replica
    await stack.start_bot("b")
    assert (await wait_finished(lobby, gid)).finished


async def test_games_begun_before_any_bot_replica_ran_are_played(stack: Stack) -> None:
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", ["bot:random"] * 3, {"players": 3})).game_id
    await stack.start_bot()  # the shared consumer is created now, and starts COURT_BOT_CATCHUP back
    assert (await wait_finished(lobby, gid)).finished


async def test_decisions_on_the_event_loop_thread(stack: Stack) -> None:
    """COURT_BOT_DECISION_THREADS=0: no deciding thread, the same games."""
    bot = await stack.start_bot(decision_threads=0)
    assert bot.decider._pool is None
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", [qc("expert"), qc("heuristic")], {"players": 2})).game_id
    final = await wait_finished(lobby, gid)
    assert final.finished
    assert len(assert_each_bot_move_once(await history(stack, gid), all_bots=True)) == final.seq


async def test_a_bot_started_before_the_rules_service_waits_for_it(bare_stack: Stack) -> None:
    port = free_port()
    bot = await bare_stack.start_bot(settings={"rules_addr": f"127.0.0.1:{port}"})  # no stream, no rules yet
    await bare_stack.start_rules(listen=f"127.0.0.1:{port}")
    await asyncio.wait_for(bot.consumer.attached.wait(), 15)
    lobby = bare_stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", [qc("heuristic")] * 2, {"players": 2})).game_id
    assert (await wait_finished(lobby, gid)).finished


async def test_metrics_are_served(stack: Stack) -> None:
    bot = await stack.start_bot(settings={"metrics_listen": "127.0.0.1:0"})
    assert bot.metrics is not None
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", [qc("heuristic"), "bot:random"], {"players": 2})).game_id
    await wait_finished(lobby, gid)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{bot.metrics.port}/metrics", timeout=5) as r:
            return r.read().decode()

    text = await asyncio.to_thread(scrape)
    level = qc("heuristic")[len(BOT_PREFIX) :]
    for series in (
        f'court_bot_decisions_total{{game="queens_court",level="{level}",purpose="turn"}}',
        f'court_bot_decision_seconds_bucket{{game="queens_court",le="0.045",level="{level}"}}',
        'court_bot_turns_total{outcome="played"}',
        "court_bot_turn_seconds_count",
        "court_bot_errors_total",
    ):
        assert series in text, series


# ---------------------------------------------------------------------------------------------- levels


async def test_a_level_without_adapter_is_not_played_silently(stack: Stack) -> None:
    """A game with no adapter: the random level still plays it, other levels wait (error logged)."""
    app = await stack.start_bot("no-adapters", adapters=lambda game: None)
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game("queens_court", ["bot:heuristic", "bot:random"], {"players": 2})
    gid = created.game_id
    # the heuristic seat is refused and put back (not dropped, not played at another level) ...
    await app.journal.wait_for(
        lambda hs: any(h.game_id == gid and h.outcome is Outcome.RETRY and h.level == "heuristic" for h in hs)
    )
    view = await lobby.get_view(gid)
    assert list(view.to_act) == [0], "the game waits for the heuristic seat"
    assert all(m.seat == 1 for m in (await history(stack, gid)).moves), "nothing was played for seat 0"
    # ... and suggestions say which levels exist for this game
    alice_game = await stack.rules_client("alice").create_game(
        "queens_court", ["alice", "alice"], {"players": 2}
    )
    hint = stack.bot_client(app, "alice")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await hint.suggest(alice_game.game_id, level="expert")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "levels available for queens_court: random" in info.value.details()
    reply = await hint.suggest(alice_game.game_id)  # empty level: the strongest available, random here
    assert reply.explanation.startswith("random level")


async def test_an_unknown_level_is_put_back_not_guessed(stack: Stack) -> None:
    app = await stack.start_bot()
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game("queens_court", ["bot:grandmaster", "bot:grandmaster"], {"players": 2})
    gid = created.game_id
    await app.journal.wait_for(lambda hs: any(h.game_id == gid and h.outcome is Outcome.RETRY for h in hs))
    assert (await lobby.get_view(gid)).seq == 0


# ---------------------------------------------------------------------------------------------- Suggest


@pytest.mark.parametrize("game", sorted({"queens_court", *adapter_games()}))
async def test_suggest_is_legal_from_the_callers_own_view(stack: Stack, game: str) -> None:
    options, n = {g: (o, k) for g, o, k in GAMES}[game]
    bot = await stack.start_bot()
    people = [f"p{i}" for i in range(n)]
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game(game, people, options)).game_id
    view = await lobby.get_view(gid)
    seat = view.to_act[0]
    me = people[seat]
    mine = await stack.rules_client(me).get_view(gid, seat)
    legal = [action_json(a) for a in mine.legal_actions]
    hint = stack.bot_client(bot, me)
    levels = list(LEVELS) if has_adapter(game) else ["random"]
    for level in [*levels, ""]:
        reply = await hint.suggest(gid, seat, level)
        assert reply.seq == mine.seq
        assert action_json(reply.action) in legal, (level, action_json(reply.action))
        assert reply.explanation.startswith(f"{level or levels[-1]} level")
    reply = await hint.suggest(gid)  # no seat: the caller's only seat
    assert action_json(reply.action) in legal
    # the suggestion is playable as it stands
    played = await stack.rules_client(me).submit(gid, reply.action, seat)
    assert played.seq == mine.seq + 1


async def test_suggest_refuses_what_the_rules_service_would(stack: Stack) -> None:
    bot = await stack.start_bot()
    people = ["p0", "p1", "p2"]
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", people, {"players": 3})).game_id
    to_act = (await lobby.get_view(gid)).to_act[0]
    other = (to_act + 1) % 3

    async def code(client: Any, *args: Any, **kw: Any) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.suggest(*args, **kw)
        return info.value.code(), info.value.details()

    intruder = stack.bot_client(bot, people[other])
    c, msg = await code(intruder, gid, to_act)  # another player's seat: never their view, never a hint
    assert c == grpc.StatusCode.PERMISSION_DENIED and "not yours" in msg
    c, msg = await code(intruder, gid, other)  # their own seat, not their turn
    assert c == grpc.StatusCode.FAILED_PRECONDITION and "not to act" in msg
    c, _ = await code(stack.bot_client(bot, "stranger"), gid)  # no seat at all
    assert c == grpc.StatusCode.PERMISSION_DENIED
    c, msg = await code(stack.bot_client(bot, people[to_act]), gid, to_act, "grandmaster")
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "unknown bot level" in msg
    c, _ = await code(stack.bot_client(bot, people[to_act]), "gnosuchgame", to_act)
    assert c == grpc.StatusCode.NOT_FOUND
    c, _ = await code(stack.bot_client(bot, None), gid, to_act)  # no token
    assert c == grpc.StatusCode.UNAUTHENTICATED
    c, _ = await code(stack.bot_client(bot, None, raw="not-a-jwt"), gid, to_act)
    assert c == grpc.StatusCode.UNAUTHENTICATED
    assert (await lobby.get_view(gid)).seq == 0, "asking for hints changes nothing"


async def test_suggest_decides_from_the_view_sent_along(stack: Stack) -> None:
    """A view sent along (``SuggestRequest.view``) is decided from as it stands, with no call to the
    rules service: with the rules service down the caller still gets a legal hint for that view's
    position (without a view it gets UNAVAILABLE). A view of another game, of another seat than the
    one asked for, of a seat that is not the caller's, a spectator's, or one that cannot be played
    from is refused with INVALID_ARGUMENT saying which, and changes nothing."""
    bot = await stack.start_bot()
    people = ["p0", "p1", "p2"]
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", people, {"players": 3})).game_id
    elsewhere = (await lobby.create_game("queens_court", people, {"players": 3})).game_id
    seat = (await lobby.get_view(gid)).to_act[0]
    other = (seat + 1) % 3
    me = people[seat]
    mine = await stack.rules_client(me).get_view(gid, seat)
    theirs = await stack.rules_client(people[other]).get_view(gid, other)
    spectator = await stack.rules_client("watcher").get_view(gid)
    legal = [action_json(a) for a in mine.legal_actions]
    hint = stack.bot_client(bot, me)

    async def refused(*args: Any, **kw: Any) -> str:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await hint.suggest(*args, **kw)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
        return str(info.value.details())

    assert f"not of game_id '{elsewhere}'" in await refused(elsewhere, seat, view=mine)
    assert f"seat {seat}'s, not seat {other}'s" in await refused(gid, other, view=mine)
    assert "not yours" in await refused(gid, view=theirs)  # another player's view, had they shown it
    assert "spectator" in await refused(gid, view=spectator)
    unplayable = rules_pb2.GameView()
    unplayable.CopyFrom(mine)
    del unplayable.legal_actions[:]
    assert "cannot be played from" in await refused(gid, seat, view=unplayable)
    assert (await lobby.get_view(gid)).seq == 0, "asking for hints changes nothing"

    # the rules service goes away: the hint comes from the view alone, the old path cannot answer
    assert stack.rules is not None
    await stack.rules.stop(0)
    stack.rules = None
    levels = list(LEVELS) if has_adapter("queens_court") else ["random"]
    for level in [*levels, ""]:
        reply = await hint.suggest(gid, seat, level, view=mine)
        assert reply.seq == mine.seq
        assert action_json(reply.action) in legal, (level, action_json(reply.action))
    reply = await hint.suggest(gid, view=mine)  # no seat: the view's
    assert action_json(reply.action) in legal
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await hint.suggest(gid, seat)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_suggest_keeps_to_a_short_deadline(stack: Stack) -> None:
    bot = await stack.start_bot(budgets_ms={"random": 5.0, "heuristic": 20.0, "expert": 2000.0})
    gid = (
        await stack.rules_client("alice").create_game("queens_court", ["alice"] * 3, {"players": 3})
    ).game_id
    hint = stack.bot_client(bot, "alice")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    reply = await hint.suggest(gid, level="expert", timeout=0.5)  # the budget is 2 s: the deadline wins
    assert loop.time() - t0 < 0.5
    assert reply.explanation.startswith("expert level") and reply.HasField("action")


async def test_an_expert_hint_made_without_search_does_not_claim_one(stack: Stack) -> None:
    """Hearts passing: the expert level passes by its rules of thumb and runs no search; the hint says
    so instead of "information-set search (0 iterations)" (issue 32). In play it searches, and says how much."""
    if not has_adapter("hearts"):
        pytest.fail("this build has no Hearts adapter: the expert level cannot be asked")
    bot = await stack.start_bot()
    people = [f"p{i}" for i in range(4)]
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("hearts", people, {"limit": 20})).game_id
    reply = await stack.bot_client(bot, people[0]).suggest(gid, 0, "expert")
    assert reply.explanation.startswith(
        "expert level, the rules of thumb of a good player (this choice needs no search)"
    )
    assert "0 iterations" not in reply.explanation, reply.explanation
    # every seat passes its three cards, one record at a time; then the holder of 2C leads it (forced:
    # no search either); the next player's choice is searched and the hint says how many iterations
    view = await lobby.get_view(gid)
    while "iterations" not in reply.explanation:
        assert not view.finished and view.seq < 40, reply.explanation
        seat = view.to_act[0]
        mine = await stack.rules_client(people[seat]).get_view(gid, seat)
        reply = await stack.bot_client(bot, people[seat]).suggest(gid, seat, "expert")
        if "iterations" in reply.explanation:
            break
        assert "0 iterations" not in reply.explanation and "needs no search" in reply.explanation
        view = (await stack.rules_client(people[seat]).submit(gid, reply.action, seat)).view
        assert mine.seq < view.seq
    assert re.search(r"information-set search \([1-9]\d* iterations\)", reply.explanation), reply.explanation


class SlowFirstTurn(Faults):
    """The replica's first turn thinks for 2.5 x ack_wait before submitting."""

    def __init__(self) -> None:
        self.turn: Turn | None = None

    async def before_submit(self, turn: Turn, seat: int) -> None:
        if self.turn is None:
            self.turn = turn
            await asyncio.sleep(2.5 * ACK_WAIT)


@pytest.mark.slow
async def test_a_slow_turn_stays_reserved_for_its_replica(stack: Stack) -> None:
    # without in-progress acks JetStream would hand the turn to replica B after ack_wait (1 s)
    slow = SlowFirstTurn()
    a = await stack.start_bot("a", concurrency=1, faults=slow)
    b = await stack.start_bot("b")
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", [qc("random")] * 3, {"players": 3})).game_id
    final = await wait_finished(lobby, gid, timeout=60)
    assert final.finished and slow.turn is not None and slow.turn.game_id == gid
    assert len(assert_each_bot_move_once(await history(stack, gid), all_bots=True)) == final.seq
    mine = [h for h in a.journal.entries if (h.game_id, h.seq) == (gid, slow.turn.seq)]
    assert [(h.outcome, h.delivered) for h in mine] == [(Outcome.PLAYED, 1)]
    assert not [h for h in b.journal.entries if (h.game_id, h.seq) == (gid, slow.turn.seq)], (
        "the turn was handed to the other replica while its first was still on it"
    )
