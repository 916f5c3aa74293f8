"""AbandonGame closes the rules game before any ante is refunded (issue 12), end to end through the
lobby on SQLite and PostgreSQL with the real services.

When every person at the table asks, the lobby closes the rules game (CloseGame, keyed by the game
id: nobody plays on it, no result and so no payout can follow), then refunds every ante once, then
marks the lobby abandoned. With the rules service (or ranking) away at the last ask, that person
reads UNAVAILABLE saying the abandon finishes on its own; nothing is refunded while the game may
still be live; once the service is back the abandon sweep finishes it, and a retry of the call
answers the abandoned lobby (every ante refunded), as every duplicate of one call does. The ledger audit passes after each.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from court_contract import actions as kactions
from court_contract import records as krec
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_rules.app import RulesApp

from tests.ranking.stack import Stack, fails, rid

from .test_stakes import ANTE, balances, clean_audit, eventually, full_table

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode


def ask(game_id: str) -> lpb.AbandonGameRequest:
    return lpb.AbandonGameRequest(request_id=rid(), game_id=game_id)


async def _status(stack: Stack, lobby_id: str) -> str:
    return (await asyncio.to_thread(stack.lobby.store.lobby, lobby_id)).status


async def _entries(stack: Stack, game_id: str) -> list[Any]:
    return await asyncio.to_thread(stack.ranking.store.entries_of_game, game_id)


async def assert_abandoned_game_closed(stack: Stack, players: list[Any], game_id: str) -> None:
    """Every seat's view is over and says why, a move is refused, and the game was closed before
    the first refund was written (so no payout could follow a refund)."""
    for p in players:
        view = await p.rules.get_view(game_id)
        assert view.finished and not view.to_act and not view.legal_actions and not view.result.winners
        assert (
            "abandoned" in view.result.closed_reason and "every ante is refunded" in view.result.closed_reason
        )
        move = kactions.from_json("queens_court", {"type": "play", "card": "5H", "target": 0, "pile": "left"})
        await fails(C.FAILED_PRECONDITION, p.rules.submit(game_id, move, view.your_seat), "was closed")
    log = await stack.rules.store.records(game_id)
    assert log[-1].body.WhichOneof("body") == "closed" and not log[-1].body.closed.into
    closed_ms = krec.time_ms(log[-1].body)
    entries = await _entries(stack, game_id)
    refunds = [e for e in entries if e.reason == "ante_refunded"]
    assert sorted(e.reason for e in entries) == ["ante_paid"] * 3 + ["ante_refunded"] * 3  # no payout
    assert all(closed_ms <= e.created_at.timestamp() * 1000 + 1 for e in refunds)  # closed, then refunded
    assert (await asyncio.to_thread(stack.ranking.store.game_status, game_id)) == "abandoned"


async def test_every_person_abandoning_closes_the_game_then_refunds_every_ante_once(stack: Stack):
    players, lid = await full_table(stack)
    started = await players[0].start(lid)
    gid = started.game_id
    assert await balances(players) == [1000 - ANTE] * 3
    for p in players[:2]:
        asked = await p.call("AbandonGame", ask(gid))
        assert asked.state == lpb.LOBBY_STATE_STARTED  # one person alone: the seat is away, play goes on
        assert not (await p.rules.get_view(gid)).finished
    last = ask(gid)
    gone = await players[2].call("AbandonGame", last)
    assert gone.state == lpb.LOBBY_STATE_ABANDONED
    assert await balances(players) == [1000] * 3
    await assert_abandoned_game_closed(stack, players, gid)
    again = await players[2].call("AbandonGame", last)
    assert again.SerializeToString(deterministic=True) == gone.SerializeToString(deterministic=True)
    await clean_audit(stack)


@pytest.mark.parametrize("away", ["rules", "ranking"])
async def test_a_backend_away_at_the_last_ask_refunds_nothing_until_the_game_is_closed(
    stack: Stack, away: str
):
    """The last person's AbandonGame answers UNAVAILABLE saying the lobby finishes the abandon
    itself. Rules away: the game is not closed, so nothing is refunded (it might still be live).
    Ranking away: the game is closed (nobody plays on) but not refunded yet, and the lobby still
    holds it as an abandon under way (ListMyGames does not mark it finished). Once the service is
    back, the abandon sweep (every 0.5 s here) finishes it: closed, then every ante back once."""
    players, lid = await full_table(stack)
    gid = (await players[0].start(lid)).game_id
    for p in players[:2]:
        await p.call("AbandonGame", ask(gid))
    address = stack.rules.address if away == "rules" else stack.ranking.address
    if away == "rules":
        await stack.rules.kill()
    else:
        await stack.kill_ranking()
    last = ask(gid)
    msg = await fails(C.UNAVAILABLE, players[2].call("AbandonGame", last))
    if away == "rules":
        assert "could not be closed yet" in msg and "as soon as the rules service answers" in msg, msg
    assert "same request_id" in msg, msg
    await asyncio.sleep(1.5)  # sweeps come and fail meanwhile
    assert await _status(stack, lid) == "started"
    info = await asyncio.to_thread(stack.lobby.store.lobby, lid)
    assert all(s.abandon_asked for s in info.seated)  # the ask is kept: the sweep's work
    if away == "rules":
        entries = await _entries(stack, gid)
        assert sorted(e.reason for e in entries) == ["ante_paid"] * 3  # the game may be live: nothing back
        stack.rules = await RulesApp.start(stack.settings("rules", listen=address))
    else:
        view = await players[0].rules.get_view(gid)
        assert view.finished and "abandoned" in view.result.closed_reason  # closed first: nobody plays on
        mine = await players[0].call("ListMyGames", lpb.ListMyGamesRequest())
        assert gid not in [g.game_id for g in mine.games]
        assert await _status(stack, lid) == "started"  # not marked finished: the refund is still owed
        await stack.start_ranking_again()
    await eventually(lambda: _is(stack, lid, "abandoned"), "the abandon sweep finishing it", timeout=60)
    assert await balances(players) == [1000] * 3
    await assert_abandoned_game_closed(stack, players, gid)
    # the client's retry (its first attempt stored no answer), as the UNAVAILABLE told it: it sees
    # the abandon it asked for done, and that answer is kept for the request id
    retried = await players[2].call("AbandonGame", last)
    assert retried.state == lpb.LOBBY_STATE_ABANDONED and retried.lobby_id == lid
    again = await players[2].call("AbandonGame", last)
    assert again.SerializeToString(deterministic=True) == retried.SerializeToString(deterministic=True)
    assert await balances(players) == [1000] * 3
    await clean_audit(stack)


async def test_duplicates_of_the_last_ask_overtaken_by_the_sweep_all_get_its_one_answer(stack: Stack):
    """The last ask's first attempt is held inside its refund while the abandon sweep (every 0.5 s
    here) finishes the abandon on its own; duplicates of that call (a client retrying the same
    request id) arrive after the sweep. Every one of them, and the held attempt once let go, gets
    the same answer: the abandoned lobby (before the fix the duplicates were refused "was abandoned:
    nothing to ask" while the held attempt answered the lobby: two answers for one request id).
    Every ante comes back once."""
    players, lid = await full_table(stack)
    gid = (await players[0].start(lid)).game_id
    for p in players[:2]:
        await p.call("AbandonGame", ask(gid))
    backends = stack.lobby.backends
    refund, held, go = backends.abandon_game, asyncio.Event(), asyncio.Event()

    async def held_first(game_id: str) -> Any:
        if not held.is_set():
            held.set()
            await go.wait()
        return await refund(game_id)

    backends.abandon_game = held_first  # type: ignore[method-assign]
    last = ask(gid)
    first = asyncio.create_task(players[2].call("AbandonGame", last))
    await asyncio.wait_for(held.wait(), 30)
    await eventually(lambda: _is(stack, lid, "abandoned"), "the abandon sweep finishing it", timeout=60)
    dups = await asyncio.gather(
        *[players[2].call("AbandonGame", last) for _ in range(10)], return_exceptions=True
    )
    go.set()
    answers = [*dups, await first]
    errors = [a for a in answers if isinstance(a, BaseException)]
    assert not errors, [str(e)[:300] for e in errors[:3]]
    assert len({a.SerializeToString(deterministic=True) for a in answers}) == 1, "more than one answer"
    assert answers[0].state == lpb.LOBBY_STATE_ABANDONED
    assert await balances(players) == [1000] * 3
    await assert_abandoned_game_closed(stack, players, gid)
    await clean_audit(stack)


async def _is(stack: Stack, lobby_id: str, status: str) -> bool:
    return await _status(stack, lobby_id) == status


async def test_two_replicas_sweeping_abandon_a_game_once(stack: Stack):
    """Two lobby replicas, both sweeping every 0.5 s, find the same abandon under way (every person
    asked; the last ask's own attempt did not get through). The replica whose sweep takes the
    lobby's lease abandons it; the other's sweeps, run again and again while the first is held
    inside its CloseGame, pass the game by: one CloseGame, one refund, in all."""
    from court_lobby.app import LobbyApp

    players, lid = await full_table(stack)
    gid = (await players[0].start(lid)).game_id
    second = await LobbyApp.start(stack.settings("lobby"))
    try:
        replicas = {"first": stack.lobby, "second": second}
        closes: list[str] = []
        sweeps = dict.fromkeys(replicas, 0)
        held, go = asyncio.Event(), asyncio.Event()
        for name, app in replicas.items():
            close, sweep = app.backends.close_game, app.application.finish_abandons

            async def counted_close(game_id: str, reason: str, name: str = name, close: Any = close) -> Any:
                closes.append(name)
                if not held.is_set():  # the first sweep to get here holds, inside the abandon
                    held.set()
                    await go.wait()
                return await close(game_id, reason)

            async def counted_sweep(name: str = name, sweep: Any = sweep) -> int:
                sweeps[name] += 1
                return int(await sweep())

            app.backends.close_game = counted_close  # type: ignore[method-assign]
            app.application.finish_abandons = counted_sweep  # type: ignore[method-assign]
        # every person asked, the abandon not done: what a last ask leaves when the rules service
        # was away (tests above); from here on it is the sweeps' work
        for p in players:
            await asyncio.to_thread(stack.lobby.store.ask_abandon, lid, p.id)
        await asyncio.wait_for(held.wait(), 30)
        holder = closes[0]
        other = "second" if holder == "first" else "first"
        seen = sweeps[other]
        await eventually(lambda: _after(sweeps, other, seen + 3), "the other replica sweeping on")
        assert closes == [holder], "the other replica's sweeps passed the leased game by"
        assert await _status(stack, lid) == "started"
        go.set()
        await eventually(lambda: _is(stack, lid, "abandoned"), "the holding sweep finishing it")
        done = dict(sweeps)
        await eventually(lambda: _after(sweeps, "first", done["first"] + 2), "more sweeps")
        await eventually(lambda: _after(sweeps, "second", done["second"] + 2), "more sweeps")
        assert closes == [holder], "one CloseGame in all"
        assert await balances(players) == [1000] * 3
        refunds = [e for e in await _entries(stack, gid) if e.reason == "ante_refunded"]
        assert len(refunds) == 3, "every ante refunded once"
        await clean_audit(stack)
    finally:
        await second.stop(0)


async def _after(counts: dict[str, int], name: str, n: int) -> bool:
    return counts[name] >= n
