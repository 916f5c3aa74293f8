"""What every Court client shares: the channel, the bearer token, request ids and safe retries.

Every call sends ``authorization: Bearer <token>`` (when a token is set) and an ``x-request-id``.
Mutating calls carry a request id (generated unless given) and are retried on ABORTED and
UNAVAILABLE with that same id, so a retry can never apply twice; reads are retried on UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

T = TypeVar("T")

RETRY_MUTATING = frozenset({grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE})
RETRY_READ = frozenset({grpc.StatusCode.UNAVAILABLE})


def new_request_id() -> str:
    return uuid.uuid4().hex


class ServiceClient:
    """A channel, a bearer token and the retry policy every Court client shares."""

    def __init__(self, target: str | grpc.aio.Channel, token: str | None = None, *, retries: int = 6,
                 backoff: float = 0.05, max_backoff: float = 1.0, timeout: float | None = 15.0):
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

    async def _call(self, fn: Callable[..., Awaitable[T]], request: Any, retry_on: frozenset[grpc.StatusCode],
                    request_id: str | None = None, timeout: float | None = None) -> T:
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
        return await self._call(fn, request, RETRY_MUTATING, request.request_id)
