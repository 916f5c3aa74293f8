"""The terminal client and the turn clock (docs/clock.md): the countdown and away marks in words,
the clock's events (typed ``court.games.v1`` events, as the rules service sends them) in words, and
a person who sits down again at a game whose seat was marked away gets it back."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from court_cli.play import Table
from court_cli.render import Names, clock_line, describe_event
from court_cli.session import Court, Endpoints
from court_cli.termio import LineReader
from court_cli.watch import Spectator
from court_client import RulesClient, event_dict
from court_proto.court.games.v1 import events_pb2
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.rules.v1 import rules_pb2
from rich.console import Console

from tests.fixtures import keys
from tests.lobby.test_clock_e2e import hearts_lobby
from tests.ranking.stack import Stack


def test_clock_line_counts_down_from_the_deadline_and_names_the_away() -> None:
    names = Names.build(["ann", "bot:heuristic", "bob", "bot:random"], {"ann": "Ann", "bob": "Bob"}, 0)
    v = rules_pb2.GameView(seats=["ann", "bot:heuristic", "bob", "bot:random"], to_act=[0])
    c = v.seat_clocks.add(seat=0, bank_ms=0)
    c.deadline.FromMilliseconds(100_000)
    v.seat_clocks.add(seat=2, away=True)
    line = clock_line(v, names, now_ms=63_500)
    assert line is not None
    assert "you: 37 s left" in line and "away (the bot plays): Bob" in line
    assert "bank" not in line
    c.bank_ms = 20_000
    assert "37 s left (of it 20 s bank)" in (clock_line(v, names, now_ms=63_500) or "")
    assert "0 s left" in (clock_line(v, names, now_ms=200_000) or "")  # never negative
    v.finished = True
    assert clock_line(v, names, now_ms=63_500) == "away (the bot plays): Bob"
    assert clock_line(rules_pb2.GameView(seats=["ann"]), names) is None  # no clock, nobody away


def test_the_clock_events_in_words() -> None:
    """The typed events of a timeout and of an away seat, as event_dict reads them off the wire."""
    names = Names.build(["ann", "bot:heuristic", "bob", "bot:random"], {"ann": "Ann", "bob": "Bob"}, 0)
    timed_out = events_pb2.Event(turn_timed_out=events_pb2.TurnTimedOut(seat=2, turn_seq=4, deadline_ms=9))
    away = events_pb2.Event(seat_away=events_pb2.SeatAway(seat=2, player="bob"))
    back = events_pb2.Event(seat_returned=events_pb2.SeatReturned(seat=0, player="ann"))
    assert (
        describe_event("hearts", event_dict(timed_out), names) == "Bob's time ran out: the bot plays for Bob"
    )
    assert describe_event("hearts", event_dict(away), names) == "Bob is away: the bot plays the seat"
    assert describe_event("hearts", event_dict(back), names) == "you are back at the table"


@pytest.fixture
async def bot_stack(tmp_path: Path) -> Any:
    s = Stack(tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    try:
        await s.start()
        await s.start_bot()
        yield s
    finally:
        await s.close()


@pytest.mark.asyncio
async def test_sitting_down_again_takes_back_an_away_seat(bot_stack: Stack) -> None:
    """Ann's seat is away (she abandoned alone, or timed out twice); `court play` at the game asks
    ReturnToSeat first, says so, and the clock no longer plays for her: her prompt shows her time
    left; she then leaves (q) and the game waits for her."""
    stack = bot_stack
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=600)
    gid = started.game_id
    await ann.rules.leave_seat(gid)
    before = await stack.rules_view(gid)
    assert before.seat_clocks[0].away
    endpoints = Endpoints(
        rules=stack.rules.address,
        lobby=stack.lobby.address,
        ranking=stack.ranking.address,
        bot=stack.bot.address,
        nats_url=stack.nats.url,
    )
    court = Court(endpoints, session={"token": ann.token, "player_id": ann.id, "name": "Ann"})
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"q\n")
    os.close(write_fd)
    out = io.StringIO()
    try:
        table = Table(court, Console(file=out, width=160), False, LineReader(read_fd))
        assert await table.play(gid) == "left"
    finally:
        await court.close()
        os.close(read_fd)
    text = out.getvalue()
    assert "You are back in your seat" in text, text[-2000:]
    assert "s left" in text, text[-2000:]  # the prompt showed her time
    view = await stack.rules_view(gid)
    assert not view.seat_clocks[0].away
    assert 0 in view.to_act and not view.finished  # her turn waits for her: nobody plays it
    admin = RulesClient(stack.channel(stack.rules.address), stack.token("ops", "admin"))
    try:
        hist = await admin.history(gid)
    finally:
        await admin.close()
    back = [m.seq for m in hist.moves if m.kind == "seat_returned" and m.seat == 0]
    assert len(back) == 1
    assert not [m for m in hist.moves if m.seq > back[0] and m.seat == 0 and m.player == "court:clock"]
    lobby = await ann.call("GetLobby", lpb.GetLobbyRequest(lobby_id=started.lobby_id))
    assert lobby.state == lpb.LOBBY_STATE_STARTED


@pytest.mark.asyncio
async def test_the_live_screen_counts_down_between_moves(bot_stack: Stack) -> None:
    """A spectator on a terminal (the make run demo's screen) of a Hearts game with a 30-second
    clock whose four people do not move: with no move to draw, the screen is redrawn every second
    and the acting seats' time left goes down."""
    stack = bot_stack
    service = RulesClient(stack.channel(stack.rules.address), stack.token("service:lobby", "service"))
    try:
        made = await service.create_game(
            "hearts",
            ["ann", "bob", "cid", "dan"],
            {"limit": 20},
            clock=events_pb2.TurnClock(turn_seconds=30, time_bank_seconds=0, autoplay_level="heuristic"),
        )
    finally:
        await service.close()
    endpoints = Endpoints(
        rules=stack.rules.address,
        lobby=stack.lobby.address,
        ranking=stack.ranking.address,
        bot=stack.bot.address,
        nats_url=stack.nats.url,
    )
    court = Court(
        endpoints, session={"token": keys.token("eve", "player"), "player_id": "eve", "name": "Eve"}
    )
    out = io.StringIO()
    spectator = Spectator(Console(file=out, width=160, force_terminal=True), True)
    watching = asyncio.create_task(spectator.run(court, made.game_id))
    try:
        for _ in range(60):  # until three redraws, a minute at most (a loaded machine)
            await asyncio.sleep(0.5)
            if len(set(re.findall(r"(\d+) s left", out.getvalue()))) >= 3:
                break
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await court.close()
    shown = [int(n) for n in re.findall(r"(\d+) s left", out.getvalue())]
    assert len(set(shown)) >= 3, out.getvalue()[-2000:]
    assert shown == sorted(shown, reverse=True) and shown[0] <= 30, shown  # counting down
    assert spectator.moves_shown == 1  # only the game's start: the redraws are the clock's


async def _until(out: io.StringIO, pattern: str, after: int = 0, timeout: float = 120.0) -> re.Match[str]:
    """The first match of ``pattern`` in what the table printed after ``after``, waiting for it."""
    for _ in range(int(timeout / 0.2)):
        m = re.compile(pattern).search(out.getvalue(), after)
        if m:
            return m
        await asyncio.sleep(0.2)
    raise AssertionError(f"{pattern!r} did not show within {timeout:.0f} s:\n{out.getvalue()[-3000:]}")


@pytest.mark.asyncio
async def test_marked_away_at_the_table_enter_takes_the_seat_back(bot_stack: Stack) -> None:
    """Ann sits at the table, her prompt open; her seat is marked away meanwhile (LeaveSeat: her own
    AbandonGame, or two timeouts): the clock plays her turn at once, the stale prompt ends, she is
    told she is away and that Enter takes the seat back; Enter does (ReturnToSeat) and her next turn
    is hers again; she leaves with q."""
    stack = bot_stack
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=600)
    gid = started.game_id
    endpoints = Endpoints(
        rules=stack.rules.address,
        lobby=stack.lobby.address,
        ranking=stack.ranking.address,
        bot=stack.bot.address,
        nats_url=stack.nats.url,
    )
    court = Court(endpoints, session={"token": ann.token, "player_id": ann.id, "name": "Ann"})
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    table = Table(court, Console(file=out, width=160), False, LineReader(read_fd))
    playing = asyncio.create_task(table.play(gid))
    try:
        prompt = await _until(out, r"your turn \(\d+ choices?; h for help\) · \d+ s left")
        await ann.rules.leave_seat(gid)
        away = await _until(out, r"You are away: the bot plays your seat\. Press Enter", prompt.end())
        os.write(write_fd, b"\n")
        back = await _until(out, r"You are back in your seat\.", away.end())
        await _until(out, r"your turn \(\d+ choices?; h for help\)", back.end())
        os.write(write_fd, b"q\n")
        assert await asyncio.wait_for(playing, 60) == "left"
    finally:
        if not playing.done():
            playing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await playing
        await court.close()
        os.close(write_fd)
        os.close(read_fd)
    text = out.getvalue()
    assert "Traceback" not in text
    view = await stack.rules_view(gid)
    assert not view.seat_clocks[0].away and 0 in view.to_act and not view.finished
    admin = RulesClient(stack.channel(stack.rules.address), stack.token("ops", "admin"))
    try:
        hist = await admin.history(gid)
    finally:
        await admin.close()
    kinds = [m.kind for m in hist.moves if m.seat == 0 and m.kind != "move"]
    assert kinds[0] == "seat_away" and kinds[-1] == "seat_returned", kinds
    assert "away" in kinds, kinds  # the clock played her seat while she was away
    back_seq = max(m.seq for m in hist.moves if m.kind == "seat_returned" and m.seat == 0)
    assert not [m for m in hist.moves if m.seq > back_seq and m.seat == 0 and m.player == "court:clock"]


