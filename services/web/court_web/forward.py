"""Forwarding: each Connect call becomes one gRPC call to its service, with the caller's own token.

For every upstream (court_web.routes) this builds the object the generated
``<Service>ASGIApplication`` serves: one coroutine per unary method and one async generator per
server-streaming method (``WatchGame``), each forwarding the decoded request over a shared gRPC
channel with

* the caller's ``authorization`` header, unchanged (the edge verifies no token and mints none),
* the caller's own address, signed with ``COURT_EDGE_SECRET`` (court_kit.edge),
* the caller's deadline (``connect-timeout-ms`` / ``grpc-timeout``), else ``COURT_WEB_CALL_TIMEOUT``
  for unary calls (streams without a deadline run as long as the client stays),

and maps the gRPC status back to the Connect code with the upstream's own message. An upstream
that cannot be reached answers ``unavailable`` naming the service; one that does not answer in
time ``deadline_exceeded``. Per client address it enforces a call rate and a number of open
streams (court_web.limits).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from court_kit import logging as klog
from court_kit.edge import sign_client
from court_kit.metrics import GrpcCalls, MethodStats
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from prometheus_client import REGISTRY

from .limits import ClientLimits
from .routes import Upstream

log = klog.get_logger("court_web.forward")

# the client's address for this request, set by the HTTP layer (court_web.http) before the
# generated Connect application runs the handler in the same task
CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("court_web_client", default="")

CALLS = GrpcCalls("court_web", "Connect and gRPC-Web calls")
REGISTRY.register(CALLS)

CODES: Mapping[grpc.StatusCode, Code] = {
    grpc.StatusCode.CANCELLED: Code.CANCELED,
    grpc.StatusCode.UNKNOWN: Code.UNKNOWN,
    grpc.StatusCode.INVALID_ARGUMENT: Code.INVALID_ARGUMENT,
    grpc.StatusCode.DEADLINE_EXCEEDED: Code.DEADLINE_EXCEEDED,
    grpc.StatusCode.NOT_FOUND: Code.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS: Code.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED: Code.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Code.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION: Code.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED: Code.ABORTED,
    grpc.StatusCode.OUT_OF_RANGE: Code.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED: Code.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL: Code.INTERNAL,
    grpc.StatusCode.UNAVAILABLE: Code.UNAVAILABLE,
    grpc.StatusCode.DATA_LOSS: Code.DATA_LOSS,
    grpc.StatusCode.UNAUTHENTICATED: Code.UNAUTHENTICATED,
}

# the generator's method names (protoc_gen_connectrpc._pascal_to_snake_case)
_UPPER_TO_LOWER = re.compile("([^_])([A-Z][a-z]+)")
_LOWER_TO_UPPER = re.compile("([a-z])([A-Z])")


def snake(name: str) -> str:
    return _LOWER_TO_UPPER.sub(r"\1_\2", _UPPER_TO_LOWER.sub(r"\1_\2", name)).lower()


class StreamChannels:
    """The gRPC connections one upstream's server streams run on.

    A service takes at most ``COURT_MAX_STREAMS`` (default 100) concurrent calls per connection and
    queues the rest, and a gRPC channel does not open a second connection on its own: all of an
    edge replica's WatchGame streams on one channel would stall from the 101st on. So each stream
    takes a place on a connection with room (``per_channel`` streams each), opening another
    connection when all are full; connections left empty are closed, but for the first.
    """

    def __init__(self, make: Callable[[], grpc.aio.Channel], per_channel: int):
        self.make, self.per_channel = make, per_channel
        self.open: list[list[Any]] = []  # [channel, streams on it]

    @contextlib.contextmanager
    def place(self) -> Iterator[grpc.aio.Channel]:
        slot = next((s for s in self.open if s[1] < self.per_channel), None)
        if slot is None:
            slot = [self.make(), 0]
            self.open.append(slot)
        slot[1] += 1
        try:
            yield slot[0]
        finally:
            slot[1] -= 1
            if slot[1] == 0 and len(self.open) > 1 and slot is not self.open[0]:
                self.open.remove(slot)
                asyncio.get_running_loop().create_task(slot[0].close())

    async def close(self) -> None:
        for channel, _ in self.open:
            await channel.close()
        self.open.clear()


class Forwarder:
    """The forwarding handlers of every upstream: unary calls over one gRPC channel per upstream,
    server streams over that upstream's StreamChannels."""

    def __init__(
        self,
        channels: Mapping[str, grpc.aio.Channel],
        addresses: Mapping[str, str],
        limits: ClientLimits,
        *,
        edge_secret: str,
        call_timeout: float,
        stream_channels: Mapping[str, StreamChannels],
    ):
        self.channels = channels
        self.stream_channels = stream_channels
        # one warning when an upstream becomes unreachable, a summary a minute, one line when back
        self.reachable = {k: klog.StateLog(log, f"the {k} service") for k in addresses}
        self.addresses = addresses
        self.limits = limits
        self.edge_secret = edge_secret
        self.call_timeout = call_timeout

    def _metadata(self, ctx: Any) -> list[tuple[str, str]]:
        md = list(sign_client(self.edge_secret, CLIENT.get())) if self.edge_secret else []
        auth = ctx.request_headers.get("authorization")
        if auth:
            md.append(("authorization", auth))
        return md

    def _error(self, up: Upstream, err: grpc.aio.AioRpcError, timeout: float | None) -> ConnectError:
        code = err.code()
        details = err.details() or code.name
        if code == grpc.StatusCode.UNAVAILABLE:
            self.reachable[up.key].failed(
                "upstream unavailable", upstream=up.key, address=self.addresses[up.key], error=details[:200]
            )
            return ConnectError(
                Code.UNAVAILABLE,
                f"the {up.key} service is unavailable ({self.addresses[up.key]}): {details}; "
                "try again in a moment",
            )
        if (
            code == grpc.StatusCode.DEADLINE_EXCEEDED
            and timeout is not None
            and details == "Deadline Exceeded"
        ):
            return ConnectError(
                Code.DEADLINE_EXCEEDED, f"the {up.key} service did not answer within {timeout:.3g} s"
            )
        return ConnectError(CODES.get(code, Code.UNKNOWN), details)

    def _timeout(self, ctx: Any, default: float | None) -> float | None:
        remaining = ctx.timeout_ms
        if remaining is None:
            return default
        if remaining <= 0:
            raise ConnectError(Code.DEADLINE_EXCEEDED, "the call's deadline passed before it was forwarded")
        return float(remaining) / 1000.0 if default is None else min(default, float(remaining) / 1000.0)

    def service(self, up: Upstream) -> object:
        """The object whose methods the generated ASGI application calls."""
        handlers: dict[str, Callable[..., Any]] = {}
        for m in up.descriptor.methods:
            if m.name not in up.public:
                handlers[snake(m.name)] = _not_served(up.path(m.name))
            elif m.server_streaming:
                handlers[snake(m.name)] = self._stream_handler(up, m)
            else:
                handlers[snake(m.name)] = self._unary_handler(up, m)
        return type(f"{up.descriptor.name}Edge", (), {k: staticmethod(v) for k, v in handlers.items()})()

    @contextlib.contextmanager
    def _accounted(self, up: Upstream, stats: MethodStats) -> Iterator[dict[str, float | None]]:
        """One call's metrics (in flight, duration, code) and its gRPC error as the Connect error
        the caller gets; the body records its upstream deadline in the yielded dict."""
        t0 = time.perf_counter()
        stats.in_flight += 1
        code = "ok"
        call: dict[str, float | None] = {"timeout": None}
        try:
            yield call
            if self.reachable[up.key].down:
                self.reachable[up.key].ok("upstream answers again", upstream=up.key)
        except grpc.aio.AioRpcError as err:
            exc = self._error(up, err, call["timeout"])
            code = exc.code.value
            raise exc from None
        except ConnectError as exc:
            code = exc.code.value
            raise
        except GeneratorExit:  # a stream's client went away
            code = "canceled"
            raise
        finally:
            stats.in_flight -= 1
            stats.done(code, time.perf_counter() - t0)

    def _unary_handler(self, up: Upstream, m: MethodDescriptor) -> Callable[..., Any]:
        path = up.path(m.name)
        output = message_factory.GetMessageClass(m.output_type)
        call = self.channels[up.key].unary_unary(
            path, request_serializer=_serialize, response_deserializer=output.FromString
        )
        stats = CALLS.method(path)

        async def unary(request: Any, ctx: Any) -> Any:
            with self._accounted(up, stats) as this:
                self.limits.take_call(CLIENT.get())
                this["timeout"] = timeout = self._timeout(ctx, self.call_timeout)
                return await call(request, metadata=self._metadata(ctx), timeout=timeout)

        return unary

    def _stream_handler(self, up: Upstream, m: MethodDescriptor) -> Callable[..., Any]:
        path = up.path(m.name)
        output = message_factory.GetMessageClass(m.output_type)
        pool = self.stream_channels[up.key]
        stats = CALLS.method(path)
        limits = self.limits

        async def stream(request: Any, ctx: Any) -> AsyncIterator[Any]:
            client = CLIENT.get()
            with self._accounted(up, stats) as this:
                limits.take_call(client)
                with limits.stream_slot(client):
                    this["timeout"] = timeout = self._timeout(ctx, None)
                    with pool.place() as channel:
                        call = channel.unary_stream(
                            path, request_serializer=_serialize, response_deserializer=output.FromString
                        )
                        upstream = call(request, metadata=self._metadata(ctx), timeout=timeout)
                        try:
                            async for message in upstream:
                                yield message
                        finally:
                            upstream.cancel()  # the client went away: end the upstream stream too

        return stream


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()  # type: ignore[no-any-return]


def _not_served(path: str) -> Callable[..., Any]:
    async def refuse(request: Any, ctx: Any) -> Any:  # the HTTP layer answers 404 before this
        raise ConnectError(Code.UNIMPLEMENTED, f"{path.lstrip('/')} is not served by court-web")

    return refuse
