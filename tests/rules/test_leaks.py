"""Hidden information never reaches a player: whole games of every game, every response and stream a
player can read (views, legal actions, submit replies, watch streams, errors, the public event
stream), checked against the engine's own list of what that seat may not see at that moment, and
against the seed."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

import grpc
import pytest
from court_client import action, action_json, result_dict
from court_contract import records as krec
from court_contract import typed
from court_games.registry import get_game
from court_proto.court.rules.v1 import rules_pb2
from court_rules.games import start_game
from google.protobuf.json_format import MessageToDict

from tests.games.randomplay import ints_in, strings_in

from .helpers import GAMES, EventLog, has_game_end

ALL_CARDS = [r + s for s in "CDHS" for r in "23456789TJQKA"]


def _view_obj(v: rules_pb2.GameView) -> Any:
    return {
        "view": typed.view_from_proto(v.view),
        "legal": [action_json(a) for a in v.legal_actions],
        "seats": list(v.seats),
        "result": result_dict(v.result),
        "options": typed.options_from_proto(v.options),
    }


class Seen:
    """What each reader (a seat, or None for a spectator / the public stream) got, by move seq."""

    def __init__(self) -> None:
        self.views: dict[Any, list[tuple[int, Any]]] = defaultdict(list)  # visible at state seq
        self.events: dict[Any, list[tuple[int, Any]]] = defaultdict(list)  # events of move seq
        self.errors: list[tuple[Any, int, str, str]] = []

    def view(self, reader: Any, v: rules_pb2.GameView) -> None:
        self.views[reader].append((v.seq, _view_obj(v)))

    def update(self, reader: Any, u: rules_pb2.GameUpdate) -> None:
        self.view(reader, u.view)
        self.events[reader].append((u.seq, [typed.event_from_proto(e) for e in u.events]))


async def _watch(client: Any, gid: str, seat: int | None, reader: Any, seen: Seen) -> None:
    async for u in client.watch(gid, seat, after_seq=0):
        seen.update(reader, u)


@pytest.mark.slow
@pytest.mark.parametrize(("game", "options", "n"), GAMES, ids=[g[0] for g in GAMES])
async def test_no_response_leaks_hidden_cards_or_the_seed(
    replicas: Any, rules: Any, game: str, options: dict, n: int
) -> None:
    players = [f"{game[:2]}{i}" for i in range(n)]
    created = await replicas.client(rules, "lobby", "service").create_game(game, players, options)
    gid = created.game_id
    clients = {i: replicas.client(rules, p, retries=0) for i, p in enumerate(players)}
    outsider = replicas.client(rules, "nosy")
    seen = Seen()
    rng = random.Random(f"leak-{game}")
    async with EventLog(replicas.nats.url, game, gid) as public:
        watchers = [asyncio.create_task(_watch(clients[s], gid, s, s, seen)) for s in clients]
        watchers.append(asyncio.create_task(_watch(outsider, gid, None, None, seen)))
        view = created.view
        while not view.finished:
            seat = rng.choice(list(view.to_act))
            c = clients[seat]
            for s, cl in clients.items():
                seen.view(s, await cl.get_view(gid))
                legal = await cl.legal_actions(gid)
                seen.views[s].append((legal.seq, [action_json(a) for a in legal.actions]))
            seen.view(None, await outsider.get_view(gid))
            mine = await c.get_view(gid, seat)
            # a wrong card, to read the error message the player gets
            bogus = _bogus(game, mine)
            if bogus is not None:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await c.submit(gid, bogus, seat)
                seen.errors.append((seat, mine.seq, info.value.details(), action_json(bogus)["card"]))
            reply = await c.submit(gid, rng.choice(list(mine.legal_actions)), seat)
            seen.view(seat, reply.view)
            seen.events[seat].append((reply.seq, [typed.event_from_proto(e) for e in reply.events]))
            for nxt in reply.next:
                seen.view(nxt.your_seat, nxt)
            view = reply.view
        await asyncio.wait_for(asyncio.gather(*watchers), 15)
        await public.wait_until(has_game_end(view.seq))
        for r in public.events:  # the whole public record: envelope, body and every event; no seed
            assert r.WhichOneof("body") != "created" or r.created.seed == 0
            seen.events["public"].append((r.seq, [MessageToDict(r), [e.full() for e in krec.events_of(r)]]))
    hist = await replicas.client(rules, "root", "admin").history(gid)
    _check(game, options, hist, seen, n)


def _bogus(game: str, mine: rules_pb2.GameView) -> Any:
    """An action with a card the player does not hold (or None when the game has no card actions)."""
    legal_cards = {action_json(a).get("card") for a in mine.legal_actions}
    if game == "queens_court":
        card = next(c for c in ALL_CARDS if c not in legal_cards)
        return action(game, {"type": "play", "card": card, "target": 0, "pile": "left"})
    if game == "hearts":
        card = next(c for c in ALL_CARDS if c not in legal_cards)
        return action(game, {"type": "play", "card": card})
    return None


def _check(game: str, options: dict, hist: rules_pb2.GetHistoryResponse, seen: Seen, n: int) -> None:
    module = get_game(game)
    opts = module.options_from_dict(options)
    state, _ = start_game(module, opts, hist.seed)
    states = [state]
    for m in hist.moves:
        state, _ = module.apply(state, m.seat, module.action_from_json(action_json(m.action)))
        states.append(state)
    seed = hist.seed
    assert seed > 10**6, "the server drew a real seed"

    def hidden(seq: int, seat: int | None) -> set[str]:
        return set(module.hidden_cards(states[seq], seat))

    def revealed(seq: int) -> set[str]:
        """A card played face up by move ``seq`` is public from then on, even if the same move then
        deals it again (a round ends with that play and the next round is dealt)."""
        if seq == 0:
            return set()
        a = action_json(hist.moves[seq - 1].action)
        return {a["card"]} if a.get("type") == "play" and "card" in a else set()

    checked = 0
    for reader in [*range(n), None]:
        for seq, obj in seen.views[reader]:
            leaked = strings_in(obj) & hidden(seq, reader)
            assert not leaked, f"{game}: a view for {reader} at move {seq} shows {sorted(leaked)}"
            assert seed not in ints_in(obj), f"{game}: a view for {reader} shows the seed"
            checked += 1
        for seq, evs in seen.events[reader]:
            # an event may show what the move revealed; never a card hidden before and after it
            secret = (hidden(seq, reader) & hidden(max(seq - 1, 0), reader)) - revealed(seq)
            leaked = strings_in(evs) & secret
            assert not leaked, f"{game}: events of move {seq} for {reader} show {sorted(leaked)}: {evs}"
            assert seed not in ints_in(evs)
            checked += 1
    for seq, payload in seen.events["public"]:
        secret = (hidden(seq, None) & hidden(max(seq - 1, 0), None)) - revealed(seq)
        leaked = strings_in(payload) & secret
        assert not leaked, f"{game}: public event of move {seq} shows {sorted(leaked)}"
        assert seed not in ints_in(payload) and str(seed) not in strings_in(payload), (
            f"{game}: a public record shows the seed"
        )
        checked += 1
    for seat, seq, msg, named in seen.errors:
        others = hidden(seq, seat) - {named}  # the card the player named may be echoed back
        assert not [c for c in others if c in msg.split() or f"'{c}'" in msg or f'"{c}"' in msg], msg
        assert str(seed) not in msg
    assert checked > 100 and len(seen.views[None]) > 10 and all(seen.events[s] for s in range(n))
