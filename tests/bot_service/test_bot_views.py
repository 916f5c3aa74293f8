"""Bot seats' views pushed by the rules service after a person's move (``court_rules.botviews``,
issue 31): the bot plays a turn that follows a person's move without a GetView of its own, and
the push is only a cache: lost, late, sent twice or held by a replica that died, every turn is
still played exactly once (a missing view is read with GetView, as before)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from court_bot.app import BotApp
from court_bot.turns import ViewShelf
from court_bot.upstream import BOT_SUB
from court_proto.court.rules.v1 import rules_pb2

from .conftest import Stack
from .test_bot_service import assert_each_bot_move_once, history, play_seat_randomly

GAME, OPTIONS = "the_court", {"mode": "free_gift"}  # a person and a bot, taking turns


def counted_reads(bot: BotApp) -> list[tuple[str, int]]:
    """The bot's own GetView calls, recorded (game id, seat)."""
    reads: list[tuple[str, int]] = []
    real_view = bot.handler.rules.view

    async def counted(game_id: str, seat: int) -> rules_pb2.GameView:
        reads.append((game_id, seat))
        return await real_view(game_id, seat)

    bot.handler.rules.view = counted  # type: ignore[method-assign]
    return reads


async def play_as_alice(stack: Stack, seed: str) -> tuple[str, rules_pb2.GameView, int]:
    """Alice (seat 0) against a random bot to the end, watching and moving as a client does; the
    game id, its final view and how many moves alice made."""
    alice = stack.rules_client("alice", retries=0)
    created = await alice.create_game(GAME, ["alice", "bot:random"], OPTIONS)
    final, mine = await play_seat_randomly(alice, created.game_id, 0, random.Random(seed))
    return created.game_id, final, mine


async def bot_moves_once(stack: Stack, gid: str, final: rules_pb2.GameView, mine: int) -> int:
    """Every move is alice's or the bot's, each bot move once. Returns how many of alice's moves
    left the bot to act (the bot moved next): the turns whose view is pushed (the others come
    after the bot's own move, their view in its submit answer)."""
    assert final.finished
    hist = await history(stack, gid)
    bots = assert_each_bot_move_once(hist, all_bots=False)
    assert len([m for m in hist.moves if m.player == "alice"]) == mine > 0
    assert len(bots) + mine == final.seq and bots
    moves = list(hist.moves)
    return sum(
        1 for m, n in zip(moves, moves[1:], strict=False) if m.player == "alice" and n.player == BOT_SUB
    )


def redelivered(bots: list[BotApp], gid: str) -> int:
    return sum(1 for b in bots for h in b.journal.entries if h.game_id == gid and h.delivered > 1)


def test_a_pushed_view_is_kept_once_for_its_own_position_and_seat() -> None:
    shelf = ViewShelf(limit=2)
    v = rules_pb2.GameView(game_id="g", seq=3, your_seat=1, to_act=[1])
    shelf.put_view(v)
    shelf.put_view(v)  # pushed twice: one entry
    assert shelf.take("g", 3, 0) is None and shelf.take("g", 2, 1) is None
    assert shelf.take("g", 3, 1) is not None and shelf.take("g", 3, 1) is None
    shelf.put_view(rules_pb2.GameView(game_id="g", seq=4, your_seat=0, to_act=[1]))  # not to act
    shelf.put_view(rules_pb2.GameView(game_id="g", seq=5, your_seat=1, to_act=[1], finished=True))
    assert shelf.take("g", 4, 0) is None and shelf.take("g", 5, 1) is None


