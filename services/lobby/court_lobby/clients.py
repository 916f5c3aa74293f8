"""The lobby's calls to the rules and ranking services, made with its own ``service`` identity."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from court_client import RulesClient
from court_client.base import TRANSIENT, ServiceClient, stub
from court_kit import errors as kerr
from court_kit.keys import Signer, issue_token
from court_kit.server import client_channel
from court_kit.settings import Settings
from court_proto.court.games.v1 import events_pb2
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1 import ranking_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2

TOKEN_TTL = 6 * 3600.0
CALL_TIMEOUT = 15.0


class RemoteError(kerr.ServiceError):
    """Another service's answer that none of our error classes names (INTERNAL, UNKNOWN, ...): its
    code is kept, so it is never mistaken for a transient one."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


def is_transient(exc: BaseException) -> bool:
    """Whether a backend call may simply be retried later (the service was not reached, or timed out)."""
    return isinstance(exc, kerr.Unavailable)


class ServiceToken:
    """The lobby's ``service`` token, re-issued well before it expires."""

    def __init__(self, signer: Signer, sub: str = "service:lobby"):
        self.signer, self.sub = signer, sub
        self._token, self._renew_at = "", 0.0

    def get(self) -> str:
        now = time.time()
        if now >= self._renew_at:
            self._token = issue_token(self.signer, self.sub, "service", TOKEN_TTL, now=now)
            self._renew_at = now + TOKEN_TTL / 2
        return self._token


