"""TLS: with certificates (self-signed, made at test time) every gRPC server speaks TLS only and the
services call each other over verified TLS; NATS requires TLS. A plaintext client is refused by each.
Reflection is off outside dev unless COURT_REFLECTION turns it on."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import nats
import pytest
from court_bot.app import BotApp
from court_bot.config import BotConfig
from court_kit.natsauth import generate_passwords
from court_kit.settings import Settings
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2_grpc

from tests.fixtures.certs import Certs, make_certs
from tests.ranking.stack import Stack
from tests.rules.helpers import play_out

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def tls_stack(tmp_path: Path) -> AsyncIterator[tuple[Stack, BotApp, Certs]]:
    certs = make_certs(tmp_path / "certs")
    nats_tls = f'tls {{\n  cert_file: "{certs.cert}"\n  key_file: "{certs.key}"\n}}\n'
    common = {
        "tls_cert": str(certs.cert),
        "tls_key": str(certs.key),
        "tls_ca": str(certs.ca),
        "nats_ca": str(certs.ca),
    }
    stack = Stack(
        tmp_path,
        f"sqlite:///{tmp_path / 'x.db'}",
        nats_users=generate_passwords(),
        nats_config=nats_tls,
        common=common,
    )
    bot = None
    try:
        await stack.start()
        bot = await BotApp.start(
            stack.settings("bot", rules_addr=stack.rules.address),
            config=BotConfig(decision_threads=0, consume=False),
        )
        yield stack, bot, certs
    finally:
        if bot is not None:
            await bot.stop(0)
        await stack.close()


async def test_services_speak_tls_to_clients_and_each_other(tls_stack: tuple[Stack, BotApp, Certs]) -> None:
    stack, bot, _ = tls_stack
    assert stack.nats.url.startswith("tls://")
    # lobby -> ranking (accounts, antes) and lobby -> rules (the game) over TLS
    ann, bob = await stack.player("Ann"), await stack.player("Bob")
    lobby = await ann.create_lobby("queens_court", {"players": 2}, online=True, ante=50)
    await bob.join(lobby.lobby_id)
    game_id = (await ann.start(lobby.lobby_id)).game_id
    assert await ann.balance() == 950
    # bot -> rules over TLS (Suggest reads the caller's view from the rules service)
    hinted = 0
    async with stack.channel(bot.address) as ch:
        for p in (ann, bob):
            view = await p.rules.get_view(game_id)
            if view.your_seat in view.to_act:
                hint = await bot_pb2_grpc.BotServiceStub(ch).Suggest(
                    bot_pb2.SuggestRequest(game_id=game_id), metadata=p.meta, timeout=30
                )
                hinted += hint.HasField("action")
    assert hinted >= 1
    # rules -> NATS (TLS) and ranking <- NATS (TLS): the game settles
    final = await play_out({0: ann.rules, 1: bob.rules}, game_id, random.Random(5))
    assert final.finished
    await stack.wait_ranked(lambda st: st.game_status(game_id) == "finished", "the game to be settled")


async def test_plaintext_clients_are_refused(tls_stack: tuple[Stack, BotApp, Certs]) -> None:
    stack, bot, _ = tls_stack
    for address in (stack.rules.address, stack.lobby.address, stack.ranking.address, bot.address):
        async with grpc.aio.insecure_channel(address) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE, address
        async with stack.channel(address) as ch:  # the same call over TLS works
            reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    # NATS: a client that speaks plaintext gets no PONG; one that does not trust the CA is refused
    port = int(stack.nats.url.rsplit(":", 1)[1])

    def plaintext_nats() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            info = s.recv(4096)
            assert b'"tls_required":true' in info
            s.sendall(b'CONNECT {"verbose":false,"user":"rules","pass":"x"}\r\nPING\r\n')
            got = b""
            try:
                while chunk := s.recv(4096):
                    got += chunk
            except (TimeoutError, ConnectionResetError):
                pass
            return got

    assert b"PONG" not in await asyncio.to_thread(plaintext_nats)
    with pytest.raises(Exception) as exc:  # noqa: B017 - the TLS failure surfaces as various types
        await nats.connect(
            stack.nats.url.replace("tls://", "nats://"),
            user="rules",
            password=stack.nats_users["rules"],
            allow_reconnect=False,
            connect_timeout=3,
        )
    assert exc.value is not None


async def test_reflection_is_off_outside_dev_unless_enabled(tls_stack: tuple[Stack, BotApp, Certs]) -> None:
    stack, _, _ = tls_stack
    assert Settings.load(
        "rules", {"COURT_ENV": "dev", "COURT_STATE_DIR": str(stack.tmp_path / "d")}
    ).reflection
    assert not stack.rules.settings.reflection
    async with stack.channel(stack.rules.address) as ch:
        call = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo()
        # the server refuses the unknown method on the call's headers alone, and the call's status
        # says so. No request is written: a write racing that refusal can fail on the client's own
        # side ("Internal error from Core", INTERNAL: seen in CI), whatever the server answered
        assert await call.code() == grpc.StatusCode.UNIMPLEMENTED
    on = Settings.load("rules", {"COURT_REFLECTION": "on", "COURT_TOKEN_KEYS": "x"})
    assert on.reflection and not on.is_dev


async def test_a_plaintext_health_port_serves_health_and_nothing_else(
    tls_stack: tuple[Stack, BotApp, Certs],
) -> None:
    """For the kubelet's gRPC probes (no TLS): COURT_HEALTH_LISTEN answers health only."""
    from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc
    from court_rules.app import RulesApp

    from tests.fixtures.nats import free_port

    stack, _, _ = tls_stack
    port = free_port()
    app = await RulesApp.start(stack.settings("rules", health_listen=f"127.0.0.1:{port}"))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await rules_pb2_grpc.RulesServiceStub(ch).GetView(
                    rules_pb2.GetViewRequest(game_id="g"), timeout=5
                )
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await app.stop(0)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the health port stops with the service"
