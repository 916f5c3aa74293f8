"""Clock skew (issue 33): two rules replicas whose clocks disagree, one 5 clock seconds ahead of
real time and one 5 behind (RulesApp's injectable clock), drive the turn clocks of games nobody
plays. Every turn times out exactly once (never twice, whichever replica fires it) and the game
logs stay linear (tests/chaos/history.py).

How early a timeout may come, measured on the NATS server's own clock (each record's stream
timestamp, which no replica's skew touches): not at all, give or take PUBLISH_MARGIN (0.25 s,
half of one replica's skew, which issue 33 allows; seen: shortest waits of 1.995 to 2.001 s for a
2.0 s turn). The rules service takes every time it writes (a record's ``t``, so the deadlines) and
every "now" the turn clock fires against from the NATS server's clock (court_rules/servertime.py),
so a replica's own clock does not matter. Before that, each replica used its own: a deadline written by the replica
5 s behind and fired by the one 5 s ahead came 10 clock seconds early (seen: 9.2, a 2.0 s turn timed
out after 1.08 s), twice the skew issue 33 allows; this test fails on that code.

Clock seconds are shortened with COURT_CLOCK_SECOND_MS=100 (docs/clock.md): a 20-second turn lasts
2 s and the 5-second skew is 0.5 s of real time.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime

import nats
import pytest
from court_client import RulesClient
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_proto.court.games.v1 import events_pb2
from court_rules.app import RulesApp

from tests.chaos.history import check_game, log_from_records
from tests.fixtures import keys
from tests.fixtures.nats import BinaryNats
from tests.rules.conftest import settings_for

SECOND_MS = 100
TURN = 20  # clock seconds
SKEW = 5 * SECOND_MS / 1000  # 5 clock seconds, in real seconds
GAMES = 2
# seconds: a replica's reading of the server's time vs the stamp on its record (the append's own
# latency on a loaded machine, plus each reading's error, half a round trip); half the skew
PUBLISH_MARGIN = 0.25


@pytest.fixture
async def skewed(nats_server: BinaryNats) -> AsyncIterator[list[RulesApp]]:
    apps: list[RulesApp] = []
    try:
        for offset in (SKEW, -SKEW):
            settings = settings_for(nats_server.url, {"COURT_CLOCK_SECOND_MS": str(SECOND_MS)})
            apps.append(await RulesApp.start(settings, clock=lambda o=offset: time.time() + o))
        yield apps
    finally:
        for app in apps:
            await app.stop(0)


def _stamp(headers: dict[str, str]) -> float:
    """Nats-Time-Stamp (RFC 3339, nanoseconds) as seconds since the epoch."""
    raw = headers["Nats-Time-Stamp"].rstrip("Z")
    whole, _, frac = raw.partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float(f"0.{frac or '0'}")


async def test_each_turn_times_out_once_and_never_early_by_more_than_the_skew(
    nats_server: BinaryNats, skewed: list[RulesApp]
) -> None:
    clients = [RulesClient(app.address, keys.token("lobby", "service")) for app in skewed]
    clock = events_pb2.TurnClock(turn_seconds=TURN, time_bank_seconds=0, autoplay_level="random")
    gids = []
    for g in range(GAMES):  # created on either replica: each writes deadlines by its own clock
        made = await clients[g % 2].create_game("queens_court", ["ann", "ben"], clock=clock)
        gids.append(made.game_id)
    nc = await nats.connect(nats_server.url)
    try:
        finished: set[str] = set()
        deadline = time.monotonic() + 240
        while len(finished) < GAMES:
            assert time.monotonic() < deadline, f"games unfinished: {set(gids) - finished}"
            for gid in set(gids) - finished:
                if (await clients[0].get_view(gid)).finished:
                    finished.add(gid)
            await asyncio.sleep(0.5)  # nobody plays: the clock ends the games
        earliest = float("inf")
        timeouts = 0
        for gid in gids:
            stored = await kjs.direct_get_batch(nc, krec.game_stream(0), krec.log_filter(gid, 1))
            recs = [krec.decode(m.data) for m in stored]
            assert check_game(log_from_records(gid, recs, [krec.redact(r) for r in recs]), []) == []
            at = {int(r.seq): _stamp(m.headers) for r, m in zip(recs, stored, strict=True)}
            timed = [r for r in recs if r.WhichOneof("body") == "move" and r.move.autoplay == "timeout"]
            per_turn = Counter(r.move.request_id for r in timed)
            assert all(n == 1 for n in per_turn.values()), per_turn
            # each seat: two timeouts in a row, then it is away and played at once
            assert Counter(int(r.move.seat) for r in timed) == {0: 2, 1: 2}, gid
            for r in timed:
                turn = int(r.move.request_id.rsplit("-", 2)[1])
                waited = at[int(r.seq)] - at[turn]
                earliest = min(earliest, waited)
                timeouts += 1
                # never early (issue 33 allows one replica's skew: 5 clock seconds; the margin is
                # less than half of that)
                assert waited >= TURN * SECOND_MS / 1000 - PUBLISH_MARGIN, (gid, r.seq, waited)
        turn_s = TURN * SECOND_MS / 1000
        print(
            f"\nclock skew: {timeouts} timeouts over {GAMES} games, turn {turn_s:.1f}s, "
            f"replica clocks +{SKEW:.2f}s / -{SKEW:.2f}s, shortest wait {earliest:.3f}s "
            f"({(earliest - turn_s) * 1000:+.0f} ms against the turn, on the server's timestamps)"
        )
    finally:
        await nc.close()
        for c in clients:
            await c.close()
