"""The lobby gRPC servicer: proto in, store call (in a worker thread) and backend calls, proto out.

Mutating calls are idempotent on (caller, request_id): the first answer is stored and returned to
every retry. Domain errors become status codes once, at the edge (court_kit's EdgeInterceptor).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from court_games import GAME_NAMES, get_game
from court_kit import clock as kclock
from court_kit import logging as klog
from court_kit import typed
from court_kit.checks import page_offset, quote
from court_kit.errors import (
    Aborted,
    FailedPrecondition,
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
from .clients import Backends, RemoteError
from .models import Account
from .saga import Starter
from .store import (
    ABANDONED,
    BOT_LEVELS,
    CANCELLED,
    FINISHED,
    MAX_CANCEL_REASON,
    OPEN,
    STARTED,
    STARTING,
    Call,
    LobbyInfo,
    LobbyStore,
    SeatInfo,
    check_name,
)

log = klog.get_logger("court_lobby.servicer")

MAX_ANTE = 1_000_000
BOT_PREFIX = "bot:"
QUICK_MATCH_CANDIDATES = 20
RESUME_BOT_LEVEL = "heuristic"  # takes a resumed game's seat whose player's account is gone
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


def _every_person_asked(info: LobbyInfo) -> bool:
    people = [s for s in info.seated if s.account_id]
    return bool(people) and all(s.abandon_asked for s in people)


def _abandon_reason(why: str, online: bool) -> str:
    """What the players of an abandoned game read (the rules service takes at most 200 characters)."""
    text = f"the game was abandoned ({why})" + ("; every ante is refunded" if online else "")
    return text if len(text) <= 200 else text[:197] + "..."


def _ts(dt: Any) -> Timestamp:
    t = Timestamp()
    if dt is not None:
        t.FromDatetime(dt)
    return t


def seat_count(game: str, options: dict[str, Any]) -> int:
    """How many seats ``game`` with ``options`` needs (the engine decides; bad options raise)."""
    if game not in GAME_NAMES:
        raise InvalidArgument(f"unknown game {quote(game)}; games: {', '.join(GAME_NAMES)}")
    module = get_game(game)
    return int(module.num_players(module.new_game(module.options_from_dict(options), 0)))


class LobbyServicer(lobby_pb2_grpc.LobbyServiceServicer):
    def __init__(
        self,
        store: LobbyStore,
        backends: Backends,
        tokens: accounts.TokenPolicy,
        limits: accounts.LoginLimits | None = None,
        starter: Starter | None = None,
    ):
        self.store = store
        self.backends = backends
        self.tokens = tokens
        self.limits = limits or accounts.LoginLimits()
        self.starter = starter or Starter(store, backends, self._render_start)

    def _render_start(self, info: LobbyInfo) -> bytes:
        """The StartGame answer the saga stores: the started lobby as its host sees it."""
        return self._lobby_proto(info, info.host_id).SerializeToString()

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
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
            lambda info: self._lobby_proto(info, me.id).SerializeToString(),
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
            ended = await asyncio.shield(asyncio.ensure_future(self.starter.drive(lobby_id)))
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

    def _lobby_proto(self, info: LobbyInfo, viewer: str | None = None) -> pb.Lobby:
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
                    pb.LobbySeat(
                        seat=n, player_id=pid, name=s.name, ready=s.ready, abandon_asked=s.abandon_asked
                    )
                )
        return out

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
        if accounts.needs_rehash(acc.password_hash):
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

    async def _check_ante(self, me: Account, ante: int) -> None:
        """Joining an online lobby with an ante needs at least that many rank points."""
        if ante <= 0:
            return
        balance = await self.backends.balance(me.id)
        if balance < ante:
            raise FailedPrecondition(f"this lobby's ante is {ante} rank points and you hold {balance}")

    def _check_online(self, me: Account, online: bool) -> None:
        if online and me.guest:
            raise PermissionDenied("guest accounts play local games; create an account to play online")

    def _validate_new_lobby(
        self, game: str, options: dict[str, Any], seats: int, ante: int, online: bool
    ) -> int:
        needed = seat_count(game, options)
        if seats and seats != needed:
            raise InvalidArgument(f"{game} with these options seats {needed} players, not {seats}")
        if ante < 0 or ante > MAX_ANTE:
            raise InvalidArgument(f"the ante must be from 0 to {MAX_ANTE} rank points")
        if ante and not (online and game == "queens_court"):
            raise InvalidArgument("an ante is staked only in online Queen's Court lobbies")
        return needed

    @staticmethod
    def _clock(request: Any, online: bool) -> dict[str, Any]:
        """The lobby's turn clock from the request's optional fields, defaults for the rest
        (court_kit.clock: 45 s turns online, none locally); INVALID_ARGUMENT outside the ranges."""

        def opt(name: str, default: Any) -> Any:
            return getattr(request, name) if request.HasField(name) else default

        c = kclock.validate(
            opt("turn_seconds", kclock.ONLINE_TURN_SECONDS if online else kclock.LOCAL_TURN_SECONDS),
            opt("time_bank_seconds", kclock.DEFAULT_BANK_SECONDS),
            opt("autoplay_level", kclock.DEFAULT_LEVEL),
            opt("abandon_after_seconds", kclock.DEFAULT_ABANDON_SECONDS),
        )
        return {
            "turn_seconds": c.turn_seconds,
            "time_bank_seconds": c.time_bank_seconds,
            "autoplay_level": c.autoplay_level,
            "abandon_after_seconds": c.abandon_after_seconds,
        }

    async def CreateLobby(self, request: pb.CreateLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            options = typed.requested_options(request.game, request.options)
            seats = self._validate_new_lobby(
                request.game, options, request.seats, request.ante, request.online
            )
            clock = self._clock(request, request.online)
            self._check_online(me, request.online)
            await self._check_ante(me, request.ante)
            return await self._run(
                self.store.create_lobby,
                me,
                request.game,
                options,
                request.online,
                request.ante,
                seats,
                not request.private,
                None,
                call,
                clock,
            )

        return await self._once(me, request, "CreateLobby", work)

    async def ListLobbies(self, request: pb.ListLobbiesRequest, context: Any) -> pb.ListLobbiesResponse:
        await self._me()
        size = request.page_size or 50
        if not 1 <= size <= 200:
            raise InvalidArgument("page_size must be from 1 to 200")
        offset = page_offset(request.page_token, 9) if request.page_token else 0
        if request.game and request.game not in GAME_NAMES:
            raise InvalidArgument(f"unknown game {quote(request.game)}; games: {', '.join(GAME_NAMES)}")
        found = await self._run(
            self.store.list_open,
            request.game or None,
            request.ante if request.HasField("ante") else None,
            request.online if request.HasField("online") else None,
            True,
            size + 1,
            offset,
        )
        out = pb.ListLobbiesResponse(lobbies=[self._lobby_proto(x) for x in found[:size]])
        if len(found) > size:
            out.next_page_token = str(offset + size)
        return out

    async def GetLobby(self, request: pb.GetLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()
        info = await self._run(self.store.lobby, request.lobby_id)
        if not info.public and not info.seat_of(me.id):
            raise NotFound(f"no lobby {quote(request.lobby_id)}")  # a private lobby is not disclosed
        return self._lobby_proto(info, me.id)

    async def _join(self, me: Account, lobby_id: str, code: str, seat: int | None, call: Call) -> LobbyInfo:
        info = await self._run(self.store.lobby, lobby_id)
        self._check_online(me, info.online)
        if not info.seat_of(me.id):
            await self._check_ante(me, info.ante)
        return await self._run(self.store.join, lobby_id, me, code, seat, call)

    async def JoinLobby(self, request: pb.JoinLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            seat = request.seat if request.HasField("seat") else None
            return await self._join(me, request.lobby_id, request.invite_code, seat, call)

        return await self._once(me, request, "JoinLobby", work)

    async def LeaveLobby(self, request: pb.LeaveLobbyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self._run(self.store.leave, request.lobby_id, me, call)

        return await self._once(me, request, "LeaveLobby", work)

    async def SetReady(self, request: pb.SetReadyRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self._run(self.store.set_ready, request.lobby_id, me, request.ready, call)

        return await self._once(me, request, "SetReady", work)

    async def SetBotSeat(self, request: pb.SetBotSeatRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            seat = request.seat if request.HasField("seat") else None
            if request.level:
                if request.level not in BOT_LEVELS:
                    raise InvalidArgument(
                        f"unknown bot level {quote(request.level)}; use one of {', '.join(BOT_LEVELS)}"
                    )
                return await self._run(self.store.add_bot, request.lobby_id, me, request.level, seat, call)
            if seat is None:
                raise InvalidArgument("name the seat whose bot to remove")
            return await self._run(self.store.kick, request.lobby_id, me, seat, True, call)

        return await self._once(me, request, "SetBotSeat", work)

    async def KickPlayer(self, request: pb.KickPlayerRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self._run(self.store.kick, request.lobby_id, me, request.seat, False, call)

        return await self._once(me, request, "KickPlayer", work)

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
            info = await self._run(self.store.lobby, request.lobby_id)
            if info.host_id != me.id:
                raise PermissionDenied("only the lobby's host may start the game")
            if info.status == OPEN and info.online and info.ante:
                for s in info.seated:
                    if s.account_id:
                        balance = await self.backends.balance(s.account_id)
                        if balance < info.ante:
                            raise FailedPrecondition(
                                f"{s.name} holds {balance} rank points, less than the ante of {info.ante}"
                            )
            await self._run(
                self.store.begin_start,
                request.lobby_id,
                me,
                call,
                lease_owner=self.starter.owner,
                lease=self.starter.lease,
            )
            raise rq.Replayed(rq.Stored(0, None))  # claimed and pending: the saga answers

        return await self._once(me, request, "StartGame", work)

    async def CancelLobby(self, request: pb.CancelLobbyRequest, context: Any) -> pb.Lobby:
        """open -> cancelled at once; starting -> undone by the start saga (every ante refunded once,
        keyed by the game id), then cancelled. The answer is the closed lobby, its ``start_error``
        the host's reason."""
        me = await self._me()
        reason = request.reason.strip()
        if len(reason) > MAX_CANCEL_REASON:
            raise InvalidArgument(f"the reason has at most {MAX_CANCEL_REASON} characters, got {len(reason)}")

        async def work(call: Call) -> LobbyInfo:
            info = await self._run(self.store.cancel, request.lobby_id, me, reason, call)
            if info is not None:
                log.info("lobby cancelled", lobby_id=info.id, by=me.id)
                return info
            log.info("lobby cancelled while starting; undoing the start", lobby_id=request.lobby_id, by=me.id)
            raise rq.Replayed(rq.Stored(0, None))  # claimed and pending: answered once the start is undone

        return await self._once(me, request, "CancelLobby", work)

    async def QuickMatch(self, request: pb.QuickMatchRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            self._check_online(me, True)
            options = typed.requested_options(request.game, request.options)
            seats = self._validate_new_lobby(request.game, options, 0, request.ante, True)
            await self._check_ante(me, request.ante)
            candidates = await self._run(
                self.store.list_open, request.game, request.ante, True, True, QUICK_MATCH_CANDIDATES
            )
            for c in candidates:
                if c.seat_of(me.id):
                    return await self._run(self.store.remember, call, c.id)
            people = sorted({s.account_id for c in candidates for s in c.seated if s.account_id} | {me.id})
            ratings = await self.backends.ratings(request.game, people)
            mine = ratings.get(me.id, 25.0)

            def distance(c: LobbyInfo) -> float:
                seated = [ratings.get(s.account_id, 25.0) for s in c.seated if s.account_id]
                return abs(sum(seated) / len(seated) - mine) if seated else 0.0

            for c in sorted(candidates, key=lambda c: (distance(c), c.created_at)):
                try:
                    return await self._run(self.store.join, c.id, me, "", None, call)
                except (FailedPrecondition, Aborted, PermissionDenied):
                    continue  # filled or started meanwhile: the next one
            clock = self._clock(pb.CreateLobbyRequest(), True)  # quick match: the online defaults
            return await self._run(
                self.store.create_lobby,
                me,
                request.game,
                options,
                True,
                request.ante,
                seats,
                True,
                None,
                call,
                clock,
            )

        return await self._once(me, request, "QuickMatch", work)

    # ------------------------------------------------------------------ my games

    async def _still_running(self, info: LobbyInfo) -> bool:
        """Ask the rules service; a finished game's lobby is marked finished on the way."""
        view = await self.backends.game_view(info.game_id)
        # a game the rules service closed for a resume whose new lobby is not recorded yet (the
        # lobby died in between) counts as running: resuming it again completes that resume
        if view.finished and not view.result.resumed_into:
            # a game the lobby closed (an abandon whose refund has not gone through yet) stays
            # started here, so the abandon sweep still finds it and refunds it; it is not running
            if not view.result.closed_reason:
                await self._run(self.store.set_status, info.id, STARTED, FINISHED)
            return False
        return True

    async def ListMyGames(self, request: pb.ListMyGamesRequest, context: Any) -> pb.ListMyGamesResponse:
        me = await self._me()
        out = pb.ListMyGamesResponse()
        for info in await self._run(self.store.my_games, me.id):
            if await self._still_running(info):
                out.games.append(
                    pb.MyGame(
                        game_id=info.game_id,
                        game=info.game,
                        seat=info.seat_of(me.id).seat_no,
                        lobby_id=info.id,
                        online=info.online,
                        ante=info.ante,
                        started=_ts(info.started_at),
                    )
                )
        return out

    async def _my_started_game(self, me: Account, game_id: str, unsure_ok: bool = False) -> LobbyInfo:
        """``unsure_ok``: the rules service away counts as running (AbandonGame: the close that
        follows judges it, and a game that has ended keeps its result)."""
        info = await self._run(self.store.lobby_of_game, game_id) if game_id and len(game_id) <= 64 else None
        if info is None or not info.seat_of(me.id):
            raise NotFound(f"you have no game {quote(game_id)}")
        if info.status != STARTED:
            raise FailedPrecondition(f"game {game_id} is not running (its lobby is {info.status})")
        try:
            running = await self._still_running(info)
        except Unavailable:
            if not unsure_ok:
                raise
            running = True
        if not running:
            raise FailedPrecondition(f"game {game_id} is not running (it has ended)")
        return info

    async def AbandonGame(self, request: pb.AbandonGameRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            under_way = await self._abandon_under_way(me, request.game_id, call)
            if under_way is not None:
                return under_way
            try:
                info = await self._my_started_game(me, request.game_id, unsure_ok=True)
            except FailedPrecondition:
                # the game closed since we looked: an abandon finished or under way (a duplicate of
                # this very call, or another person's last ask) answers; anything else is refused
                under_way = await self._abandon_under_way(me, request.game_id, call)
                if under_way is not None:
                    return under_way
                raise
            # the ask is recorded even with the rules service away: once every person asked, the
            # abandon is finished by the sweep when it is back
            info = await self._run(self.store.ask_abandon, info.id, me.id)
            if _every_person_asked(info):
                log.info("abandon asked by the last person at the table", game_id=info.game_id, by=me.id)
                return await self._abandon(info, call, "every person at the table asked")
            # alone: the seat is marked away and the autoplay bot plays it to the end; the result stands
            await self.backends.leave_seat(info.game_id, info.seat_of(me.id).seat_no)
            log.info("abandon asked: the seat is away, the game goes on", game_id=info.game_id, by=me.id)
            return await self._run(self.store.remember, call, info.id)

        return await self._once(me, request, "AbandonGame", work)

    async def _abandon_under_way(self, me: Account, game_id: str, call: Call) -> LobbyInfo | None:
        """When every person of ``me``'s lobby of ``game_id`` has asked: finish the abandon if it is
        still under way (a backend was away, or a duplicate is at it), answer the abandoned lobby if
        it is done; else None.

        Done, the answer is the abandoned lobby, stored under the call's request id, whoever finished
        it: a duplicate of this call, another person's last ask, or the sweep (after an attempt of
        this call found a backend away and was told to retry with the same request_id to see it).
        The caller asked (every person did), so the abandon is what they asked for; and duplicates of
        one call racing the sweep all get the one answer, where a refusal for those that looked
        after the sweep and the lobby for the call the sweep overtook would be two."""
        found = await self._run(self.store.lobby_of_game, game_id) if game_id and len(game_id) <= 64 else None
        if found is None or not found.seat_of(me.id) or not _every_person_asked(found):
            return None
        if found.status == STARTED:
            return await self._abandon(found, call, "every person at the table asked")
        if found.status == ABANDONED:  # by an earlier call, another's last ask, or the sweep
            return await self._run(self.store.remember, call, found.id)
        return None

    async def _abandon(self, info: LobbyInfo, call: Call | None, why: str) -> LobbyInfo:
        """Abandon the started game, in this order, each step keyed so repeating it changes nothing:

        1. the rules service closes the game (CloseGame, keyed by the game id), so nobody plays on
           and no result, so no payout, can follow: refund and payout never both happen;
        2. the ranking service refunds every ante exactly once (its entries keyed by the game id);
        3. the lobby is marked abandoned (answering ``call``).

        A game that ended before step 1 keeps its result (FAILED_PRECONDITION, nothing refunded:
        ranking pays it out). A backend away: nothing after that step happens now; every person
        asked, which is recorded, so the abandon sweep (``finish_abandons``) or any retry of the
        call finishes it."""
        try:
            await self.backends.close_game(info.game_id, _abandon_reason(why, info.online))
        except FailedPrecondition:
            await self._run(self.store.set_status, info.id, STARTED, FINISHED)
            raise FailedPrecondition(
                f"game {info.game_id} has ended before it could be abandoned: its result stands"
            ) from None
        except Unavailable as exc:
            raise Unavailable(
                f"game {info.game_id} could not be closed yet ({str(exc)[:200]}); every person asked, so the "
                "lobby abandons it and refunds every ante as soon as the rules service answers; retry "
                "AbandonGame with the same request_id to see it"
            ) from None
        if info.online:
            await self.backends.abandon_game(info.game_id)  # every ante back, once
        try:
            done = await self._run(self.store.abandon, info.id, call)
        except Aborted:
            now = await self._run(self.store.lobby, info.id)
            if now.status != ABANDONED:
                raise
            done = now if call is None else await self._run(self.store.remember, call, info.id)
        log.info("game abandoned", game_id=info.game_id, why=why)
        return done

    async def finish_abandons(self) -> int:
        """Finish every abandon whose closing or refund did not go through (a backend away when the
        last person asked): started lobbies every person of which asked. Returns how many ended."""
        n = 0
        for info in await self._run(self.store.abandoning):
            try:
                await self._abandon(info, None, "every person at the table asked")
                n += 1
            except (Aborted, FailedPrecondition):
                continue  # abandoned by another replica meanwhile, or the game had ended
            except ServiceError as exc:
                log.warning("could not finish an abandon", game_id=info.game_id, error=str(exc)[:200])
        return n

    async def abandon_away_games(self, now_ms: int | None = None) -> int:
        """Abandon every started game whose every human seat has been away for the lobby's
        abandon_after_seconds (the rules view's ``abandon_at`` has passed). Returns how many."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        n, after = 0, ""
        while True:
            batch = await self._run(self.store.started_with_clock, 500, after)
            if not batch:
                return n
            after = batch[-1].id
            for info in batch:
                if not info.clock or not info.clock.get("abandon_after_seconds") or not info.game_id:
                    continue
                try:
                    view = await self.backends.game_view(info.game_id)
                    # closed by the lobby yet still started here: an abandon whose refund did not go
                    # through (ranking away); finish it
                    under_way = view.finished and bool(view.result.closed_reason)
                    if not under_way and (
                        view.finished
                        or not view.HasField("abandon_at")
                        or view.abandon_at.ToMilliseconds() > now_ms
                    ):
                        continue
                    await self._abandon(info, None, "every person's seat was away for the abandon time")
                    n += 1
                except (Aborted, FailedPrecondition):
                    continue  # finished or abandoned meanwhile
                except ServiceError as exc:
                    log.warning("could not check an away game", game_id=info.game_id, error=str(exc))

    async def _resume(self, me: Account, game_id: str, call: Call) -> LobbyInfo:
        """A new started lobby whose game continues ``game_id`` from its save point.

        Seats: every person of the old game keeps their seat (while their account exists, else a
        ``heuristic`` bot takes it), every bot seat keeps its bot; the caller hosts. The resumed
        game is a local one (no ante, not ranked); the old lobby is marked abandoned (an online old
        game is abandoned in ranking too, refunding any ante). Resuming a game again, by any of its
        players, answers the lobby of the first resume.
        """
        old = await self._run(self.store.lobby_of_game, game_id) if game_id and len(game_id) <= 64 else None
        if old is None:
            raise NotFound(f"no game {quote(game_id)}")
        if not old.seat_of(me.id):
            raise PermissionDenied(f"you did not sit in game {game_id}")
        done = await self._run(self.store.resumed_lobby, game_id)
        if done is not None:
            return await self._run(self.store.remember, call, done.id)
        if not hasattr(get_game(old.game), "save_point"):
            raise FailedPrecondition(
                f"{old.game} games have no save points and cannot be resumed "
                "(only Hearts saves at the start of every hand)"
            )
        if old.status != STARTED or not await self._still_running(old):
            status = FINISHED if old.status == STARTED else old.status
            raise FailedPrecondition(f"game {game_id} cannot be resumed: it is {status}")
        seats: list[SeatInfo] = []
        for x in old.seated:
            if x.account_id is not None:
                try:
                    acc = await self._run(self.store.account, x.account_id)
                    seats.append(SeatInfo(x.seat_no, acc.id, None, acc.name, True))
                    continue
                except NotFound:
                    x = SeatInfo(x.seat_no, None, RESUME_BOT_LEVEL, "", True)
            seats.append(SeatInfo(x.seat_no, None, x.bot_level, f"Bot ({x.bot_level})", True))
        new_id = await self.backends.resume_game(
            old.game,
            [x.account_id or f"{BOT_PREFIX}{x.bot_level}" for x in seats],
            game_id,
            request_id=f"lobby-resume-{game_id}",
        )
        if old.online:
            await self.backends.abandon_game(game_id)
        info = await self._run(self.store.record_resume, old, me, seats, new_id, call)
        log.info("game resumed", game_id=new_id, resumed_from=game_id, by=me.id)
        return info

    async def ResumeGame(self, request: pb.ResumeGameRequest, context: Any) -> pb.Lobby:
        me = await self._me()

        async def work(call: Call) -> LobbyInfo:
            return await self._resume(me, request.game_id, call)

        return await self._once(me, request, "ResumeGame", work)
