"""The lobby's application layer: matchmaking and the life of a lobby's game.

The gRPC servicer (``court_lobby.servicer``) reads a request, names the caller, makes the call
idempotent on its request id (``_once``) and builds the answer; the policy is here: what a new
lobby may be (seats, ante, clock), who may join and where QuickMatch seats a player, the start's
ante check, abandoning (on every person's ask, or when every person has been away for the abandon
time; ``finish_abandons`` and ``abandon_away_games`` are the abandon sweep's work) and resuming.
Store calls run in worker threads. Errors are ``court_kit.errors`` (mapped at the edge).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, TypeVar

from court_contract import typed
from court_games import GAME_NAMES, get_game
from court_kit import clock as kclock
from court_kit import logging as klog
from court_kit.checks import quote
from court_kit.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ServiceError,
    Unavailable,
)

from .clients import Backends
from .models import Account
from .saga import Starter
from .store import (
    ABANDONED,
    BOT_LEVELS,
    FINISHED,
    MAX_CANCEL_REASON,
    OPEN,
    STARTED,
    Call,
    LobbyInfo,
    LobbyStore,
    SeatInfo,
)

T = TypeVar("T")
log = klog.get_logger("court_lobby.application")

MAX_ANTE = 1_000_000
BOT_PREFIX = "bot:"
QUICK_MATCH_CANDIDATES = 20
DEFAULT_RATING = 25.0  # a player the ranking service has no rating for yet (its start value)
RESUME_BOT_LEVEL = "heuristic"  # takes a resumed game's seat whose player's account is gone
ClockField = Literal["turn_seconds", "time_bank_seconds", "autoplay_level", "abandon_after_seconds"]
CLOCK_FIELDS: tuple[ClockField, ...] = (
    "turn_seconds",
    "time_bank_seconds",
    "autoplay_level",
    "abandon_after_seconds",
)


MAX_HISTORY_PAGE = 50  # finished games per ListMyGames page (include_finished)


def _history_cursor(token: str) -> tuple[datetime, str]:
    """The (started_at, lobby id) a finished-games page token stands for (``finished_games``)."""
    bad = InvalidArgument("page_token is not one this service gave out: send back next_page_token as it came")
    if len(token) > 200:
        raise bad
    try:
        at, _, lobby_id = base64.urlsafe_b64decode(token.encode("ascii")).decode().partition("|")
        return datetime.fromisoformat(at), lobby_id
    except (ValueError, UnicodeError, binascii.Error):
        raise bad from None


def every_person_asked(info: LobbyInfo) -> bool:
    people = [s for s in info.seated if s.account_id]
    return bool(people) and all(s.abandon_asked for s in people)


def abandon_reason(why: str, online: bool) -> str:
    """What the players of an abandoned game read (the rules service takes at most 200 characters)."""
    text = f"the game was abandoned ({why})" + ("; every ante is refunded" if online else "")
    return text if len(text) <= 200 else text[:197] + "..."


def seat_count(game: str, options: dict[str, Any]) -> int:
    """How many seats ``game`` with ``options`` needs (the engine decides; bad options raise)."""
    if game not in GAME_NAMES:
        raise InvalidArgument(f"unknown game {quote(game)}; games: {', '.join(GAME_NAMES)}")
    module = get_game(game)
    return int(module.num_players(module.new_game(module.options_from_dict(options), 0)))


def validate_new_lobby(game: str, options: dict[str, Any], seats: int, ante: int, online: bool) -> int:
    """The seats a new lobby has; INVALID_ARGUMENT for a seat count, ante or game that do not fit."""
    needed = seat_count(game, options)
    if seats and seats != needed:
        raise InvalidArgument(f"{game} with these options seats {needed} players, not {seats}")
    if ante < 0 or ante > MAX_ANTE:
        raise InvalidArgument(f"the ante must be from 0 to {MAX_ANTE} rank points")
    if ante and not (online and game == "queens_court"):
        raise InvalidArgument("an ante is staked only in online Queen's Court lobbies")
    return needed


def lobby_clock(asked: dict[str, Any], online: bool) -> dict[str, Any]:
    """The lobby's turn clock from the fields the request set (``CLOCK_FIELDS``), defaults for the
    rest (court_kit.clock: 45 s turns online, none locally); INVALID_ARGUMENT outside the ranges."""
    c = kclock.validate(
        asked.get("turn_seconds", kclock.ONLINE_TURN_SECONDS if online else kclock.LOCAL_TURN_SECONDS),
        asked.get("time_bank_seconds", kclock.DEFAULT_BANK_SECONDS),
        asked.get("autoplay_level", kclock.DEFAULT_LEVEL),
        asked.get("abandon_after_seconds", kclock.DEFAULT_ABANDON_SECONDS),
    )
    return {
        "turn_seconds": c.turn_seconds,
        "time_bank_seconds": c.time_bank_seconds,
        "autoplay_level": c.autoplay_level,
        "abandon_after_seconds": c.abandon_after_seconds,
    }


def cancel_reason(reason: str) -> str:
    """The host's reason for a cancel, as the players read it (checked before the call is claimed)."""
    reason = reason.strip()
    if len(reason) > MAX_CANCEL_REASON:
        raise InvalidArgument(f"the reason has at most {MAX_CANCEL_REASON} characters, got {len(reason)}")
    return reason


