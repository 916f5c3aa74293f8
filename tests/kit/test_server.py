"""court_kit's gRPC bootstrap: the edge interceptor's auth and error mapping, health, reflection,
metrics, and a real ``court-rules`` process shutting down gracefully on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from court_games.core import IllegalAction, InvalidAction, InvalidOptions, NotYourTurn
from court_kit import errors
from court_kit import logging as klog
from court_kit.keys import Signer, issue_token
from court_kit.metrics import GRPC, start_metrics_server
from court_kit.server import EdgeInterceptor, add_health_and_reflection, create_server, current_identity
from court_kit.settings import ConfigError
from court_kit.tokens import Verifier
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.fixtures import keys
from tests.fixtures.nats import free_port, make_nats

RAISES: dict[str, BaseException] = {
    "g-illegal": IllegalAction({"type": "play"}, "you do not hold 5H"),
    "g-turn": NotYourTurn({"type": "play"}, "it is seat 2's turn"),
    "g-malformed": InvalidAction("unknown card 'ZZ'"),
    "g-options": InvalidOptions("option 'players' must be an integer from 2 to 4"),
    "g-missing": errors.NotFound("no game 'g-missing'"),
    "g-race": errors.Aborted("another move reached this game first"),
    "g-seat": errors.PermissionDenied("seat 0 is not yours"),
    "g-down": errors.Unavailable("the game store is unavailable"),
    "g-bug": RuntimeError("secret internal detail"),
}


class Probe(rules_pb2_grpc.RulesServiceServicer):
    def __init__(self) -> None:
        self.stream_ended = asyncio.Event()  # a WatchGame of g-forever ended

    async def GetView(self, request: Any, context: Any) -> rules_pb2.GameView:
        if request.game_id in RAISES:
            raise RAISES[request.game_id]
        ident = current_identity()
        if request.game_id.startswith("g-log"):
            # what a log line written now carries, then what this handler binds (as the servicer does)
            context_now = klog.bound()
            klog.bind(game_id=request.game_id)
            return rules_pb2.GameView(
                game_id=request.game_id, seats=[f"{k}={v}" for k, v in context_now.items()]
            )
        return rules_pb2.GameView(game_id=request.game_id, seats=[ident.sub, ident.role])

    async def GetHistory(self, request: Any, context: Any) -> rules_pb2.GetHistoryResponse:
        """A public method (``PUBLIC``): says who called, or ``anonymous``."""
        try:
            who = current_identity().sub
        except errors.Unauthenticated:
            who = "anonymous"
        return rules_pb2.GetHistoryResponse(game_id=request.game_id, created_by=who)

    async def WatchGame(self, request: Any, context: Any) -> Any:
        yield rules_pb2.GameUpdate(seq=1)
        if request.game_id == "g-forever":
            try:
                await asyncio.Event().wait()  # until the caller cancels
            finally:
                self.stream_ended.set()
        raise RAISES[request.game_id]


PUBLIC = "/court.rules.v1.RulesService/GetHistory"


@pytest.fixture
async def probe_server() -> Any:
    """``Probe`` behind the edge, installed as ``start_server`` installs it for every service."""
    server, port = create_server(
        "127.0.0.1:0", edge=EdgeInterceptor(Verifier(keys.KEY_SET, "court-rules"), public_methods=[PUBLIC])
    )
    probe = Probe()
    rules_pb2_grpc.add_RulesServiceServicer_to_server(probe, server)
    health = await add_health_and_reflection(server, ["court.rules.v1.RulesService"])
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield {"port": port, "channel": channel, "health": health, "probe": probe}
    await channel.close()
    await server.stop(0)


def _md(sub: str = "alice", role: str = "player") -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {keys.token(sub, role)}"), ("x-request-id", "req-42"))


async def test_errors_map_to_status_codes_once(probe_server: Any) -> None:
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    expected = {
        "g-illegal": grpc.StatusCode.FAILED_PRECONDITION,
        "g-turn": grpc.StatusCode.FAILED_PRECONDITION,
        "g-malformed": grpc.StatusCode.INVALID_ARGUMENT,
        "g-options": grpc.StatusCode.INVALID_ARGUMENT,
        "g-missing": grpc.StatusCode.NOT_FOUND,
        "g-race": grpc.StatusCode.ABORTED,
        "g-seat": grpc.StatusCode.PERMISSION_DENIED,
        "g-down": grpc.StatusCode.UNAVAILABLE,
        "g-bug": grpc.StatusCode.INTERNAL,
    }
    for gid, code in expected.items():
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetView(rules_pb2.GetViewRequest(game_id=gid), metadata=_md())
        assert info.value.code() == code, gid
        if gid == "g-bug":
            assert "secret" not in info.value.details() and "request id" in info.value.details()
        elif gid in ("g-illegal", "g-turn"):
            assert info.value.details() == RAISES[gid].reason
        else:
            assert info.value.details() == str(RAISES[gid])
    ok = await stub.GetView(rules_pb2.GetViewRequest(game_id="g-fine"), metadata=_md("bob", "bot"))
    assert list(ok.seats) == ["bob", "bot"], "the handler sees the verified caller"
    # a streaming call maps its error after the first item
    items = []
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for u in stub.WatchGame(rules_pb2.WatchGameRequest(game_id="g-seat"), metadata=_md()):
            items.append(u.seq)
    assert items == [1] and info.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_each_call_logs_with_its_own_request_id_caller_and_nothing_of_earlier_calls(
    probe_server: Any,
) -> None:
    """The edge binds the request id, method and verified caller at the start of every call; what
    a handler bound for an earlier call (its game id) is gone."""
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    method = "/court.rules.v1.RulesService/GetView"
    first = await stub.GetView(rules_pb2.GetViewRequest(game_id="g-log-1"), metadata=_md("alice", "player"))
    assert dict(x.split("=", 1) for x in first.seats) == {
        "request_id": "req-42",
        "method": method,
        "sub": "alice",
        "role": "player",
    }
    md = (("authorization", f"Bearer {keys.token('bob', 'bot')}"), ("x-request-id", "req-43"))
    second = await stub.GetView(rules_pb2.GetViewRequest(game_id="g-log-2"), metadata=md)
    assert dict(x.split("=", 1) for x in second.seats) == {
        "request_id": "req-43",
        "method": method,
        "sub": "bob",
        "role": "bot",
    }
    anonymous = await stub.GetView(rules_pb2.GetViewRequest(game_id="g-log-3"), metadata=_md()[:1])
    rid = dict(x.split("=", 1) for x in anonymous.seats)["request_id"]
    assert len(rid) == 32 and rid not in ("req-42", "req-43"), (
        "a call without x-request-id gets an id of its own"
    )


async def test_concurrent_calls_of_different_callers_each_see_their_own_caller_and_request_id(
    probe_server: Any,
) -> None:
    """Many calls in flight at once, from two callers on two connections: each handler sees the
    caller and request id its own call sent (the edge reads a call's metadata where grpc looked its
    handler up, in the call's own task: never another call's)."""
    target, own = f"127.0.0.1:{probe_server['port']}", [("grpc.use_local_subchannel_pool", 1)]
    async with (
        grpc.aio.insecure_channel(target, options=own) as ch_a,
        grpc.aio.insecure_channel(target, options=own) as ch_b,
    ):
        stubs = [rules_pb2_grpc.RulesServiceStub(ch) for ch in (ch_a, ch_b)]
        who = [("alice", "player"), ("bob", "bot")]
        tokens = [keys.token(*w) for w in who]

        async def one(i: int) -> None:
            md = (("authorization", f"Bearer {tokens[i % 2]}"), ("x-request-id", f"req-{i}"))
            reply = await stubs[i % 2].GetView(rules_pb2.GetViewRequest(game_id=f"g-log-{i}"), metadata=md)
            seen = dict(x.split("=", 1) for x in reply.seats)
            assert (seen["request_id"], seen["sub"], seen["role"]) == (f"req-{i}", *who[i % 2])

        await asyncio.gather(*(one(i) for i in range(160)))  # 80 a connection (at most 100 streams)


async def test_calls_are_counted_by_method_and_code(probe_server: Any) -> None:
    """court_grpc_requests_total by code, the handling-time histogram, and in-flight back to 0."""
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    stats = GRPC.method("/court.rules.v1.RulesService/GetView")
    codes, count = dict(stats.codes), stats.count
    await stub.GetView(rules_pb2.GetViewRequest(game_id="g-fine"), metadata=_md())
    for gid in ("g-missing", "g-bug"):
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetView(rules_pb2.GetViewRequest(game_id=gid), metadata=_md())
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.GetView(
            rules_pb2.GetViewRequest(game_id="g-fine"), metadata=(("authorization", "Bearer nope"),)
        )
    # a failed call is counted when its handler resumes after sending the status, which can be
    # just after the client has the error (seen under load): wait for the fourth call's count
    for _ in range(500):
        if stats.count - count >= 4:
            break
        await asyncio.sleep(0.01)
    grown = {c: n - codes.get(c, 0) for c, n in stats.codes.items() if n != codes.get(c, 0)}
    assert grown == {"OK": 1, "NOT_FOUND": 1, "INTERNAL": 1, "UNAUTHENTICATED": 1}
    assert stats.count - count == 4 and stats.in_flight == 0
    assert sum(stats.buckets) == stats.count
    family = {m.name: m for m in GRPC.collect()}
    samples = [
        s
        for s in family["court_grpc_request_seconds"].samples
        if s.labels.get("method") == "/court.rules.v1.RulesService/GetView"
    ]
    assert [s.value for s in samples if s.name.endswith("_count")] == [stats.count]
    assert [s.value for s in samples if s.labels.get("le") == "+Inf"] == [stats.count], (
        "buckets are cumulative"
    )


async def test_missing_or_bad_tokens_are_unauthenticated(probe_server: Any) -> None:
    """A caller without a good token gets UNAUTHENTICATED and a message saying what to fix; the
    handler never runs (nothing is counted for it but the refusal)."""
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    for md, details in [
        ((), "missing bearer token: send metadata 'authorization: Bearer <token>'"),
        ((("authorization", "Bearer nope"),), "malformed token: expected a signed JWT"),
        (
            (("authorization", issue_token(Signer.generate("court-lobby"), "a", "player")),),
            "token key id is unknown",
        ),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetView(rules_pb2.GetViewRequest(game_id="g-fine"), metadata=md)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert info.value.details().startswith(details), info.value.details()


async def test_a_public_method_serves_a_caller_without_a_token_but_checks_one_it_is_sent(
    probe_server: Any,
) -> None:
    """``public_methods``: no token, the handler runs for an anonymous caller; a good token, for that
    caller; a bad token is still UNAUTHENTICATED (a public method is no way around verification)."""
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    req = rules_pb2.GetHistoryRequest(game_id="g-1")
    assert (await stub.GetHistory(req)).created_by == "anonymous"
    assert (await stub.GetHistory(req, metadata=(("x-request-id", "r1"),))).created_by == "anonymous"
    assert (await stub.GetHistory(req, metadata=_md("carol"))).created_by == "carol"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetHistory(req, metadata=(("authorization", "Bearer nope"),))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert info.value.details() == "malformed token: expected a signed JWT"


async def test_a_caller_cancelling_a_stream_ends_the_handler_and_is_counted_cancelled(
    probe_server: Any,
) -> None:
    """The caller cancels a server stream after its first message: it sees CANCELLED, the handler's
    generator is closed (its ``finally`` runs), and the stream is counted CANCELLED with none left
    in flight."""
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    stats = GRPC.method("/court.rules.v1.RulesService/WatchGame")
    cancelled = stats.codes.get("CANCELLED", 0)
    call = stub.WatchGame(rules_pb2.WatchGameRequest(game_id="g-forever"), metadata=_md())
    assert (await call.read()).seq == 1
    assert call.cancel()
    assert await call.code() == grpc.StatusCode.CANCELLED
    await asyncio.wait_for(probe_server["probe"].stream_ended.wait(), 5)
    for _ in range(500):  # counted as the handler unwinds, just after its finally
        if stats.codes.get("CANCELLED", 0) > cancelled:
            break
        await asyncio.sleep(0.01)
    assert stats.codes.get("CANCELLED", 0) == cancelled + 1 and stats.in_flight == 0


async def test_health_and_reflection_need_no_token(probe_server: Any) -> None:
    ch = probe_server["channel"]
    health = health_pb2_grpc.HealthStub(ch)
    for name in ("", "court.rules.v1.RulesService"):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(ch)
    call = refl.ServerReflectionInfo()
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    reply = await call.read()
    await call.done_writing()
    names = {s.name for s in reply.list_services_response.service}
    assert {"court.rules.v1.RulesService", "grpc.health.v1.Health"} <= names


async def test_methods_are_served_without_a_pending_task_each(probe_server: Any) -> None:
    """A started server waits for calls on one generic request task, not one per registered
    method (court_kit.server._generic_handlers_only: grpcio waits on all of those again after
    every call), and every kind of call, the service's own, health and reflection, is still served
    (the other tests here call each)."""
    per_method = [t for t in asyncio.all_tasks() if "_request_registered_call" in repr(t)]
    assert per_method == [], f"{len(per_method)} per-method request tasks: {per_method[:2]}"
    reply = await rules_pb2_grpc.RulesServiceStub(probe_server["channel"]).GetView(
        rules_pb2.GetViewRequest(game_id="g-1"), metadata=_md()
    )
    assert list(reply.seats) == ["alice", "player"]


async def test_create_server_refuses_a_taken_port(probe_server: Any) -> None:
    with pytest.raises(ConfigError, match="cannot listen"):
        create_server(f"127.0.0.1:{probe_server['port']}")


async def test_metrics_endpoint_counts_calls(probe_server: Any) -> None:
    metrics = start_metrics_server("127.0.0.1:0")
    assert metrics is not None
    try:
        stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
        await stub.GetView(rules_pb2.GetViewRequest(game_id="g-fine"), metadata=_md())
        body = await asyncio.to_thread(
            lambda: (
                urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=5).read().decode()
            )
        )
        assert 'court_grpc_requests_total{code="OK",method="/court.rules.v1.RulesService/GetView"}' in body
        assert "court_grpc_request_seconds_bucket" in body
    finally:
        metrics.close()
    assert start_metrics_server("") is None, "an empty COURT_METRICS_LISTEN disables the endpoint"


@pytest.mark.slow
async def test_court_rules_process_serves_and_shuts_down_gracefully(tmp_path: Path) -> None:
    nats = make_nats(tmp_path / "nats")
    nats.start()
    port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "COURT_NATS_URL": nats.url,
        "COURT_LISTEN": f"127.0.0.1:{port}",
        "COURT_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
        **keys.env("rules"),
        "COURT_LOG_FORMAT": "json",
        "COURT_SHUTDOWN_GRACE": "5",
        "COURT_STATE_DIR": str(tmp_path / "state"),
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "court-rules")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            reply = await health.Check(health_pb2.HealthCheckRequest(), wait_for_ready=True, timeout=30)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = rules_pb2_grpc.RulesServiceStub(ch)
            created = await stub.CreateGame(
                rules_pb2.CreateGameRequest(request_id="c1", game="queens_court", seats=["a", "b"]),
                metadata=_md("lobby", "service"),
                timeout=30,
            )
            assert created.game_id
            # a health watcher sees NOT_SERVING as soon as the shutdown starts
            watch = health.Watch(health_pb2.HealthCheckRequest(service="court.rules.v1.RulesService"))
            first = await watch.read()
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            proc.send_signal(signal.SIGTERM)
            second = await asyncio.wait_for(watch.read(), 10)
            assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()
        rc = await asyncio.to_thread(proc.wait, 30)
        assert rc == 0
        logs = [json.loads(x) for x in proc.stderr.read().splitlines() if x.startswith("{")]
        events = [x["event"] for x in logs]
        assert "rules service listening" in events and "shutting down" in events and events[-1] == "stopped"
        assert all(x["service"] == "rules" and "timestamp" in x and "level" in x for x in logs)
        created_line = next(x for x in logs if x["event"] == "game created")
        assert created_line["game_id"] == created.game_id and created_line["request_id"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        nats.stop()


def test_tune_gc_freezes_start_up_and_raises_the_young_threshold() -> None:
    """A service's cycle collector after start-up (court_kit.server.tune_gc, COURT_GC_THRESHOLD):
    start-up's objects frozen out of every later collection, a young collection every N new
    containers; 0 leaves Python's defaults (run in a child: the test process's collector is kept)."""
    code = (
        "import gc, sys\n"
        "from court_kit.server import tune_gc\n"
        "default = gc.get_threshold()\n"
        "tune_gc(int(sys.argv[1]))\n"
        "print(gc.get_threshold()[0], gc.get_threshold()[1:] == default[1:], gc.get_freeze_count() > 0)\n"
    )
    run = [sys.executable, "-c", code]
    assert subprocess.run([*run, "5000"], capture_output=True, text=True, check=True).stdout.split() == [
        "5000",
        "True",
        "True",
    ]
    assert subprocess.run([*run, "0"], capture_output=True, text=True, check=True).stdout.split() == [
        "700",
        "True",
        "False",
    ]


async def test_the_edge_reads_metadata_looked_up_in_another_task_never() -> None:
    """The edge takes a call's metadata from grpc's handler lookup only in the task that lookup ran
    in; a task that inherited it (one the handler started, say) reads its own call's metadata from
    the context instead, and verifies that caller."""
    from court_kit import server as ks

    edge = EdgeInterceptor(Verifier(keys.KEY_SET, "court-rules"))

    class Context:
        def __init__(self, md: tuple[tuple[str, str], ...]) -> None:
            self.metadata = md

        def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
            return self.metadata

    alice, bob = (
        _md("alice"),
        (("authorization", f"Bearer {keys.token('bob', 'bot')}"), ("x-request-id", "b")),
    )

    async def child() -> tuple[str, str]:
        edge._enter(Context(bob), "/court.rules.v1.RulesService/GetView", False)
        return current_identity().sub, ks.current_request_id()

    ks._LOOKED_UP.set((id(asyncio.current_task()), alice))  # as _BehindEdge.service sets it
    edge._enter(Context(bob), "/court.rules.v1.RulesService/GetView", False)
    assert (current_identity().sub, ks.current_request_id()) == ("alice", "req-42"), "this task's lookup"
    assert await asyncio.create_task(child()) == ("bob", "b"), "inherited, not its own: the context's"


async def test_the_edge_looks_up_the_running_loop_once_not_per_call(
    probe_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edge asks for a call's task twice (grpc's handler lookup, then the handler's start) and
    looks the running loop up once for all calls (Python 3.11: a ``getpid`` system call per
    lookup), while each call still sees its own caller (the concurrent test above checks that)."""
    import sys

    real = asyncio.current_task
    lookups: list[bool] = []  # per current_task call from court_kit.server: was the loop given

    def counting(loop: Any = None) -> Any:
        if sys._getframe(1).f_code.co_filename.endswith("court_kit/server.py"):
            lookups.append(loop is not None)
        return real(loop)

    monkeypatch.setattr(asyncio, "current_task", counting)
    stub = rules_pb2_grpc.RulesServiceStub(probe_server["channel"])
    for i in range(20):
        reply = await stub.GetView(rules_pb2.GetViewRequest(game_id=f"g-{i}"), metadata=_md())
        assert list(reply.seats) == ["alice", "player"]
    assert len(lookups) >= 40, "the edge asks for each call's task twice"
    assert lookups.count(False) <= 1, "the running loop looked up once, then kept"