async def test_a_bot_following_a_person_plays_from_the_pushed_view(stack: Stack) -> None:
    bot = await stack.start_bot(concurrency=1)
    await asyncio.wait_for(bot.consumer.attached.wait(), 10)  # subscribed before the first move
    reads = counted_reads(bot)
    assert stack.rules is not None
    pushed_before = stack.rules.servicer.bot_views.pushed
    gid, final, mine = await play_as_alice(stack, "pushed")
    after_alice = await bot_moves_once(stack, gid, final, mine)
    assert after_alice > 0
    # each of alice's moves but a last one ending the game left the bot to act: its view was
    # pushed; a bot following itself has its view in its own submit answer (ViewShelf). A view
    # read is the first turn's, a late push's (the record first, on a loaded machine) or a
    # redelivered turn's
    assert stack.rules.servicer.bot_views.pushed - pushed_before == after_alice
    assert bot.consumer.pushed == after_alice
    mine_reads = [r for r in reads if r[0] == gid]
    assert len(mine_reads) <= 1 + redelivered([bot], gid) + after_alice // 4, (
        f"{len(mine_reads)} view reads for {after_alice} bot turns after alice's moves"
    )


@pytest.mark.parametrize("fault", ["lost", "twice", "late"])
async def test_pushed_views_lost_twice_or_late_still_play_each_turn_once(stack: Stack, fault: str) -> None:
    """What a player sees: the bot answers every move as before, never twice. Lost (no bot replica
    subscribed, NATS away), the bot reads its view with GetView (one call more per turn); sent
    twice, it is kept once; late (after the turn's record), the turn was played from a view read,
    and the late one is never played from again."""
    bot = await stack.start_bot(concurrency=1)
    await asyncio.wait_for(bot.consumer.attached.wait(), 10)
    reads = counted_reads(bot)
    assert stack.rules is not None
    out = stack.rules.servicer.bot_views.out
    real_publish = out.publish
    loop = asyncio.get_running_loop()

    def faulty(subject: str, payload: bytes) -> None:
        if fault == "twice":
            real_publish(subject, payload)
            real_publish(subject, payload)
        elif fault == "late":  # after the turn's record has reached the bot and been played
            loop.call_later(1.0, real_publish, subject, payload)

    out.publish = faulty  # type: ignore[method-assign]
    pushed_before = bot.consumer.pushed
    gid, final, mine = await play_as_alice(stack, fault)
    after_alice = await bot_moves_once(stack, gid, final, mine)
    mine_reads = [r for r in reads if r[0] == gid]
    if fault == "twice":
        assert bot.consumer.pushed - pushed_before == 2 * after_alice
        assert len(mine_reads) <= 1 + redelivered([bot], gid) + after_alice // 4
    else:  # each turn after alice's move read its view: nothing else to play from
        assert len(mine_reads) >= after_alice
    if fault == "late":
        await asyncio.sleep(1.2)  # the last late views arrive; nothing plays from them
        hist = await history(stack, gid)
        assert len(hist.moves) == final.seq


async def test_the_replica_holding_a_pushed_view_dies_another_plays_the_turn_once(stack: Stack) -> None:
    """Every replica keeps the views pushed (each subscribes): a replica killed holding a turn and
    its view leaves the turn to be delivered again after ack_wait to another, which plays it from
    its own copy of the view or from a view read. The player sees one bot move, an ack wait late."""
    a = await stack.start_bot("a", concurrency=1)
    b = await stack.start_bot("b", concurrency=1)
    for r in (a, b):
        await asyncio.wait_for(r.consumer.attached.wait(), 10)
    killed = asyncio.Event()

    class DieOnce:  # a dies when about to submit its first turn (decided, nothing sent)
        async def before_submit(self, turn: Any, seat: int) -> None:
            if not killed.is_set():
                killed.set()
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(a.kill()))
                await asyncio.sleep(3600)

    a.handler.faults.before_submit = DieOnce().before_submit  # type: ignore[method-assign]
    gid, final, mine = await play_as_alice(stack, "killed")
    assert killed.is_set()
    after_alice = await bot_moves_once(stack, gid, final, mine)
    assert b.consumer.pushed == after_alice  # b had every view pushed, the dead replica's turn's too
