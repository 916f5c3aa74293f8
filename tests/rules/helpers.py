"""Scripted players and an event collector for the rules-service tests."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

import nats
from court_client import RulesClient
from court_contract import records as krec
from court_proto.court.events.v2 import records_pb2
from court_proto.court.rules.v1 import rules_pb2
from nats.js.api import DeliverPolicy

# one option set per game, seats per option set
GAMES: list[tuple[str, dict[str, Any], int]] = [
    ("queens_court", {"players": 3}, 3),
    ("hearts", {"limit": 20}, 4),
    ("the_court", {"mode": "free_gift"}, 2),
    ("court_wars", {"players": 3, "turn_limit": 60}, 3),
]


async def play_out(
    clients: Mapping[int, RulesClient],
    game_id: str,
    rng: random.Random,
    *,
    max_moves: int = 5_000,
    on_reply: Callable[[int, Any], None] | None = None,
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
        view = await view_after(clients[seat], game_id, seat, reply)
    raise AssertionError(f"game {game_id} did not end within {max_moves} moves")


async def view_after(client: Any, game_id: str, seat: int, reply: Any) -> rules_pb2.GameView:
    """The mover's view after its move: the answer's, or, when the answer leaves it out (the bot
    identity's once its seat is done, docs/contract.md), read with GetView."""
    return reply.view if reply.HasField("view") else await client.get_view(game_id, seat)


class EventLog:
    """Every record of one game, as stored in JetStream: the public records
    (``court.events.<game>.<game_id>``, written by the projector) or, with ``full``, the game log
    itself (``court.games.<shard>.<game_id>.*``). ``events`` is the list of ``court.events.v2.Record``."""

    def __init__(self, nats_url: str, game: str, game_id: str, *, full: bool = False, shards: int = 1):
        self.url = nats_url
        self.subject = krec.log_filter(game_id, shards) if full else krec.public_subject(game, game_id)
        self.events: list[records_pb2.Record] = []
        self.raw_ids: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._changed = asyncio.Event()
        self._nc: Any = None
        self._sub: Any = None

    async def __aenter__(self) -> EventLog:
        self._nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        js = self._nc.jetstream()
        self._sub = await js.subscribe(
            self.subject, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL, cb=self._on_msg
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._sub.unsubscribe()
        await self._nc.close()

    async def _on_msg(self, msg: Any) -> None:
        self.events.append(krec.decode(msg.data))
        self.headers.append(dict(msg.headers or {}))
        self.raw_ids.append(msg.headers.get("Nats-Msg-Id", "") if msg.headers else "")
        self._changed.set()

    async def wait_until(
        self,
        predicate: Callable[[list[records_pb2.Record]], bool],
        timeout: float = 15.0,
        what: str = "records",
    ) -> None:
        async def loop() -> None:
            while not predicate(self.events):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            last = [(r.seq, r.WhichOneof("body")) for r in self.events[-8:]]
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; last records {last}"
            ) from None

    def payloads(self) -> list[dict[str, Any]]:
        """Every event of every record, as ``core.Event.full()`` dicts (public records: no private parts)."""
        return [e.full() for r in self.events for e in krec.events_of(r)]


def count_refreshes(app: Any) -> list[str]:
    """The game id of every read of the log ``app``'s game cache makes from now on
    (``GameCache.refresh``), appended as it happens."""
    reads: list[str] = []
    real = app.cache.refresh

    async def counting(entry: Any) -> bool:
        reads.append(entry.game_id)
        return bool(await real(entry))

    app.cache.refresh = counting
    return reads


async def first_seat_moves(
    clients: Mapping[int, RulesClient], game_id: str, view: Any, rng: random.Random, n: int
) -> Any:
    """``n`` random legal moves, each by the first seat to act, from ``view``; the last answer's view."""
    for _ in range(n):
        seat = view.to_act[0]
        mine = await clients[seat].get_view(game_id, seat)
        view = (await clients[seat].submit(game_id, rng.choice(list(mine.legal_actions)), seat)).view
    return view


def has_game_end(seq: int) -> Callable[[list[records_pb2.Record]], bool]:
    return lambda recs: any(r.finished and r.seq == seq for r in recs)


def assert_complete(records: list[records_pb2.Record], last_seq: int, *, public: bool = True) -> None:
    """One record per seq 0..last_seq, in order, none twice; public ones with their message ids."""
    seqs = [r.seq for r in records if r.WhichOneof("body") != "closed"]
    assert seqs == list(range(last_seq + 1)), (
        f"every move once, in order: {seqs[:5]}..{seqs[-5:]} vs 0..{last_seq}"
    )
    assert records[0].WhichOneof("body") == "created"
    assert all(
        r.WhichOneof("body") in ("move", "seat_changed")
        for r in records[1:]
        if r.WhichOneof("body") != "closed"
    )
    want = krec.PUBLIC if public else krec.FULL
    assert all(r.visibility == want for r in records)
