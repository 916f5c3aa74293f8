"""Behind the edge every call reaches the lobby from the edge's address; the edge passes on each
browser's own address, signed with COURT_EDGE_SECRET (court_kit.edge), so the lobby's per-address
sign-up limit keeps two browsers apart, and a plain gRPC client's forged address header is ignored.

The lobby here allows two new accounts per address (COURT_SIGNUP_BURST=2, refilled once in 1000 s);
loopback addresses 127.0.0.2-6 stand for browsers and a proxy."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
from court_kit.edge import ADDR_HEADER, SIG_HEADER, sign_client
from court_lobby.app import LobbyApp
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc

from tests.ranking.stack import Stack

from .conftest import EDGE_SECRET, raw, start_edge

pytestmark = pytest.mark.asyncio(loop_scope="module")

GUEST = "/court.lobby.v1.LobbyService/CreateGuest"
PROXY = "127.0.0.5"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def limited(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("web-limited")
    lobby = await LobbyApp.start(
        stack.settings(
            "lobby",
            database_url=f"sqlite:///{tmp / 'lobby.db'}",
            extra={"COURT_SIGNUP_RATE": "0.001", "COURT_SIGNUP_BURST": "2"},
        )
    )
    edge = await start_edge(stack, tmp, upstreams={"lobby": lobby.address}, trusted_proxies=f"{PROXY}/32")
    try:
        yield {"lobby": lobby, "edge": edge}
    finally:
        await edge.stop(0)
        await lobby.stop(0)


async def _signup(edge: Any, source: str, **headers: str) -> tuple[int, str]:
    reply = await raw(edge.address, GUEST, {}, source=source, headers=headers)
    return reply.status, reply.json().get("code", "ok")


async def test_two_browsers_from_two_addresses_are_limited_apart(limited: dict[str, Any]) -> None:
    edge = limited["edge"]
    assert [await _signup(edge, "127.0.0.2") for _ in range(2)] == [(200, "ok")] * 2
    status, code = await _signup(edge, "127.0.0.2")
    assert (status, code) == (429, "resource_exhausted")
    # another browser is not held back by the first one's sign-ups
    assert [await _signup(edge, "127.0.0.3") for _ in range(2)] == [(200, "ok")] * 2
    assert await _signup(edge, "127.0.0.3") == (429, "resource_exhausted")
    reply = await raw(edge.address, GUEST, {}, source="127.0.0.2")
    assert "new accounts from your address" in reply.json()["message"], reply

    # behind a trusted proxy: the address the proxy saw, one per browser
    for browser in ("198.51.100.20", "198.51.100.21"):
        got = [await _signup(edge, PROXY, **{"x-forwarded-for": browser}) for _ in range(3)]
        assert got == [(200, "ok"), (200, "ok"), (429, "resource_exhausted")], (browser, got)
    # an untrusted peer's X-Forwarded-For is its own claim: ignored, limited by its own address
    got = [await _signup(edge, "127.0.0.6", **{"x-forwarded-for": f"203.0.113.{i}"}) for i in range(3)]
    assert got == [(200, "ok"), (200, "ok"), (429, "resource_exhausted")], got


async def test_a_forged_address_from_a_plain_grpc_client_is_ignored(limited: dict[str, Any]) -> None:
    lobby = lobby_pb2_grpc.LobbyServiceStub(channel := grpc.aio.insecure_channel(limited["lobby"].address))
    try:
        now = time.time()
        forgeries = [
            ((ADDR_HEADER, "127.0.0.40"), (SIG_HEADER, f"{int(now)}.{'0' * 64}")),  # a made-up signature
            sign_client("another-secret-" + "x" * 32, "127.0.0.41", now),  # signed with the wrong secret
            sign_client(EDGE_SECRET, "127.0.0.42", now - 3600),  # a real edge signature, an hour old
        ]
        codes = []
        for md in forgeries:
            try:
                await lobby.CreateGuest(lpb.CreateGuestRequest(), metadata=md, timeout=30)
                codes.append("ok")
            except grpc.aio.AioRpcError as err:
                codes.append(err.code().name)
        # all three counted against the client's own address (127.0.0.1): two allowed, then refused
        assert codes == ["ok", "ok", "RESOURCE_EXHAUSTED"], codes
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await lobby.CreateGuest(
                lpb.CreateGuestRequest(),
                metadata=((ADDR_HEADER, "127.0.0.4"), (SIG_HEADER, f"{int(now)}.bad")),
                timeout=30,
            )
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # the address it claimed is untouched: a browser there, through the edge, signs up as usual
        assert await _signup(limited["edge"], "127.0.0.4") == (200, "ok")
    finally:
        await channel.close()