@pytest.mark.asyncio
async def test_a_turn_that_times_out_at_the_prompt_closes_it(bot_stack: Stack) -> None:
    """Ann's prompt is open and she types nothing: when her 5-second turn times out the clock plays
    it, the table says so and asks again for her next card to pass (a new turn, a new countdown)
    instead of leaving the stale prompt up; she leaves with q, before a second timeout."""
    stack = bot_stack
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=5, time_bank_seconds=0)
    gid = started.game_id
    endpoints = Endpoints(
        rules=stack.rules.address,
        lobby=stack.lobby.address,
        ranking=stack.ranking.address,
        bot=stack.bot.address,
        nats_url=stack.nats.url,
    )
    court = Court(endpoints, session={"token": ann.token, "player_id": ann.id, "name": "Ann"})
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    table = Table(court, Console(file=out, width=160), False, LineReader(read_fd))
    playing = asyncio.create_task(table.play(gid))
    try:
        first = await _until(out, r"move (\d+) · your turn \(13 choices; h for help\) · \d+ s left >")
        ran_out = await _until(out, r"your time ran out: the bot plays for you", first.end())
        again = await _until(
            out, r"move (\d+) · your turn \(12 choices; h for help\) · \d+ s left >", ran_out.end()
        )
        os.write(write_fd, b"q\n")
        assert await asyncio.wait_for(playing, 60) == "left"
    finally:
        if not playing.done():
            playing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await playing
        await court.close()
        os.close(write_fd)
        os.close(read_fd)
    assert int(again.group(1)) > int(first.group(1))
    admin = RulesClient(stack.channel(stack.rules.address), stack.token("ops", "admin"))
    try:
        hist = await admin.history(gid)
    finally:
        await admin.close()
    mine = [m for m in hist.moves if m.seat == 0]
    assert mine and mine[0].kind == "timeout" and mine[0].player == "court:clock", [
        (m.kind, m.player) for m in mine
    ]


