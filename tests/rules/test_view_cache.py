"""The rules service's per-position view cache (``views.game_view``, by (seq, closed, seat) on the
game's entry, bounded): GetView, submit answers and WatchGame share a view, but never serve one
seat's view to another, a spectator a seat's, or a position the game has left (issue 31)."""

from __future__ import annotations

import random
from typing import Any

from court_client import view_dict
from court_rules.views import VIEWS_KEPT


async def test_cached_views_are_per_seat_per_position_and_bounded(replicas: Any, rules: Any) -> None:
    players = ["ada", "bea"]
    lobby = replicas.client(rules, "lobby", "service")
    gid = (await lobby.create_game("queens_court", players, {"players": 2})).game_id
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    spectator = replicas.client(rules, "carl")
    rng = random.Random(9)
    for _ in range(2 * VIEWS_KEPT):  # far more positions than the cache keeps
        a, b = await clients[0].get_view(gid, 0), await clients[1].get_view(gid, 1)
        again = await clients[0].get_view(gid, 0)  # served from the cache: the same answer
        watcher = await spectator.get_view(gid)
        assert a == again and a.seq == b.seq == watcher.seq
        assert (a.your_seat, b.your_seat) == (0, 1) and not watcher.HasField("your_seat")
        hands = view_dict(a)["hand"], view_dict(b)["hand"]
        assert hands[0] != hands[1] and "hand" not in view_dict(watcher)
        seat = a.to_act[0]
        mine = a if seat == 0 else b
        reply = await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)
        # the next read is of the new position, never the cached old one
        now = await clients[seat].get_view(gid, seat)
        assert now.seq == reply.seq == a.seq + 1 and now == reply.view
        if now.finished:
            break
        entry = rules.application.cache.peek(gid)
        assert len(entry.views) <= VIEWS_KEPT
    # closing the game at the same seq: the cached open view is not served again
    before = await clients[0].get_view(gid, 0)
    if not before.finished:
        await lobby.close_game(gid, "the lobby was cancelled")
        closed = await clients[0].get_view(gid, 0)
        assert closed.seq == before.seq and closed.finished and not before.finished
        assert not closed.legal_actions and not closed.to_act
