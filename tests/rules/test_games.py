"""Whole games of every game through gRPC, between scripted clients, one per seat."""

from __future__ import annotations

import random
from typing import Any

import pytest
from court_client import result_dict, view_dict
from court_contract import records as krec

from .helpers import GAMES, EventLog, assert_complete, has_game_end, play_out


@pytest.mark.parametrize(("game", "options", "n"), GAMES, ids=[g[0] for g in GAMES])
async def test_full_game_between_scripted_clients(
    replicas: Any, rules: Any, game: str, options: dict, n: int
) -> None:
    lobby = replicas.client(rules, "lobby", "service")
    players = [f"p{i}-{game}" for i in range(n)]
    created = await lobby.create_game(game, players, options)
    gid = created.game_id
    assert not created.view.HasField("your_seat"), "the lobby watches as a spectator"
    clients = {i: replicas.client(rules, p) for i, p in enumerate(players)}
    async with (
        EventLog(replicas.nats.url, game, gid) as public,
        EventLog(replicas.nats.url, game, gid, full=True) as full,
    ):
        final = await play_out(clients, gid, random.Random(f"{game}-1"))
        assert final.finished and final.HasField("result") and final.result.finished
        result = result_dict(final.result)
        assert result["finished"] is True
        # every seat sees the same finished game
        for seat, c in clients.items():
            v = await c.get_view(gid)
            assert v.your_seat == seat and v.finished and v.seq == final.seq
            assert not v.legal_actions
        await public.wait_until(has_game_end(final.seq), what="GameEnded (public)")
        await full.wait_until(has_game_end(final.seq), what="GameEnded (full)")
        assert_complete(public.events, final.seq)
        assert_complete(full.events, final.seq, public=False)
        assert [krec.redact(r) for r in full.events] == public.events, (
            "each public record is its full one redacted"
        )
        assert public.raw_ids == [f"{gid}-{s}" for s in range(final.seq + 1)]
        assert list(public.events[0].created.seats) == players and public.events[0].created.seed == 0
        assert full.events[0].created.seed != 0
        assert all(not r.move.HasField("action") and not r.move.request_id for r in public.events[1:])
        assert all(r.move.HasField("action") for r in full.events[1:])
        # the history (admin) replays to the same result
        admin = replicas.client(rules, "root", "admin")
        hist = await admin.history(gid)
        assert len(hist.moves) == final.seq
        assert result_dict(hist.result) == result
        assert [m.seq for m in hist.moves] == list(range(1, final.seq + 1))
        spectator = await lobby.get_view(gid)
        assert spectator.finished and view_dict(spectator) == view_dict(await admin.get_view(gid))
