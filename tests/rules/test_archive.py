"""Finished games leave the hot streams after COURT_FINISHED_RETENTION and stay readable from the
archive; unfinished games are never touched."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from court_kit import jetstream as kjs
from court_rules.app import RulesApp

from .conftest import settings_for
from .helpers import play_out


async def test_a_finished_game_moves_to_the_archive_and_still_reads(replicas: Any) -> None:
    app = await RulesApp.start(settings_for(replicas.nats.url, extra={"COURT_FINISHED_RETENTION": "1"}),
                               sweep_delay=0.2)
    replicas.apps.append(app)
    players = ["ann", "bob"]
    lobby = replicas.client(app, "lobby", "service")
    done = (await lobby.create_game("queens_court", players, {"players": 2})).game_id
    running = (await lobby.create_game("queens_court", players, {"players": 2})).game_id
    clients = {i: replicas.client(app, p) for i, p in enumerate(players)}
    final = await play_out(clients, done, random.Random(5))
    assert final.finished
    analyst = replicas.client(app, "analyst", "analytics")
    before = await analyst.history(done)
    nc = app.nc
    archived = await kjs.direct_get_last(nc, "COURT_GAMES_ARCHIVE", f"court.archive.{done}")
    assert archived is not None, "the final move archived the game"
    # the janitor purges it from the three hot streams once it is a second old
    deadline = time.monotonic() + 30
    while await kjs.direct_get_last(nc, "COURT_GAMES", f"court.games.{done}") is not None:
        assert time.monotonic() < deadline, "the finished game never left COURT_GAMES"
        await asyncio.sleep(0.1)  # the janitor's purge has no event a client can wait on
    for stream, subject in (("COURT_EVENTS", f"court.events.queens_court.{done}.>"),
                            ("COURT_EVENTS_FULL", f"court.full.queens_court.{done}.>")):
        while await kjs.direct_get_last(nc, stream, subject) is not None:
            assert time.monotonic() < deadline, f"the finished game's events never left {stream}"
            await asyncio.sleep(0.1)
    # the unfinished game is untouched
    assert await kjs.direct_get_last(nc, "COURT_GAMES", f"court.games.{running}") is not None
    # a replica that never saw the game reads it from the archive: same view, same history
    cold = await replicas.start()
    c = replicas.client(cold, "ann")
    view = await c.get_view(done, 0)
    assert view.finished and view.seq == final.seq
    after = await replicas.client(cold, "analyst", "analytics").history(done)
    assert [m.seq for m in after.moves] == [m.seq for m in before.moves] and after.seed == before.seed
    # and nothing of it came back into the hot streams (no events republished on load)
    assert await kjs.direct_get_last(nc, "COURT_EVENTS", f"court.events.queens_court.{done}.>") is None
    assert await kjs.direct_get_last(nc, "COURT_GAMES", f"court.games.{done}") is None
