"""Scripted players and an event collector for the rules-service tests."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

import nats
from court_client import RulesClient
from court_kit.structs import to_dict
from court_proto.court.events.v1 import events_pb2
from court_proto.court.rules.v1 import rules_pb2
from nats.js.api import DeliverPolicy

# one option set per game, seats per option set
GAMES: list[tuple[str, dict[str, Any], int]] = [
    ("queens_court", {"players": 3}, 3),
    ("hearts", {"limit": 20}, 4),
    ("the_court", {"mode": "free_gift"}, 2),
    ("court_wars", {"players": 3, "turn_limit": 60}, 3),
]


async def play_out(clients: Mapping[int, RulesClient], game_id: str, rng: random.Random, *,
                   max_moves: int = 5_000, on_reply: Callable[[int, Any], None] | None = None
                   ) -> rules_pb2.GameView:
    """Every seat's own client reads its view and plays a random legal action, until the game ends."""
    any_client = next(iter(clients.values()))
    view = await any_client.get_view(game_id, next(iter(clients)))
    for _ in range(max_moves):
        if view.finished:
            return view
        seat = rng.choice(list(view.to_act))
        mine = await clients[seat].get_view(game_id, seat)
        if seat not in mine.to_act:  # someone else moved meanwhile
            view = mine
            continue
        act = rng.choice(list(mine.legal_actions))
        reply = await clients[seat].submit(game_id, act, seat)
        if on_reply is not None:
            on_reply(seat, reply)
        view = reply.view
    raise AssertionError(f"game {game_id} did not end within {max_moves} moves")


class EventLog:
    """Every event of one game on one subject set (public or full), as it is stored in JetStream."""

    def __init__(self, nats_url: str, game: str, game_id: str, *, full: bool = False):
        self.url = nats_url
        self.subject = f"court.{'full' if full else 'events'}.{game}.{game_id}.>"
        self.events: list[events_pb2.GameEvent] = []
        self.raw_ids: list[str] = []
        self._changed = asyncio.Event()
        self._nc: Any = None
        self._sub: Any = None

    async def __aenter__(self) -> EventLog:
        self._nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        js = self._nc.jetstream()
        self._sub = await js.subscribe(self.subject, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL,
                                       cb=self._on_msg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._sub.unsubscribe()
        await self._nc.close()

    async def _on_msg(self, msg: Any) -> None:
        ev = events_pb2.GameEvent.FromString(msg.data)
        self.events.append(ev)
        self.raw_ids.append(msg.headers.get("Nats-Msg-Id", "") if msg.headers else "")
        self._changed.set()

    async def wait_until(self, predicate: Callable[[list[events_pb2.GameEvent]], bool], timeout: float = 15.0,
                         what: str = "events") -> None:
        async def loop() -> None:
            while not predicate(self.events):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            types = [(e.seq, e.type) for e in self.events[-8:]]
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last events {types}") from None

    def payloads(self) -> list[dict[str, Any]]:
        return [to_dict(e.payload) for e in self.events]


def has_game_end(seq: int) -> Callable[[list[events_pb2.GameEvent]], bool]:
    return lambda evs: any(e.type == "GameEnded" and e.seq == seq for e in evs)


def assert_complete(events: list[events_pb2.GameEvent], last_seq: int) -> None:
    """Events are in (seq, index) order, without gaps or duplicates, for every seq 0..last_seq."""
    keys = [(e.seq, e.index) for e in events]
    assert keys == sorted(keys), "events are stored in order"
    assert len(keys) == len(set(keys)), "no event is stored twice"
    seqs = sorted({e.seq for e in events})
    assert seqs == list(range(last_seq + 1)), f"every move has events: {seqs[:5]}..{seqs[-5:]} vs 0..{last_seq}"
    for s in seqs:
        idx = [e.index for e in events if e.seq == s]
        assert idx == list(range(len(idx))), f"move {s} has every event index"
    for e in events:
        assert e.event_id == f"{e.game_id}-{e.seq}-{e.index}"
