"""Bounded storage: every stream the rules service makes has limits (defaults, overridable by
COURT_<STREAM>_MAX_* variables), and a game log that reaches its bound refuses the next move
instead of silently losing its oldest records."""

from __future__ import annotations

import random
from typing import Any

import grpc
import pytest
from court_kit import jetstream as kjs
from court_kit.settings import ConfigError
from court_rules.app import RulesApp
from nats.js.api import DiscardPolicy

from .conftest import settings_for


def test_sizes_and_ages_parse_and_bad_values_name_the_variable() -> None:
    assert kjs.parse_size("X", "2GiB") == 2 << 30 and kjs.parse_size("X", "512MB") == 512_000_000
    assert kjs.parse_size("X", "1024") == 1024 and kjs.parse_size("X", "-1") == -1
    assert kjs.parse_age("X", "30d") == 30 * 86400 and kjs.parse_age("X", "15m") == 900
    assert kjs.parse_age("X", "0") == 0
    for bad in ("lots", "2 parsecs", "-5", "1e9"):
        with pytest.raises(ConfigError, match="COURT_GAMES_MAX_BYTES"):
            kjs.stream_limits("COURT_GAMES", {"COURT_GAMES_MAX_BYTES": bad})
    with pytest.raises(ConfigError, match="COURT_EVENTS_MAX_AGE must be a duration"):
        kjs.stream_limits("COURT_EVENTS", {"COURT_EVENTS_MAX_AGE": "forever"})
    with pytest.raises(ConfigError, match="MAX_MSGS_PER_SUBJECT"):
        kjs.stream_limits("COURT_GAMES", {"COURT_GAMES_MAX_MSGS_PER_SUBJECT": "0"})
    assert all(lim.max_bytes > 0 for lim in kjs.STREAM_LIMITS.values()), "every default is bounded"


async def test_streams_are_bounded_and_the_environment_overrides(nats_server: Any) -> None:
    env = {
        "COURT_EVENTS_MAX_BYTES": "64MiB",
        "COURT_EVENTS_MAX_AGE": "2d",
        "COURT_GAMES_MAX_MSGS_PER_SUBJECT": "500",
        "COURT_GAME_STREAMS": "2",
    }
    app = await RulesApp.start(settings_for(nats_server.url, extra=env))
    try:
        js = app.store.js
        shards = [(await js.stream_info(f"COURT_GAMES_{i}")).config for i in (0, 1)]
        events = (await js.stream_info("COURT_EVENTS")).config
        for games, i in zip(shards, (0, 1), strict=True):  # every shard has COURT_GAMES' limits
            assert games.subjects == [f"court.games.{i}.*.*"]
            assert games.max_bytes == kjs.STREAM_LIMITS["COURT_GAMES"].max_bytes
            assert games.max_msgs_per_subject == 500 and games.discard == DiscardPolicy.NEW
            assert games.discard_new_per_subject is True
        assert events.max_bytes == 64 << 20 and events.max_age == 2 * 86400
        names = {n async for n in _names(js)}
        assert "COURT_EVENTS_FULL" not in names and "COURT_GAMES" not in names, "v1's streams are not made"
        for cfg in (*shards, events):
            assert cfg.max_bytes > 0 and cfg.max_msg_size > 0 and cfg.num_replicas == 1
    finally:
        await app.stop(0)


async def test_a_game_log_at_its_bound_refuses_moves_and_keeps_every_record(replicas: Any) -> None:
    app = await RulesApp.start(
        settings_for(replicas.nats.url, extra={"COURT_GAMES_MAX_MSGS_PER_SUBJECT": "4"})
    )
    replicas.apps.append(app)
    players = ["amy", "bob", "cal"]
    created = await replicas.client(app, "lobby", "service").create_game(
        "queens_court", players, {"players": 3}
    )
    gid = created.game_id
    rng = random.Random(1)
    clients = {i: replicas.client(app, p, retries=0) for i, p in enumerate(players)}
    view = created.view
    for _ in range(3):  # records 2..4: the creation is record 1
        seat = view.to_act[0]
        mine = await clients[seat].get_view(gid, seat)
        view = (await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)).view
    assert view.seq == 3
    seat = view.to_act[0]
    mine = await clients[seat].get_view(gid, seat)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await clients[seat].submit(gid, rng.choice(list(mine.legal_actions)), seat)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    # nothing was lost: the log still starts with the creation and holds all three moves
    assert (await clients[0].get_view(gid)).seq == 3
    msgs = await kjs.direct_get_batch(app.nc, "COURT_GAMES_0", f"court.games.0.{gid}.*")
    assert [int(m.headers["Court-Seq"]) for m in msgs] == [0, 1, 2, 3]


async def _names(js: Any) -> Any:
    for n in await js.streams_info():
        yield n.config.name
