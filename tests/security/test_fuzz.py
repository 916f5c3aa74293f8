"""Hypothesis fuzz of every RPC's request message, through the real servers (rules, lobby, ranking
and bot on a real nats-server and SQLite), as every kind of caller (anonymous, a player, the
lobby's service identity, the bot identity, an admin).

What must hold for every call:
* no crash: every server still answers health afterwards;
* the status is OK or one of the documented refusals (``REFUSALS``): never INTERNAL, UNKNOWN,
  UNAVAILABLE or DEADLINE_EXCEEDED (an error the client developer cannot act on);
* a refused call changes nothing: the row counts of every lobby and ranking table and the message
  counts of every JetStream stream are the same before and after it.

Bounded: ``MAX_EXAMPLES`` requests per RPC (env ``COURT_FUZZ_EXAMPLES``, default 6).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import nats.js.errors
import pytest
from court_bot.app import BotApp
from court_bot.config import BotConfig
from court_proto.court.bot.v1 import bot_pb2
from court_proto.court.lobby.v1 import lobby_pb2
from court_proto.court.ranking.v1 import ranking_pb2
from court_proto.court.rules.v1 import rules_pb2
from court_rules.projector import DURABLE as PROJECTOR
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor as F
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, text

from tests.fixtures import keys
from tests.fixtures.nats import consumer_drained
from tests.ranking.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAX_EXAMPLES = int(os.environ.get("COURT_FUZZ_EXAMPLES", "6"))
C = grpc.StatusCode
REFUSALS = {
    C.INVALID_ARGUMENT,
    C.NOT_FOUND,
    C.PERMISSION_DENIED,
    C.FAILED_PRECONDITION,
    C.UNAUTHENTICATED,
    C.ALREADY_EXISTS,
    C.ABORTED,
    C.RESOURCE_EXHAUSTED,
    C.OUT_OF_RANGE,
}
SERVICES = [
    rules_pb2.DESCRIPTOR.services_by_name["RulesService"],
    lobby_pb2.DESCRIPTOR.services_by_name["LobbyService"],
    ranking_pb2.DESCRIPTOR.services_by_name["RankingService"],
    bot_pb2.DESCRIPTOR.services_by_name["BotService"],
]
METHODS = [(svc, m) for svc in SERVICES for m in svc.methods]
STRINGS = st.one_of(
    st.text(max_size=24),
    st.sampled_from(
        [
            "",
            "g" + "0" * 24,
            "bot:random",
            "bot:expert",
            "queens_court",
            "hearts",
            "the_court",
            "court_wars",
            "me",
            "x" * 5000,
            "\x00",
            "../../etc/passwd",
            "٣",
            "service:lobby",
            "p-ann",
            "Ann",
            "correct horse battery",
        ]
    ),
)
INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}
JSON = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def scalar(field: Any) -> st.SearchStrategy[Any]:
    t = field.type
    if t == F.TYPE_STRING:
        return STRINGS
    if t == F.TYPE_BYTES:
        return st.binary(max_size=24)
    if t == F.TYPE_BOOL:
        return st.booleans()
    if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32 if t == F.TYPE_FLOAT else 64)
    if t == F.TYPE_ENUM:
        return st.integers(-2, 12)  # unknown values too (open enums)
    lo, hi = INTS[t]
    return st.one_of(st.integers(lo, hi), st.sampled_from([0, 1, -1 if lo < 0 else 2, 7, hi]))


@st.composite
def message(draw: Any, desc: Any, depth: int = 0) -> Any:
    msg = message_factory.GetMessageClass(desc)()
    for field in desc.fields:
        if not draw(st.booleans()):
            continue
        if field.type == F.TYPE_MESSAGE:
            if depth >= 3 or field.message_type.full_name == "google.protobuf.Value":
                continue
            if field.is_repeated:
                if field.message_type.GetOptions().map_entry:
                    continue
                for _ in range(draw(st.integers(0, 2))):
                    getattr(msg, field.name).add().CopyFrom(draw(message(field.message_type, depth + 1)))
            else:
                getattr(msg, field.name).CopyFrom(draw(message(field.message_type, depth + 1)))
        elif field.is_repeated:
            getattr(msg, field.name).extend(draw(st.lists(scalar(field), max_size=3)))
        else:
            try:
                setattr(msg, field.name, draw(scalar(field)))
            except ValueError:  # a float out of a float32's range, say: leave it unset
                pass
    return msg


class Loop:
    """The stack runs on an event loop in its own thread; hypothesis drives calls from the test's."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    loop = Loop()
    stack = Stack(Path(tmp), f"sqlite:///{Path(tmp) / 'x.db'}")

    async def up() -> dict[str, Any]:
        await stack.start()
        bot = await BotApp.start(
            stack.settings("bot", rules_addr=stack.rules.address),
            config=BotConfig(consume=False, decision_threads=0),
        )
        ann = await stack.player("Ann")
        host = await stack.player("Host")
        lobby = await host.create_lobby("queens_court", {"players": 2}, online=False)
        await ann.join(lobby.lobby_id)
        started = await host.start(lobby.lobby_id)
        channels = {
            svc.full_name: grpc.aio.insecure_channel(addr)
            for svc, addr in zip(
                SERVICES,
                (stack.rules.address, stack.lobby.address, stack.ranking.address, bot.address),
                strict=True,
            )
        }
        return {"bot": bot, "ann": ann, "game_id": started.game_id, "channels": channels}

    ctx = loop.run(up())
    ctx.update(stack=stack, loop=loop)
    ctx["tokens"] = {
        "none": None,
        "player": ctx["ann"].token,
        "service": keys.token("service:lobby", "service"),
        "bot": keys.token("bot-service", "bot"),
        "admin": keys.token("root", "admin"),
    }
    try:
        yield ctx
    finally:

        async def down() -> None:
            for ch in ctx["channels"].values():
                await ch.close()
            await ctx["bot"].stop(0)
            await stack.close()

        loop.run(down())
        loop.close()


