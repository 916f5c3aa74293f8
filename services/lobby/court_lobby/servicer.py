"""The lobby gRPC servicer: proto in, a call of the application layer, proto out.

Matchmaking and the life of a lobby's game are ``court_lobby.application``; accounts (sign-up,
login, tokens) are here with ``court_lobby.accounts``. Mutating calls are idempotent on
(caller, request_id): the first answer is stored and returned to every retry (``_once``). Domain
errors become status codes once, at the edge (court_kit's EdgeInterceptor).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from court_contract import typed
from court_kit import logging as klog
from court_kit.checks import page_offset
from court_kit.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from court_kit.server import current_identity
from court_proto.court.lobby.v1 import lobby_pb2 as pb
from court_proto.court.lobby.v1 import lobby_pb2_grpc
from court_store import requests as rq
from google.protobuf.timestamp_pb2 import Timestamp

from . import accounts
from .application import BOT_PREFIX, CLOCK_FIELDS, LobbyApplication, cancel_reason
from .clients import RemoteError
from .models import Account
from .store import (
    CANCELLED,
    FINISHED,
    OPEN,
    STARTED,
    STARTING,
    Call,
    LobbyInfo,
    LobbyStore,
    check_name,
)

T = TypeVar("T")
log = klog.get_logger("court_lobby.servicer")

STATES = {
    OPEN: pb.LOBBY_STATE_OPEN,
    STARTING: pb.LOBBY_STATE_STARTING,
    STARTED: pb.LOBBY_STATE_STARTED,
    FINISHED: pb.LOBBY_STATE_FINISHED,
    CANCELLED: pb.LOBBY_STATE_CLOSED,
}
CODES = {c.value[0]: c for c in grpc.StatusCode}
START_WAIT = 25.0  # seconds a StartGame call waits for its saga before answering UNAVAILABLE (retry: same id)
PUBLIC_METHODS = tuple(
    f"/court.lobby.v1.LobbyService/{m}" for m in ("CreateAccount", "CreateGuest", "Login", "RefreshToken")
)


def _ts(dt: Any) -> Timestamp:
    t = Timestamp()
    if dt is not None:
        t.FromDatetime(dt)
    return t


def lobby_proto(info: LobbyInfo, viewer: str | None = None) -> pb.Lobby:
    state = STATES.get(info.status, pb.LOBBY_STATE_ABANDONED if info.game_id else pb.LOBBY_STATE_CLOSED)
    out = pb.Lobby(
        lobby_id=info.id,
        game=info.game,
        host=info.host_id,
        ante=info.ante,
        state=state,
        game_id=info.game_id or "",
        created=_ts(info.created_at),
        online=info.online,
        private=not info.public,
        resumed_from=info.resumed_from or "",
    )
    if info.status != STARTING and info.start_error:
        out.start_error = info.start_error
    if info.status in (OPEN, STARTING):
        out.game_id = ""  # fixed at the start, shown once the game exists
    if info.options:
        out.options.CopyFrom(typed.options_to_proto(info.game, info.options))
    if info.clock:
        out.turn_seconds = int(info.clock["turn_seconds"])
        out.time_bank_seconds = int(info.clock["time_bank_seconds"])
        out.autoplay_level = str(info.clock["autoplay_level"])
        out.abandon_after_seconds = int(info.clock["abandon_after_seconds"])
    if info.invite_code and viewer is not None and info.seat_of(viewer):
        out.invite_code = info.invite_code
    seated = {s.seat_no: s for s in info.seated}
    for n in range(info.seats):
        s = seated.get(n)
        if s is None:
            out.seats.append(pb.LobbySeat(seat=n))
        else:
            pid = s.account_id or f"{BOT_PREFIX}{s.bot_level}"
            out.seats.append(
                pb.LobbySeat(seat=n, player_id=pid, name=s.name, ready=s.ready, abandon_asked=s.abandon_asked)
            )
    return out


def render_start(info: LobbyInfo) -> bytes:
    """The StartGame answer the start saga stores: the started lobby as its host sees it."""
    return lobby_proto(info, info.host_id).SerializeToString()


def _seat(request: Any) -> int | None:
    return request.seat if request.HasField("seat") else None


class LobbyServicer(lobby_pb2_grpc.LobbyServiceServicer):
    def __init__(
        self,
        app: LobbyApplication,
        tokens: accounts.TokenPolicy,
        limits: accounts.LoginLimits | None = None,
    ):
        self.app = app
        self.store: LobbyStore = app.store
        self.tokens = tokens
        self.limits = limits or accounts.LoginLimits()

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _hashing(self, fn: Callable[..., Any], *args: Any) -> Any:
        """argon2 (CPU-bound) on its own small pool: a flood of sign-ins queues there and never
        takes the threads every other call's database work runs on."""
        return await asyncio.get_running_loop().run_in_executor(self.limits.pool, fn, *args)

    async def _me(self) -> Account:
        ident = current_identity()
        if ident.role != "player":
            raise PermissionDenied("lobby calls are made by players (sign in with Login or CreateGuest)")
        try:
            return await self._run(self.store.account, ident.sub)
        except NotFound:
            raise Unauthenticated("the token's account does not exist; log in again") from None

    def _call(self, me: Account, request: Any, method: str) -> Call:
        if not request.request_id:
            raise InvalidArgument("request_id is required: choose one per change and reuse it on retries")
        return Call(
            rq.Claim(me.id, request.request_id, method, rq.body_hash(method, request)),
            lambda info: lobby_proto(info, me.id).SerializeToString(),
        )

    @staticmethod
    def _replay(stored: rq.Stored) -> pb.Lobby:
        if stored.code:
            raise RemoteError(
                CODES.get(stored.code, grpc.StatusCode.UNKNOWN), (stored.response or b"").decode()
            )
        return pb.Lobby.FromString(stored.response or b"")

    async def _once(
        self, me: Account, request: Any, method: str, work: Callable[[Call], Awaitable[LobbyInfo]]
    ) -> pb.Lobby:
        """Apply ``work`` once per (caller, request id): its store write claims the request id in the
        same transaction as the change and stores the answer with it, so a concurrent duplicate
        waits for the first and gets its answer; a reused id with another body is INVALID_ARGUMENT."""
        call = self._call(me, request, method)
        stored = await self._run(self.store.recall, call.claim)
        if stored is None:
            try:
                return pb.Lobby.FromString(call.render(await work(call)))
            except rq.Replayed as again:
                stored = again.stored
            except ServiceError:
                # a concurrent duplicate may have committed meanwhile and changed what ``work``
                # checks (an abandoned game is no longer running): its answer is ours
                stored = await self._run(self.store.recall, call.claim)
                if stored is None:
                    raise
        if stored.pending:  # a StartGame whose saga has not ended yet, or a CancelLobby undoing one
            return await self._await_start(call, request.lobby_id, method == "CancelLobby")
        return self._replay(stored)

    async def _await_start(self, call: Call, lobby_id: str, cancel: bool = False) -> pb.Lobby:
        """Drive the lobby's start saga (or wait for whoever drives it) until its answer is stored.

        ``cancel``: the call is a CancelLobby that caught the lobby starting; the saga answers only
        StartGame, so once the lobby no longer starts this call stores its own answer (the closed
        lobby, or FAILED_PRECONDITION had the game started regardless); any retry, on any replica,
        stores the same one, and the first stored is every retry's answer."""
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + START_WAIT, 0.02
        while True:
            # shielded: a caller who gives up does not stop the saga half-way (the sweep would finish it)
            ended = await asyncio.shield(asyncio.ensure_future(self.app.starter.drive(lobby_id)))
            stored = await self._run(self.store.recall, call.claim)
            if stored is not None and not stored.pending:
                return self._replay(stored)
            if cancel and ended:
                info = await self._run(self.store.lobby, lobby_id)
                if info.status != STARTING:
                    if info.status == CANCELLED:
                        await self._run(
                            self.store.answer_pending,
                            call.claim.caller,
                            call.claim.request_id,
                            call.render(info),
                        )
                    else:
                        await self._run(
                            self.store.answer_pending,
                            call.claim.caller,
                            call.claim.request_id,
                            f"lobby {lobby_id}'s game started before the cancel could undo it "
                            f"(it is {info.status}); a seated player may AbandonGame".encode(),
                            int(grpc.StatusCode.FAILED_PRECONDITION.value[0]),
                        )
                    continue
            if loop.time() > deadline:
                raise Unavailable(
                    f"the game of lobby {lobby_id} is still starting; retry "
                    f"{'CancelLobby' if cancel else 'StartGame'} with the same request_id"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def _auth_reply(self, acc: Account) -> pb.AuthResponse:
        token, expires = self.tokens.access(acc.id)
        refresh = await self._run(self.store.issue_refresh, acc.id, self.tokens.refresh_delta)
        return pb.AuthResponse(
            account=pb.Account(player_id=acc.id, name=acc.name, created=_ts(acc.created_at), guest=acc.guest),
            token=token,
            expires=_ts(expires),
            refresh_token=refresh,
            refresh_expires=Timestamp(
                seconds=int(expires.timestamp() - self.tokens.ttl + self.tokens.refresh_ttl)
            ),
        )

    # ------------------------------------------------------------------ accounts

    async def CreateAccount(self, request: pb.CreateAccountRequest, context: Any) -> pb.AuthResponse:
        self.limits.check_signup(self.limits.client(context))
        accounts.check_password(request.password)
        check_name(request.name)
        acc = await self._run(
            self.store.create_account,
            request.name,
            await self._hashing(accounts.hash_password, request.password),
        )
        log.info("account created", player_id=acc.id)
        return await self._auth_reply(acc)

    async def CreateGuest(self, request: pb.CreateGuestRequest, context: Any) -> pb.AuthResponse:
        self.limits.check_signup(self.limits.client(context))
        name = request.name or f"Guest-{secrets.token_hex(3).upper()}"
        acc = await self._run(self.store.create_account, name, None, True)
        return await self._auth_reply(acc)

    async def Login(self, request: pb.LoginRequest, context: Any) -> pb.AuthResponse:
        if len(request.password) > accounts.MAX_PASSWORD:
            raise InvalidArgument(f"a password has at most {accounts.MAX_PASSWORD} characters")
        self.limits.check_login(self.limits.client(context), request.name)
        acc = await self._run(self.store.account_by_name, request.name)
        ok = await self._hashing(
            accounts.verify_password, acc.password_hash if acc else None, request.password
        )
        if acc is None or not ok:
            raise Unauthenticated("wrong name or password")
        if acc.password_hash is not None and accounts.needs_rehash(acc.password_hash):
            new_hash = await self._hashing(accounts.hash_password, request.password)
            await self._run(self.store.set_password_hash, acc.id, new_hash)
        return await self._auth_reply(acc)

    async def RefreshToken(self, request: pb.RefreshTokenRequest, context: Any) -> pb.AuthResponse:
        acc = await self._run(self.store.use_refresh, request.refresh_token)
        return await self._auth_reply(acc)

    async def GetAccount(self, request: pb.GetAccountRequest, context: Any) -> pb.Account:
        me = await self._me()
        acc = me if not request.player_id else await self._run(self.store.account, request.player_id)
        return pb.Account(player_id=acc.id, name=acc.name, created=_ts(acc.created_at), guest=acc.guest)

    # ------------------------------------------------------------------ lobbies

    async def CreateLobby(self, request: pb.CreateLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.create_lobby(
                me,
                call,
                game=request.game,
                options=request.options,
                seats=request.seats,
                ante=request.ante,
                online=request.online,
                public=not request.private,
                clock={f: getattr(request, f) for f in CLOCK_FIELDS if request.HasField(f)},
            )

        return await self._once(me, request, "CreateLobby", work)

    async def ListLobbies(self, request: pb.ListLobbiesRequest, context: Any) -> pb.ListLobbiesResponse:
        await self._me()
        size = request.page_size or 50
        if not 1 <= size <= 200:
            raise InvalidArgument("page_size must be from 1 to 200")
        offset = page_offset(request.page_token, 9) if request.page_token else 0
        found = await self.app.list_lobbies(
            request.game,
            request.ante if request.HasField("ante") else None,
            request.online if request.HasField("online") else None,
            size + 1,
            offset,
        )
        out = pb.ListLobbiesResponse(lobbies=[lobby_proto(x) for x in found[:size]])
        if len(found) > size:
            out.next_page_token = str(offset + size)
        return out

    async def GetLobby(self, request: pb.GetLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()
        return lobby_proto(await self.app.lobby(me, request.lobby_id), me.id)

    async def JoinLobby(self, request: pb.JoinLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.join(me, request.lobby_id, request.invite_code, _seat(request), call)

        return await self._once(me, request, "JoinLobby", work)

    async def LeaveLobby(self, request: pb.LeaveLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.leave(me, request.lobby_id, call)

        return await self._once(me, request, "LeaveLobby", work)

    async def SetReady(self, request: pb.SetReadyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.set_ready(me, request.lobby_id, request.ready, call)

        return await self._once(me, request, "SetReady", work)

    async def SetBotSeat(self, request: pb.SetBotSeatRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.set_bot_seat(me, request.lobby_id, request.level, _seat(request), call)

        return await self._once(me, request, "SetBotSeat", work)

    async def KickPlayer(self, request: pb.KickPlayerRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.kick(me, request.lobby_id, request.seat, call)

        return await self._once(me, request, "KickPlayer", work)

    async def QuickMatch(self, request: pb.QuickMatchRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.quick_match(
                me, call, game=request.game, options=request.options, ante=request.ante
            )

        return await self._once(me, request, "QuickMatch", work)

    # ------------------------------------------------------------------ starting

    async def StartGame(self, request: pb.StartGameRequest, context: Any) -> pb.Lobby:
        """open -> starting (the saga's identity fixed, the request claimed), then the saga (saga.py).

        Online games: every ante is checked first (a readable error), then taken by the ranking
        service exactly once, keyed by the game id. The answer is the started lobby, or, when the
        start had to be undone, FAILED_PRECONDITION (or the failing service's code) with the reason,
        also shown on the open lobby as ``start_error``.
        """
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            await self.app.begin_start(me, request.lobby_id, call)
            raise rq.Replayed(rq.Stored(0, None))  # claimed and pending: the saga answers

        return await self._once(me, request, "StartGame", work)

    async def CancelLobby(self, request: pb.CancelLobbyRequest, context: Any) -> pb.Lobby:
        """open -> cancelled at once; starting -> undone by the start saga (every ante refunded once,
        keyed by the game id), then cancelled. The answer is the closed lobby, its ``start_error``
        the host's reason."""
        me = await self._me()
        reason = cancel_reason(request.reason)

        async def work(call: Call) -> LobbyInfo:
            info = await self.app.cancel(me, request.lobby_id, reason, call)
            if info is not None:
                return info
            raise rq.Replayed(rq.Stored(0, None))  # claimed and pending: answered once the start is undone

        return await self._once(me, request, "CancelLobby", work)

    # ------------------------------------------------------------------ my games

    async def ListMyGames(self, request: pb.ListMyGamesRequest, context: Any) -> pb.ListMyGamesResponse:
        me = await self._me()
        out = pb.ListMyGamesResponse()
        running: list[LobbyInfo] = []
        if not (request.include_finished and request.page_token):  # the first page: unfinished games
            # (this also marks the games found ended as finished, so the finished page below sees them)
            running = await self.app.running_games(me)
        finished: list[LobbyInfo] = []
        if request.include_finished:
            finished, out.next_page_token = await self.app.finished_games(
                me, request.page_size, request.page_token
            )
        for info, ended in [(i, False) for i in running] + [(i, True) for i in finished]:
            seat = info.seat_of(me.id)
            if seat is None:  # left since (both lists hold the lobbies ``me`` sits in)
                continue
            out.games.append(
                pb.MyGame(
                    game_id=info.started_game_id,
                    game=info.game,
                    seat=seat.seat_no,
                    lobby_id=info.id,
                    online=info.online,
                    ante=info.ante,
                    started=_ts(info.started_at),
                    finished=ended,
                )
            )
        return out

    async def AbandonGame(self, request: pb.AbandonGameRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.ask_abandon(me, request.game_id, call)

        return await self._once(me, request, "AbandonGame", work)

    async def ResumeGame(self, request: pb.ResumeGameRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self.app.resume(me, request.game_id, call)

        return await self._once(me, request, "ResumeGame", work)
