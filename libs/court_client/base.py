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
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

T = TypeVar("T")

TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
RETRY_MUTATING = TRANSIENT
RETRY_READ = TRANSIENT


def new_request_id() -> str:
    return uuid.uuid4().hex


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

    def metadata(self, request_id: str | None = None) -> tuple[tuple[str, str], ...]:
        meta = [("x-request-id", request_id or new_request_id())]
        if self.token:
            meta.append(("authorization", f"Bearer {self.token}"))
        return tuple(meta)

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
