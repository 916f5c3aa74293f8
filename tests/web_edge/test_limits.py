"""The edge's per-client limits: open WatchGame streams per address, and calls per address."""

from __future__ import annotations

import asyncio
import http.client
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pyqwest
import pytest
from connectrpc.errors import ConnectError
from court_client import options_proto
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1.lobby_connect import LobbyServiceClient
from court_proto.court.rules.v1 import rules_pb2
from court_proto.court.rules.v1.rules_connect import RulesServiceClient
from court_web.app import WebApp

from tests.ranking.stack import Stack

from .conftest import STREAMS_PER_CLIENT, bearer, raw, start_edge

pytestmark = pytest.mark.asyncio(loop_scope="module")

WATCH = "/court.rules.v1.RulesService/WatchGame"


async def _solo_game(edge: WebApp, http_client: pyqwest.Client) -> tuple[str, str]:
    """(token, game id) of a guest's Hearts game in which they hold every seat: nothing moves."""
    auth = await LobbyServiceClient(edge.url, http_client=http_client).create_guest(lpb.CreateGuestRequest())
    req = rules_pb2.CreateGameRequest(
        request_id=uuid.uuid4().hex, game="hearts", seats=[auth.account.player_id] * 4
    )
    req.options.CopyFrom(options_proto("hearts", {"limit": 20}))
    rules = RulesServiceClient(edge.url, http_client=http_client)
    created = await rules.create_game(req, headers=bearer(auth.token))
    return auth.token, created.game_id


def _open_stream(
    address: str, game_id: str, token: str, source: str
) -> tuple[http.client.HTTPConnection, bytes]:
    """A Connect (JSON) WatchGame from ``source``: the connection, kept open, and its first frame."""
    host, _, port = address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(source, 0))
    msg = json.dumps({"gameId": game_id, "seat": 0}).encode()
    conn.request(
        "POST",
        WATCH,
        body=b"\x00" + len(msg).to_bytes(4, "big") + msg,
        headers={
            "content-type": "application/connect+json",
            "connect-protocol-version": "1",
            **bearer(token),
        },
    )
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    head = resp.read(5)
    return conn, head + resp.read(int.from_bytes(head[1:], "big"))


async def _until(predicate: Any, what: str, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)  # the edge's own counter: nothing to wait on but itself
    assert predicate(), what


async def test_open_streams_per_client_are_limited(edge: WebApp, http_client: pyqwest.Client) -> None:
    token, gid = await _solo_game(edge, http_client)
    rules = RulesServiceClient(edge.url, http_client=http_client)
    open_streams: list[AsyncIterator[rules_pb2.GameUpdate]] = []
    try:
        for _ in range(STREAMS_PER_CLIENT):
            stream = rules.watch_game(rules_pb2.WatchGameRequest(game_id=gid, seat=0), headers=bearer(token))
            first = await anext(stream)  # the snapshot: the stream is open
            assert first.view.game_id == gid
            open_streams.append(stream)
        refused = rules.watch_game(rules_pb2.WatchGameRequest(game_id=gid, seat=0), headers=bearer(token))
        with pytest.raises(ConnectError) as err:
            await anext(refused)
        assert err.value.code.value == "resource_exhausted", err.value
        assert f"at most {STREAMS_PER_CLIENT}" in err.value.message
        # another browser (another address) is not held back
        conn, frame = await asyncio.to_thread(_open_stream, edge.address, gid, token, "127.0.0.2")
        assert frame[0] == 0 and json.loads(frame[5:])["view"]["gameId"] == gid
        conn.close()
        # one stream closes: the slot comes back
        await open_streams.pop().aclose()  # type: ignore[attr-defined]
        limits = edge.forwarder.limits
        await _until(lambda: limits.open.get("127.0.0.1", 0) < STREAMS_PER_CLIENT, "the closed stream's slot")
        again = rules.watch_game(rules_pb2.WatchGameRequest(game_id=gid, seat=0), headers=bearer(token))
        assert (await anext(again)).view.game_id == gid
        open_streams.append(again)
    finally:
        for s in open_streams:
            await s.aclose()  # type: ignore[attr-defined]
    await _until(lambda: not edge.forwarder.limits.open, "every stream's slot back")


async def test_calls_per_client_are_rate_limited(stack: Stack, tmp_path: Path) -> None:
    app = await start_edge(stack, tmp_path, rate="1", burst="3")
    try:
        got = [
            (await raw(app.address, "/court.lobby.v1.LobbyService/CreateGuest", {})).status for _ in range(3)
        ]
        assert got == [200, 200, 200]
        over = await raw(app.address, "/court.lobby.v1.LobbyService/CreateGuest", {})
        assert over.status == 429 and over.json()["code"] == "resource_exhausted", over
        assert "too many calls from your address; try again in" in over.json()["message"]
        other = await raw(app.address, "/court.lobby.v1.LobbyService/CreateGuest", {}, source="127.0.0.2")
        assert other.status == 200, other
    finally:
        await app.stop(0)


async def test_streams_spread_over_connections_within_the_services_limit(
    stack: Stack, tmp_path: Path, http_client: pyqwest.Client
) -> None:
    """A rules replica taking 2 concurrent calls per connection (COURT_MAX_STREAMS=2): 5 WatchGame
    streams through one edge all open, on 3 connections; closed, the extra connections go."""
    from court_rules.app import RulesApp

    rules = await RulesApp.start(stack.settings("rules", max_streams=2))
    app = await start_edge(
        stack,
        tmp_path,
        upstreams={"rules": rules.address},
        overrides={"max_streams": 2},
        max_streams_per_client="10",
    )
    streams: list[Any] = []
    try:
        token, gid = await _solo_game(app, http_client)
        client = RulesServiceClient(app.url, http_client=http_client)
        async with asyncio.timeout(30):
            for _ in range(5):
                s = client.watch_game(rules_pb2.WatchGameRequest(game_id=gid, seat=0), headers=bearer(token))
                assert (await anext(s)).view.game_id == gid  # open: a stream past the 2nd did not wait
                streams.append(s)
        pool = app.forwarder.stream_channels["rules"]
        assert [n for _, n in pool.open] == [2, 2, 1]
        for s in streams:
            await s.aclose()
        await _until(lambda: [n for _, n in pool.open] == [0], "the extra connections closed")
    finally:
        for s in streams:
            await s.aclose()
        await app.stop(0)
        await rules.stop(0)
