"""Turns the bot already knows to be stale, and the turns of one game taken one at a time.

A replica notes the newest position of each game it has seen (``court_bot.turns.Progress``: records
delivered, the answers to its own moves, views pushed after a person's move) and drops a turn of an
older position with no call to the rules service; and it handles one game's turns one after
another (``OneAtATime``), so that a person moving during a simultaneous phase (Hearts' passing) no
longer sends the bot two moves decided on two positions of one game, one of which the rules service
refused and the bot then read a view to learn the turn was stale (make bench ONLY=stack: about 3 %
of the bot's turns, each a refused SubmitAction and a GetView).
"""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest
from court_bot.turns import OneAtATime, Outcome, Progress, Turn
from court_proto.court.rules.v1 import actions_pb2, rules_pb2

from .conftest import Stack, bot_seats
from .test_bot_service import assert_each_bot_move_once, first_turn_event, history, play_seat_randomly
from .test_bot_views import counted_reads


def test_progress_knows_a_game_moved_past_a_position_and_forgets_the_oldest_games() -> None:
    p = Progress(limit=2)
    assert not p.past("a", 0)  # never seen: nothing known
    p.saw("a", 3)
    p.saw("a", 1)  # an older record delivered late changes nothing
    assert p.past("a", 2) and not p.past("a", 3) and not p.past("a", 4)
    p.saw("b", 5)
    p.saw("a", 4)  # seen again: the most recent
    p.saw("c", 1)  # the third game: the least recently seen ("b") goes
    assert not p.past("b", 0) and p.past("a", 3) and p.past("c", 0)


async def test_one_game_s_turns_wait_for_each_other_and_other_games_do_not() -> None:
    games = OneAtATime()
    await games.take("g1")
    second = asyncio.create_task(games.take("g1"))
    third = asyncio.create_task(games.take("g1"))
    await games.take("g2")  # another game: at once
    await asyncio.sleep(0)
    assert not second.done() and not third.done()
    second.cancel()  # a waiter that goes away (its replica stops) holds nobody up
    with pytest.raises(asyncio.CancelledError):
        await second
    games.give("g1")
    await asyncio.wait_for(third, 5)
    # handed the game just as it is cancelled: it passes it on
    fourth = asyncio.create_task(games.take("g1"))
    fifth = asyncio.create_task(games.take("g1"))
    await asyncio.sleep(0)
    games.give("g1")  # to fourth ...
    fourth.cancel()  # ... cancelled before it ran
    with pytest.raises(asyncio.CancelledError):
        await fourth
    await asyncio.wait_for(fifth, 5)
    games.give("g1")
    games.give("g2")
    assert len(games) == 0


async def test_a_turn_older_than_a_position_seen_is_dropped_without_a_call(stack: Stack) -> None:
    """The replica saw the game reach a newer position: the older turn is stale at once. The rules
    service is stopped first, so any call it made would come back UNAVAILABLE (a retry), not stale."""
    app = await stack.start_bot("manual", consume=False)
    lobby = stack.rules_client("lobby", "service")
    gid = (await lobby.create_game("queens_court", ["bot:random"] * 3, {"players": 3})).game_id
    event, _ = await first_turn_event(stack, "queens_court", gid)
    turn = Turn.from_record(event)
    assert turn.seq == 0 and turn.bot_seats()
    reads = counted_reads(app)
    assert stack.rules is not None
    await stack.rules.stop(0)
    stack.rules = None
    app.handler.progress.saw(gid, 1)  # as a newer record of the game would have
    handled = await asyncio.wait_for(app.handler.handle(turn, 1), 10)
    assert handled.outcome is Outcome.STALE
    assert reads == []
    # a game the replica has not seen move on is asked about as before: here, the service is away
    other = Turn("queens_court", "g-unseen", 0, turn.to_act, turn.players)
    assert (await asyncio.wait_for(app.handler.handle(other, 1), 10)).outcome is Outcome.RETRY


async def test_a_person_passing_beside_bots_costs_the_bot_no_refused_move(stack: Stack) -> None:
    """Hearts' passing is simultaneous: a person's passes land between the bots'. Every bot move
    is played once, and none is refused for having been decided on a position already gone."""
    app = await stack.start_bot()
    refused: list[str] = []
    real_submit = app.handler.rules.submit

    async def submit(
        game_id: str, seat: int, action: actions_pb2.Action, request_id: str
    ) -> rules_pb2.SubmitActionResponse:
        try:
            return await real_submit(game_id, seat, action, request_id)
        except grpc.aio.AioRpcError as err:
            refused.append(f"{err.code().name}: {err.details()}")
            raise

    app.handler.rules.submit = submit  # type: ignore[method-assign]
    alice = stack.rules_client("alice", retries=0)
    for i in range(2):
        created = await alice.create_game("hearts", ["alice", *bot_seats("hearts", 3)], {"limit": 20})
        final, mine = await play_seat_randomly(alice, created.game_id, 0, random.Random(f"pass-{i}"))
        assert final.finished and mine > 0
        assert_each_bot_move_once(await history(stack, created.game_id), all_bots=False)
    assert refused == []