async def _court_play(stack: Stack, config: Path, *args: str) -> str:
    """`court play ARGS` as a person types it, pointed at ``stack``, with ``q`` at the first prompt."""
    from court_cli.session import SessionStore

    from tests.cli.conftest import COURT

    env = {k: v for k, v in os.environ.items() if not k.startswith("COURT_")}
    env.update(
        {
            "COURT_CONFIG_DIR": str(config),
            "COURT_RULES_ADDR": stack.rules.address,
            "COURT_LOBBY_ADDR": stack.lobby.address,
            "COURT_RANKING_ADDR": stack.ranking.address,
            "COURT_BOT_ADDR": stack.bot.address,
            "COURT_NATS_URL": stack.nats.url,
            "LANG": "C.UTF-8",
        }
    )
    assert SessionStore(config / "session.json").load(stack.lobby.address) is not None
    proc = await asyncio.create_subprocess_exec(
        COURT,
        "play",
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(b"q\n"), timeout=120)
    return out.decode()


@pytest.mark.asyncio
async def test_court_play_returns_a_person_to_their_unfinished_online_game(
    bot_stack: Stack, tmp_path: Path
) -> None:
    """Ann's terminal closed mid-game and the clock marked her away. She types `court play hearts`
    again: instead of a new local table she is told of her online game (its id), sits down in it,
    and her seat is hers again (SeatReturned; the clock no longer plays for her). `court play --new
    hearts` starts a new local game all the same."""
    from court_cli.session import SessionStore

    stack = bot_stack
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=600)
    gid = started.game_id
    await ann.rules.leave_seat(gid)
    assert (await stack.rules_view(gid)).seat_clocks[0].away
    config = tmp_path / "ann-config"
    SessionStore(config / "session.json").save(
        stack.lobby.address, {"token": ann.token, "player_id": ann.id, "name": "Ann"}
    )

    text = await _court_play(stack, config, "hearts")
    assert f"You have an unfinished online game of Hearts (game {gid}); taking your seat back." in text, text
    assert "You are back in your seat" in text, text[-2000:]
    view = await stack.rules_view(gid)
    assert not view.seat_clocks[0].away and 0 in view.to_act and not view.finished

    text = await _court_play(stack, config, "--new", "hearts")
    assert "unfinished online game" not in text, text
    mine = await ann.call("ListMyGames", lpb.ListMyGamesRequest())
    others = [g for g in mine.games if g.game_id != gid]
    assert len(others) == 1 and others[0].game == "hearts" and not others[0].online, mine
    assert [g.game_id for g in mine.games if g.online] == [gid]  # the online game still waits for her
