"""The lobby service's storage: accounts, refresh tokens, lobbies, seats and the request log.

Every change to a lobby starts with ``_take`` (a conditional ``UPDATE lb_lobby SET version =
version + 1 WHERE id = ? AND status = 'open'``): on PostgreSQL that row lock queues concurrent
changes to one lobby, on SQLite ``BEGIN IMMEDIATE`` does the same, and the unique seat
constraints back both up. Starting moves the lobby from ``open`` to ``starting`` in one such
update, so of two concurrent starts exactly one proceeds.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from court_kit.checks import quote
from court_kit.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from court_store import changed, check_text, require_head, table_of, upgrade
from court_store import requests as rq
from grpc import StatusCode
from sqlalchemy import Integer, delete, func, true, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from .models import Account, Lobby, RefreshToken, RequestLog, Seat, utcnow

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE = "lobby"
BOT_LEVELS = ("random", "heuristic", "expert")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,22}[A-Za-z0-9_.\-]$")
MAX_REQUEST_ID = 64
OPEN, STARTING, STARTED, FINISHED, ABANDONED = "open", "starting", "started", "finished", "abandoned"
CANCELLED = "cancelled"  # the host cancelled it (CancelLobby) before its game started
REQUESTS = table_of(RequestLog)
COMPENSATING = "compensating: "  # start_error's prefix while a failed start is being undone
CANCELLING = "cancelling: "  # ... while a start is undone because the host cancelled the lobby
MAX_CANCEL_REASON = 200


def cancel_text(reason: str) -> str:
    """What the lobby's members read on a lobby its host cancelled."""
    return "cancelled by the host" + (f": {reason}" if reason else "")


def _not_cancelling() -> Any:
    """The lobby's host has not cancelled it while it was starting."""
    return col(Lobby.start_error).is_(None) | ~col(Lobby.start_error).startswith(CANCELLING, autoescape=True)


def _row(s: Session, lobby_id: str) -> Lobby:
    """The lobby's row as this transaction has it now (read again: a conditional UPDATE changed it)."""
    row = s.get(Lobby, lobby_id, populate_existing=True)
    if row is None:
        raise NotFound(f"no lobby {quote(lobby_id)}")
    return row


def new_game_id() -> str:
    """A game id the lobby fixes when a lobby enters ``starting`` (the rules service's id shape)."""
    return "g" + secrets.token_hex(12)


@dataclass(frozen=True, slots=True)
class Call:
    """A mutating call: its claim on (caller, request id) and how its answer is rendered."""

    claim: rq.Claim
    render: Callable[[LobbyInfo], bytes]


def migrate(engine: Engine) -> str | None:
    """Bring the lobby schema to the newest revision (service start and ``court-lobby migrate``)."""
    return upgrade(engine, MIGRATIONS, SERVICE)


def check_schema(engine: Engine) -> str | None:
    """Start-up with COURT_MIGRATE_ON_START=false: the schema must already be at the newest revision."""
    return require_head(engine, MIGRATIONS, SERVICE)