async def state(stack: Stack) -> dict[str, int]:
    """Row counts of every lobby and ranking table, message counts of every stream."""
    out: dict[str, int] = {}
    for name, engine in (("lobby", stack.lobby.engine), ("ranking", stack.ranking.engine)):

        def count(engine: Any = engine) -> dict[str, int]:
            with engine.connect() as conn:
                return {
                    t: conn.execute(text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one()
                    for t in inspect(engine).get_table_names()
                    if t != "alembic_version"
                }

        out.update({f"{name}.{t}": n for t, n in (await asyncio.to_thread(count)).items()})
    js = stack.rules.store.js
    for stream in await js.streams_info():
        out[f"stream.{stream.config.name}"] = stream.state.messages
    return out


async def projected(stack: Stack) -> None:
    """Until the projector has handled every record appended so far (its durable on each game-log
    stream drained). An accepted call's public record is published after the call returns, so
    without this wait it could land during the next call and be counted as that call's change."""
    js = stack.rules.store.js
    for stream in await js.streams_info():
        name = stream.config.name
        if not name.startswith("COURT_GAMES_") or name == "COURT_GAMES_ARCHIVE":
            continue
        try:
            await consumer_drained(js, name, PROJECTOR)
        except nats.js.errors.NotFoundError:
            continue


async def call(ctx: dict[str, Any], svc: Any, method: Any, request: Any, who: str) -> tuple[C, dict, dict]:
    channel = ctx["channels"][svc.full_name]
    path = f"/{svc.full_name}/{method.name}"
    token = ctx["tokens"][who]
    md = (("authorization", f"Bearer {token}"),) if token else ()
    before = ctx.get("state") or await state(ctx["stack"])
    code = C.OK
    try:
        if method.server_streaming:
            stream = channel.unary_stream(
                path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=bytes
            )(request, metadata=md, timeout=30)
            try:
                await asyncio.wait_for(stream.read(), 3)  # the first update, or the end of the stream
            except TimeoutError:
                pass  # an open stream waiting: fine (wait_for cancelled the read, and the call with it)
            else:
                if stream.done():
                    code = await stream.code()  # the status it ended with (a refusal raised from read)
            stream.cancel()
        else:
            await channel.unary_unary(
                path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=bytes
            )(request, metadata=md, timeout=20)
    except grpc.aio.AioRpcError as err:
        code = err.code()
        if code == C.CANCELLED and method.server_streaming:
            code = C.OK
    await projected(ctx["stack"])
    after = await state(ctx["stack"])
    ctx["state"] = after  # the next call's "before"
    return code, before, after


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("svc", "method"), METHODS, ids=[f"{s.name}.{m.name}" for s, m in METHODS])
def test_fuzzed_requests_get_a_documented_status_and_refusals_change_nothing(
    fuzz_stack: dict[str, Any], svc: Any, method: Any
) -> None:
    ctx = fuzz_stack

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        request=message(method.input_type),
        who=st.sampled_from(["none", "player", "service", "bot", "admin"]),
        real_game=st.booleans(),
    )
    def check(request: Any, who: str, real_game: bool) -> None:
        if real_game and "game_id" in method.input_type.fields_by_name:
            request.game_id = ctx["game_id"]  # reach past NOT_FOUND into the real checks
        code, before, after = ctx["loop"].run(call(ctx, svc, method, request, who))
        assert code == C.OK or code in REFUSALS, (code, who, str(request)[:300])
        if code != C.OK:
            changed = {
                k: (before.get(k), after.get(k))
                for k in set(before) | set(after)
                if before.get(k) != after.get(k)
            }
            assert not changed, (code, who, changed, str(request)[:300])

    check()

    async def healthy() -> None:
        for ch in ctx["channels"].values():
            reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

    ctx["loop"].run(healthy())
