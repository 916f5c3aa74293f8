"""A rules replica dies while the bot holds a turn: the surviving replica takes over, the game finishes.

The chaos suite (tests/chaos) once stalled here: after a rules replica was killed, games stopped
moving. The bot had read the position from replica A and decided; A died; the bot's submit went
to replica B, whose cache held the game at an older position (loaded before A wrote the later
moves). B judged the move on that position, lost the compare-and-set append to the log and
answered ABORTED ("retry with the same request id"); the bot took ABORTED for "the game moved
on", acked the turn and dropped it. Nothing else ever brings that position's TurnStarted again, so
the person waited for a bot that would never move.

Here that happens on purpose, every time: a real nats-server, two real rules replicas (each runs a
projector, which never touches the cache: B's cache stays where the test put it), the bot service with both replicas in its
target, one person playing random legal moves. At a bot turn where B's cached position would
accept the bot's move, A is killed between the bot's decision and its submit. What the person
sees: the game goes on and finishes; the bot's move at that position is in the log once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import grpc
import pytest
from court_bot.turns import Faults, Outcome, Turn, request_id
from court_client import RulesClient
from court_contract import actions as kactions
from court_games.core import IllegalAction
from court_rules.app import RulesApp
from prometheus_client import REGISTRY

from .conftest import Stack, settings_for, token, wait_finished
from .test_bot_service import assert_each_bot_move_once

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PERSON = "failover-person"


def conflicts() -> float:
    return REGISTRY.get_sample_value("court_rules_conflicts_total") or 0.0


class KillAWhenBIsBehind(Faults):
    """At each bot turn: if replica B's cached position is older than the turn and would accept the
    bot's move, kill replica A now (the bot has decided; its submit is next). Otherwise bring B's
    cache up to this position and wait for a later turn."""

    def __init__(self, game_id: str, a: RulesApp, b: RulesApp, b_client: RulesClient):
        self.game_id, self.a, self.b, self.b_client = game_id, a, b, b_client
        self.killed = asyncio.Event()
        self.turn: Turn | None = None
        self.b_seq: int | None = None

    async def decided(self, turn: Turn, seat: int, action: Any) -> None:
        if self.killed.is_set() or turn.game_id != self.game_id:
            return
        entry = self.b.cache.peek(self.game_id)
        if entry is not None and entry.seq < turn.seq and accepts(entry, seat, action):
            self.turn = turn
            self.b_seq = entry.seq
            await self.a.kill()
            self.killed.set()
            return
        await self.b_client.get_view(self.game_id)  # B now holds the game at this position


def accepts(entry: Any, seat: int, action: Any) -> bool:
    """Whether ``entry``'s cached state takes ``action`` for ``seat`` (as B's SubmitAction would judge it)."""
    try:
        entry.module.apply(entry.state, seat, entry.module.action_from_json(kactions.to_json(action)))
    except (IllegalAction, ValueError, KeyError):
        return False
    return True


class Person:
    """Seat 0: on its turn a random legal action; otherwise wait for the next update.

    It plays through replica A until A is killed, then stays off replica B until the bot has
    handled the turn in flight (a read of the game on B would bring B's cache up to date and
    hide the case under test), then plays on through B."""

    def __init__(self, a: RulesClient, b: RulesClient, fault: KillAWhenBIsBehind, bot: Any, seed: int):
        self.a, self.b, self.fault, self.bot = a, b, fault, bot
        self.rng = random.Random(seed)

    async def client(self) -> RulesClient:
        if not self.fault.killed.is_set():
            return self.a
        turn = self.fault.turn
        assert turn is not None
        await self.bot.journal.wait_for(
            lambda hs: any(h.game_id == turn.game_id and h.seq == turn.seq for h in hs), timeout=60
        )
        return self.b

    async def play(self, game_id: str) -> None:
        while True:
            client = await self.client()
            try:
                view = await client.get_view(game_id, 0)
                if view.finished:
                    return
                if 0 in view.to_act and view.legal_actions:
                    act = self.rng.choice(list(view.legal_actions))
                    try:
                        await client.submit(game_id, act, 0, request_id=f"person-{game_id}-{view.seq}")
                    except grpc.aio.AioRpcError as err:
                        if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                            raise
                    continue

                async def next_update(after: int, client: RulesClient = client) -> None:
                    async for upd in client.watch(game_id, 0, after_seq=after):
                        if upd.seq > after:
                            return

                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(next_update(view.seq), 5)
            except grpc.aio.AioRpcError as err:
                # replica A died under this call: go on through B (once the bot's turn is handled)
                if not (client is self.a and self.fault.killed.is_set()):
                    raise
                assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), err


async def test_rules_replica_killed_while_the_bots_move_is_in_flight_game_finishes(stack: Stack) -> None:
    a = stack.rules
    assert a is not None
    # replica B runs a projector as every rules replica does (on v2 the bot follows the public
    # records: once A and its projector are dead, B's projector must carry the game on). The
    # projector never touches B's cache: only this test's reads move it
    b = await RulesApp.start(settings_for("rules", stack.nats.url))
    try:
        target = f"ipv4:{a.address},{b.address}"  # pick_first: A while it lives, then B
        lobby = stack.rules_client("lobby", "service")
        gid = (await lobby.create_game("queens_court", [PERSON, "bot:random"], {"players": 2})).game_id
        b_client = RulesClient(b.address, token("root", "admin"))
        stack.clients.append(b_client)
        fault = KillAWhenBIsBehind(gid, a, b, b_client)
        bot = await stack.start_bot("bot", settings={"rules_addr": target}, faults=fault)
        a_person = RulesClient(a.address, token(PERSON), retries=2)
        b_person = RulesClient(b.address, token(PERSON), retries=12, max_backoff=1.0)
        stack.clients += [a_person, b_person]
        before = conflicts()

        try:
            await asyncio.wait_for(Person(a_person, b_person, fault, bot, 16).play(gid), 90)
        except TimeoutError:
            view = await b_person.get_view(gid, 0)
            raise AssertionError(
                f"the game stalled at move {view.seq} (to act {list(view.to_act)}); the bot "
                f"handled the turn in flight as {[h.outcome.value for h in bot.journal.entries if fault.turn and h.seq == fault.turn.seq]}"
            ) from None

        watcher = RulesClient(b.address, token("root", "admin"))
        stack.clients.append(watcher)
        final = await wait_finished(watcher, gid, timeout=30)
        assert final.finished
        assert fault.killed.is_set(), "the game ended before a bot turn B would take on its older position"
        turn = fault.turn
        assert turn is not None and fault.b_seq is not None and fault.b_seq < turn.seq
        assert conflicts() > before, "B judged the bot's move on its older position and lost the append"
        # the bot's move at the turn in flight is in the log once, under that position's request id
        hist = await watcher.history(gid)
        bots = assert_each_bot_move_once(hist, all_bots=False)
        seat = turn.bot_seats()[0][0]
        at_turn = [m for m in bots if m.request_id == request_id(gid, turn.seq, seat)]
        assert [m.seq for m in at_turn] == [turn.seq + 1], "the bot's move of the turn in flight, once"
        # the bot played that turn (it did not take B's refusal for "the game moved on")
        outcomes = [h.outcome for h in bot.journal.entries if h.game_id == gid and h.seq == turn.seq]
        assert Outcome.PLAYED in outcomes and Outcome.STALE not in outcomes, outcomes
    finally:
        await b.stop(0)
