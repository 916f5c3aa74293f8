"""The turn clock in the rules service (docs/clock.md): real nats-server, real replicas on loopback.

Clock seconds are shortened with the documented dev setting COURT_CLOCK_SECOND_MS (a 5-second turn
lasts 5 x that many ms); nothing here asserts on elapsed time: tests wait for events with generous
limits and check what the log holds.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import grpc
import pytest
from court_client import RulesClient
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit.settings import Settings
from court_proto.court.events.v2 import records_pb2
from court_proto.court.games.v1 import events_pb2
from court_proto.court.rules.v1 import rules_pb2
from court_rules.app import RulesApp
from court_rules.store import DUE_HEADER

from tests.fixtures import keys

from .conftest import Replicas, token
from .helpers import EventLog, assert_complete, count_refreshes, first_seat_moves, view_after

pytestmark = pytest.mark.asyncio


def clock_settings(nats_url: str, second_ms: int) -> Settings:
    return Settings.load(
        "rules",
        {"COURT_CLOCK_SECOND_MS": str(second_ms)},
        nats_url=nats_url,
        listen="127.0.0.1:0",
        metrics_listen="",
        env="test",
        **keys.overrides("rules"),
    )


async def start(replicas: Replicas, second_ms: int = 20, **kw: Any) -> RulesApp:
    app = await RulesApp.start(clock_settings(replicas.nats.url, second_ms), **kw)
    replicas.apps.append(app)
    return app


def clock(turn: int = 5, bank: int = 0, level: str = "heuristic") -> events_pb2.TurnClock:
    return events_pb2.TurnClock(turn_seconds=turn, time_bank_seconds=bank, autoplay_level=level)


def events(recs: list[records_pb2.Record], kind: str) -> list[dict[str, Any]]:
    """The data of every event ``kind`` in the records, in order."""
    return [e.data for r in recs for e in krec.events_of(r) if e.type == kind]


def autoplayed(recs: list[records_pb2.Record], kind: str) -> list[records_pb2.Record]:
    return [r for r in recs if r.WhichOneof("body") == "move" and r.move.autoplay == kind]


PEOPLE = ["ann", "ben", "cat", "dan"]


async def test_nobody_moves_the_clock_plays_the_game_to_its_end(replicas: Replicas) -> None:
    """Four people who never move: every turn of theirs times out (the first two in a row of each
    seat) or is played at once for a seat marked away; the game ends; the events say so."""
    app = await start(replicas)
    svc = replicas.client(app, "lobby", "service")
    made = await svc.create_game("hearts", PEOPLE, {"limit": 20}, clock=clock())
    gid = made.game_id
    assert made.view.clock.turn_seconds == 5
    assert [c.seat for c in made.view.seat_clocks] == [0, 1, 2, 3]
    assert all(c.HasField("deadline") for c in made.view.seat_clocks)  # passing: all four to act
    async with EventLog(replicas.nats.url, "hearts", gid) as ev:
        await ev.wait_until(lambda rs: any(r.finished for r in rs), timeout=240, what="the game's end")
        admin = replicas.client(app, "root", "admin")
        hist = await admin.history(gid)
        last = hist.moves[-1].seq
        assert_complete(ev.events, last)
        kinds = Counter(m.kind for m in hist.moves)
        assert set(kinds) <= {"timeout", "away"}, kinds
        assert all(m.player == "court:clock" for m in hist.moves)
        # each seat: exactly two timeouts (then it is away and played at once), one SeatAway
        per_seat = Counter(m.seat for m in hist.moves if m.kind == "timeout")
        assert per_seat == {0: 2, 1: 2, 2: 2, 3: 2}, per_seat
        assert len(events(ev.events, "TurnTimedOut")) == 8
        assert Counter(e["seat"] for e in events(ev.events, "SeatAway")) == {0: 1, 1: 1, 2: 1, 3: 1}
        # a timeout's record is the clock's move, its first event TurnTimedOut naming the seat and
        # the turn; every record before the end names the deadlines of the seats to act
        timed = autoplayed(ev.events, "timeout")
        assert len(timed) == 8
        for r in timed:
            first = krec.events_of(r)[0]
            assert first.type == "TurnTimedOut" and first.data["seat"] == r.move.seat
            assert r.move.action_type and not r.move.HasField("action")  # public: the action's type only
        assert all({d.seat for d in r.deadlines} == set(r.to_act) for r in ev.events if not r.finished)
        assert ev.events[0].created.clock.turn_seconds == 5
        view = await svc.get_view(gid)
        assert view.finished and not any(c.HasField("deadline") for c in view.seat_clocks)
        assert all(c.away for c in view.seat_clocks)


async def test_a_player_back_from_away_gets_the_seat_on_their_next_action(replicas: Replicas) -> None:
    """Ann is marked away (LeaveSeat, as one player's AbandonGame does): the clock plays her seat at
    once; ReturnToSeat gives it back (SeatReturned), each time (her own move does too:
    test_an_away_seats_own_move_takes_the_seat_back)."""
    app = await start(replicas)
    svc = replicas.client(app, "lobby", "service")
    # the other three seats are people who play promptly (this test moves for them)
    made = await svc.create_game("hearts", PEOPLE, {"limit": 20}, clock=clock(turn=600, bank=0))
    gid = made.game_id
    ann = replicas.client(app, "ann")
    others = {i: replicas.client(app, p) for i, p in enumerate(PEOPLE) if i}
    async with EventLog(replicas.nats.url, "hearts", gid) as ev:
        left = await ann.leave_seat(gid)
        assert left.changed and [c.away for c in left.view.seat_clocks] == [True, False, False, False]
        await ev.wait_until(
            lambda rs: bool(autoplayed(rs, "away")), timeout=60, what="the away seat's autoplay"
        )
        again = await ann.leave_seat(gid)  # already away: nothing changes
        assert not again.changed
        back = await ann.return_to_seat(gid)
        assert back.changed and not back.view.seat_clocks[0].away
        await ev.wait_until(lambda rs: bool(events(rs, "SeatReturned")), what="SeatReturned")
        seq_back = back.seq
        # the others play; whenever it is ann's turn the clock does not play it (600 s turns)
        rng = random.Random(5)
        for _ in range(40):
            view = await others[1].get_view(gid, 1)
            if 0 in view.to_act:
                mine = await ann.get_view(gid)
                reply = await ann.submit(gid, rng.choice(list(mine.legal_actions)))
                assert reply.seq > seq_back
                break
            seat = next(iter(s for s in view.to_act))
            mine = await others[seat].get_view(gid, seat)
            await others[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)
        else:
            raise AssertionError("ann was never to act")
        hist = await replicas.client(app, "root", "admin").history(gid)
        after = [m for m in hist.moves if m.seq > seq_back]
        assert not [m for m in after if m.player == "court:clock"], (
            "nobody played ann's seat after she came back"
        )
        # she is away again (LeaveSeat) and ReturnToSeat brings her back again
        await ann.leave_seat(gid)
        n_returned = len(events(ev.events, "SeatReturned"))
        await ann.return_to_seat(gid)
        await ev.wait_until(lambda rs: len(events(rs, "SeatReturned")) > n_returned, what="2nd return")
        assert [r.seat_changed.kind for r in ev.events if r.WhichOneof("body") == "seat_changed"] == [
            "seat_away",
            "seat_returned",
            "seat_away",
            "seat_returned",
        ]


async def test_bad_clock_settings_are_refused_and_change_nothing(replicas: Replicas) -> None:
    app = await start(replicas)
    svc = replicas.client(app, "lobby", "service")
    for bad, field in (
        (clock(turn=4), "turn_seconds"),
        (clock(turn=601), "turn_seconds"),
        (clock(bank=-1), "time_bank_seconds"),
        (clock(level="genius"), "autoplay_level"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await svc.create_game("hearts", PEOPLE, clock=bad, request_id=f"bad-{field}-{bad.turn_seconds}")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in err.value.details()
    # a bot may not mark a person away; another player may not take ann's seat back
    made = await svc.create_game("hearts", PEOPLE, clock=clock(turn=600))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await replicas.client(app, "bots", "bot").leave_seat(made.game_id, 0)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await replicas.client(app, "ben").return_to_seat(made.game_id, 0)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    view = await svc.get_view(made.game_id)
    assert view.seq == 0 and not any(c.away for c in view.seat_clocks)


async def test_an_away_seats_own_move_takes_the_seat_back(replicas: Replicas) -> None:
    """Ann is away and it is her turn, but the clock has not played it yet (the replica's clock
    driver is stopped: JetStream holds the due record, as for a slow or dead driver). Her own move
    is accepted and brings her back: its record (her move, by her) opens with SeatReturned;
    her view and the spectator's no longer mark her away."""
    from court_rules.tasks import stop_tasks

    app = await start(replicas)
    assert not await stop_tasks([app._clock], 10.0), "the clock driver stopped"
    app._clock = None
    svc = replicas.client(app, "lobby", "service")
    made = await svc.create_game("hearts", PEOPLE, {"limit": 20}, clock=clock(turn=600, bank=0))
    gid = made.game_id
    ann = replicas.client(app, "ann")
    async with EventLog(replicas.nats.url, "hearts", gid) as ev:
        left = await ann.leave_seat(gid)
        assert left.changed and left.view.seat_clocks[0].away and 0 in left.view.to_act
        mine = await ann.get_view(gid)
        reply = await ann.submit(gid, mine.legal_actions[0], turn_seq=mine.seat_clocks[0].turn_seq)
        assert reply.seq == left.seq + 1
        assert not reply.view.seat_clocks[0].away and reply.view.seat_clocks[0].timeouts_in_row == 0
        assert not (await svc.get_view(gid)).seat_clocks[0].away
        await ev.wait_until(lambda rs: any(r.seq == reply.seq for r in rs), what="her move's record")
        rec = next(r for r in ev.events if r.seq == reply.seq)
        assert rec.WhichOneof("body") == "move" and rec.move.seat == 0 and rec.move.autoplay == ""
        types = [e.type for e in krec.events_of(rec)]
        assert types[0] == "SeatReturned" and "TurnTimedOut" not in types, types  # then her move's events
        assert rec.move.by == ""  # the public record: who asked stays in the game log
        assert events([rec], "SeatReturned") == [{"seat": 0, "player": "ann"}]
    hist = await replicas.client(app, "root", "admin").history(gid)
    assert [(m.kind, m.player) for m in hist.moves] == [("seat_away", "ann"), ("move", "ann")]


async def test_a_late_move_racing_its_timeout_applies_exactly_one(replicas: Replicas) -> None:
    """200 times: the seat's own move is sent at its deadline, when the clock (two replicas) plays
    it too. Exactly one move of that seat lands in that turn, every time."""
    a = await start(replicas, second_ms=8)  # 5 s turns last 40 ms
    b = await start(replicas, second_ms=8)
    svc = replicas.client(a, "lobby", "service")
    clients = [replicas.client(a if i % 2 else b, p) for i, p in enumerate(PEOPLE)]
    races, human_won, games = 0, 0, 0
    while races < 200:
        made = await svc.create_game("hearts", PEOPLE, {"limit": 20}, clock=clock(turn=5, bank=0))
        gid, games = made.game_id, games + 1
        rng = random.Random(races)
        while races < 200:
            view = await clients[0].get_view(gid, 0)
            if view.finished:
                break
            if all(c.away for c in view.seat_clocks):
                break
            seat = view.to_act[0]
            mine = await clients[seat].get_view(gid, seat)
            if seat not in mine.to_act or mine.seat_clocks[seat].away:
                continue
            turn_seq = mine.seat_clocks[seat].turn_seq
            deadline = mine.seat_clocks[seat].deadline.ToMilliseconds() / 1000
            act = rng.choice(list(mine.legal_actions))
            rid = f"race-{races}"
            await asyncio.sleep(
                max(0.0, deadline - time.time())
            )  # sent at the deadline, give or take a few ms
            try:
                await clients[seat].submit(gid, act, seat, request_id=rid, turn_seq=turn_seq)
                mine_applied = True
            except grpc.aio.AioRpcError as err:
                assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err.details()
                mine_applied = False
            hist = await svc_history(replicas, a, gid)
            # the moves of this seat in the turn that started at turn_seq
            theirs = [m for m in hist.moves if m.seq > turn_seq and m.seat == seat]
            first_after = theirs[0] if theirs else None
            assert first_after is not None, "the seat's turn was played (by it or the clock)"
            in_turn = [
                m for m in hist.moves if m.seq > turn_seq and m.seq <= first_after.seq and m.seat == seat
            ]
            assert len(in_turn) == 1
            timed = first_after.request_id == f"clock-{gid}-{turn_seq}-{seat}"
            assert timed != mine_applied, (first_after, mine_applied)
            assert mine_applied == (first_after.request_id == rid and first_after.player == PEOPLE[seat])
            human_won += mine_applied
            races += 1
            # take the seat back if the clock marked it away
            view = await clients[seat].get_view(gid, seat)
            if view.seat_clocks[seat].away and not view.finished:
                try:
                    await clients[seat].return_to_seat(gid, seat)
                except grpc.aio.AioRpcError as err:  # the clock may have played the game to its end since
                    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "is over" in err.details()
    print(f"200 races over {games} games: the seat's own move won {human_won}, the clock {200 - human_won}")


async def svc_history(replicas: Replicas, app: RulesApp, gid: str) -> rules_pb2.GetHistoryResponse:
    c = RulesClient(app.address, token("root", "admin"))
    try:
        return await c.history(gid)
    finally:
        await c.close()


async def test_only_records_with_clock_work_reach_the_clock(replicas: Replicas) -> None:
    """A record after which the clock has work is appended on the game's ``due`` subject, every
    other on ``log``; the clock's durable follows ``due`` alone. A whole game with bot seats only
    (no clock work: bots have no clock) goes by without one delivery to the clock, while a game of
    people that nobody plays still gets its timeouts from it; both logs are one log each, read back
    whole from ``court.games.<shard>.<game_id>.*`` with seqs 0..n."""
    app = await start(replicas)
    js = app.store.js
    svc = replicas.client(app, "lobby", "service")
    bots = replicas.client(app, "court-bots", "bot")

    async def delivered() -> int:
        info = await js.consumer_info(krec.game_stream(0), "rules-clock")
        assert info.config.filter_subject == "court.games.0.*.due"
        return int(info.delivered.consumer_seq or 0)

    # the clock's consumer exists once the replica runs
    for _ in range(200):
        try:
            before = await delivered()
            break
        except Exception:  # noqa: BLE001 - not created yet
            await asyncio.sleep(0.05)
    else:
        raise AssertionError("the clock's durable was never created")

    made = await svc.create_game("hearts", [f"bot:{i}" for i in range(4)], {"limit": 20}, clock=clock())
    view = made.view
    rng = random.Random(7)
    moves = 0
    while not view.finished:
        seat = rng.choice(list(view.to_act))
        mine = await bots.get_view(made.game_id, seat)
        reply = await bots.submit(made.game_id, rng.choice(list(mine.legal_actions)), seat)
        view = await view_after(bots, made.game_id, seat, reply)
        moves += 1
    assert moves > 20
    bot_log = await app.store.records(made.game_id)
    assert [int(r.body.seq) for r in bot_log] == list(range(len(bot_log)))
    raw = await log_messages(app, made.game_id)
    assert {m.subject.rsplit(".", 1)[1] for m in raw} == {krec.LOG_TOKEN}
    assert not any(DUE_HEADER in m.headers for m in raw)
    assert await delivered() == before, "records with no clock work reached the clock"

    # people who never move: every record after which someone is to act is on `due`, and the
    # clock plays their turns from those deliveries
    people = await svc.create_game("queens_court", PEOPLE[:2], {}, clock=clock())
    async with EventLog(replicas.nats.url, "queens_court", people.game_id) as ev:
        await ev.wait_until(lambda rs: len(autoplayed(rs, "timeout")) >= 2, timeout=120, what="two timeouts")
    raw = await log_messages(app, people.game_id)
    for m in raw:
        assert m.subject.endswith(f".{krec.DUE_TOKEN}") == (DUE_HEADER in m.headers), (m.subject, m.headers)
    assert any(m.subject.endswith(f".{krec.DUE_TOKEN}") for m in raw)
    assert await delivered() > before
    recs = await app.store.records(people.game_id)
    assert [int(r.body.seq) for r in recs] == list(range(len(recs)))


async def log_messages(app: RulesApp, game_id: str) -> list[kjs.StoredMsg]:
    """The game's log as stored: subjects and headers of every record."""
    return await kjs.direct_get_batch(app.nc, krec.game_stream(0), krec.log_filter(game_id, 1))


async def test_bot_seats_have_no_deadline_anywhere_a_player_reads(replicas: Replicas) -> None:
    """Ann and two bots, a 300-second turn: Ann's turns have a deadline; the bots' have none, in the
    view, the watched updates, the records' deadlines and TurnStarted (docs/clock.md: bot seats have
    no clock; a client drew `⏱ Blue Otter: 30 s left` from them before, issue 32)."""
    app = await start(replicas, second_ms=1000)
    svc = replicas.client(app, "lobby", "service")
    bots = replicas.client(app, "court-bots", "bot")
    ann = replicas.client(app, "ann")
    made = await svc.create_game(
        "queens_court", ["ann", "bot:heuristic", "bot:random"], {"players": 3}, clock=clock(300)
    )
    gid = made.game_id
    humans = {0}

    def check(view: rules_pb2.GameView, where: str) -> None:
        clocks = {c.seat: c for c in view.seat_clocks}
        for seat in view.to_act:
            assert clocks[seat].HasField("deadline") == (seat in humans), (where, seat, view.seq)
        assert not any(clocks[b].HasField("deadline") for b in (1, 2)), (where, view.seq)

    check(made.view, "CreateGame")
    seen: list[rules_pb2.GameView] = []
    rng = random.Random(5)
    bot_turns = ann_turns = 0

    async def follow() -> None:
        async for update in ann.watch(gid, 0):
            seen.append(update.view)
            if update.view.finished or update.view.seq >= 30:
                return

    async with EventLog(replicas.nats.url, "queens_court", gid) as ev:
        watcher = asyncio.create_task(follow())
        view = made.view
        while view.seq < 30 and not view.finished:
            seat = view.to_act[0]
            client = ann if seat in humans else bots
            mine = await client.get_view(gid, seat)
            check(mine, f"GetView seat {seat}")
            view = await view_after(
                client, gid, seat, await client.submit(gid, rng.choice(list(mine.legal_actions)), seat)
            )
            check(view, "SubmitAction")
            bot_turns += seat not in humans
            ann_turns += seat in humans
        await asyncio.wait_for(watcher, 60)
        await ev.wait_until(lambda rs: len(rs) > view.seq, timeout=60, what="every record projected")
    assert bot_turns >= 10 and ann_turns >= 5, (bot_turns, ann_turns)
    for v in seen:
        check(v, "WatchGame")
    for r in ev.events:
        if not r.finished:
            assert {d.seat for d in r.deadlines} == set(r.to_act) & humans, (r.body.seq, list(r.deadlines))
    for e in events(ev.events, "TurnStarted"):
        assert {d["seat"] for d in e.get("deadlines", [])} == set(e["to_act"]) & humans, e


async def test_due_records_of_turns_played_in_time_are_acknowledged_without_a_read(
    replicas: Replicas,
) -> None:
    """Every record after which a person is to act reaches the clock twice: at once (delayed to
    its due time) and at its due time. When the person moved in time the replica's cached entry
    is already past that record, so the clock acknowledges it without reading the log (a newer
    record exists and carries its own due time); none of those turns times out."""
    app = await start(replicas)  # 20 ms clock seconds: a 150 s turn is 3 s
    refreshes = count_refreshes(app)
    made = await replicas.client(app, "lobby", "service").create_game(
        "queens_court", PEOPLE[:2], {}, clock=clock(turn=150)
    )
    gid = made.game_id
    clients = {i: replicas.client(app, p) for i, p in enumerate(PEOPLE[:2])}
    await first_seat_moves(clients, gid, made.view, random.Random(3), 4)
    raw = await log_messages(app, gid)
    due = [m.seq for m in raw if m.subject.endswith(f".{krec.DUE_TOKEN}")]
    assert len(due) >= 4, "each of these records leaves a person to act"
    js = app.store.js
    async with asyncio.timeout(60):  # every due record but the newest acknowledged at its due time
        while (
            int((await js.consumer_info(krec.game_stream(0), "rules-clock")).ack_floor.stream_seq) < due[-2]
        ):
            await asyncio.sleep(0.1)  # the durable's state has no event to wait on
    recs = await app.store.records(gid)
    timeouts = autoplayed([r.body for r in recs], "timeout")
    # the newest record's turn times out about when the older ones come back (nobody moves after
    # the fourth move): the clock reads the log for it, and plays it, once per timeout (one more
    # when a timeout is being played as the log is read here); the older records, none
    assert len(refreshes) <= len(timeouts) + 1, (
        f"the clock read the log {len(refreshes)} times for {len(due) - 1} records it was past "
        f"and {len(timeouts)} timeouts"
    )
    assert not any(int(r.seq) <= 4 for r in timeouts), "every turn of the four was played in time"
