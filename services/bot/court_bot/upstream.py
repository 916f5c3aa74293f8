"""Calls to the rules service: the bot identity, and rules errors passed on as ours."""

from __future__ import annotations

import asyncio
import time

import grpc
from court_client import RulesClient
from court_kit.errors import ServiceError
from court_kit.keys import Signer, issue_token
from court_proto.court.rules.v1 import actions_pb2, rules_pb2

BOT_SUB = "bot-service"  # every replica acts under this one sub, so request ids are shared
BOT_TOKEN_TTL = 24 * 3600.0
SUBMIT_RETRIES = 4


class UpstreamError(ServiceError):
    """A rules-service error passed on to our caller with the same status code and message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


def passed_on(err: grpc.aio.AioRpcError) -> UpstreamError:
    code = err.code()
    details = err.details() or code.name
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return UpstreamError(code, f"the rules service did not answer in time: {details}")
    return UpstreamError(code, details)


class BotRules:
    """The rules service as the bot identity (role ``bot``: it sees and acts for bot seats only)."""

    def __init__(self, channel: grpc.aio.Channel, signer: Signer, *, timeout: float = 5.0):
        self._signer = signer  # the bot service's own key: it can mint bot tokens only
        self._minted = 0.0
        self.client = RulesClient(channel, self._mint(), retries=3, timeout=timeout)
        self.timeout = timeout

    def _mint(self) -> str:
        self._minted = time.time()
        return issue_token(self._signer, BOT_SUB, "bot", BOT_TOKEN_TTL)

    def _fresh(self) -> RulesClient:
        if time.time() - self._minted > BOT_TOKEN_TTL / 2:
            self.client.token = self._mint()
        return self.client

    async def view(self, game_id: str, seat: int) -> rules_pb2.GameView:
        return await self._fresh().get_view(game_id, seat)

    async def submit(
        self, game_id: str, seat: int, action: actions_pb2.Action, request_id: str
    ) -> rules_pb2.SubmitActionResponse:
        """Submit under ``request_id``, retrying only while the rules service is unreachable.

        ABORTED and FAILED_PRECONDITION are not retried here: they mean either that the game moved
        on (the new position brings its own turn event) or that the replica judged the move on a
        cached position older than the log's; the turn handler tells the two apart with a fresh
        view (``court_bot.turns``) and resubmits under the same request id only in the second case.
        """
        client = self._fresh()
        req = rules_pb2.SubmitActionRequest(game_id=game_id, request_id=request_id, seat=seat, action=action)
        delay = 0.05
        for attempt in range(SUBMIT_RETRIES + 1):
            try:
                answer: rules_pb2.SubmitActionResponse = await client.stub.SubmitAction(
                    req, metadata=client.metadata(request_id), timeout=self.timeout
                )
                return answer
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE or attempt == SUBMIT_RETRIES:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")
