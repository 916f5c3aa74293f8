"""Finished games leave the hot log after COURT_FINISHED_RETENTION and stay readable from the
archive; unfinished games are never touched; the public records stay in their feed."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from court_contract import records as krec
from court_kit import jetstream as kjs
from court_proto.court.events.v2 import records_pb2
from court_rules.app import RulesApp
from court_rules.store import game_log_bytes

from .conftest import settings_for
from .helpers import play_out


async def test_a_finished_game_moves_to_the_archive_and_still_reads(replicas: Any) -> None:
    app = await RulesApp.start(settings_for(replicas.nats.url, extra={"COURT_FINISHED_RETENTION": "1"}))
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
    deadline = time.monotonic() + 30
    # the projector archives it once its final record is public
    while (archived := await kjs.direct_get_last(nc, "COURT_GAMES_ARCHIVE", f"court.archive.{done}")) is None:
        assert time.monotonic() < deadline, "the finished game was never archived"
        await asyncio.sleep(0.1)  # the projector's archive write has no event a client can wait on
    last_public = await kjs.direct_get_last(nc, "COURT_EVENTS", f"court.events.queens_court.{done}")
    assert last_public is not None and int(last_public.headers["Court-Seq"]) == final.seq
    assert len(records_pb2.GameLog.FromString(archived.data).records) == final.seq + 1
    # the janitor purges its log once it is a second old
    while await kjs.direct_get_last(nc, "COURT_GAMES_0", f"court.games.0.{done}.*") is not None:
        assert time.monotonic() < deadline, "the finished game never left COURT_GAMES_0"
        await asyncio.sleep(0.1)  # the janitor's purge has no event a client can wait on
    # the unfinished game is untouched
    assert await kjs.direct_get_last(nc, "COURT_GAMES_0", f"court.games.0.{running}.*") is not None
    # a replica that never saw the game reads it from the archive: same view, same history
    cold = await replicas.start()
    c = replicas.client(cold, "ann")
    view = await c.get_view(done, 0)
    assert view.finished and view.seq == final.seq
    after = await replicas.client(cold, "analyst", "analytics").history(done)
    assert [m.seq for m in after.moves] == [m.seq for m in before.moves] and after.seed == before.seed
    # nothing of it came back into the hot log, and its public records are there once each
    assert await kjs.direct_get_last(nc, "COURT_GAMES_0", f"court.games.0.{done}.*") is None
    public = await kjs.direct_get_batch(nc, "COURT_EVENTS", f"court.events.queens_court.{done}")
    assert [int(m.headers["Court-Seq"]) for m in public] == list(range(final.seq + 1))


def test_a_game_log_written_from_serialized_records_reads_as_the_records() -> None:
    """``game_log_bytes`` writes records the projector kept serialized (as the log holds them) into
    the archive's ``GameLog`` as they are: it parses as the same records, in order, with the last
    log sequence, whether each record came as bytes or as a message (lengths past one and two
    varint bytes included)."""
    recs = [
        krec.closed_record(
            "queens_court",
            "g1",
            i,
            1_700_000_000_000 + i,
            into="",
            by="lobby",
            request_id="r" * n,
            reason="x" * n,
        )
        for i, n in enumerate((0, 1, 150, 20_000))
    ]
    mixed = [r.SerializeToString() if i % 2 else r for i, r in enumerate(recs)]
    data = game_log_bytes(mixed, 987_654)
    got = records_pb2.GameLog.FromString(data)
    assert list(got.records) == recs and got.last_sseq == 987_654
    assert data == records_pb2.GameLog(records=recs, last_sseq=987_654).SerializeToString()
    assert records_pb2.GameLog.FromString(game_log_bytes([], 0)) == records_pb2.GameLog()