def check_online(me: Account, online: bool) -> None:
    if online and me.guest:
        raise PermissionDenied("guest accounts play local games; create an account to play online")


class LobbyApplication:
    def __init__(
        self, store: LobbyStore, backends: Backends, starter: Starter, *, abandon_lease: float = 60.0
    ):
        self.store = store
        self.backends = backends
        self.starter = starter
        self.abandon_lease = abandon_lease  # COURT_ABANDON_LEASE: seconds a replica's sweep holds a game

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _check_ante(self, me: Account, ante: int) -> None:
        """Joining an online lobby with an ante needs at least that many rank points."""
        if ante <= 0:
            return
        balance = await self.backends.balance(me.id)
        if balance < ante:
            raise FailedPrecondition(f"this lobby's ante is {ante} rank points and you hold {balance}")

    # ------------------------------------------------------------------ lobbies

    async def create_lobby(
        self,
        me: Account,
        call: Call,
        *,
        game: str,
        options: Any,
        seats: int,
        ante: int,
        online: bool,
        public: bool,
        clock: dict[str, Any],
    ) -> LobbyInfo:
        """``options``: the request's ``GameOptions``; ``clock``: the clock fields it set."""
        opts = typed.requested_options(game, options)
        needed = validate_new_lobby(game, opts, seats, ante, online)
        settings = lobby_clock(clock, online)
        check_online(me, online)
        await self._check_ante(me, ante)
        info: LobbyInfo = await self._run(
            self.store.create_lobby, me, game, opts, online, ante, needed, public, None, call, settings
        )
        return info

    async def list_lobbies(
        self, game: str, ante: int | None, online: bool | None, size: int, offset: int
    ) -> list[LobbyInfo]:
        """Open lobbies with a free seat: up to ``size`` from ``offset``."""
        if game and game not in GAME_NAMES:
            raise InvalidArgument(f"unknown game {quote(game)}; games: {', '.join(GAME_NAMES)}")
        found: list[LobbyInfo] = await self._run(
            self.store.list_open, game or None, ante, online, True, size, offset
        )
        return found

    async def lobby(self, me: Account, lobby_id: str) -> LobbyInfo:
        info: LobbyInfo = await self._run(self.store.lobby, lobby_id)
        if not info.public and not info.seat_of(me.id):
            raise NotFound(f"no lobby {quote(lobby_id)}")  # a private lobby is not disclosed
        return info

    async def join(self, me: Account, lobby_id: str, code: str, seat: int | None, call: Call) -> LobbyInfo:
        info = await self._run(self.store.lobby, lobby_id)
        check_online(me, info.online)
        if not info.seat_of(me.id):
            await self._check_ante(me, info.ante)
        joined: LobbyInfo = await self._run(self.store.join, lobby_id, me, code, seat, call)
        return joined

    async def leave(self, me: Account, lobby_id: str, call: Call) -> LobbyInfo:
        info: LobbyInfo = await self._run(self.store.leave, lobby_id, me, call)
        return info

    async def set_ready(self, me: Account, lobby_id: str, ready: bool, call: Call) -> LobbyInfo:
        info: LobbyInfo = await self._run(self.store.set_ready, lobby_id, me, ready, call)
        return info

    async def set_bot_seat(
        self, me: Account, lobby_id: str, level: str, seat: int | None, call: Call
    ) -> LobbyInfo:
        """``level``: a bot level to seat (at ``seat``, or the first free one); empty: remove ``seat``'s bot."""
        if level:
            if level not in BOT_LEVELS:
                raise InvalidArgument(f"unknown bot level {quote(level)}; use one of {', '.join(BOT_LEVELS)}")
            added: LobbyInfo = await self._run(self.store.add_bot, lobby_id, me, level, seat, call)
            return added
        if seat is None:
            raise InvalidArgument("name the seat whose bot to remove")
        removed: LobbyInfo = await self._run(self.store.kick, lobby_id, me, seat, True, call)
        return removed

    async def kick(self, me: Account, lobby_id: str, seat: int, call: Call) -> LobbyInfo:
        info: LobbyInfo = await self._run(self.store.kick, lobby_id, me, seat, False, call)
        return info

    async def quick_match(self, me: Account, call: Call, *, game: str, options: Any, ante: int) -> LobbyInfo:
        """Seat ``me`` in an open online lobby of ``game`` at ``ante``: one they sit in already, else
        the one whose seated players' mean rating is nearest theirs (the oldest first on a tie), else
        a new public lobby with the online defaults. Looks at the oldest ``QUICK_MATCH_CANDIDATES``."""
        check_online(me, True)
        opts = typed.requested_options(game, options)
        seats = validate_new_lobby(game, opts, 0, ante, True)
        await self._check_ante(me, ante)
        candidates: list[LobbyInfo] = await self._run(
            self.store.list_open, game, ante, True, True, QUICK_MATCH_CANDIDATES
        )
        for c in candidates:
            if c.seat_of(me.id):
                again: LobbyInfo = await self._run(self.store.remember, call, c.id)
                return again
        people = sorted({s.account_id for c in candidates for s in c.seated if s.account_id} | {me.id})
        ratings = await self.backends.ratings(game, people)
        mine = ratings.get(me.id, DEFAULT_RATING)

        def distance(c: LobbyInfo) -> float:
            seated = [ratings.get(s.account_id, DEFAULT_RATING) for s in c.seated if s.account_id]
            return abs(sum(seated) / len(seated) - mine) if seated else 0.0

        for c in sorted(candidates, key=lambda c: (distance(c), c.created_at)):
            try:
                joined: LobbyInfo = await self._run(self.store.join, c.id, me, "", None, call)
                return joined
            except (FailedPrecondition, Aborted, PermissionDenied):
                continue  # filled or started meanwhile: the next one
        clock = lobby_clock({}, True)  # quick match: the online defaults
        created: LobbyInfo = await self._run(
            self.store.create_lobby, me, game, opts, True, ante, seats, True, None, call, clock
        )
        return created

    # ------------------------------------------------------------------ starting

    async def begin_start(self, me: Account, lobby_id: str, call: Call) -> None:
        """open -> starting, the request claimed and pending (the start saga answers it). Online
        games: every ante is checked first (a readable error); the saga takes them."""
        info = await self._run(self.store.lobby, lobby_id)
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
            lobby_id,
            me,
            call,
            lease_owner=self.starter.owner,
            lease=self.starter.lease,
        )

    async def cancel(self, me: Account, lobby_id: str, reason: str, call: Call) -> LobbyInfo | None:
        """The cancelled lobby; None: it was starting, and the start saga undoes the start.
        ``reason``: as ``cancel_reason`` gave it."""
        info: LobbyInfo | None = await self._run(self.store.cancel, lobby_id, me, reason, call)
        if info is not None:
            log.info("lobby cancelled", lobby_id=info.id, by=me.id)
        else:
            log.info("lobby cancelled while starting; undoing the start", lobby_id=lobby_id, by=me.id)
        return info

    # ------------------------------------------------------------------ my games

    async def still_running(self, info: LobbyInfo) -> bool:
        """Ask the rules service; a finished game's lobby is marked finished on the way."""
        view = await self.backends.game_view(info.started_game_id)
        # a game the rules service closed for a resume whose new lobby is not recorded yet (the
        # lobby died in between) counts as running: resuming it again completes that resume
        if view.finished and not view.result.resumed_into:
            # a game the lobby closed (an abandon whose refund has not gone through yet) stays
            # started here, so the abandon sweep still finds it and refunds it; it is not running
            if not view.result.closed_reason:
                await self._run(self.store.set_status, info.id, STARTED, FINISHED)
            return False
        return True

    async def running_games(self, me: Account) -> list[LobbyInfo]:
        """The lobbies of ``me``'s games still running."""
        return [
            info for info in await self._run(self.store.my_games, me.id) if await self.still_running(info)
        ]

    async def finished_games(
        self, me: Account, page_size: int, page_token: str
    ) -> tuple[list[LobbyInfo], str]:
        """A page of ``me``'s finished games, newest first, and the next page's token ("" at the
        end). Read from the lobby's own rows (status finished: set when the game's end was seen,
        by ``still_running`` or an abandon that came too late), so no call per game."""
        if page_size < 0:
            raise InvalidArgument(
                f"page_size must be 0 (the default, {MAX_HISTORY_PAGE}) or more, got {page_size}"
            )
        size = min(page_size or MAX_HISTORY_PAGE, MAX_HISTORY_PAGE)
        after = _history_cursor(page_token) if page_token else None
        rows: list[LobbyInfo] = await self._run(self.store.my_finished_games, me.id, size + 1, after)
        if len(rows) <= size:
            return rows, ""
        last = rows[size - 1]
        cursor = f"{last.started_at.isoformat() if last.started_at else ''}|{last.id}"
        return rows[:size], base64.urlsafe_b64encode(cursor.encode()).decode()

    async def _lobby_of_game(self, game_id: str) -> LobbyInfo | None:
        if not game_id or len(game_id) > 64:
            return None
        found: LobbyInfo | None = await self._run(self.store.lobby_of_game, game_id)
        return found

    async def _my_started_game(self, me: Account, game_id: str, unsure_ok: bool = False) -> LobbyInfo:
        """``unsure_ok``: the rules service away counts as running (AbandonGame: the close that
        follows judges it, and a game that has ended keeps its result)."""
        info = await self._lobby_of_game(game_id)
        if info is None or not info.seat_of(me.id):
            raise NotFound(f"you have no game {quote(game_id)}")
        if info.status != STARTED:
            raise FailedPrecondition(f"game {game_id} is not running (its lobby is {info.status})")
        try:
            running = await self.still_running(info)
        except Unavailable:
            if not unsure_ok:
                raise
            running = True
        if not running:
            raise FailedPrecondition(f"game {game_id} is not running (it has ended)")
        return info

    # ------------------------------------------------------------------ abandoning

    async def ask_abandon(self, me: Account, game_id: str, call: Call) -> LobbyInfo:
        """``me`` asks to abandon their running game: the last person at the table to ask abandons it
        (``_abandon``); before that, the asker's seat is marked away and the autoplay bot plays it."""
        under_way = await self._abandon_under_way(me, game_id, call)
        if under_way is not None:
            return under_way
        try:
            info = await self._my_started_game(me, game_id, unsure_ok=True)
        except FailedPrecondition:
            # the game closed since we looked: an abandon finished or under way (a duplicate of
            # this very call, or another person's last ask) answers; anything else is refused
            under_way = await self._abandon_under_way(me, game_id, call)
            if under_way is not None:
                return under_way
            raise
        # the ask is recorded even with the rules service away: once every person asked, the
        # abandon is finished by the sweep when it is back
        info = await self._run(self.store.ask_abandon, info.id, me.id)
        if every_person_asked(info):
            log.info("abandon asked by the last person at the table", game_id=info.game_id, by=me.id)
            return await self._abandon(info, call, "every person at the table asked")
        # alone: the seat is marked away and the autoplay bot plays it to the end; the result stands
        seat = info.seat_of(me.id)
        if seat is None:  # left the lobby meanwhile (a started lobby keeps its seats: never so far)
            raise NotFound(f"you have no game {quote(game_id)}")
        await self.backends.leave_seat(info.started_game_id, seat.seat_no)
        log.info("abandon asked: the seat is away, the game goes on", game_id=info.game_id, by=me.id)
        remembered: LobbyInfo = await self._run(self.store.remember, call, info.id)
        return remembered

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
        found = await self._lobby_of_game(game_id)
        if found is None or not found.seat_of(me.id) or not every_person_asked(found):
            return None
        if found.status == STARTED:
            return await self._abandon(found, call, "every person at the table asked")
        if found.status == ABANDONED:  # by an earlier call, another's last ask, or the sweep
            remembered: LobbyInfo = await self._run(self.store.remember, call, found.id)
            return remembered
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
            await self.backends.close_game(info.started_game_id, abandon_reason(why, info.online))
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
            await self.backends.abandon_game(info.started_game_id)  # every ante back, once
        try:
            done: LobbyInfo = await self._run(self.store.abandon, info.id, call)
        except Aborted:
            now = await self._run(self.store.lobby, info.id)
            if now.status != ABANDONED:
                raise
            done = now if call is None else await self._run(self.store.remember, call, info.id)
        log.info("game abandoned", game_id=info.game_id, why=why)
        return done

    async def _sweep_abandon(self, info: LobbyInfo, why: str) -> bool:
        """The abandon sweep's abandon of ``info``, under the lobby row's lease (the start saga's,
        ``lease_started``: this replica's name, ``abandon_lease`` seconds), so of the replicas whose
        sweeps find the game at once one abandons it and the others pass it by. False: another
        replica holds it, or it is no longer started. Every step is keyed as well (``_abandon``): a
        replica that outlives its lease repeats nothing that changes anything."""
        owner = self.starter.owner
        if not await self._run(self.store.lease_started, info.id, owner, self.abandon_lease):
            return False
        try:
            await self._abandon(info, None, why)
        finally:
            await self._run(self.store.release_lease, info.id, owner)
        return True

    async def finish_abandons(self) -> int:
        """Finish every abandon whose closing or refund did not go through (a backend away when the
        last person asked): started lobbies every person of which asked. Returns how many ended."""
        n = 0
        for info in await self._run(self.store.abandoning):
            try:
                n += await self._sweep_abandon(info, "every person at the table asked")
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
                    view = await self.backends.game_view(info.started_game_id)
                    # closed by the lobby yet still started here: an abandon whose refund did not go
                    # through (ranking away); finish it
                    under_way = view.finished and bool(view.result.closed_reason)
                    if not under_way and (
                        view.finished
                        or not view.HasField("abandon_at")
                        or view.abandon_at.ToMilliseconds() > now_ms
                    ):
                        continue
                    n += await self._sweep_abandon(info, "every person's seat was away for the abandon time")
                except (Aborted, FailedPrecondition):
                    continue  # finished or abandoned meanwhile
                except ServiceError as exc:
                    log.warning("could not check an away game", game_id=info.game_id, error=str(exc))

    # ------------------------------------------------------------------ resuming

    async def resume(self, me: Account, game_id: str, call: Call) -> LobbyInfo:
        """A new started lobby whose game continues ``game_id`` from its save point.

        Seats: every person of the old game keeps their seat (while their account exists, else a
        ``heuristic`` bot takes it), every bot seat keeps its bot; the caller hosts. The resumed
        game is a local one (no ante, not ranked); the old lobby is marked abandoned (an online old
        game is abandoned in ranking too, refunding any ante). Resuming a game again, by any of its
        players, answers the lobby of the first resume.
        """
        old = await self._lobby_of_game(game_id)
        if old is None:
            raise NotFound(f"no game {quote(game_id)}")
        if not old.seat_of(me.id):
            raise PermissionDenied(f"you did not sit in game {game_id}")
        done = await self._run(self.store.resumed_lobby, game_id)
        if done is not None:
            remembered: LobbyInfo = await self._run(self.store.remember, call, done.id)
            return remembered
        if not hasattr(get_game(old.game), "save_point"):
            raise FailedPrecondition(
                f"{old.game} games have no save points and cannot be resumed "
                "(only Hearts saves at the start of every hand)"
            )
        if old.status != STARTED or not await self.still_running(old):
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
        info: LobbyInfo = await self._run(self.store.record_resume, old, me, seats, new_id, call)
        log.info("game resumed", game_id=new_id, resumed_from=game_id, by=me.id)
        return info
