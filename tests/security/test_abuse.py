"""Abuse limits on real servers: sign-in and sign-up rate limits per peer address and per name
(RESOURCE_EXHAUSTED before any password hashing, nothing created), at most COURT_MAX_STREAMS calls
at once per connection, and no message over COURT_MAX_MESSAGE_BYTES. The throughput with and
without the limits is measured by ``make bench ONLY=logins`` (tests/bench/logins.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from court_kit.ratelimit import RateLimiter, peer_host
from court_lobby.app import LobbyApp
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
from court_rules.app import RulesApp

from tests.fixtures import keys
from tests.ranking.stack import Stack

pytestmark = [pytest.mark.integration]

C = grpc.StatusCode
LIMITS = {
    "COURT_LOGIN_RATE": "0.01",
    "COURT_LOGIN_BURST": "4",
    "COURT_LOGIN_NAME_RATE": "0.01",
    "COURT_LOGIN_NAME_BURST": "2",
    "COURT_SIGNUP_RATE": "0.01",
    "COURT_SIGNUP_BURST": "3",
}


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[tuple[Stack, lobby_pb2_grpc.LobbyServiceStub]]:
    stack = Stack(tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    lobby = None
    try:
        await stack.start()
        lobby = await LobbyApp.start(stack.settings("lobby", extra=LIMITS))
        async with grpc.aio.insecure_channel(lobby.address) as ch:
            yield stack, lobby_pb2_grpc.LobbyServiceStub(ch)
    finally:
        if lobby is not None:
            await lobby.stop(0)
        await stack.close()


async def code_of(call) -> tuple[grpc.StatusCode, str]:
    try:
        await call
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or ""
    return C.OK, ""


def accounts(stack: Stack) -> int:
    from court_lobby.models import Account
    from sqlalchemy import func
    from sqlmodel import Session, select

    with Session(stack.lobby.engine) as s:
        return s.exec(select(func.count()).select_from(Account)).one()


async def test_signups_are_limited_per_address_and_a_refused_one_creates_nothing(limited) -> None:
    stack, stub = limited
    got = [
        await code_of(stub.CreateAccount(lpb.CreateAccountRequest(name=f"Ann{i}", password="correct horse")))
        for i in range(2)
    ]
    got += [await code_of(stub.CreateGuest(lpb.CreateGuestRequest()))]
    assert [c for c, _ in got] == [C.OK] * 3
    before = accounts(stack)
    code, msg = await code_of(
        stub.CreateAccount(lpb.CreateAccountRequest(name="Ann9", password="correct horse"))
    )
    assert code == C.RESOURCE_EXHAUSTED and "try again in" in msg and "address" in msg
    code, _ = await code_of(stub.CreateGuest(lpb.CreateGuestRequest()))
    assert code == C.RESOURCE_EXHAUSTED
    assert accounts(stack) == before, "a refused sign-up creates nothing"
    # another lobby replica (or the unlimited one) is a separate budget: the limit is per replica
    ok = await lobby_pb2_grpc.LobbyServiceStub(stack.lobby_channel).CreateGuest(lpb.CreateGuestRequest())
    assert ok.token


async def test_logins_are_limited_per_name_and_per_address(limited) -> None:
    stack, stub = limited
    await stack.player("Bea", "correct horse battery")  # made on the unlimited replica
    # per name: two tries for Bea, then refused even with the right password
    assert (await code_of(stub.Login(lpb.LoginRequest(name="Bea", password="wrong password"))))[
        0
    ] == C.UNAUTHENTICATED
    assert (await code_of(stub.Login(lpb.LoginRequest(name="bea", password="correct horse battery"))))[
        0
    ] == C.OK
    code, msg = await code_of(stub.Login(lpb.LoginRequest(name="BEA", password="correct horse battery")))
    assert code == C.RESOURCE_EXHAUSTED and "this account" in msg
    # per address: the address's budget (4, three of them spent above) goes on any name
    assert (await code_of(stub.Login(lpb.LoginRequest(name="x1", password="whatever1"))))[
        0
    ] == C.UNAUTHENTICATED
    code, msg = await code_of(stub.Login(lpb.LoginRequest(name="x2", password="whatever1")))
    assert code == C.RESOURCE_EXHAUSTED and "your address" in msg


def test_rate_limiter_refills_and_forgets_bounded() -> None:
    now = [0.0]
    rl = RateLimiter(2.0, 3, max_keys=2, clock=lambda: now[0])
    assert [rl.take("a") for _ in range(3)] == [0, 0, 0] and rl.take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert rl.take("a") == 0
    rl.take("b"), rl.take("c")
    assert len(rl._buckets) == 2, "memory stays bounded however many keys come"
    assert peer_host("ipv4:10.1.2.3:5555") == "10.1.2.3" and peer_host("ipv6:[::1]:5555") == "::1"


async def test_streams_per_connection_and_message_size_are_bounded(tmp_path: Path) -> None:
    stack = Stack(tmp_path, "sqlite://")
    stack.nats.start()
    rules = await RulesApp.start(stack.settings("rules", max_streams=2, max_message_bytes=64 * 1024))
    try:
        md = (("authorization", f"Bearer {keys.token('service:lobby', 'service')}"),)
        admin = (("authorization", f"Bearer {keys.token('root', 'admin')}"),)
        own = [("grpc.use_local_subchannel_pool", 1)]  # two channels, two connections (no shared subchannel)
        async with (
            grpc.aio.insecure_channel(rules.address, options=own) as ch,
            grpc.aio.insecure_channel(rules.address, options=own) as other,
        ):
            stub = rules_pb2_grpc.RulesServiceStub(ch)
            created = await stub.CreateGame(
                rules_pb2.CreateGameRequest(request_id="r", game="queens_court", seats=["a", "b"]),
                metadata=md,
            )
            watches = [
                stub.WatchGame(rules_pb2.WatchGameRequest(game_id=created.game_id), metadata=admin)
                for _ in range(2)
            ]
            for w in watches:
                await w.read()  # both streams open and holding their snapshot
            code, _ = await code_of(
                stub.GetView(rules_pb2.GetViewRequest(game_id=created.game_id), metadata=admin, timeout=1.5)
            )
            assert code == C.DEADLINE_EXCEEDED, (
                "a third concurrent call on the connection waits for a free stream"
            )
            view = await rules_pb2_grpc.RulesServiceStub(other).GetView(
                rules_pb2.GetViewRequest(game_id=created.game_id), metadata=admin, timeout=10
            )
            assert view.game_id == created.game_id, "other connections are not affected"
            for w in watches:
                w.cancel()
            await asyncio.sleep(0)
            # a request over the size limit is refused before any handler sees it
            big = rules_pb2.CreateGameRequest(
                request_id="x" * (70 * 1024), game="queens_court", seats=["a", "b"]
            )
            code, _ = await code_of(
                rules_pb2_grpc.RulesServiceStub(other).CreateGame(big, metadata=md, timeout=10)
            )
            assert code == C.RESOURCE_EXHAUSTED
    finally:
        await rules.stop(0)
        stack.nats.stop()
