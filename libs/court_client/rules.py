"""An asyncio client for the rules service.

    async with RulesClient("127.0.0.1:50051", token) as rules:
        created = await rules.create_game("hearts", ["me", "bot:1", "bot:2", "bot:3"])
        view = await rules.get_view(created.game_id)
        reply = await rules.submit(created.game_id, view.legal_actions[0])
        async for update in rules.watch(created.game_id, after_seq=reply.seq):
            ...

Every call sends ``authorization: Bearer <token>`` and an ``x-request-id``.
Mutating calls carry a request id (generated unless given) and are retried on
ABORTED and UNAVAILABLE with the same id, so a retry can never apply twice;
reads are retried on UNAVAILABLE. ``watch`` resumes after a broken stream from
the last sequence number it delivered.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from court_kit import actions as kactions
from court_kit.structs import to_dict, to_struct
from court_proto.court.rules.v1 import actions_pb2, rules_pb2, rules_pb2_grpc

T = TypeVar("T")

RETRY_MUTATING = frozenset({grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE})
RETRY_READ = frozenset({grpc.StatusCode.UNAVAILABLE})


def new_request_id() -> str:
    return uuid.uuid4().hex


def action(game: str, d: Mapping[str, Any]) -> actions_pb2.Action:
    """A typed action from RULES.md's canonical JSON (``{"type": "play", "card": "2C"}``)."""
    return kactions.from_json(game, d)


def action_json(a: actions_pb2.Action) -> dict[str, Any]:
    return kactions.to_json(a)


def view_dict(view: rules_pb2.GameView) -> dict[str, Any]:
    """The engine's view as a dict (integers as ints)."""
    return to_dict(view.view)


class RulesClient:
    def __init__(self, target: str | grpc.aio.Channel, token: str, *, retries: int = 8,
                 backoff: float = 0.02, max_backoff: float = 1.0, timeout: float | None = 15.0):
        self._own_channel = isinstance(target, str)
        self.channel = grpc.aio.insecure_channel(target) if isinstance(target, str) else target
        self.stub = rules_pb2_grpc.RulesServiceStub(self.channel)
        self.token = token
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.attempts = 0  # calls sent, retries included (tests, benchmarks)

    async def __aenter__(self) -> RulesClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_channel:
            await self.channel.close()

    def metadata(self, request_id: str | None = None) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"), ("x-request-id", request_id or new_request_id()))

    async def _call(self, fn: Callable[..., Awaitable[T]], request: Any, retry_on: frozenset[grpc.StatusCode],
                    request_id: str | None = None) -> T:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            self.attempts += 1
            try:
                return await fn(request, metadata=self.metadata(request_id), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                if err.code() not in retry_on or attempt == self.retries:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.max_backoff)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ calls

    async def create_game(self, game: str, seats: Sequence[str], options: Mapping[str, Any] | None = None, *,
                          seed: int | None = None, request_id: str | None = None, resume_from: str = ""
                          ) -> rules_pb2.CreateGameResponse:
        rid = request_id or new_request_id()
        req = rules_pb2.CreateGameRequest(request_id=rid, game=game, seats=list(seats), resume_from=resume_from)
        to_struct(options or {}, req.options)
        if seed is not None:
            req.seed = seed
        return await self._call(self.stub.CreateGame, req, RETRY_MUTATING, rid)

    async def get_view(self, game_id: str, seat: int | None = None) -> rules_pb2.GameView:
        req = rules_pb2.GetViewRequest(game_id=game_id)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.GetView, req, RETRY_READ)

    async def legal_actions(self, game_id: str, seat: int | None = None) -> rules_pb2.ListLegalActionsResponse:
        req = rules_pb2.ListLegalActionsRequest(game_id=game_id)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.ListLegalActions, req, RETRY_READ)

    async def submit(self, game_id: str, act: actions_pb2.Action, seat: int | None = None, *,
                     request_id: str | None = None) -> rules_pb2.SubmitActionResponse:
        rid = request_id or new_request_id()
        req = rules_pb2.SubmitActionRequest(game_id=game_id, request_id=rid, action=act)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.SubmitAction, req, RETRY_MUTATING, rid)

    async def history(self, game_id: str) -> rules_pb2.GetHistoryResponse:
        return await self._call(self.stub.GetHistory, rules_pb2.GetHistoryRequest(game_id=game_id), RETRY_READ)

    async def watch(self, game_id: str, seat: int | None = None, after_seq: int | None = None, *,
                    resume: bool = True) -> AsyncIterator[rules_pb2.GameUpdate]:
        """Updates of the caller's view; after a broken stream it reconnects from the last seq seen."""
        last = after_seq
        delay = self.backoff
        failures = 0
        while True:
            req = rules_pb2.WatchGameRequest(game_id=game_id)
            if seat is not None:
                req.seat = seat
            if last is not None:
                req.after_seq = last
            call = self.stub.WatchGame(req, metadata=self.metadata())
            self.attempts += 1
            try:
                async for update in call:
                    failures = 0
                    last = update.seq
                    yield update
                return
            except grpc.aio.AioRpcError as err:
                retriable = err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                           grpc.StatusCode.INTERNAL)
                failures += 1
                if not resume or not retriable or failures > self.retries:
                    raise
            finally:
                call.cancel()
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.max_backoff)
