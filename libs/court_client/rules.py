"""An asyncio client for the rules service.

    async with RulesClient("127.0.0.1:50051", token) as rules:
        created = await rules.create_game("hearts", ["me", "bot:1", "bot:2", "bot:3"])
        view = await rules.get_view(created.game_id)
        reply = await rules.submit(created.game_id, view.legal_actions[0])
        async for update in rules.watch(created.game_id, after_seq=reply.seq):
            ...

Calls, request ids and retries as every Court client (``court_client.base``).
``watch`` resumes after a broken stream from the last sequence number it
delivered.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc
from court_contract import actions as kactions
from court_contract import typed
from court_proto.court.games.v1 import events_pb2
from court_proto.court.rules.v1 import actions_pb2, rules_pb2, rules_pb2_grpc

from .base import RETRY_MUTATING, RETRY_READ, ServiceClient, new_request_id, stub

# the rules service answers ABORTED to the loser of a race on one game: retry with the same id
RETRY_MOVE = RETRY_MUTATING | {grpc.StatusCode.ABORTED}


def action(game: str, d: Mapping[str, Any]) -> actions_pb2.Action:
    """A typed action from the canonical JSON of docs/rules/ (``{"type": "play", "card": "2C"}``)."""
    return kactions.from_json(game, d)


def action_json(a: actions_pb2.Action) -> dict[str, Any]:
    return kactions.to_json(a)


def view_dict(view: rules_pb2.GameView) -> dict[str, Any]:
    """The engine's view as a dict (the typed ``court.games.v1.View`` in its JSON form)."""
    return typed.view_from_proto(view.view)


def event_dict(event: Any) -> dict[str, Any]:
    """A typed ``court.games.v1.Event`` as the engine's dict (``{"type": ..., ...}``)."""
    return typed.event_from_proto(event)


def result_dict(result: rules_pb2.GameResult) -> dict[str, Any]:
    """A game's result as the engine's dict; a game closed by a resume adds ``resumed_into``, one
    closed by its lobby (CloseGame) ``closed_reason``."""
    if result.result.WhichOneof("game") is None:
        return {}
    out = typed.result_from_proto(result.result)
    if result.resumed_into:
        out["resumed_into"] = result.resumed_into
    if result.closed_reason:
        out["closed_reason"] = result.closed_reason
    return out


def options_proto(game: str, options: Mapping[str, Any] | None) -> Any:
    """Typed ``court.games.v1.GameOptions`` from the options' JSON (docs/rules/); keys left out
    take their defaults. ``typed.TypedError`` (a ValueError) names a key the game does not have.
    A game with no options message here (not one of ``typed.GAMES``) gets no options: the
    service answers INVALID_ARGUMENT naming the games it has."""
    if not options or game not in typed.GAMES:
        return typed.GameOptions()
    return typed.options_to_proto(game, options)


class RulesClient(ServiceClient):
    def __init__(
        self,
        target: str | grpc.aio.Channel,
        token: str,
        *,
        retries: int = 8,
        backoff: float = 0.02,
        max_backoff: float = 1.0,
        timeout: float | None = 15.0,
    ):
        super().__init__(
            target, token, retries=retries, backoff=backoff, max_backoff=max_backoff, timeout=timeout
        )
        self.stub = stub(rules_pb2_grpc.RulesServiceStub, self.channel)

    async def __aenter__(self) -> RulesClient:
        return self

    # ------------------------------------------------------------------ calls

    async def create_game(
        self,
        game: str,
        seats: Sequence[str],
        options: Mapping[str, Any] | None = None,
        *,
        seed: int | None = None,
        request_id: str | None = None,
        resume_from: str = "",
        game_id: str = "",
        clock: events_pb2.TurnClock | None = None,
        online: bool = False,
    ) -> rules_pb2.CreateGameResponse:
        """``game_id`` (service and admin callers only): create the game under this id, e.g. one the
        lobby fixed before taking the antes; a retry with the same request id returns that game.
        ``clock``: the game's turn clock (docs/clock.md). ``online`` (the lobby only): an online
        game, as its public GameCreated says."""
        rid = request_id or new_request_id()
        req = rules_pb2.CreateGameRequest(
            request_id=rid,
            game=game,
            seats=list(seats),
            resume_from=resume_from,
            game_id=game_id,
            online=online,
        )
        if clock is not None:
            req.clock.CopyFrom(clock)
        req.options.CopyFrom(options_proto(game, options))
        if seed is not None:
            req.seed = seed
        return await self._call(self.stub.CreateGame, req, RETRY_MOVE, rid)

    async def close_game(
        self, game_id: str, reason: str, *, request_id: str | None = None
    ) -> rules_pb2.CloseGameResponse:
        """Close an unfinished game for good (service callers: the lobby); idempotent."""
        rid = request_id or new_request_id()
        req = rules_pb2.CloseGameRequest(game_id=game_id, request_id=rid, reason=reason)
        return await self._call(self.stub.CloseGame, req, RETRY_MOVE, rid)

    async def get_view(self, game_id: str, seat: int | None = None) -> rules_pb2.GameView:
        req = rules_pb2.GetViewRequest(game_id=game_id)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.GetView, req, RETRY_READ)

    async def legal_actions(
        self, game_id: str, seat: int | None = None
    ) -> rules_pb2.ListLegalActionsResponse:
        req = rules_pb2.ListLegalActionsRequest(game_id=game_id)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.ListLegalActions, req, RETRY_READ)

    async def submit(
        self,
        game_id: str,
        act: actions_pb2.Action,
        seat: int | None = None,
        *,
        request_id: str | None = None,
        turn_seq: int | None = None,
    ) -> rules_pb2.SubmitActionResponse:
        """``turn_seq``: the turn the move is for (turn clock): refused once that turn timed out."""
        rid = request_id or new_request_id()
        req = rules_pb2.SubmitActionRequest(game_id=game_id, request_id=rid, action=act)
        if seat is not None:
            req.seat = seat
        if turn_seq is not None:
            req.turn_seq = turn_seq
        return await self._call(self.stub.SubmitAction, req, RETRY_MOVE, rid)

    async def return_to_seat(
        self, game_id: str, seat: int | None = None, *, request_id: str | None = None
    ) -> rules_pb2.SeatResponse:
        """Turn clock: take back a seat marked away (the bot stops playing it)."""
        rid = request_id or new_request_id()
        req = rules_pb2.ReturnToSeatRequest(game_id=game_id, request_id=rid)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.ReturnToSeat, req, RETRY_MOVE, rid)

    async def leave_seat(
        self, game_id: str, seat: int | None = None, *, request_id: str | None = None
    ) -> rules_pb2.SeatResponse:
        """Turn clock: mark a seat away (the autoplay bot plays its turns at once)."""
        rid = request_id or new_request_id()
        req = rules_pb2.LeaveSeatRequest(game_id=game_id, request_id=rid)
        if seat is not None:
            req.seat = seat
        return await self._call(self.stub.LeaveSeat, req, RETRY_MOVE, rid)

    async def history(self, game_id: str) -> rules_pb2.GetHistoryResponse:
        return await self._call(
            self.stub.GetHistory, rules_pb2.GetHistoryRequest(game_id=game_id), RETRY_READ
        )

    async def watch(
        self, game_id: str, seat: int | None = None, after_seq: int | None = None, *, resume: bool = True
    ) -> AsyncIterator[rules_pb2.GameUpdate]:
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
                retriable = err.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.INTERNAL,
                )
                failures += 1
                if not resume or not retriable or failures > self.retries:
                    raise
            finally:
                call.cancel()
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.max_backoff)
