"""The bot plays a turn from the view its previous submit answer brought (issue 31): one RPC per
move when a bot follows a bot, never a view of another seat or another position, and a view
that went stale since is caught by the submit and the fresh view after it."""

from __future__ import annotations

from court_bot.turns import Outcome, ViewShelf
from court_proto.court.rules.v1 import rules_pb2

from .conftest import Stack, bot_seats, wait_finished
from .test_bot_service import assert_each_bot_move_once, history


def _view(game_id: str, seq: int, seat: int, to_act: list[int], finished: bool = False) -> rules_pb2.GameView:
    return rules_pb2.GameView(game_id=game_id, seq=seq, your_seat=seat, to_act=to_act, finished=finished)


def test_the_shelf_serves_a_view_only_for_its_own_game_position_and_seat_and_only_once() -> None:
    shelf = ViewShelf(limit=3)
    reply = rules_pb2.SubmitActionResponse(view=_view("g1", 5, 0, [1]))
    reply.next.append(_view("g1", 5, 1, [1]))
    reply.next.append(_view("g1", 5, 2, [2], finished=True))  # over: nothing to play from it
    shelf.put(reply)
    assert shelf.take("g1", 5, 0) is None  # seat 0 is not to act: its view was not kept
    assert shelf.take("g1", 5, 2) is None
    assert shelf.take("g1", 4, 1) is None and shelf.take("g1", 6, 1) is None  # another position
    assert shelf.take("g2", 5, 1) is None  # another game
    got = shelf.take("g1", 5, 1)
    assert got is not None and got.your_seat == 1 and got.seq == 5
    assert shelf.take("g1", 5, 1) is None  # taken once
    for seq in range(10):  # bounded: the oldest go
        shelf.put(rules_pb2.SubmitActionResponse(view=_view("g3", seq, 0, [0])))
    assert shelf.take("g3", 0, 0) is None and shelf.take("g3", 9, 0) is not None


async def test_bots_following_bots_read_no_view_and_still_play_each_turn_once(stack: Stack) -> None:
    bot = await stack.start_bot()
    reads = []
    real_view = bot.handler.rules.view

    async def counted(game_id: str, seat: int) -> rules_pb2.GameView:
        reads.append((game_id, seat))
        return await real_view(game_id, seat)

    bot.handler.rules.view = counted  # type: ignore[method-assign]
    lobby = stack.rules_client("lobby", "service")
    created = await lobby.create_game("the_court", bot_seats("the_court", 2), {"mode": "free_gift"})
    final = await wait_finished(lobby, created.game_id, timeout=120)
    assert final.finished
    hist = await history(stack, created.game_id)
    assert len(assert_each_bot_move_once(hist, all_bots=True)) == final.seq
    await bot.journal.wait_for(
        lambda hs: sum(h.game_id == created.game_id and h.outcome is Outcome.PLAYED for h in hs) >= final.seq
    )
    # the first turn reads its view; the others came with the previous move's answer (a turn whose
    # answer was not there in time reads it, so allow a few)
    mine = [r for r in reads if r[0] == created.game_id]
    assert bot.handler.shelf.taken + len(mine) >= final.seq
    assert len(mine) <= max(2, final.seq // 10), f"{len(mine)} view reads for {final.seq} moves"
