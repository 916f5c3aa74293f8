"""The turn clock end to end (docs/clock.md): lobby, rules (one and two replicas), bot service and
ranking on a real nats-server and a real database; the absent player is a real account that never
moves. Turns are the public minimum, 5 seconds, on the real clock; nothing asserts on elapsed time
(waits are for events, with generous limits)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from court_client import RulesClient
from court_contract import records as krec
from court_contract import typed
from court_proto.court.events.v2 import records_pb2
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_rules.app import RulesApp

from tests.ranking.stack import Player, Stack, rid
from tests.rules.helpers import EventLog, assert_complete

pytestmark = pytest.mark.asyncio

CLOCK_EXTRA = {"COURT_CLOCK_ACK_WAIT": "2", "COURT_ABANDON_SWEEP": "3600"}


async def hearts_lobby(stack: Stack, ann: Player, **clock: Any) -> lpb.Lobby:
    """An online 4-seat Hearts lobby: Ann (a person) and three heuristic bots, started."""
    req = lpb.CreateLobbyRequest(request_id=rid(), game="hearts", online=True, **clock)
    req.options.CopyFrom(typed.options_to_proto("hearts", {"limit": 40}))
    lobby = await ann.call("CreateLobby", req)
    for seat in (1, 2, 3):
        await ann.call(
            "SetBotSeat",
            lpb.SetBotSeatRequest(request_id=rid(), lobby_id=lobby.lobby_id, seat=seat, level="heuristic"),
        )
    return await ann.start(lobby.lobby_id)


async def history(stack: Stack, rules_address: str, game_id: str) -> Any:
    c = RulesClient(stack.channel(rules_address), stack.token("ops", "admin"))
    try:
        return await c.history(game_id)
    finally:
        await c.close()


def events(recs: list[records_pb2.Record], kind: str) -> list[dict[str, Any]]:
    return [e.data for r in recs for e in krec.events_of(r) if e.type == kind]


def game_over(recs: list[records_pb2.Record]) -> bool:
    return any(r.finished for r in recs)


def check_seat_played_by_clock(hist: Any, recs: list[records_pb2.Record], seat: int) -> None:
    """Every move of ``seat`` was the clock's: a timeout (its TurnTimedOut first) or an away
    autoplay; two timeouts (then away), each for its own turn; none twice; no gap in the history."""
    mine = [m for m in hist.moves if m.seat == seat]
    assert mine and all(m.player == "court:clock" and m.kind in ("timeout", "away") for m in mine), Counter(
        (m.player, m.kind) for m in mine
    )
    timeouts = [m for m in mine if m.kind == "timeout"]
    assert len(timeouts) == 2, [m.seq for m in timeouts]
    rids = [m.request_id for m in mine]
    assert len(rids) == len(set(rids)), "no turn of the seat was played twice"
    assert [m.seq for m in hist.moves] == list(range(1, len(hist.moves) + 1)), "the history has no gaps"
    timed_out = events(recs, "TurnTimedOut")
    assert sorted(e["turn_seq"] for e in timed_out) == sorted({e["turn_seq"] for e in timed_out})
    assert [e["seat"] for e in timed_out] == [seat, seat]
    for r in recs:  # a TurnTimedOut opens the clock's own move record for that seat
        if any(e.type == "TurnTimedOut" for e in krec.events_of(r)):
            assert r.WhichOneof("body") == "move" and r.move.autoplay == "timeout" and r.move.seat == seat
            assert krec.events_of(r)[0].type == "TurnTimedOut"
    assert [a["seat"] for a in events(recs, "SeatAway")] == [seat]


@pytest.fixture
async def clock_stack(tmp_path: Path, stack_db: str) -> Any:
    s = Stack(tmp_path, stack_db)
    orig = s.settings

    def settings(service: str, **overrides: Any) -> Any:
        extra = {**overrides.pop("extra", {}), **CLOCK_EXTRA}
        return orig(service, extra=extra, **overrides)

    s.settings = settings  # type: ignore[method-assign]
    try:
        await s.start()
        yield s
    finally:
        await s.close()


async def test_an_absent_player_never_freezes_an_online_hearts_game(clock_stack: Stack) -> None:
    """Ann never moves: her turns time out (twice), then the autoplay bot plays her seat at once;
    the game ends on its own and the ranking settles it."""
    stack = clock_stack
    await stack.start_bot()
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=5, time_bank_seconds=0)
    gid = started.game_id
    async with EventLog(stack.nats.url, "hearts", gid) as ev:
        await ev.wait_until(game_over, timeout=300, what="the game's end")
        hist = await history(stack, stack.rules.address, gid)
        assert_complete(ev.events, hist.moves[-1].seq)
        check_seat_played_by_clock(hist, ev.events, 0)
    await stack.wait_ranked(lambda st: st.game_status(gid) == "finished", "the game settled")
    audit = await stack.audit()
    assert not audit.violations and audit.games >= 1, audit


async def test_two_replicas_one_killed_and_nats_restarted(clock_stack: Stack, tmp_path: Path) -> None:
    """The same with a second rules replica (sharing the clock's durable consumer) killed while
    Ann's first timeout is pending, nats-server restarted after it, and the replica started again:
    no turn times out twice, none is skipped (the game ends), the history has no gaps."""
    stack = clock_stack
    second = await RulesApp.start(stack.settings("rules"))
    await stack.start_bot()
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=5, time_bank_seconds=0)
    gid = started.game_id
    again: RulesApp | None = None
    try:
        async with EventLog(stack.nats.url, "hearts", gid) as ev:
            await second.kill()  # Ann's first deadline is ahead: the record waits in JetStream
            await ev.wait_until(
                lambda rs: bool(events(rs, "TurnTimedOut")), timeout=120, what="the first timeout"
            )
            stack.nats.restart()
            again = await RulesApp.start(stack.settings("rules", listen=second.address))
            await ev.wait_until(game_over, timeout=300, what="the game's end")
            hist = await history(stack, stack.rules.address, gid)
            assert_complete(ev.events, hist.moves[-1].seq)
            check_seat_played_by_clock(hist, ev.events, 0)
        await stack.wait_ranked(lambda st: st.game_status(gid) == "finished", "the game settled")
    finally:
        if again is not None:
            await again.stop(0)


async def test_every_person_away_for_the_abandon_time_refunds_once(clock_stack: Stack) -> None:
    """Every person's seat (Ann's) away for the lobby's abandon_after_seconds: the lobby abandons
    the game (the ranking marks it abandoned, antes refunded by its keyed entries), once. No bot
    service runs, so the bot seats hold the game still after the clock has played Ann's passes."""
    stack = clock_stack
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=600, abandon_after_seconds=60)
    gid = started.game_id
    lobby_app = stack.lobby.application
    assert lobby_app is not None
    view = await stack.rules_view(gid)
    assert not view.HasField("abandon_at")
    assert await lobby_app.abandon_away_games() == 0
    await ann.rules.leave_seat(gid)
    for _ in range(200):  # the clock plays her passes at once; then the bots (not running) hold the game
        view = await stack.rules_view(gid)
        if 0 not in view.to_act:
            break
        await asyncio.sleep(0.05)
    assert view.HasField("abandon_at") and view.seat_clocks[0].away
    at = view.abandon_at.ToMilliseconds()
    assert at == view.seat_clocks[0].away_since.ToMilliseconds() + 60_000
    assert await lobby_app.abandon_away_games(now_ms=at - 1) == 0
    assert await lobby_app.abandon_away_games(now_ms=at) == 1
    lobby = await ann.call("GetLobby", lpb.GetLobbyRequest(lobby_id=started.lobby_id))
    assert lobby.state == lpb.LOBBY_STATE_ABANDONED
    assert await lobby_app.abandon_away_games(now_ms=at + 10) == 0
    await stack.wait_ranked(lambda st: st.game_status(gid) == "abandoned", "the game abandoned in ranking")