def check_name(name: Any, what: str = "name") -> str:
    """2 to 24 characters: letters, digits, space, ``_ . -``; starting with a letter or digit."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        shown = name if isinstance(name, str) and len(name) <= 40 else f"{str(name)[:40]}..."
        raise InvalidArgument(
            f"{what} {quote(shown)} is not allowed: use 2 to 24 characters, letters, digits, space, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SeatInfo:
    seat_no: int
    account_id: str | None
    bot_level: str | None
    name: str
    ready: bool
    abandon_asked: bool = False


@dataclass(frozen=True, slots=True)
class LobbyInfo:
    id: str
    game: str
    options: dict[str, Any]
    online: bool
    ante: int
    seats: int
    public: bool
    invite_code: str | None
    host_id: str
    status: str
    game_id: str | None
    seed: int | None
    resumed_from: str | None
    created_at: datetime
    started_at: datetime | None
    seated: tuple[SeatInfo, ...]
    start_rid: str | None = None
    start_error: str | None = None
    starting_at: datetime | None = None
    start_account: str | None = None
    start_request: str | None = None
    clock: dict[str, Any] | None = None  # court_kit.clock.ClockSettings fields; None: no clock

    @property
    def free_seats(self) -> int:
        return self.seats - len(self.seated)

    def seat_of(self, account_id: str) -> SeatInfo | None:
        return next((s for s in self.seated if s.account_id == account_id), None)

    @property
    def started_game_id(self) -> str:
        """The game id of a lobby whose start has begun (fixed by ``begin_start``)."""
        if self.game_id is None:
            raise FailedPrecondition(f"lobby {self.id} has no game: it was never started")
        return self.game_id


class LobbyStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    # ------------------------------------------------------------------ accounts

    def create_account(self, name: str, password_hash: str | None, guest: bool = False) -> Account:
        """A new account; ``AlreadyExists`` when the name (compared casefolded) is taken."""
        check_name(name)
        acc = Account(
            id=str(uuid.uuid4()),
            name=name,
            name_key=name.casefold(),
            password_hash=password_hash,
            guest=guest,
        )
        try:
            with self.session() as s, s.begin():
                s.add(acc)
        except IntegrityError:
            raise AlreadyExists(f"the name {quote(name)} is taken; choose another") from None
        return acc

    def account_by_name(self, name: str) -> Account | None:
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            return None  # no account has such a name
        with self.session() as s:
            return s.exec(select(Account).where(col(Account.name_key) == name.casefold())).first()

    def account(self, account_id: str) -> Account:
        check_text(account_id, "player_id", 64)
        with self.session() as s:
            acc = s.get(Account, account_id)
        if acc is None:
            raise NotFound(f"no account {quote(account_id)}")
        return acc

    def set_password_hash(self, account_id: str, password_hash: str) -> None:
        with self.session() as s, s.begin():
            s.execute(
                update(Account).where(col(Account.id) == account_id).values(password_hash=password_hash)
            )

    def issue_refresh(self, account_id: str, ttl: timedelta) -> str:
        token = secrets.token_urlsafe(32)
        with self.session() as s, s.begin():
            s.add(
                RefreshToken(token_hash=_hash_token(token), account_id=account_id, expires_at=utcnow() + ttl)
            )
        return token

    def use_refresh(self, token: str) -> Account:
        """Spend a refresh token (once: a replayed one is refused) and return its account."""
        if not isinstance(token, str) or not 10 <= len(token) <= 200:
            raise Unauthenticated("the refresh token is malformed; log in again")
        h = _hash_token(token)
        with self.session() as s, s.begin():
            done = s.execute(
                update(RefreshToken)
                .where(
                    col(RefreshToken.token_hash) == h,
                    col(RefreshToken.used).is_(False),
                    col(RefreshToken.expires_at) > utcnow(),
                )
                .values(used=True)
            )
            if changed(done) != 1:
                raise Unauthenticated("the refresh token is unknown, expired or already used; log in again")
            row = s.get(RefreshToken, h)
            acc = s.get(Account, row.account_id) if row is not None else None
        if acc is None:  # the account was deleted (its tokens go with it) between the two reads
            raise Unauthenticated("the refresh token's account does not exist; log in again")
        return acc

    # ------------------------------------------------------------------ the request log

    def recall(self, claim: rq.Claim) -> rq.Stored | None:
        """The stored answer to an earlier call with this request id, if any (None: a new call)."""
        check_text(claim.request_id, "request_id", MAX_REQUEST_ID)
        with self.session() as s:
            return rq.recall(s, REQUESTS, claim)

    @contextmanager
    def _write(self, call: Call | None) -> Iterator[Session]:
        """A write transaction that first claims ``call``'s request id (``Replayed``: claimed before)."""
        with self.session() as s, s.begin():
            if call is not None:
                check_text(call.claim.request_id, "request_id", MAX_REQUEST_ID)
                stored = rq.claim(s, REQUESTS, call.claim)
                if stored is not None:
                    raise rq.Replayed(stored)
            yield s

    def _reply(self, s: Session, call: Call | None, lobby_id: str) -> LobbyInfo:
        """The lobby as this transaction leaves it; the call's answer is stored with it."""
        s.flush()
        info = self._info(s, _row(s, lobby_id))
        if call is not None:
            rq.answer(s, REQUESTS, call.claim, call.render(info))
        return info

    def remember(self, call: Call, lobby_id: str) -> LobbyInfo:
        """Answer ``call`` with the lobby as it stands (calls whose effect is elsewhere or nothing)."""
        with self._write(call) as s:
            return self._reply(s, call, lobby_id)

    def answer_pending(self, account_id: str, request_id: str, response: bytes, code: int = 0) -> bool:
        with self.session() as s, s.begin():
            return rq.answer(s, REQUESTS, rq.Claim(account_id, request_id, "", ""), response, code)

    # ------------------------------------------------------------------ lobbies

    @staticmethod
    def _info(s: Session, lobby: Lobby) -> LobbyInfo:
        seats = s.exec(select(Seat).where(col(Seat.lobby_id) == lobby.id).order_by(col(Seat.seat_no))).all()
        return LobbyInfo(
            id=lobby.id,
            game=lobby.game,
            options=json.loads(lobby.options),
            online=lobby.online,
            ante=lobby.ante,
            seats=lobby.seats,
            public=lobby.public,
            invite_code=lobby.invite_code,
            host_id=lobby.host_id,
            status=lobby.status,
            game_id=lobby.game_id,
            seed=lobby.seed,
            resumed_from=lobby.resumed_from,
            created_at=lobby.created_at,
            started_at=lobby.started_at,
            seated=tuple(
                SeatInfo(x.seat_no, x.account_id, x.bot_level, x.name, x.ready, x.abandon_asked)
                for x in seats
            ),
            start_rid=lobby.start_rid,
            start_error=lobby.start_error,
            starting_at=lobby.starting_at,
            start_account=lobby.start_account,
            start_request=lobby.start_request,
            clock=json.loads(lobby.clock) if lobby.clock else None,
        )

    def lobby(self, lobby_id: str) -> LobbyInfo:
        check_text(lobby_id, "lobby_id", 36)
        with self.session() as s:
            row = s.get(Lobby, lobby_id)
            if row is None:
                raise NotFound(f"no lobby {quote(lobby_id)}")
            return self._info(s, row)

    def lobby_of_game(self, game_id: str) -> LobbyInfo | None:
        check_text(game_id, "game_id", 64)
        with self.session() as s:
            row = s.exec(select(Lobby).where(col(Lobby.game_id) == game_id)).first()
            return None if row is None else self._info(s, row)

    def _take(self, s: Session, lobby_id: str, status: str = OPEN) -> Lobby:
        """Lock the lobby for a change; it must be in ``status`` (``open`` by default)."""
        done = s.execute(
            update(Lobby)
            .where(col(Lobby.id) == lobby_id, col(Lobby.status) == status)
            .values(version=col(Lobby.version) + 1)
        )
        row = s.get(Lobby, lobby_id, populate_existing=True)
        if row is None:
            raise NotFound(f"no lobby {quote(lobby_id)}")
        if changed(done) != 1:
            if status == OPEN:
                raise FailedPrecondition(f"lobby {lobby_id} is {row.status}, no longer open")
            raise FailedPrecondition(f"lobby {lobby_id} is {row.status}, not {status}")
        return row

    def create_lobby(
        self,
        host: Account,
        game: str,
        options: Mapping[str, Any],
        online: bool,
        ante: int,
        seats: int,
        public: bool,
        resumed_from: str | None = None,
        call: Call | None = None,
        clock: Mapping[str, Any] | None = None,
    ) -> LobbyInfo:
        """A new open lobby with the host in seat 0 (private lobbies get an invite code).
        ``clock``: the turn clock's settings (``court_kit.clock.ClockSettings`` fields)."""
        lobby = Lobby(
            id=str(uuid.uuid4()),
            game=game,
            options=json.dumps(dict(options), sort_keys=True),
            online=online,
            ante=ante,
            seats=seats,
            public=public,
            invite_code=None if public else secrets.token_hex(4).upper(),
            host_id=host.id,
            resumed_from=resumed_from,
            clock=json.dumps(dict(clock), sort_keys=True) if clock else None,
        )
        with self._write(call) as s:
            s.add(lobby)
            s.flush()
            s.add(Seat(lobby_id=lobby.id, seat_no=0, account_id=host.id, name=host.name))
            return self._reply(s, call, lobby.id)

    def list_open(
        self,
        game: str | None = None,
        ante: int | None = None,
        online: bool | None = None,
        with_free_seat: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> list[LobbyInfo]:
        """Open public lobbies, oldest first, filtered by game, ante and mode."""
        taken = select(col(Seat.lobby_id), func.count().label("n")).group_by(col(Seat.lobby_id)).subquery()
        q = (
            select(Lobby)
            .join(taken, taken.c.lobby_id == col(Lobby.id), isouter=True)
            .where(col(Lobby.status) == OPEN, col(Lobby.public).is_(True))
        )
        if game:
            q = q.where(col(Lobby.game) == game)
        if ante is not None:
            q = q.where(col(Lobby.ante) == ante)
        if online is not None:
            q = q.where(col(Lobby.online).is_(online))
        if with_free_seat:
            q = q.where(func.coalesce(taken.c.n, 0) < col(Lobby.seats))
        q = (
            q.order_by(col(Lobby.created_at), col(Lobby.id))
            .offset(max(0, offset))
            .limit(max(1, min(limit, 200)))
        )
        with self.session() as s:
            return [self._info(s, row) for row in s.exec(q)]

    def join(
        self,
        lobby_id: str,
        account: Account,
        invite_code: str = "",
        seat_no: int | None = None,
        call: Call | None = None,
    ) -> LobbyInfo:
        """Take ``seat_no`` or the lowest free seat. Joining a lobby one already sits in changes nothing."""
        try:
            with self._write(call) as s:
                lobby = self._take(s, lobby_id)
                info = self._info(s, lobby)
                if info.seat_of(account.id):
                    return self._reply(s, call, lobby_id)
                if not lobby.public and not secrets.compare_digest(
                    (invite_code or "").upper().encode(), (lobby.invite_code or "").encode()
                ):
                    raise PermissionDenied(f"lobby {lobby_id} is private: a correct invite code is required")
                taken = {x.seat_no for x in info.seated}
                free = [n for n in range(lobby.seats) if n not in taken]
                if not free:
                    raise FailedPrecondition(f"lobby {lobby_id} is full ({lobby.seats} seats)")
                if seat_no is not None:
                    if not 0 <= seat_no < lobby.seats:
                        raise InvalidArgument(f"seat must be from 0 to {lobby.seats - 1}, got {seat_no}")
                    if seat_no in taken:
                        raise FailedPrecondition(f"seat {seat_no} of lobby {lobby_id} is taken; free: {free}")
                    free = [seat_no]
                s.add(Seat(lobby_id=lobby_id, seat_no=free[0], account_id=account.id, name=account.name))
                return self._reply(s, call, lobby_id)
        except IntegrityError:
            # only reachable if the lobby row lock was bypassed; the unique seat constraints hold the line
            raise Aborted(f"lost the race for a seat in lobby {lobby_id}; look again") from None

    def leave(self, lobby_id: str, account: Account, call: Call | None = None) -> LobbyInfo:
        """Give up one's seat; the host leaving hands the lobby to the next person, or closes it."""
        with self._write(call) as s:
            lobby = self._take(s, lobby_id)
            gone = s.execute(
                delete(Seat).where(col(Seat.lobby_id) == lobby_id, col(Seat.account_id) == account.id)
            )
            if changed(gone) == 0:
                raise FailedPrecondition(f"you have no seat in lobby {lobby_id}")
            if lobby.host_id == account.id:
                heir = s.exec(
                    select(Seat)
                    .where(col(Seat.lobby_id) == lobby_id, col(Seat.account_id).is_not(None))
                    .order_by(col(Seat.seat_no))
                ).first()
                if heir is None or heir.account_id is None:
                    lobby.status = ABANDONED
                else:
                    lobby.host_id = heir.account_id
                s.add(lobby)
            return self._reply(s, call, lobby_id)

    def set_ready(self, lobby_id: str, account: Account, ready: bool, call: Call | None = None) -> LobbyInfo:
        with self._write(call) as s:
            self._take(s, lobby_id)
            done = s.execute(
                update(Seat)
                .where(col(Seat.lobby_id) == lobby_id, col(Seat.account_id) == account.id)
                .values(ready=ready)
            )
            if changed(done) == 0:
                raise FailedPrecondition(f"you have no seat in lobby {lobby_id}")
            return self._reply(s, call, lobby_id)

    def _host_take(self, s: Session, lobby_id: str, account: Account, what: str) -> Lobby:
        lobby = self._take(s, lobby_id)
        if lobby.host_id != account.id:
            raise PermissionDenied(f"only the lobby's host may {what}")
        return lobby

    def add_bot(
        self,
        lobby_id: str,
        account: Account,
        level: str,
        seat_no: int | None = None,
        call: Call | None = None,
    ) -> LobbyInfo:
        """Seat a bot (host only) at ``level`` in ``seat_no`` or the lowest free seat."""
        if level not in BOT_LEVELS:
            raise InvalidArgument(f"unknown bot level {quote(level)}; use one of {', '.join(BOT_LEVELS)}")
        with self._write(call) as s:
            lobby = self._host_take(s, lobby_id, account, "add a bot")
            taken = {x.seat_no for x in self._info(s, lobby).seated}
            if seat_no is None:
                free = [n for n in range(lobby.seats) if n not in taken]
                if not free:
                    raise FailedPrecondition(f"lobby {lobby_id} is full ({lobby.seats} seats)")
                seat_no = free[0]
            elif not 0 <= seat_no < lobby.seats:
                raise InvalidArgument(f"seat must be from 0 to {lobby.seats - 1}, got {seat_no}")
            elif seat_no in taken:
                raise FailedPrecondition(f"seat {seat_no} of lobby {lobby_id} is taken")
            s.add(
                Seat(lobby_id=lobby_id, seat_no=seat_no, bot_level=level, name=f"Bot ({level})", ready=True)
            )
            return self._reply(s, call, lobby_id)

    def kick(
        self, lobby_id: str, account: Account, seat_no: int, bots_only: bool = False, call: Call | None = None
    ) -> LobbyInfo:
        """Empty a seat (host only): a person is removed, a bot taken away (``bots_only``: bots alone)."""
        with self._write(call) as s:
            lobby = self._host_take(s, lobby_id, account, "kick a player or remove a bot")
            seat = next((x for x in self._info(s, lobby).seated if x.seat_no == seat_no), None)
            if seat is None:
                raise NotFound(f"seat {seat_no} of lobby {lobby_id} is empty")
            if seat.account_id == account.id:
                raise FailedPrecondition("the host cannot kick themselves; leave the lobby instead")
            if bots_only and seat.bot_level is None:
                raise FailedPrecondition(f"seat {seat_no} holds a person, not a bot; use KickPlayer")
            s.execute(delete(Seat).where(col(Seat.lobby_id) == lobby_id, col(Seat.seat_no) == seat_no))
            return self._reply(s, call, lobby_id)

    def begin_start(
        self,
        lobby_id: str,
        account: Account,
        call: Call | None = None,
        *,
        lease_owner: str | None = None,
        lease: float = 0.0,
    ) -> LobbyInfo:
        """open -> starting (host only, every seat filled): the start saga's identity fixed in one go.

        The new game's id and seed, the saga's id (the rules service's request id) and the StartGame
        request that gets the saga's answer are stored on the row in this transaction, together with
        the request's claim; every later step, by any replica, uses them. Exactly one of two
        concurrent starts gets here; the other sees ``FailedPrecondition``.

        ``lease_owner``: the replica answering StartGame holds the saga's lease from this very
        transaction (for ``lease`` seconds), so it drives the start itself; another replica's sweep
        takes over only once that lease expires (the replica died).
        """
        with self._write(call) as s:
            lobby = s.get(Lobby, lobby_id)
            if lobby is None:
                raise NotFound(f"no lobby {quote(lobby_id)}")
            if lobby.host_id != account.id:
                raise PermissionDenied("only the lobby's host may start the game")
            n = s.exec(select(func.count()).select_from(Seat).where(col(Seat.lobby_id) == lobby_id)).one()
            if lobby.status == OPEN and n < lobby.seats:
                raise FailedPrecondition(
                    f"lobby {lobby_id} has {lobby.seats - n} empty seat(s); wait for players or add bots"
                )
            seed = secrets.randbits(52)  # the rules service takes seeds below 2**53 (JSON-safe)
            done = s.execute(
                update(Lobby)
                .where(col(Lobby.id) == lobby_id, col(Lobby.status) == OPEN)
                .values(
                    status=STARTING,
                    version=col(Lobby.version) + 1,
                    seed=seed,
                    game_id=new_game_id(),
                    start_rid=f"lobby-start-{uuid.uuid4().hex}",
                    starting_at=utcnow(),
                    start_error=None,
                    start_account=call.claim.caller if call else None,
                    start_request=call.claim.request_id if call else None,
                    lease_owner=lease_owner,
                    lease_until=utcnow() + timedelta(seconds=lease) if lease_owner else None,
                )
            )
            if changed(done) != 1:
                # someone else moved the lobby on first (another start, or a cancel): what it is now,
                # read from the database (the ORM applies an update's values to the objects it holds
                # even when the row did not match, so ``lobby.status`` here could read "starting")
                now, why = s.execute(
                    select(col(Lobby.status), col(Lobby.start_error)).where(col(Lobby.id) == lobby_id)
                ).one()
                if now == CANCELLED:
                    raise FailedPrecondition(
                        f"lobby {lobby_id} was {why or cancel_text('')}; it can no longer be started "
                        "(create a new lobby)"
                    )
                raise FailedPrecondition(f"lobby {lobby_id} is {now}: its game was already started")
            s.flush()
            return self._info(s, _row(s, lobby_id))  # answered when the saga ends

    # the lobby row's lease: one driver at a time (the start saga while the lobby is starting, the
    # abandon sweep while it is started), taken over once it expires

    @staticmethod
    def _claim_lease(
        s: Session, lobby_id: str, owner: str, ttl: float, *, take_free: bool, status: str = STARTING
    ) -> bool:
        """Lease the lobby, while it is in ``status``, to ``owner`` for ``ttl`` seconds from now, in
        ``s``'s transaction: when ``owner`` holds it already, or (``take_free``) nobody does or its
        lease expired. One conditional UPDATE, so of two replicas claiming at once exactly one gets it."""
        now = utcnow()
        held = col(Lobby.lease_owner) == owner
        if take_free:
            held = (col(Lobby.lease_until).is_(None)) | (col(Lobby.lease_until) < now) | held
        done = s.execute(
            update(Lobby)
            .where(col(Lobby.id) == lobby_id, col(Lobby.status) == status, held)
            .values(lease_owner=owner, lease_until=now + timedelta(seconds=ttl))
        )
        return changed(done) == 1

    def acquire_lease(self, lobby_id: str, owner: str, ttl: float) -> LobbyInfo | None:
        """The starting lobby, leased to ``owner`` for ``ttl`` seconds; None when it is not starting
        or another driver holds an unexpired lease."""
        with self.session() as s, s.begin():
            if not self._claim_lease(s, lobby_id, owner, ttl, take_free=True):
                return None
            return self._info(s, _row(s, lobby_id))

    def renew_lease(self, lobby_id: str, owner: str, ttl: float) -> str | None:
        """Extend ``owner``'s lease; None when it is lost (or the lobby no longer starting), else the
        row's ``start_error`` ("" if none): a ``cancelling: ...`` one tells the driver to undo the start."""
        with self.session() as s, s.begin():
            if not self._claim_lease(s, lobby_id, owner, ttl, take_free=False):
                return None
            return s.exec(select(col(Lobby.start_error)).where(col(Lobby.id) == lobby_id)).one() or ""

    def lease_started(self, lobby_id: str, owner: str, ttl: float) -> bool:
        """Lease the started lobby to ``owner`` for ``ttl`` seconds (the abandon sweep: one replica
        abandons a game at a time); False when it is no longer started or another replica holds it."""
        with self.session() as s, s.begin():
            return self._claim_lease(s, lobby_id, owner, ttl, take_free=True, status=STARTED)

    def release_lease(self, lobby_id: str, owner: str) -> None:
        with self.session() as s, s.begin():
            s.execute(
                update(Lobby)
                .where(col(Lobby.id) == lobby_id, col(Lobby.lease_owner) == owner)
                .values(lease_owner=None, lease_until=None)
            )

    def starting(self, limit: int = 50) -> list[str]:
        """Lobbies in ``starting`` whose lease is free or expired, oldest first (the sweep's work)."""
        now = utcnow()
        with self.session() as s:
            return list(
                s.exec(
                    select(col(Lobby.id))
                    .where(
                        col(Lobby.status) == STARTING,
                        (col(Lobby.lease_until).is_(None)) | (col(Lobby.lease_until) < now),
                    )
                    .order_by(col(Lobby.starting_at), col(Lobby.id))
                    .limit(limit)
                )
            )

    def mark_compensating(self, lobby_id: str, start_rid: str, reason: str) -> bool:
        """Record that this start is being undone (so whoever drives it next undoes it too); a
        cancel's mark (``cancelling: ...``) is kept: the lobby closes when the undoing ends."""
        with self.session() as s, s.begin():
            done = s.execute(
                update(Lobby)
                .where(
                    col(Lobby.id) == lobby_id,
                    col(Lobby.status) == STARTING,
                    col(Lobby.start_rid) == start_rid,
                    _not_cancelling(),
                )
                .values(start_error=(COMPENSATING + reason)[:300])
            )
            return changed(done) == 1

    def cancel(
        self, lobby_id: str, account: Account, reason: str, call: Call | None = None
    ) -> LobbyInfo | None:
        """CancelLobby (host only). An open lobby is closed at once (``cancelled``, the reason in
        ``start_error``) and the lobby returned, its answer stored with the claim. A starting lobby
        is marked ``cancelling: <reason>`` in the same transaction as the claim and None returned:
        the start saga's driver sees the mark at its next step (or its ``finish_start`` is refused)
        and undoes the start, refunding every ante, and the lobby ends ``cancelled``; the caller
        answers once it does. Any other state is ``FailedPrecondition``."""
        check_text(reason, "reason", MAX_CANCEL_REASON)
        text = cancel_text(reason)
        with self._write(call) as s:
            lobby = s.get(Lobby, lobby_id)
            if lobby is None:
                raise NotFound(f"no lobby {quote(lobby_id)}")
            if lobby.host_id != account.id:
                raise PermissionDenied("only the lobby's host may cancel it")
            done = s.execute(
                update(Lobby)
                .where(col(Lobby.id) == lobby_id, col(Lobby.status) == OPEN)
                .values(status=CANCELLED, version=col(Lobby.version) + 1, start_error=text[:300])
            )
            if changed(done) == 1:
                return self._reply(s, call, lobby_id)
            done = s.execute(
                update(Lobby)
                .where(col(Lobby.id) == lobby_id, col(Lobby.status) == STARTING)
                .values(version=col(Lobby.version) + 1)
            )
            if changed(done) == 1:
                s.execute(
                    update(Lobby)
                    .where(col(Lobby.id) == lobby_id, _not_cancelling())
                    .values(start_error=(CANCELLING + text)[:300])
                )
                return None  # a cancel of a cancelling lobby waits for the same end
            row = _row(s, lobby_id)
            if row.status == STARTED:
                raise FailedPrecondition(
                    f"lobby {lobby_id}'s game has started: it can no longer be cancelled "
                    "(a seated player may AbandonGame)"
                )
            raise FailedPrecondition(
                f"lobby {lobby_id} is {row.status}: only an open or starting lobby can be cancelled"
            )

    def _answer_start(self, s: Session, lobby: Lobby, response: bytes, code: int) -> None:
        if lobby.start_account and lobby.start_request:
            rq.answer(s, REQUESTS, rq.Claim(lobby.start_account, lobby.start_request, "", ""), response, code)

    def finish_start(
        self, lobby_id: str, start_rid: str, render: Callable[[LobbyInfo], bytes], force: bool = False
    ) -> LobbyInfo:
        """starting -> started (the saga's last step; the StartGame request's answer is stored with it).

        Refused (the lobby returned still ``starting``) once the host has cancelled it: the driver
        undoes the start instead. ``force``: the game has already ended, so it started regardless."""
        with self.session() as s, s.begin():
            done = s.execute(
                update(Lobby)
                .where(
                    col(Lobby.id) == lobby_id,
                    col(Lobby.status) == STARTING,
                    col(Lobby.start_rid) == start_rid,
                    true() if force else _not_cancelling(),
                )
                .values(
                    status=STARTED,
                    started_at=utcnow(),
                    version=col(Lobby.version) + 1,
                    lease_owner=None,
                    lease_until=None,
                    start_error=None,
                )
            )
            lobby = s.get(Lobby, lobby_id, populate_existing=True)
            if lobby is None:
                raise NotFound(f"no lobby {quote(lobby_id)}")
            info = self._info(s, lobby)
            if changed(done) == 1:
                self._answer_start(s, lobby, render(info), 0)
            return info

    def fail_start(self, lobby_id: str, start_rid: str, reason: str, code: int) -> bool:
        """starting -> open again with ``reason`` shown to its members (the antes are back by now);
        a lobby its host cancelled meanwhile goes to ``cancelled`` with the host's reason instead,
        and the StartGame request is answered FAILED_PRECONDITION with it."""
        with self.session() as s, s.begin():
            lobby = s.get(Lobby, lobby_id, with_for_update=True)
            status = OPEN
            if lobby is not None and lobby.start_error and lobby.start_error.startswith(CANCELLING):
                status, reason = CANCELLED, lobby.start_error[len(CANCELLING) :]
                code = int(StatusCode.FAILED_PRECONDITION.value[0])
            done = s.execute(
                update(Lobby)
                .where(
                    col(Lobby.id) == lobby_id,
                    col(Lobby.status) == STARTING,
                    col(Lobby.start_rid) == start_rid,
                )
                .values(
                    status=status,
                    version=col(Lobby.version) + 1,
                    seed=None,
                    game_id=None,
                    start_rid=None,
                    starting_at=None,
                    start_error=reason[:300],
                    lease_owner=None,
                    lease_until=None,
                )
            )
            if changed(done) == 1 and lobby is not None:
                shown = f"lobby {lobby_id} was {reason}" if status == CANCELLED else reason
                self._answer_start(s, lobby, shown.encode()[:1000], code)  # lobby: the row as it was
                s.execute(
                    update(Lobby)
                    .where(col(Lobby.id) == lobby_id)
                    .values(start_account=None, start_request=None)
                )
            return changed(done) == 1

    def set_status(self, lobby_id: str, from_status: str, to_status: str) -> bool:
        with self.session() as s, s.begin():
            done = s.execute(
                update(Lobby)
                .where(col(Lobby.id) == lobby_id, col(Lobby.status) == from_status)
                .values(status=to_status, version=col(Lobby.version) + 1)
            )
            return changed(done) == 1

    def ask_abandon(self, lobby_id: str, account_id: str) -> LobbyInfo:
        """Mark ``account_id``'s seat of the started lobby as asking to abandon its game (kept)."""
        with self.session() as s:
            s.execute(
                update(Seat)
                .where(col(Seat.lobby_id) == lobby_id, col(Seat.account_id) == account_id)
                .values(abandon_asked=True)
            )
            s.commit()
            row = s.get(Lobby, lobby_id)
            if row is None:
                raise NotFound(f"no lobby {quote(lobby_id)}")
            return self._info(s, row)

    def started_with_clock(self, limit: int = 500, after: str = "") -> list[LobbyInfo]:
        """Started lobbies that have a turn clock, by id, ``limit`` at a time after ``after``."""
        q = (
            select(Lobby)
            .where(col(Lobby.status) == STARTED, col(Lobby.clock).is_not(None), col(Lobby.id) > after)
            .order_by(col(Lobby.id))
            .limit(limit)
        )
        with self.session() as s:
            return [self._info(s, row) for row in s.exec(q)]

    def abandoning(self, limit: int = 100) -> list[LobbyInfo]:
        """Started lobbies every person of which asked to abandon the game: an abandon whose
        closing or refund did not go through yet (a backend away), for the abandon sweep."""
        person = col(Seat.account_id).is_not(None)
        asked_all = (
            select(col(Seat.lobby_id))
            .where(person)
            .group_by(col(Seat.lobby_id))
            .having(func.min(func.cast(col(Seat.abandon_asked), Integer)) == 1)
        )
        q = (
            select(Lobby)
            .where(col(Lobby.status) == STARTED, col(Lobby.id).in_(asked_all))
            .order_by(col(Lobby.id))
            .limit(limit)
        )
        with self.session() as s:
            return [self._info(s, row) for row in s.exec(q)]

    def abandon(self, lobby_id: str, call: Call | None = None) -> LobbyInfo:
        """started -> abandoned (its antes are refunded by then), answering ``call`` with it."""
        with self._write(call) as s:
            done = s.execute(
                update(Lobby)
                .where(col(Lobby.id) == lobby_id, col(Lobby.status) == STARTED)
                .values(status=ABANDONED, version=col(Lobby.version) + 1)
            )
            if changed(done) != 1:
                raise Aborted(f"lobby {lobby_id} changed state meanwhile; look again")
            return self._reply(s, call, lobby_id)

    def resumed_lobby(self, game_id: str) -> LobbyInfo | None:
        """The lobby of the game that resumed ``game_id``, if it was resumed."""
        check_text(game_id, "game_id", 64)
        with self.session() as s:
            row = s.exec(select(Lobby).where(col(Lobby.resumed_from) == game_id)).first()
            return None if row is None else self._info(s, row)

    def record_resume(
        self, old: LobbyInfo, host: Account, seats: Sequence[SeatInfo], game_id: str, call: Call | None = None
    ) -> LobbyInfo:
        """The started lobby of ``game_id``, resumed from ``old``'s game; ``old`` becomes abandoned.

        The new lobby's id is derived from the old game's id, so of two racing resumes one row is
        written and both answer it.
        """
        lobby_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"court-lobby-resume:{old.game_id}"))
        try:
            with self._write(call) as s:
                s.add(
                    Lobby(
                        id=lobby_id,
                        game=old.game,
                        options=json.dumps(old.options, sort_keys=True),
                        online=False,
                        ante=0,
                        seats=old.seats,
                        public=False,
                        invite_code=secrets.token_hex(4).upper(),
                        host_id=host.id,
                        status=STARTED,
                        game_id=game_id,
                        resumed_from=old.game_id,
                        started_at=utcnow(),
                    )
                )
                s.flush()
                for x in seats:
                    s.add(
                        Seat(
                            lobby_id=lobby_id,
                            seat_no=x.seat_no,
                            account_id=x.account_id,
                            bot_level=x.bot_level,
                            name=x.name,
                            ready=True,
                        )
                    )
                s.execute(
                    update(Lobby)
                    .where(col(Lobby.id) == old.id, col(Lobby.status) == STARTED)
                    .values(status=ABANDONED, version=col(Lobby.version) + 1)
                )
                return self._reply(s, call, lobby_id)
        except IntegrityError:
            pass  # a concurrent resume of the same game wrote it first
        return self.remember(call, lobby_id) if call is not None else self.lobby(lobby_id)

    def my_games(self, account_id: str, statuses: Sequence[str] = (STARTED,)) -> list[LobbyInfo]:
        """Lobbies whose game ``account_id`` sits in, newest first."""
        q = (
            select(Lobby)
            .join(Seat, col(Seat.lobby_id) == col(Lobby.id))
            .where(col(Seat.account_id) == account_id, col(Lobby.status).in_(list(statuses)))
            .order_by(col(Lobby.started_at).desc(), col(Lobby.id))
        )
        with self.session() as s:
            return [self._info(s, row) for row in s.exec(q)]

    def my_finished_games(
        self, account_id: str, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[LobbyInfo]:
        """Lobbies of ``account_id``'s finished games, newest first (start time, then lobby id),
        at most ``limit``; ``after``: the (started_at, id) of the last one of the previous page."""
        q = (
            select(Lobby)
            .join(Seat, col(Seat.lobby_id) == col(Lobby.id))
            .where(col(Seat.account_id) == account_id, col(Lobby.status) == FINISHED)
        )
        if after is not None:
            at, lobby_id = after
            q = q.where(
                (col(Lobby.started_at) < at) | ((col(Lobby.started_at) == at) & (col(Lobby.id) > lobby_id))
            )
        q = q.order_by(col(Lobby.started_at).desc(), col(Lobby.id)).limit(limit)
        with self.session() as s:
            return [self._info(s, row) for row in s.exec(q)]


# ---------------------------------------------------------------------------------------- purges

PURGE_BATCH = 5000  # rows per DELETE, so a purge never holds a long lock


def _delete_batched(engine: Engine, table: Any, key: Any, where: Any) -> int:
    """DELETE the rows matching ``where`` in batches of ``PURGE_BATCH`` (by primary key)."""
    total = 0
    while True:
        with Session(engine) as s, s.begin():
            keys = [r[0] for r in s.execute(select(key).where(where).limit(PURGE_BATCH))]
            if not keys:
                return total
            s.execute(delete(table).where(key.in_(keys)))
        total += len(keys)
        if len(keys) < PURGE_BATCH:
            return total


def _delete_where(engine: Engine, table: Any, where: Any) -> int:
    """One DELETE (for tables keyed by several columns): rows matching ``where``."""
    with Session(engine) as s, s.begin():
        return int(changed(s.execute(delete(table).where(where))))


def purge(
    store: LobbyStore, *, request_ttl: timedelta, finished_ttl: timedelta, now: datetime | None = None
) -> dict[str, int]:
    """Delete what no longer serves anyone (the lobby's TTL purges, ``court_lobby.app``'s task):

    * request-log rows older than ``request_ttl`` (a retry comes seconds later, not days);
    * refresh tokens past their expiry (used or not: either way they are refused);
    * lobbies of finished or abandoned games (with their seats) started, or if never started
      created, more than ``finished_ttl`` ago; the game's own log stays with the rules service.

    Returns the rows deleted per kind."""
    now = now or utcnow()
    out = {"requests": 0, "refresh_tokens": 0, "lobbies": 0}
    e = store.engine
    out["requests"] = _delete_where(e, RequestLog, col(RequestLog.created_at) < now - request_ttl)
    out["refresh_tokens"] = _delete_batched(
        e, RefreshToken, col(RefreshToken.token_hash), col(RefreshToken.expires_at) < now
    )
    old = now - finished_ttl
    done = col(Lobby.status).in_([FINISHED, ABANDONED, CANCELLED]) & (
        func.coalesce(col(Lobby.started_at), col(Lobby.created_at)) < old
    )
    while True:
        with Session(e) as s, s.begin():
            ids = [r[0] for r in s.execute(select(col(Lobby.id)).where(done).limit(PURGE_BATCH))]
            if not ids:
                break
            s.execute(delete(Seat).where(col(Seat.lobby_id).in_(ids)))
            s.execute(delete(Lobby).where(col(Lobby.id).in_(ids)))
        out["lobbies"] += len(ids)
        if len(ids) < PURGE_BATCH:
            break
    return out
