"""Faults behind the edge, and what a browser sees:

* the rules service killed (a real ``court-rules`` process, SIGKILL): an open WatchGame ends with
  ``unavailable``; a call answers ``unavailable`` naming the rules service and its address;
  readiness turns 503 naming it; once it is back the same calls work again, the game unchanged;
* the rules service hung (a gRPC server that accepts calls and never answers): calls end with
  ``deadline_exceeded`` at the edge's own bound or the caller's deadline, whichever comes first;
* ``court-web`` itself as a process: it starts from its console script, serves, drains and exits 0
  on SIGTERM (tests/web_edge/test_units.py: it refuses to start without ``COURT_EDGE_SECRET``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import pyqwest
import pytest
from connectrpc.errors import ConnectError
from court_client import options_proto
from court_proto.court.rules.v1 import rules_pb2
from court_proto.court.rules.v1.rules_connect import RulesServiceClient
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.procs import STOP_LIMIT, Service
from tests.ranking.stack import Stack

from .conftest import EDGE_SECRET, bearer, raw, start_edge

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _serving(address: str, timeout: float = 60.0) -> None:
    """Until the service at ``address`` reports SERVING (its health stream; reconnects while down)."""
    async with asyncio.timeout(timeout):
        while True:
            async with grpc.aio.insecure_channel(address) as ch:
                try:
                    async for reply in health_pb2_grpc.HealthStub(ch).Watch(
                        health_pb2.HealthCheckRequest(service=""), wait_for_ready=True
                    ):
                        if reply.status == health_pb2.HealthCheckResponse.SERVING:
                            return
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.1)  # not up yet: nothing else to wait on


async def _create(rules: RulesServiceClient, token: str, player: str) -> rules_pb2.CreateGameResponse:
    req = rules_pb2.CreateGameRequest(request_id=uuid.uuid4().hex, game="hearts", seats=[player] * 4)
    req.options.CopyFrom(options_proto("hearts", {"limit": 20}))
    return await rules.create_game(req, headers=bearer(token))


async def test_the_rules_service_killed_and_back(
    stack: Stack, tmp_path: Path, http_client: pyqwest.Client
) -> None:
    env = {
        "COURT_NATS_URL": stack.nats.url,
        "COURT_ENV": "test",
        "COURT_PROJECTOR": "off",
        **keys.env("rules"),
    }
    proc = Service("rules", tmp_path, env)
    edge = None
    try:
        await _serving(proc.address)
        edge = await start_edge(stack, tmp_path, upstreams={"rules": proc.address})
        rules = RulesServiceClient(edge.url, http_client=http_client)
        token = keys.token("web-fault", "player")
        created = await _create(rules, token, "web-fault")
        gid, seat = created.game_id, created.view.to_act[0]
        stream = rules.watch_game(rules_pb2.WatchGameRequest(game_id=gid, seat=seat), headers=bearer(token))
        assert (await anext(stream)).view.game_id == gid

        proc.kill()
        # the open stream ends with `unavailable`
        with pytest.raises(ConnectError) as err:
            async with asyncio.timeout(30):
                await anext(stream)
        assert err.value.code.value == "unavailable", err.value
        assert "rules service" in err.value.message
        # a call: `unavailable`, naming the service and where it was looked for, at once
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as err:
            await rules.get_view(rules_pb2.GetViewRequest(game_id=gid, seat=seat), headers=bearer(token))
        assert err.value.code.value == "unavailable", err.value
        assert f"the rules service is unavailable ({proc.address})" in err.value.message
        assert "try again" in err.value.message
        assert time.monotonic() - t0 < 10, "a dead upstream is reported, not waited on for the whole timeout"
        assert edge.forwarder.reachable["rules"].down, "logged once as unreachable (court_kit StateLog)"
        ready = await raw(edge.address, "/readyz", method="GET")
        assert ready.status == 503 and ready.json()["upstreams"]["rules"].startswith("UNAVAILABLE"), ready
        # the other services still answer through the edge
        assert (await raw(edge.address, "/court.lobby.v1.LobbyService/CreateGuest", {})).status == 200

        proc.restart()
        await _serving(proc.address)
        # back: the edge reconnects within its backoff (at most 2 s), the game is where it was
        async with asyncio.timeout(15):
            while True:
                try:
                    view = await rules.get_view(
                        rules_pb2.GetViewRequest(game_id=gid, seat=seat), headers=bearer(token)
                    )
                    break
                except ConnectError as exc:
                    assert exc.code.value == "unavailable", exc
                    await asyncio.sleep(0.1)  # the channel's reconnect backoff: retry as a client would
        assert view.seq == 0 and view.game_id == gid
        # the operator's side: one warning when it went, one line when it came back
        assert edge.forwarder.reachable["rules"].down is False
    finally:
        if edge is not None:
            await edge.stop(0)
        proc.close()


async def _hang(request: bytes, context: Any) -> bytes:
    await asyncio.Event().wait()  # never answers
    return b""


class _Hung(grpc.GenericRpcHandler):
    def service(self, handler_call_details: Any) -> Any:
        if handler_call_details.method.endswith("WatchGame"):

            async def stream(request: bytes, context: Any) -> Any:
                await asyncio.Event().wait()
                yield b""

            return grpc.unary_stream_rpc_method_handler(stream)
        return grpc.unary_unary_rpc_method_handler(_hang)


async def test_a_hung_rules_service_ends_in_deadline_exceeded(
    stack: Stack, tmp_path: Path, http_client: pyqwest.Client
) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_Hung(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    edge = await start_edge(stack, tmp_path, upstreams={"rules": f"127.0.0.1:{port}"}, call_timeout="0.5")
    try:
        rules = RulesServiceClient(edge.url, http_client=http_client)
        me = bearer(keys.token("web-slow", "player"))
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as err:  # no deadline of its own: the edge's bound
            await rules.get_view(rules_pb2.GetViewRequest(game_id="g" + "1" * 24), headers=me)
        assert err.value.code.value == "deadline_exceeded", err.value
        assert "the rules service did not answer within 0.5 s" in err.value.message
        assert time.monotonic() - t0 < 5
        with pytest.raises(ConnectError) as err:  # the caller's shorter deadline wins
            await rules.get_view(rules_pb2.GetViewRequest(game_id="g" + "1" * 24), headers=me, timeout_ms=150)
        assert err.value.code.value == "deadline_exceeded", err.value
        # a stream has no bound of the edge's own: the caller's deadline ends it
        stream = rules.watch_game(
            rules_pb2.WatchGameRequest(game_id="g" + "1" * 24), headers=me, timeout_ms=300
        )
        with pytest.raises(ConnectError) as err:
            async with asyncio.timeout(10):
                await anext(stream)
        assert err.value.code.value == "deadline_exceeded", err.value
    finally:
        await edge.stop(0)
        await server.stop(0)


async def test_court_web_as_a_process_serves_and_stops_on_sigterm(stack: Stack, tmp_path: Path) -> None:
    env = {
        "COURT_ENV": "test",
        "COURT_EDGE_SECRET": EDGE_SECRET,
        "COURT_RULES_ADDR": stack.rules.address,
        "COURT_LOBBY_ADDR": stack.lobby.address,
        "COURT_RANKING_ADDR": stack.ranking.address,
        "COURT_BOT_ADDR": stack.bot.address,
        "COURT_WEB_STATIC": str(tmp_path / "no-client"),
    }
    web = Service("web", tmp_path, env)
    try:
        web.wait_log("service listening", 60)
        assert (await raw(web.address, "/healthz", method="GET")).status == 200
        guest = await raw(web.address, "/court.lobby.v1.LobbyService/CreateGuest", {})
        assert guest.status == 200 and guest.json()["token"]
        seconds, rc = web.terminate_and_time()
        assert rc == 0 and seconds < STOP_LIMIT, (rc, seconds)
        assert any(x.get("event") == "stopped" for x in web.logs())
    finally:
        web.close()
