"""End to end: lobbies started through the lobby, games played through the rules service by
scripted clients, rank points paid by the ranking service's event consumer, on both databases."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import nats
import pytest
from court_client import RulesClient
from court_contract import typed
from court_proto.court.ranking.v1 import ranking_pb2 as rpb

from tests.rules.helpers import play_out

from .qc_expect import expected_changes
from .stack import Player, Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ANTE = 150


async def full_events(stack: Stack, game_id: str) -> tuple[list[dict[str, Any]], int]:
    """The game's full-information events in order, and its seed (the analytics role's history)."""
    async with RulesClient(stack.rules.address, stack.token("analyst", "analytics")) as analyst:
        h = await analyst.history(game_id)
    events = [typed.event_from_proto(e) for e in h.created_events]
    for m in h.moves:
        events.extend(typed.event_from_proto(e) for e in m.events)
    return events, h.seed


async def online_lobby(stack: Stack, players: list[Player], ante: int) -> str:
    host = players[0]
    lobby = await host.create_lobby("queens_court", {"players": len(players)}, online=True, ante=ante)
    for p in players[1:]:
        await p.join(lobby.lobby_id)
    started = await host.start(lobby.lobby_id)
    assert started.game_id
    return started.game_id


async def play(players: list[Player], game_id: str, seed: int, **kw: Any) -> Any:
    return await play_out({i: p.rules for i, p in enumerate(players)}, game_id, random.Random(seed), **kw)


async def test_an_online_game_pays_exactly_what_the_rules_say(stack: Stack):
    players = [await stack.player(n) for n in ("Ann", "Bob", "Cy")]
    assert [await p.balance() for p in players] == [1000, 1000, 1000]
    game_id = await online_lobby(stack, players, ANTE)
    assert [await p.balance() for p in players] == [1000 - ANTE] * 3  # the ante, once, at the start
    final = await play(players, game_id, 1)
    assert final.finished
    await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")
    events, seed = await full_events(stack, game_id)
    want = expected_changes(events, 3, ANTE, seed)
    assert [await p.balance() for p in players] == [1000 + d for d in want]
    # the ledger explains every point: one entry per (round, reason) and player
    history = await players[0].rank("GetHistory", rpb.GetLedgerHistoryRequest(page_size=500))
    assert sum(e.delta for e in history.entries) == history.balance == 1000 + want[0]
    assert history.entries[0].balance_after == history.balance
    challenges = await players[1].rank("GetChallenges", rpb.GetChallengesRequest(game_id=game_id))
    assert challenges.finished and [len(s.challenges) for s in challenges.seats] == [3]
    assert [c.tier for c in challenges.seats[0].challenges] == [50, 100, 200]
    # the ratings moved once, and the winner leads the board
    board = await players[0].rank("GetLeaderboard", rpb.GetLeaderboardRequest(game="queens_court"))
    winner = players[final.result.winners[0]].id
    assert board.rows[0].player_id == winner and len(board.rows) == 3


async def test_a_local_game_leaves_every_balance_unchanged(stack: Stack):
    players = [await stack.player(n) for n in ("Dee", "Eve", "Fay")]
    before = [await p.balance() for p in players]
    host = players[0]
    lobby = await host.create_lobby("queens_court", {"players": 3}, online=False)
    for p in players[1:]:
        await p.join(lobby.lobby_id)
    game_id = (await host.start(lobby.lobby_id)).game_id
    assert (await play(players, game_id, 2)).finished
    # a later online game is settled only after every earlier event was seen: then nothing moved
    others = [await stack.player(n) for n in ("Gus", "Hal")]
    marker = await online_lobby(stack, others, 0)
    assert (await play(others, marker, 3)).finished
    await stack.wait_ranked(lambda st: st.game_status(marker) == "finished", "the marker game to be settled")
    assert [await p.balance() for p in players] == before
    assert stack.ranking.store.game_status(game_id) is None  # never registered: local


async def play_some(players: list[Player], game_id: str, rng: random.Random, *, rounds: int) -> None:
    """Random legal moves until ``rounds`` more rounds have ended (or the game has)."""
    clients = {i: p.rules for i, p in enumerate(players)}
    view = await clients[0].get_view(game_id, 0)
    ended = 0
    while ended < rounds and not view.finished:
        seat = view.to_act[0]
        mine = await clients[seat].get_view(game_id, seat)
        reply = await clients[seat].submit(game_id, rng.choice(list(mine.legal_actions)), seat)
        ended += sum(1 for e in reply.events if typed.event_from_proto(e).get("type") == "RoundEnded")
        view = reply.view


class Duplicator:
    """Publishes every public record of every Queen's Court game a second time under a new message
    id, so the ranking consumer receives each record twice (as a redelivery or a replay would)."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.copied = 0
        self._changed = asyncio.Condition()

    async def wait_copied(self, n: int, timeout: float = 60.0) -> None:
        async def loop() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.copied >= n)

        await asyncio.wait_for(loop(), timeout)

    async def __aenter__(self) -> Duplicator:
        self.nc = await nats.connect(self.stack.nats.url)
        self.js = self.nc.jetstream()
        self.sub = await self.nc.subscribe("court.events.queens_court.>", cb=self._copy)
        return self

    async def _copy(self, msg: Any) -> None:
        headers = dict(msg.headers or {})
        if headers.get("Nats-Msg-Id", "").endswith("-again"):
            return  # our own copy coming back
        headers["Nats-Msg-Id"] = headers.get("Nats-Msg-Id", "") + "-again"
        headers.pop("Nats-Expected-Last-Subject-Sequence", None)  # the projector's guard, not ours
        await self.js.publish(msg.subject, msg.data, headers=headers)
        async with self._changed:
            self.copied += 1
            self._changed.notify_all()

    async def __aexit__(self, *exc: object) -> None:
        await self.sub.unsubscribe()
        await self.nc.drain()


async def test_killed_consumer_two_replicas_and_every_event_twice_still_pay_exactly_once(stack: Stack):
    players = [await stack.player(n) for n in ("Ivy", "Jon", "Kim")]
    rng = random.Random(11)
    async with Duplicator(stack) as dup:
        game_id = await online_lobby(stack, players, ANTE)
        await play_some(players, game_id, rng, rounds=1)
        await stack.kill_ranking()  # dies holding whatever it fetched and did not acknowledge
        await play_some(players, game_id, rng, rounds=1)  # a round ends while nobody consumes
        await stack.start_ranking_again()
        await stack.second_ranking()  # two replicas share the durable from here on
        final = await play(players, game_id, 12)
        assert final.finished
        await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")
        events, seed = await full_events(stack, game_id)
        await dup.wait_copied(final.seq + 1)  # each public record went into the stream twice
        js = stack.ranking.nc.jetstream()

        async def drained() -> bool:  # every copy of every event delivered and acknowledged
            info = await js.consumer_info("COURT_EVENTS", "ranking")
            return info.num_pending == 0 and info.num_ack_pending == 0

        await stack.ranking.consumer.wait_for(drained, 60, "the consumer to take every event")
    # at least once per record: a core subscriber also sees the projector's publishes that JetStream
    # refused (the copies move the subject on under its expected last sequence) and copies them too
    assert dup.copied >= final.seq + 1
    want = expected_changes(events, 3, ANTE, seed)
    assert [await p.balance() for p in players] == [1000 + d for d in want]
    entries = await asyncio.to_thread(stack.ranking.store.entries_of_game, game_id)
    keys = [(e.round, e.reason, e.player_id) for e in entries]
    assert len(keys) == len(set(keys))