class Backends:
    """Rules (through court_client's RulesClient) and ranking (the generated stub over plain
    multicallables, ``court_client.base.stub``, as every Court client calls)."""

    def __init__(self, settings: Settings, signer: Signer):
        self.token = ServiceToken(signer)
        self._rules_channel = client_channel(settings.rules_addr, settings)
        self.rules = RulesClient(self._rules_channel, self.token.get(), retries=4)
        self._ranking_channel = client_channel(settings.ranking_addr, settings)
        # retried on UNAVAILABLE and DEADLINE_EXCEEDED only, always with the request's own id
        self._ranking_client = ServiceClient(self._ranking_channel, retries=4, timeout=CALL_TIMEOUT)
        self.ranking = stub(ranking_pb2_grpc.RankingServiceStub, self._ranking_channel)

    async def close(self) -> None:
        await self.rules.close()
        await self._rules_channel.close()
        await self._ranking_channel.close()

    async def _ranking(self, method: Any, request: Any) -> Any:
        self._ranking_client.token = self.token.get()
        try:
            return await self._ranking_client._call(
                method, request, TRANSIENT, getattr(request, "request_id", None)
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, "ranking") from None

    # ---------------------------------------------------------------- rules

    async def create_game(
        self,
        game: str,
        seats: Sequence[str],
        options: Mapping[str, Any],
        seed: int,
        request_id: str,
        game_id: str = "",
        clock: Mapping[str, Any] | None = None,
        online: bool = False,
    ) -> str:
        """``clock``: the lobby's turn clock (court_kit.clock.ClockSettings fields), given to the game;
        ``online``: an online lobby's game (registered with the ranking service), public in its
        GameCreated record."""
        self.rules.token = self.token.get()
        tc = events_pb2.TurnClock(**clock) if clock else None
        try:
            reply = await self.rules.create_game(
                game,
                seats,
                options,
                seed=seed,
                request_id=request_id,
                game_id=game_id,
                clock=tc,
                online=online,
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, "rules") from None
        return reply.game_id

    async def resume_game(self, game: str, seats: Sequence[str], resume_from: str, request_id: str) -> str:
        """A new game from ``resume_from``'s save point (its options and seed come from the save)."""
        self.rules.token = self.token.get()
        try:
            reply = await self.rules.create_game(game, seats, request_id=request_id, resume_from=resume_from)
        except grpc.aio.AioRpcError as err:
            raise translate(err, "rules") from None
        return reply.game_id

    async def close_game(self, game_id: str, reason: str) -> bool:
        """Close the rules service's game ``game_id`` for good (its start is undone or it is
        abandoned, its antes refunded); the request id is the game's, so every retry, by any
        replica, is the same call. True when the game existed; False when it had not been created:
        the rules service then keeps a tombstone, so a CreateGame still in flight (or retried
        later) is refused and the game never starts."""
        self.rules.token = self.token.get()
        try:
            reply = await self.rules.close_game(
                game_id, reason[:200] or "the game's start was undone", request_id=f"lobby-close-{game_id}"
            )
        except grpc.aio.AioRpcError as err:
            raise translate(err, "rules") from None
        return bool(reply.view.game)

    async def leave_seat(self, game_id: str, seat: int) -> rules_pb2.SeatResponse:
        """Mark a person's seat away (the autoplay bot plays it on): one player's AbandonGame."""
        self.rules.token = self.token.get()
        try:
            return await self.rules.leave_seat(game_id, seat, request_id=f"lobby-away-{game_id}-{seat}")
        except grpc.aio.AioRpcError as err:
            raise translate(err, "rules") from None

    async def game_view(self, game_id: str) -> rules_pb2.GameView:
        self.rules.token = self.token.get()
        try:
            return await self.rules.get_view(game_id)
        except grpc.aio.AioRpcError as err:
            raise translate(err, "rules") from None

    # ---------------------------------------------------------------- ranking

    async def balance(self, player_id: str) -> int:
        reply = await self._ranking(self.ranking.GetBalance, rpb.GetBalanceRequest(player_id=player_id))
        return int(reply.points)

    async def ratings(self, game: str, player_ids: Sequence[str]) -> dict[str, float]:
        if not player_ids:
            return {}
        reply = await self._ranking(
            self.ranking.GetRatings, rpb.GetRatingsRequest(game=game, player_ids=player_ids)
        )
        return {pid: r.mu for pid, r in zip(reply.player_ids, reply.ratings, strict=True)}

    async def register_game(
        self, game_id: str, game: str, online: bool, ante: int, seed: int, seats: Sequence[tuple[str, str]]
    ) -> rpb.RegisterGameResponse:
        req = rpb.RegisterGameRequest(
            request_id=f"register:{game_id}",
            game_id=game_id,
            game=game,
            online=online,
            ante=ante,
            seed=seed,
            seats=[rpb.RankedSeat(player_id=p, name=n) for p, n in seats],
        )
        answer: rpb.RegisterGameResponse = await self._ranking(self.ranking.RegisterGame, req)
        return answer

    async def abandon_game(self, game_id: str) -> rpb.AbandonGameResponse:
        answer: rpb.AbandonGameResponse = await self._ranking(
            self.ranking.AbandonGame, rpb.AbandonGameRequest(request_id=f"abandon:{game_id}", game_id=game_id)
        )
        return answer


def translate(err: grpc.aio.AioRpcError, service: str) -> Exception:
    """Another service's error as one of ours, its code kept: only UNAVAILABLE and DEADLINE_EXCEEDED
    (the answer never came) become our UNAVAILABLE; INTERNAL stays INTERNAL, and so on."""
    code = err.code()
    detail = err.details() or code.name
    by_code = {
        grpc.StatusCode.INVALID_ARGUMENT: kerr.InvalidArgument,
        grpc.StatusCode.FAILED_PRECONDITION: kerr.FailedPrecondition,
        grpc.StatusCode.NOT_FOUND: kerr.NotFound,
        grpc.StatusCode.PERMISSION_DENIED: kerr.PermissionDenied,
        grpc.StatusCode.ALREADY_EXISTS: kerr.AlreadyExists,
        grpc.StatusCode.ABORTED: kerr.Aborted,
    }
    if code in TRANSIENT:
        return kerr.Unavailable(
            f"the {service} service did not answer ({code.name}: {detail[:200]}); retry with the "
            "same request_id"
        )
    cls = by_code.get(code)
    if cls is None:
        return RemoteError(code, f"{service} service failed ({code.name}): {detail[:200]}")
    return cls(f"{service} service: {detail}")
