"""The terminal client and the turn clock (docs/clock.md): the countdown and away marks in words,
and a person who sits down again at a game whose seat was marked away gets it back."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from court_cli.play import Table
from court_cli.render import Names, clock_line, describe_event
from court_cli.session import Court, Endpoints
from court_cli.termio import LineReader
from court_client import RulesClient
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.rules.v1 import rules_pb2
from rich.console import Console

from tests.lobby.test_clock_e2e import hearts_lobby
from tests.ranking.stack import Stack


def test_clock_line_counts_down_from_the_deadline_and_names_the_away() -> None:
    names = Names.build(["ann", "bot:heuristic", "bob", "bot:random"], {"ann": "Ann", "bob": "Bob"}, 0)
    v = rules_pb2.GameView(seats=["ann", "bot:heuristic", "bob", "bot:random"], to_act=[0])
    c = v.seat_clocks.add(seat=0, bank_ms=0)
    c.deadline.FromMilliseconds(100_000)
    v.seat_clocks.add(seat=2, away=True)
    line = clock_line(v, names, now_ms=63_500)
    assert "37 s left" in line and "away (the bot plays): Bob" in line
    assert "0 s left" in clock_line(v, names, now_ms=200_000)  # never negative
    v.finished = True
    assert clock_line(v, names, now_ms=63_500) == "away (the bot plays): Bob"
    assert clock_line(rules_pb2.GameView(seats=["ann"]), names) is None
    assert "time ran out" in describe_event("hearts", {"type": "TurnTimedOut", "seat": 2, "turn_seq": 4}, names)
    assert "is away" in describe_event("hearts", {"type": "SeatAway", "seat": 2, "player": "bob"}, names)
    assert "are back" in describe_event("hearts", {"type": "SeatReturned", "seat": 0, "player": "ann"}, names)


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
    ReturnToSeat first, says so, and the bot no longer plays for her; she then leaves (q)."""
    stack = bot_stack
    ann = await stack.player("Ann")
    started = await hearts_lobby(stack, ann, turn_seconds=600)
    gid = started.game_id
    await ann.rules.leave_seat(gid)
    endpoints = Endpoints(rules=stack.rules.address, lobby=stack.lobby.address, ranking=stack.ranking.address,
                          bot=stack.bot.address, nats_url=stack.nats.url)
    court = Court(endpoints, session={"token": ann.token, "player_id": ann.id, "name": "Ann"})
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"q\n")
    os.close(write_fd)
    out = io.StringIO()
    try:
        table = Table(court, Console(file=out, width=140), False, LineReader(read_fd))
        assert await table.play(gid) == "left"
    finally:
        await court.close()
        os.close(read_fd)
    text = out.getvalue()
    assert "You are back in your seat" in text, text[-2000:]
    view = await stack.rules_view(gid)
    assert not view.seat_clocks[0].away
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
    assert "s left" in text  # the prompt showed her time
