"""Asyncio clients for the lobby, ranking and bot services (the rules service's is ``rules.py``).

    async with LobbyClient("127.0.0.1:50052") as lobby:
        auth = await lobby.create_guest("Brown Monkey")
        lobby.token = auth.token
        room = await lobby.create_lobby("hearts", online=False)

As every Court client (``court_client.base``): every call sends ``authorization: Bearer <token>`` (when a token is set)
and an ``x-request-id``; mutating calls carry a request id (generated unless given) and are
retried on UNAVAILABLE and DEADLINE_EXCEEDED with that same id, so a retry never applies twice;
reads are retried on the same two codes. Errors surface as ``grpc.aio.AioRpcError`` with the service's message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from court_proto.court.bot.v1 import bot_pb2, bot_pb2_grpc
from court_proto.court.lobby.v1 import lobby_pb2 as lpb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_proto.court.ranking.v1 import ranking_pb2 as rpb
from court_proto.court.ranking.v1 import ranking_pb2_grpc
from court_proto.court.rules.v1 import rules_pb2

from .base import RETRY_READ, ServiceClient, new_request_id, stub


def _options(game: str, options: Mapping[str, Any] | None) -> Any:
    """The game's typed options (court_client.rules, with the games' protos: loaded when a lobby is made)."""
    from .rules import options_proto

    return options_proto(game, options)


class LobbyClient(ServiceClient):
    """``court.lobby.v1.LobbyService``: accounts, lobbies, quick match, my games."""

    def __init__(self, target: str | grpc.aio.Channel, token: str | None = None, **kwargs: Any):
        super().__init__(target, token, **kwargs)
        self.stub = stub(lobby_pb2_grpc.LobbyServiceStub, self.channel)

    # accounts (no token needed for the first four)
    async def create_account(self, name: str, password: str) -> lpb.AuthResponse:
        # not retried on UNAVAILABLE: a lost answer would leave the name taken
        return await self._call(
            self.stub.CreateAccount, lpb.CreateAccountRequest(name=name, password=password), frozenset()
        )

    async def create_guest(self, name: str = "") -> lpb.AuthResponse:
        return await self._call(self.stub.CreateGuest, lpb.CreateGuestRequest(name=name), frozenset())

    async def login(self, name: str, password: str) -> lpb.AuthResponse:
        return await self._read(self.stub.Login, lpb.LoginRequest(name=name, password=password))

    async def refresh(self, refresh_token: str) -> lpb.AuthResponse:
        return await self._call(
            self.stub.RefreshToken, lpb.RefreshTokenRequest(refresh_token=refresh_token), frozenset()
        )

    async def account(self, player_id: str = "") -> lpb.Account:
        return await self._read(self.stub.GetAccount, lpb.GetAccountRequest(player_id=player_id))

    # lobbies
    async def create_lobby(
        self,
        game: str,
        options: Mapping[str, Any] | None = None,
        *,
        seats: int = 0,
        ante: int = 0,
        online: bool = False,
        private: bool = False,
        request_id: str | None = None,
        turn_seconds: int | None = None,
        time_bank_seconds: int | None = None,
        autoplay_level: str | None = None,
        abandon_after_seconds: int | None = None,
    ) -> lpb.Lobby:
        """The turn clock's fields (docs/clock.md): None takes the lobby's default."""
        req = lpb.CreateLobbyRequest(
            request_id=request_id or new_request_id(),
            game=game,
            seats=seats,
            ante=ante,
            online=online,
            private=private,
        )
        if turn_seconds is not None:
            req.turn_seconds = turn_seconds
        if time_bank_seconds is not None:
            req.time_bank_seconds = time_bank_seconds
        if autoplay_level is not None:
            req.autoplay_level = autoplay_level
        if abandon_after_seconds is not None:
            req.abandon_after_seconds = abandon_after_seconds
        req.options.CopyFrom(_options(game, options))
        return await self._write(self.stub.CreateLobby, req)

    async def list_lobbies(
        self,
        game: str = "",
        *,
        online: bool | None = None,
        ante: int | None = None,
        page_size: int = 50,
        page_token: str = "",
    ) -> lpb.ListLobbiesResponse:
        req = lpb.ListLobbiesRequest(game=game, page_size=page_size, page_token=page_token)
        if online is not None:
            req.online = online
        if ante is not None:
            req.ante = ante
        return await self._read(self.stub.ListLobbies, req)

    async def get_lobby(self, lobby_id: str) -> lpb.Lobby:
        return await self._read(self.stub.GetLobby, lpb.GetLobbyRequest(lobby_id=lobby_id))

    async def join(
        self, lobby_id: str, *, seat: int | None = None, invite_code: str = "", request_id: str | None = None
    ) -> lpb.Lobby:
        req = lpb.JoinLobbyRequest(
            request_id=request_id or new_request_id(), lobby_id=lobby_id, invite_code=invite_code
        )
        if seat is not None:
            req.seat = seat
        return await self._write(self.stub.JoinLobby, req)

    async def leave(self, lobby_id: str, *, request_id: str | None = None) -> lpb.Lobby:
        return await self._write(
            self.stub.LeaveLobby,
            lpb.LeaveLobbyRequest(request_id=request_id or new_request_id(), lobby_id=lobby_id),
        )

    async def set_ready(
        self, lobby_id: str, ready: bool = True, *, request_id: str | None = None
    ) -> lpb.Lobby:
        return await self._write(
            self.stub.SetReady,
            lpb.SetReadyRequest(request_id=request_id or new_request_id(), lobby_id=lobby_id, ready=ready),
        )

    async def set_bot(
        self, lobby_id: str, level: str, *, seat: int | None = None, request_id: str | None = None
    ) -> lpb.Lobby:
        req = lpb.SetBotSeatRequest(request_id=request_id or new_request_id(), lobby_id=lobby_id, level=level)
        if seat is not None:
            req.seat = seat
        return await self._write(self.stub.SetBotSeat, req)

    async def kick(self, lobby_id: str, seat: int, *, request_id: str | None = None) -> lpb.Lobby:
        return await self._write(
            self.stub.KickPlayer,
            lpb.KickPlayerRequest(request_id=request_id or new_request_id(), lobby_id=lobby_id, seat=seat),
        )

    async def start(self, lobby_id: str, *, request_id: str | None = None) -> lpb.Lobby:
        return await self._write(
            self.stub.StartGame,
            lpb.StartGameRequest(request_id=request_id or new_request_id(), lobby_id=lobby_id),
        )

    async def cancel(self, lobby_id: str, reason: str = "", *, request_id: str | None = None) -> lpb.Lobby:
        """Cancel an open or starting lobby (host only): closed, every ante taken for it refunded."""
        return await self._write(
            self.stub.CancelLobby,
            lpb.CancelLobbyRequest(
                request_id=request_id or new_request_id(), lobby_id=lobby_id, reason=reason
            ),
        )

    async def quick_match(
        self,
        game: str,
        options: Mapping[str, Any] | None = None,
        *,
        ante: int = 0,
        request_id: str | None = None,
    ) -> lpb.Lobby:
        req = lpb.QuickMatchRequest(request_id=request_id or new_request_id(), game=game, ante=ante)
        req.options.CopyFrom(_options(game, options))
        return await self._write(self.stub.QuickMatch, req)

    async def my_games(self) -> lpb.ListMyGamesResponse:
        return await self._read(self.stub.ListMyGames, lpb.ListMyGamesRequest())

    async def resume(self, game_id: str, *, request_id: str | None = None) -> lpb.Lobby:
        return await self._write(
            self.stub.ResumeGame,
            lpb.ResumeGameRequest(request_id=request_id or new_request_id(), game_id=game_id),
        )

    async def abandon(self, game_id: str, *, request_id: str | None = None) -> lpb.Lobby:
        return await self._write(
            self.stub.AbandonGame,
            lpb.AbandonGameRequest(request_id=request_id or new_request_id(), game_id=game_id),
        )


class RankingClient(ServiceClient):
    """``court.ranking.v1.RankingService``: balances, ledger, profiles, leaderboards, challenges."""

    def __init__(self, target: str | grpc.aio.Channel, token: str | None = None, **kwargs: Any):
        super().__init__(target, token, **kwargs)
        self.stub = stub(ranking_pb2_grpc.RankingServiceStub, self.channel)

    async def balance(self, player_id: str = "") -> rpb.Balance:
        return await self._read(self.stub.GetBalance, rpb.GetBalanceRequest(player_id=player_id))

    async def ledger(
        self, player_id: str = "", *, page_size: int = 50, page_token: str = ""
    ) -> rpb.LedgerHistory:
        return await self._read(
            self.stub.GetHistory,
            rpb.GetLedgerHistoryRequest(player_id=player_id, page_size=page_size, page_token=page_token),
        )

    async def profile(self, player_id: str = "") -> rpb.Profile:
        return await self._read(self.stub.GetProfile, rpb.GetProfileRequest(player_id=player_id))

    async def leaderboard(
        self,
        game: str,
        *,
        limit: int = 10,
        metric: rpb.Metric.ValueType = rpb.METRIC_RATING,
        offset: int = 0,
        around: str = "",
    ) -> rpb.Leaderboard:
        return await self._read(
            self.stub.GetLeaderboard,
            rpb.GetLeaderboardRequest(game=game, limit=limit, metric=metric, offset=offset, around=around),
        )

    async def challenges(self, game_id: str, seat: int | None = None) -> rpb.Challenges:
        req = rpb.GetChallengesRequest(game_id=game_id)
        if seat is not None:
            req.seat = seat
        return await self._read(self.stub.GetChallenges, req)

    async def audit(self, *, timeout: float | None = 120.0) -> rpb.AuditResponse:
        """Admin only: the ledger's invariants checked across the whole database."""
        return await self._call(self.stub.Audit, rpb.AuditRequest(), RETRY_READ, timeout=timeout)

    async def ratings(self, game: str, player_ids: Sequence[str]) -> rpb.Ratings:
        return await self._read(
            self.stub.GetRatings, rpb.GetRatingsRequest(game=game, player_ids=list(player_ids))
        )


class BotClient(ServiceClient):
    """``court.bot.v1.BotService``: what a bot would play in one of the caller's seats."""

    def __init__(self, target: str | grpc.aio.Channel, token: str | None = None, **kwargs: Any):
        super().__init__(target, token, **kwargs)
        self.stub = stub(bot_pb2_grpc.BotServiceStub, self.channel)

    async def suggest(
        self,
        game_id: str,
        seat: int | None = None,
        level: str = "",
        *,
        timeout: float | None = None,
        view: rules_pb2.GameView | None = None,
    ) -> bot_pb2.SuggestResponse:
        """``view``: the caller's own view of the game as the rules service gave it (GetView,
        WatchGame); sent along, the bot decides from it instead of reading it again."""
        req = bot_pb2.SuggestRequest(game_id=game_id, level=level)
        if seat is not None:
            req.seat = seat
        if view is not None:
            req.view.CopyFrom(view)
        return await self._call(self.stub.Suggest, req, RETRY_READ, timeout=timeout)
