"""court_rules.servertime: the turn clock reads the NATS server's time, not the replica's clock."""

from __future__ import annotations

import time
from typing import Any

import nats
import pytest
from court_contract import records as krec
from court_rules.servertime import ServerClock, parse_time
from court_rules.store import GameStore, ensure_streams_ready


def test_parse_time_reads_what_the_nats_server_writes() -> None:
    assert parse_time("1970-01-01T00:00:01Z") == 1.0
    assert parse_time("2026-12-05T06:12:39.096636798Z") == pytest.approx(1796451159.096636798, abs=1e-6)
    assert parse_time("2026-12-05T07:12:39.5+01:00") == pytest.approx(1796451159.5, abs=1e-6)


def test_the_sample_with_the_shortest_round_trip_wins_and_a_step_drops_the_old_ones() -> None:
    local = [100.0]
    sc = ServerClock(None, "S", local=lambda: local[0], window=4)
    with pytest.raises(RuntimeError, match="before the first sample"):
        sc.now()
    sc.add(0.010, 1000.000)
    sc.add(0.200, 1000.080)  # a delayed link: long round trip, its offset within half of it
    assert sc.now() == pytest.approx(1100.0)
    assert sc.uncertainty == pytest.approx(0.005)
    sc.add(0.002, 1000.001)
    assert sc.now() == pytest.approx(1100.001)
    sc.add(0.002, 1005.000)  # cannot agree with the kept one: a clock stepped 5 s
    assert sc.now() == pytest.approx(1105.0)
    sc.add(0.001, 1005.0002)
    assert sc.now() == pytest.approx(1105.0002)


async def test_a_skewed_replica_clock_reads_the_servers_time(nats_server: Any) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        await ensure_streams_ready(GameStore(nc, replicas=1, environ={}))
        for skew in (5.0, -5.0):  # the replica's own clock: 5 s ahead, 5 s behind
            sc = ServerClock(nc, krec.game_stream(0), local=lambda s=skew: time.time() + s)
            await sc.sync()
            await sc.sample()
            # this nats-server runs on this machine's clock: the skew is gone, to the round trip
            assert abs(sc.now() - time.time()) < 0.05 + sc.uncertainty
        missing = ServerClock(nc, "NO_SUCH_STREAM", timeout=0.5)
        with pytest.raises(RuntimeError, match="no server time"):
            await missing.sample()
    finally:
        await nc.close()
