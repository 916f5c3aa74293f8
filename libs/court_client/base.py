"""What every Court client shares: the channel, the bearer token, request ids and safe retries.

Every call sends ``authorization: Bearer <token>`` (when a token is set) and an ``x-request-id``.
Mutating calls carry a request id (generated unless given). Only the two codes that say "the
answer never came" are retried: UNAVAILABLE (not reached, or the server is going away) and
DEADLINE_EXCEEDED (no answer in time; the first attempt may still have applied). A mutating call
is always retried with the same request id, so the service applies it once and answers the retry
with the first answer. Every other code (INTERNAL included) is the service's answer and is raised
as it came: retrying it would either fail again or, worse, apply a second time under a fresh id.
The rules client adds ABORTED for its moves: the rules service answers ABORTED to the loser of a
compare-and-set race, only when that attempt applied nothing, and documents it as "retry with the
same request id" (why that is safe: docs/contract.md, "Retries: request ids and ABORTED").
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import grpc

T = TypeVar("T")

TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
RETRY_MUTATING = TRANSIENT
RETRY_READ = TRANSIENT


_ID_PREFIX = secrets.token_hex(12)  # 96 random bits per process...
_ID_COUNTER = itertools.count()  # ...and a count: unique without a system call per id


def _new_id_prefix() -> None:
    """A forked child draws its own prefix: its ids never repeat its parent's."""
    global _ID_PREFIX, _ID_COUNTER  # noqa: PLW0603 - the process's id source
    _ID_PREFIX = secrets.token_hex(12)
    _ID_COUNTER = itertools.count()


os.register_at_fork(after_in_child=_new_id_prefix)


def new_request_id() -> str:
    """A fresh request id: 32 hex digits, a random prefix drawn once per process and a counter.
    Unique as ``uuid4`` is, at a tenth of its cost (``uuid4`` reads 16 random bytes from the
    kernel per id: 4 to 9 us against 0.5 in process, once per move of every client). Nothing
    depends on an id being unguessable: the rules service keys a request by the caller and its id."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):08x}"


class CallMetadata(grpc.aio.Metadata):  # type: ignore[misc]  # grpc ships no types
    """A call's metadata, as the pairs it is made of. grpc.aio turns metadata given as a tuple into
    a ``grpc.aio.Metadata`` (an ordered dict of lists, a method call per pair) and back into a
    tuple, on every call: about 4 us of the caller's CPU for the two pairs every Court call sends.
    Given a ``Metadata``, it only iterates it, which here is the tuple's own iterator. The mapping
    is built only if something asks for it (a client interceptor reading or changing a key), and
    from then on serves everything, so the object behaves as a ``grpc.aio.Metadata`` throughout."""

    def __init__(self, *pairs: tuple[str, str]) -> None:  # noqa: D107 - no super(): no mapping yet
        self._pairs: tuple[tuple[str, str], ...] | None = pairs

    def __getattr__(self, name: str) -> Any:
        if name != "_metadata" or self._pairs is None:
            raise AttributeError(name)
        mapping: OrderedDict[str, list[str]] = OrderedDict()
        for key, value in self._pairs:
            mapping.setdefault(key, []).append(value)
        self._metadata, self._pairs = mapping, None
        return mapping

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._pairs) if self._pairs is not None else super().__iter__()

    def __len__(self) -> int:
        return len(self._pairs) if self._pairs is not None else super().__len__()


def _plain(kind: str) -> Callable[..., Any]:
    """``PlainMethods``' method ``kind`` (``unary_unary``...): the channel's multicallable of that
    kind with the stub's path and serializers, and nothing else it was asked (``_registered_method``)."""

    def method(
        self: PlainMethods,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        **_: Any,
    ) -> Any:
        return getattr(self.channel, kind)(
            method, request_serializer=request_serializer, response_deserializer=response_deserializer
        )

    method.__name__ = kind
    return method


class PlainMethods:
    """A channel as a generated stub asks it for its methods, answered with gRPC's plain
    multicallables: a stub from grpcio-tools asks for each method as a registered one
    (``_registered_method=True``), and grpc.aio's registered calls cost the caller more, not
    less: about 12,000 more instructions a call (callgrind, grpcio 1.85, a unary call with the
    two metadata pairs and a deadline: 243k against 231k). The method's path, serializers and
    the wire are the same. ``stub(Stub, channel)`` builds a stub over it."""

    def __init__(self, channel: grpc.aio.Channel):
        self.channel = channel

    unary_unary = _plain("unary_unary")
    unary_stream = _plain("unary_stream")
    stream_unary = _plain("stream_unary")
    stream_stream = _plain("stream_stream")


def stub(stub_class: Callable[[Any], T], channel: grpc.aio.Channel) -> T:
    """A generated stub (``rules_pb2_grpc.RulesServiceStub``...) whose methods are plain
    multicallables of ``channel`` (``PlainMethods``): what every Court client calls through."""
    return stub_class(PlainMethods(channel))


class ServiceClient:
    """A channel, a bearer token and the retry policy every Court client shares."""

    def __init__(
        self,
        target: str | grpc.aio.Channel,
        token: str | None = None,
        *,
        retries: int = 6,
        backoff: float = 0.05,
        max_backoff: float = 1.0,
        timeout: float | None = 15.0,
    ):
        self._own_channel = isinstance(target, str)
        self.channel = grpc.aio.insecure_channel(target) if isinstance(target, str) else target
        self.token = token
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.attempts = 0  # calls sent, retries included (tests, benchmarks)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_channel:
            await self.channel.close()

    @property
    def token(self) -> str | None:
        return self._token

    @token.setter
    def token(self, token: str | None) -> None:
        self._token = token
        self._auth = (("authorization", f"Bearer {token}"),) if token else ()  # built once per token

    def metadata(self, request_id: str | None = None) -> CallMetadata:
        """A call's metadata: ``x-request-id`` (``request_id`` or a new one), then
        ``authorization: Bearer <token>`` when a token is set."""
        return CallMetadata(("x-request-id", request_id or new_request_id()), *self._auth)

    async def _call(
        self,
        fn: Callable[..., Awaitable[T]],
        request: Any,
        retry_on: frozenset[grpc.StatusCode],
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> T:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            self.attempts += 1
            try:
                return await fn(request, metadata=self.metadata(request_id), timeout=timeout or self.timeout)
            except grpc.aio.AioRpcError as err:
                if err.code() not in retry_on or attempt == self.retries:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.max_backoff)
        raise AssertionError("unreachable")

    async def _read(self, fn: Callable[..., Awaitable[T]], request: Any) -> T:
        return await self._call(fn, request, RETRY_READ)

    async def _write(self, fn: Callable[..., Awaitable[T]], request: Any) -> T:
        if not request.request_id:
            request.request_id = new_request_id()  # chosen once: every retry below carries it
        return await self._call(fn, request, RETRY_MUTATING, request.request_id)
