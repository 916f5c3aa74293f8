"""court_client retries only where it is safe: UNAVAILABLE and DEADLINE_EXCEEDED, with the same request id.

A real gRPC server on loopback (the ranking service's generated servicer, answering from a script)
records every attempt's ``x-request-id`` and request id, so each test states exactly what the
caller saw and how often the service was asked.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from court_client import RankingClient
from court_client.base import ServiceClient
from court_lobby.clients import RemoteError, translate
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1 import ranking_pb2_grpc

C = grpc.StatusCode


class Scripted(ranking_pb2_grpc.RankingServiceServicer):
    """Answers each call with the next status of ``script`` (OK answers a balance)."""

    def __init__(self, script: list[C]):
        self.script = list(script)
        self.seen: list[tuple[str, str]] = []  # (x-request-id metadata, request_id field)

    async def _next(self, request, context):
        meta = dict(context.invocation_metadata())
        self.seen.append((meta.get("x-request-id", ""), getattr(request, "request_id", "")))
        code = self.script.pop(0) if self.script else C.OK
        if code == C.DEADLINE_EXCEEDED:
            await asyncio.sleep(1.0)  # longer than the client's deadline: the caller gives up waiting
            return rpb.RegisterGameResponse(created=True)
        if code != C.OK:
            await context.abort(code, f"scripted {code.name}")
        return rpb.RegisterGameResponse(created=True)

    async def RegisterGame(self, request, context):
        return await self._next(request, context)

    async def GetBalance(self, request, context):
        await self._next(request, context)
        return rpb.Balance(player_id="p", points=7)


async def _serve(servicer: Scripted) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    ranking_pb2_grpc.add_RankingServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def _register(client: ServiceClient, stub, rid: str = "") -> rpb.RegisterGameResponse:
    req = rpb.RegisterGameRequest(request_id=rid, game_id="g1", game="queens_court")
    return await client._write(stub.RegisterGame, req)


@pytest.mark.parametrize("code", [C.UNAVAILABLE, C.DEADLINE_EXCEEDED])
async def test_a_transient_failure_is_retried_with_the_same_request_id(code):
    servicer = Scripted([code, code])
    server, addr = await _serve(servicer)
    try:
        async with RankingClient(addr, backoff=0.01, timeout=0.3) as client:
            reply = await _register(client, client.stub)
        assert reply.created
        assert len(servicer.seen) == 3
        rids = {field for _, field in servicer.seen} | {meta for meta, _ in servicer.seen}
        assert len(rids) == 1 and "" not in rids  # one id, chosen once, on every attempt
    finally:
        await server.stop(None)


@pytest.mark.parametrize(
    "code", [C.INTERNAL, C.ABORTED, C.FAILED_PRECONDITION, C.UNKNOWN, C.RESOURCE_EXHAUSTED]
)
async def test_every_other_code_is_the_answer_and_is_never_retried(code):
    servicer = Scripted([code])
    server, addr = await _serve(servicer)
    try:
        async with RankingClient(addr, backoff=0.01) as client:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _register(client, client.stub, "rid-1")
            assert err.value.code() == code  # as it came: INTERNAL stays INTERNAL
            assert len(servicer.seen) == 1
            with pytest.raises(grpc.aio.AioRpcError):  # reads too
                servicer.script = [code]
                await client.balance("p")
            assert len(servicer.seen) == 2
    finally:
        await server.stop(None)


async def test_the_lobby_keeps_a_backend_s_code_and_only_calls_transient_transient():
    servicer = Scripted([C.INTERNAL, C.UNAVAILABLE, C.DEADLINE_EXCEEDED])
    server, addr = await _serve(servicer)
    try:
        async with RankingClient(addr, retries=0, timeout=0.3) as client:
            seen = []
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await _register(client, client.stub, "r")
                seen.append(translate(err.value, "ranking"))
        internal, unavailable, late = seen
        assert (
            isinstance(internal, RemoteError) and internal.code == C.INTERNAL
        )  # never rewritten as UNAVAILABLE
        assert unavailable.code == C.UNAVAILABLE and late.code == C.UNAVAILABLE
    finally:
        await server.stop(None)


def test_request_ids_are_unique_and_a_forked_child_draws_its_own() -> None:
    """court_client's request ids: 32 hex digits, never repeated in a process, and a forked child
    (a worker pool, a pre-forked server) does not repeat its parent's: it draws its own prefix."""
    import os

    from court_client.base import new_request_id

    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_request_id() for _ in range(100)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = f.read().split()
    os.waitpid(pid, 0)
    mine = [new_request_id() for _ in range(100)]
    assert len(child) == 100 and not set(child) & set(mine + ids)
    assert {c[:24] for c in child} != {m[:24] for m in mine}, "the child's prefix is its own"


async def test_every_call_sends_its_request_id_then_the_bearer_token_of_the_moment() -> None:
    """The wire contract of court_client's metadata: ``x-request-id`` (the request's id on a
    mutating call) then ``authorization: Bearer <token>``, exactly those pairs and in that order; a
    token set later is sent from the next call on, and a client without a token sends none."""
    seen: list[list[tuple[str, str]]] = []

    class Recorder(ranking_pb2_grpc.RankingServiceServicer):
        async def RegisterGame(self, request, context):
            ours = [
                (k, v) for k, v in context.invocation_metadata() if k in ("x-request-id", "authorization")
            ]
            seen.append([*ours, ("request_id", request.request_id)])
            return rpb.RegisterGameResponse(created=True)

    server, addr = await _serve(Recorder())
    try:
        async with RankingClient(addr, "t1") as client:
            await _register(client, client.stub, "rid-1")
            client.token = "t2"
            await _register(client, client.stub, "rid-2")
            client.token = None
            await _register(client, client.stub)
        assert seen[0] == [("x-request-id", "rid-1"), ("authorization", "Bearer t1"), ("request_id", "rid-1")]
        assert seen[1] == [("x-request-id", "rid-2"), ("authorization", "Bearer t2"), ("request_id", "rid-2")]
        (key, rid), (_, field) = seen[2]
        assert key == "x-request-id" and rid == field and len(rid) == 32, "no token: no authorization"
    finally:
        await server.stop(None)


def test_call_metadata_is_a_grpc_metadata_throughout() -> None:
    """``ServiceClient.metadata`` is a ``grpc.aio.Metadata`` (what grpc.aio iterates per call); read
    or changed by key, as a client interceptor would, it behaves as one built from the same pairs."""
    from court_client.base import CallMetadata

    pairs = (("x-request-id", "r1"), ("authorization", "Bearer t"))
    md = CallMetadata(*pairs)
    assert isinstance(md, grpc.aio.Metadata) and tuple(md) == pairs and len(md) == 2 and md
    assert md == grpc.aio.Metadata(*pairs) and md["authorization"] == "Bearer t"
    md.add("x-extra", "1")
    md["x-request-id"] = "r2"
    assert tuple(md) == (("x-request-id", "r2"), ("authorization", "Bearer t"), ("x-extra", "1"))
    assert len(md) == 3 and "x-extra" in md
    client = ServiceClient.__new__(ServiceClient)
    client.token = "tok"
    assert tuple(client.metadata("r3")) == (("x-request-id", "r3"), ("authorization", "Bearer tok"))
