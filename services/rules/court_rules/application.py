"""The rules service's application layer: who may do what, the engine, the state log, events.

Both the gRPC servicer (``court_rules.servicer``: proto in, a call here, proto out) and the turn
clock (``court_rules.clockdriver``: ``write_locked``) go through this. Nothing here reads a
request message or builds an answer message; the methods take Python values and the caller's
``Identity`` and return the entry, the position (seq, state, events) and the seat an answer is
built from. Errors are ``court_kit.errors`` (the server maps them to gRPC statuses at the edge).

Who may do what (see protos/court/rules/v1/rules.proto):

* a player sees and acts for the seats whose id is their sub; a caller
  without a seat sees the spectator view;
* the bot identity sees and acts for ``bot:<level>`` seats only;
* ``service`` (the lobby) and ``admin`` create games and may choose the seed;
  a player may create a game only when every seat is themselves or a bot
  (local play, e.g. one person against three bots, or hot-seat);
* only ``service`` resumes a game (``resume_from``), with each of its people in
  their own seat (a bot may take a person's seat; a bot seat stays a bot's).
  The resumed game is closed in the same step (a closing record in its log,
  before the new game's creation), so two playable copies of one deal never
  exist: it answers finished, its result names the game that continues it;
* only ``service`` closes a game (``CloseGame``: the lobby, when it undoes a start whose game
  exists, e.g. its host cancelled the lobby and every ante is refunded): a closing record with the
  reason ends its log and its public stream; it then answers finished and refuses moves. A game
  id with no log yet gets a tombstone instead (``games.Tombstone``): a later CreateGame of it
  answers FAILED_PRECONDITION with the reason, so an undone start never becomes a playable game;
* ``admin`` may read any seat's view; ``admin`` and ``analytics`` read the
  full-information history. Neither acts for a seat.

Submits are optimistic: the move is computed from this replica's cached
state and appended with the expected last subject sequence. A stale cache
shows up either as an illegal move (the entry is refreshed from the log and
the move judged again, once) or as a lost append (``Conflict``: the entry is
refreshed; if the log now holds this request id the first answer is returned,
otherwise ABORTED and the client retries with the same request id). We do not
retry a lost race internally: the caller may want to decide again on the new
position, and a retry with the same id is cheap and safe (docs/contract.md, "Retries").
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from court_contract import actions as kactions
from court_contract import records as krec
from court_contract import typed
from court_games.core import Event, IllegalAction
from court_games.registry import get_game
from court_kit import clock as kitclock
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.checks import quote
from court_kit.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from court_kit.tokens import Identity
from court_proto.court.rules.v1 import actions_pb2
from nats.errors import TimeoutError as NatsTimeout
from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily

from . import clock as kclock
from .games import (
    BOT_PREFIX,
    ClosedBeforeCreated,
    GameCache,
    GameEntry,
    Tombstone,
    game_id_for,
    valid_game_id,
)
from .store import CLOSED_HEADER, SEQ_HEADER, Conflict, GameStore
from .views import ActionCodec

log = klog.get_logger("court_rules")

CONFLICTS = Counter("court_rules_conflicts_total", "Appends that lost a race (answered ABORTED or replayed)")
REPLAYED = Counter("court_rules_idempotent_replays_total", "Retries answered with the first answer")
_MOVES_OF: dict[str, int] = {}  # court_rules_moves_total per game (_Moves)


class _Moves:
    """``court_rules_moves_total{game}``, moves accepted by game: a counter read from ``_MOVES_OF``
    when scraped (a Counter's child takes a lock per move; these counts change on the event loop
    alone, and a scrape reads a dict whose values are ints)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("court_rules_moves", "Moves accepted, by game", labels=["game"])
        for game, n in list(_MOVES_OF.items()):
            family.add_metric([game], n)
        yield family


REGISTRY.register(_Moves())


def _count_move(game: str) -> None:
    _MOVES_OF[game] = _MOVES_OF.get(game, 0) + 1


MAX_SEED = 2**53  # seeds stay exact in JSON (records, saves, clients in other languages)
MAX_ID = 128
MAX_REASON = 200
CHOSEN_GAME_ID = re.compile(r"g[0-9a-f]{24}")  # the shape of every game id (games.game_id_for)
WATCH_POLL = 5.0  # a watcher re-reads the log this often when no notification came
TIMER_SLACK = 0.002  # a loop's timer may fire this much before its time (uvloop: millisecond ticks)
BEHIND_POLL = 0.1  # how soon a watcher re-reads a log that did not yet show a move it was told of


class Faults:
    """Fault injection points for tests (the production instance does nothing)."""

    def after_append(self, entry: GameEntry, seq: int) -> None:
        """Called after a record is durably appended, before the caller is answered."""


# ------------------------------------------------------------------ what the calls answer


@dataclass(frozen=True)
class ClockRequest:
    """The clock a creation asks for, as sent (validated by ``create_game``)."""

    turn_seconds: int
    time_bank_seconds: int
    autoplay_level: str
    abandon_after_seconds: int


@dataclass(frozen=True)
class Created:
    """A game created (or found again by a retry): the position at creation, the caller's seat."""

    entry: GameEntry
    state: Any
    seat: int | None


class Position(NamedTuple):
    """A seat's (``None``: a spectator's) position after record ``seq``; ``events``: the events of
    that record, when the answer carries them (``None``: a snapshot). A named tuple: a watcher
    makes one per update, at a quarter of a frozen dataclass's cost."""

    entry: GameEntry
    seq: int
    state: Any
    seat: int | None
    events: tuple[Event, ...] | None = None


class Submitted(NamedTuple):
    """A move applied (or its first answer replayed to a retry). ``full``: the move's events as its
    full record holds them, each serialized, one for one, when at hand (empty: a replay);
    ``caller``: the identity whose other seats to act get their views too. (A named tuple, as
    ``Position``: one per move, built in a fifth of a frozen dataclass's time.)"""

    entry: GameEntry
    seq: int
    seat: int
    state: Any
    events: tuple[Event, ...]
    caller: Identity
    full: tuple[bytes, ...] = ()

    def seat_to_act(self) -> bool:
        """Whether the acting seat is still to act after this move (a simultaneous phase, a seat
        that plays twice running)."""
        return self.seat in self.entry.module.to_act(self.state)

    def next_seats(self) -> list[int]:
        """The caller's other seats to act after this move (hot-seat, a bot driving several)."""
        return [
            s
            for s in self.entry.module.to_act(self.state)
            if s != self.seat and may_act(self.entry, self.caller, s)
        ]


@dataclass(frozen=True)
class Closed:
    """A CloseGame's outcome: the closed game's position, or the tombstone of a game id with no log."""

    game_id: str
    closed_now: bool
    position: Position | None = None
    tomb: Tombstone | None = None


@dataclass(frozen=True)
class SeatChanged:
    position: Position
    changed: bool


# ------------------------------------------------------------------ seats


def require_id(value: str, what: str) -> str:
    if not value:
        raise InvalidArgument(f"{what} is required (a client-chosen id; a retry reuses it)")
    if len(value) > MAX_ID:
        raise InvalidArgument(f"{what} is at most {MAX_ID} characters")
    return value


def _behind(entry: GameEntry, hint: int | None, closing: bool, last: tuple[int, int] | None) -> bool:
    """Whether a watcher's entry is behind the log: behind the record its wake named (``hint``,
    ``closing``), or, with no wake (a poll), behind the log's last record ``last``."""
    if hint is None:
        return last is not None and last[0] > entry.last_sseq
    return hint > entry.seq or (closing and entry.closed_into is None)


def may_act(entry: GameEntry, ident: Identity, seat: int) -> bool:
    return ident.may_act_for(entry.seats[seat])


def _may_view(entry: GameEntry, ident: Identity, seat: int) -> bool:
    return ident.may_view(entry.seats[seat])


def _check_seat(entry: GameEntry, seat: int) -> int:
    if not 0 <= seat < len(entry.seats):
        raise InvalidArgument(f"seat {seat} does not exist: this game has seats 0 to {len(entry.seats) - 1}")
    return seat


def own_seats(entry: GameEntry, ident: Identity) -> list[int]:
    return [i for i in range(len(entry.seats)) if may_act(entry, ident, i)]


def viewer_seat(entry: GameEntry, ident: Identity, requested: int | None) -> int | None:
    """The seat whose view the caller gets; ``None``: the spectator's."""
    if requested is not None:
        _check_seat(entry, requested)
        if not _may_view(entry, ident, requested):
            raise PermissionDenied(
                f"seat {requested} is not yours; you may watch this game as a spectator (leave the seat out)"
            )
        return requested
    mine = own_seats(entry, ident)
    if not mine:
        return None
    acting = [s for s in mine if s in entry.to_act()]
    return (acting or mine)[0]


def _acting_seat(entry: GameEntry, ident: Identity, requested: int | None) -> int:
    if ident.role not in ("player", "bot"):
        raise PermissionDenied(f"the {ident.role} role does not act for seats; players and bots do")
    if requested is not None:
        _check_seat(entry, requested)
        if not may_act(entry, ident, requested):
            raise PermissionDenied(f"seat {requested} is not yours")
        return requested
    mine = own_seats(entry, ident)
    if not mine:
        raise PermissionDenied("you have no seat in this game")
    acting = [s for s in mine if s in entry.to_act()]
    if len(acting) > 1:
        raise InvalidArgument(f"you hold several seats that may act now ({acting}): name one in `seat`")
    return (acting or mine)[0]


@dataclass(frozen=True, slots=True)
class _LocalWake:
    """A wake for a record appended by this replica: the record's seq and whether it closes the
    game, as a watcher reads them of a NATS message's headers (``headers``), without the parse."""

    seq: int
    closing: bool

    @property
    def headers(self) -> dict[str, str]:
        return {SEQ_HEADER: str(self.seq), **({CLOSED_HEADER: "1"} if self.closing else {})}


def _announced(msg: Any) -> tuple[int, bool]:
    """The record a wake announces: its seq (0: none named) and whether it closes the game."""
    if type(msg) is _LocalWake:
        return msg.seq, msg.closing
    headers = msg.headers or {}
    return int(headers.get(SEQ_HEADER, "0")), CLOSED_HEADER in headers


class Wake:
    """One watcher's wakes, in order (what ``Wakes`` hands it). Waiting costs a future, not a task
    (``asyncio.wait_for`` on a queue's ``get`` makes one per wait: a watcher waits once per move),
    nor a timer per wait: one timer stays armed across waits and is moved only when it would end a
    wait early or late (a wait still ends ``timeout`` seconds after it began; ``close`` stops it)."""

    __slots__ = ("_items", "_waiter", "_until", "_timer", "_timer_at", "_loop")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None  # its watcher's (Python 3.11's
        # get_running_loop makes a getpid system call each time: once per wait otherwise)
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._until = 0.0  # when the current wait times out (loop time)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def put_nowait(self, msg: Any) -> None:
        self._items.append(msg)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._expire)

    def _expire(self) -> None:
        """The timer: ends the wait whose time is up, or moves on to the current wait's end."""
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # no wait now: the next one arms the timer again
        loop = waiter.get_loop()
        if loop.time() >= self._until - TIMER_SLACK:
            waiter.set_result(None)
        else:  # the timer of an earlier wait, which a wake ended
            self._arm(loop, self._until)

    async def get(self, timeout: float) -> Any:
        """The next wake; ``TimeoutError`` when none came within ``timeout`` seconds."""
        if not self._items:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            until = self._until = loop.time() + timeout
            if self._timer is None or self._timer_at > until + TIMER_SLACK:
                self._arm(loop, until)
            try:
                await waiter
            finally:
                self._waiter = None
            if not self._items:
                raise TimeoutError
        return self._items.popleft()

    def close(self) -> None:
        """The watcher is gone: stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Wakes:
    """One NATS subscription per watched game on this replica, fanned out to its watchers in
    process (each WatchGame stream had its own, so nats-server sent every move once per watcher)."""

    def __init__(self, nc: Any):
        self.nc = nc
        self._games: dict[str, tuple[Any, set[Wake]]] = {}
        self._pending: dict[str, asyncio.Future[Any]] = {}
        # per followed game: the newest record a wake announced (seq, closing)...
        self._seen: dict[str, tuple[int, bool]] = {}
        # ...and the connection's reconnect count when a watcher last read the log while subscribed
        self._synced: dict[str, int] = {}
        # per followed game: a watcher's read of the log begun while subscribed, still in flight
        self._reading: dict[str, asyncio.Future[None]] = {}

    def _reconnects(self) -> int:
        return int(self.nc.stats.get("reconnects", 0))

    def synced(self, subject: str, reconnects: int) -> None:
        """A watcher of ``subject`` read the log (the entry holds every record up to then) while
        subscribed, the connection having reconnected ``reconnects`` times when the read began."""
        if subject in self._games:
            self._synced[subject] = reconnects

    def current(self, subject: str, entry: GameEntry) -> bool:
        """Whether ``entry`` holds every record of its log as this replica knows it without reading
        the log: the game's wakes are followed (a watcher here), were followed when its entry was
        last brought up to date with the log and without a break since (no reconnect: core NATS
        loses what is published while a connection is down), and no wake announced a record the
        entry lacks. As fresh as a read of the log, which may itself come from a stream follower
        a moment behind (docs/contract.md): a wake is sent as the record is stored."""
        at = self._synced.get(subject)
        if at is None or at != self._reconnects() or not self.nc.is_connected:
            return False
        seq, closing = self._seen.get(subject, (-1, False))
        return not _behind(entry, seq, closing, None)

    def reading(self, subject: str) -> asyncio.Future[None] | None:
        """The read of ``subject``'s log a watcher began while subscribed, while it is in flight:
        done when it ends (whether or not it succeeded)."""
        return self._reading.get(subject)

    @contextlib.contextmanager
    def read(self, subject: str) -> Iterator[None]:
        """Marks a watcher's read of ``subject``'s log, begun while subscribed, as in flight
        (``reading``) for the time of the ``with``."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reading[subject] = done
        try:
            yield
        finally:
            if self._reading.get(subject) is done:
                del self._reading[subject]
            done.set_result(None)

    def local(self, subject: str, seq: int, closing: bool = False) -> None:
        """A record this replica appended: its watchers are woken here, at once (the connection has
        ``no_echo``: nats-server does not send this replica its own appends; a connection without it
        wakes them twice, which a watcher takes as the no-op it is)."""
        held = self._games.get(subject)
        if held is None:
            return
        wake = _LocalWake(seq, closing)
        self._saw(subject, wake)
        for w in held[1]:
            w.put_nowait(wake)

    def _saw(self, subject: str, msg: Any) -> None:
        try:
            seq, closes = _announced(msg)
        except ValueError:
            return
        was, closing = self._seen.get(subject, (-1, False))
        self._seen[subject] = (max(was, seq), closing or closes)

    async def join(self, subject: str) -> Wake:
        """The subject's messages from now on, for one watcher (the subscription is on the
        connection before this returns, so it precedes any later request of this replica's)."""
        q = Wake()
        while True:
            held = self._games.get(subject)
            if held is not None:
                held[1].add(q)
                return q
            pending = self._pending.get(subject)
            if pending is not None:
                await asyncio.shield(pending)
                continue
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._pending[subject] = fut
            queues: set[Wake] = {q}

            async def fan_out(msg: Any, queues: set[Wake] = queues, subject: str = subject) -> None:
                self._saw(subject, msg)
                for w in queues:
                    w.put_nowait(msg)

            try:
                sub = await self.nc.subscribe(subject, cb=fan_out)
            except BaseException as exc:
                fut.set_exception(exc)
                fut.exception()
                raise
            finally:
                del self._pending[subject]
            self._games[subject] = (sub, queues)
            fut.set_result(None)
            return q

    async def leave(self, subject: str, q: Wake) -> None:
        q.close()
        held = self._games.get(subject)
        if held is None:
            return
        held[1].discard(q)
        if not held[1]:
            del self._games[subject]
            self._seen.pop(subject, None)
            self._synced.pop(subject, None)
            await kjs.unsubscribe_quietly(held[0])

    def __len__(self) -> int:
        return len(self._games)


class RulesApplication:
    def __init__(
        self,
        store: GameStore,
        cache: GameCache,
        *,
        id_secret: str,
        faults: Faults | None = None,
        clock: Callable[[], float] = time.time,
        clock_second_ms: int = 1000,
    ):
        self.clock_second_ms = clock_second_ms  # COURT_CLOCK_SECOND_MS (dev/test only; court_kit.clock)
        self.store = store
        self.cache = cache
        self.codec = ActionCodec()
        self._secret = id_secret  # COURT_ID_SECRET: game ids, never a token key
        self.faults = faults or Faults()
        self._clock = clock
        self.wakes = Wakes(store.nc)
        self.unread_views = 0  # views answered without reading the log (Wakes.current; tests)
        self.unread_watches = 0  # watches begun without reading the log (Wakes.current; tests)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # ------------------------------------------------------------------ creating

    async def create_game(
        self,
        ident: Identity,
        *,
        request_id: str,
        game: str,
        options: Any,
        seats: list[str],
        seed: int | None = None,
        game_id: str = "",
        resume_from: str = "",
        online: bool = False,
        clock: ClockRequest | None = None,
    ) -> Created:
        """``options``: the request's ``GameOptions`` message (checked against ``game`` here)."""
        if ident.role in ("bot", "analytics"):
            raise PermissionDenied(f"the {ident.role} role may not create games")
        rid = require_id(request_id, "request_id")
        module = get_game(game)  # InvalidOptions -> INVALID_ARGUMENT
        opts = module.options_to_dict(module.options_from_dict(typed.requested_options(game, options)))
        for s in seats:
            if not s or len(s) > MAX_ID or (s.startswith(BOT_PREFIX) and len(s) == len(BOT_PREFIX)):
                raise InvalidArgument(
                    f'seat id {quote(s)} must be a player id or "bot:<level>" (1-{MAX_ID} chars)'
                )
        if seed is not None:
            if ident.role not in ("service", "admin"):
                raise PermissionDenied("only a trusted caller (service, admin) may choose the seed")
            if seed >= MAX_SEED:
                raise InvalidArgument(f"seed must be below 2**53, got {seed}")
        if ident.role == "player":
            if ident.sub not in seats or any(s != ident.sub and not s.startswith(BOT_PREFIX) for s in seats):
                raise PermissionDenied(
                    "a player may create only local games: every seat must be you or a bot "
                    '("bot:<level>"); games with other players start from the lobby'
                )
        if online and ident.role != "service":
            raise PermissionDenied("only the lobby (the service role) may mark a game online")
        if game_id:
            if ident.role not in ("service", "admin"):
                raise PermissionDenied("only a trusted caller (service, admin) may choose the game id")
            if not CHOSEN_GAME_ID.fullmatch(game_id):
                raise InvalidArgument(f"game_id {quote(game_id)} must be 'g' and 24 lowercase hex digits")
        else:
            game_id = game_id_for(self._secret, ident.sub, rid)
        resume: dict[str, Any] = {}
        old: GameEntry | None = None
        if resume_from:
            old, old_seq, resume = await self._save_point(
                ident, game, module, seed, resume_from, seats, game_id
            )
            if options.WhichOneof("game") is not None and opts != resume["save"]["options"]:
                raise InvalidArgument("a resumed game keeps the options of its save point: leave options out")
            opts, seed = resume["save"]["options"], resume["save"]["seed"]
        elif seed is None:
            seed = secrets.randbits(52)
        klog.bind(game_id=game_id)
        known = self.cache.peek(game_id)
        if known is not None:
            return self._created(known, ident, rid)
        record = {
            "k": "c",
            "game": game,
            "options": opts,
            "seed": seed,
            "seats": seats,
            "by": ident.sub,
            "rid": rid,
            "t": self._now_ms(),
            **resume,
        }
        if online:
            record["online"] = True
        if clock is not None:
            settings = kitclock.validate(
                clock.turn_seconds,
                clock.time_bank_seconds,
                clock.autoplay_level or kitclock.DEFAULT_LEVEL,
                clock.abandon_after_seconds,
            )
            record["clock"] = kitclock.to_record(settings, self.clock_second_ms)
        entry = GameEntry(game_id, record, 0)  # InvalidArgument when the seats do not fit the game
        if old is not None:
            await self._close_resumed(old, old_seq, game_id, ident, rid)
        try:
            entry.last_sseq = await self.store.append(
                game_id, entry.created_record().SerializeToString(), 0, 0, due=entry.next_due()
            )
        except Conflict:
            CONFLICTS.inc()
            return self._created(await self.cache.existing(game_id), ident, rid)
        self.cache.put(entry)
        log.info("game created", game=game, seats=len(seats))
        self.faults.after_append(entry, 0)
        return self._created(entry, ident, rid)

    async def _save_point(
        self,
        ident: Identity,
        game: str,
        module: Any,
        seed: int | None,
        resume_from: str,
        seats: list[str],
        game_id: str,
    ) -> tuple[GameEntry, int, dict[str, Any]]:
        """The game resumed, the seq its save point was read at, and the creation record's part for
        a game resumed from it."""
        if ident.role != "service":
            raise PermissionDenied("only the lobby resumes games: call LobbyService.ResumeGame")
        if not hasattr(module, "save_point"):
            raise InvalidArgument(f"{game} games have no save points to resume from")
        if seed is not None:
            raise InvalidArgument("a resumed game keeps the seed of its save point: leave seed out")
        old = await self.cache.fresh(resume_from)
        if old.game != game:
            raise InvalidArgument(f"game {old.game_id} is a {old.game} game, not {game}")
        if len(seats) != len(old.seats):
            raise InvalidArgument(f"game {old.game_id} has {len(old.seats)} seats; got {len(seats)}")
        for i, (was, now) in enumerate(zip(old.seats, seats, strict=True)):
            if now.startswith(BOT_PREFIX) or now == was:
                continue
            whose = "a bot's" if was.startswith(BOT_PREFIX) else f"{quote(was)}'s"
            raise InvalidArgument(
                f"seat {i} of game {old.game_id} is {whose}: a resumed game keeps each person "
                f"in their own seat (or gives the seat to a bot), got {quote(now)}"
            )
        if old.closed_into == "":
            raise FailedPrecondition(old.closed_text() + ": nothing to resume")
        if old.closed_into is not None and old.closed_into != game_id:
            raise FailedPrecondition(f"game {old.game_id} was resumed already, as game {old.closed_into}")
        if old.module.is_terminal(old.state):
            raise FailedPrecondition(f"game {old.game_id} is finished: nothing to resume")
        return old, old.seq, {"save": module.save_point(old.state), "resumed_from": old.game_id}

    async def _close_resumed(self, old: GameEntry, seq: int, into: str, ident: Identity, rid: str) -> None:
        """Close ``old`` (resumed as ``into``) before ``into`` exists: its log's closing record."""
        async with old.lock:
            if old.closed_into == into:
                return  # a retry: this request closed it already
            if old.closed_into is not None or old.seq != seq:
                raise Aborted(
                    f"game {old.game_id} changed while it was being resumed; retry with the same request_id"
                )
            t = self._now_ms()
            data = old.closed_record(into, ident.sub, rid, t).SerializeToString()
            try:
                sseq = await self.store.append(old.game_id, data, old.seq, old.last_sseq, closing=True)
            except Conflict:
                CONFLICTS.inc()
                await self.cache.refresh(old)
                if old.closed_into == into:
                    return
                raise Aborted(
                    f"game {old.game_id} changed while it was being resumed; retry with the same request_id"
                ) from None
            old.close(into, sseq, (ident.sub, rid, t))
            self.wakes.local(self.store.subject(old.game_id), old.seq, closing=True)
        log.info("game closed: resumed as another game", closed=old.game_id, into=into)

    @staticmethod
    def _created(entry: GameEntry, ident: Identity, rid: str) -> Created:
        if (entry.created_by, entry.created_rid) != (ident.sub, rid):
            raise AlreadyExists(f"game {entry.game_id} exists and was not created by this request")
        state, _ = entry.at(0)
        # the caller's seat as it was at creation, so a retry later gets the very same answer
        mine = own_seats(entry, ident)
        acting = [x for x in mine if x in entry.module.to_act(state)]
        seat = (acting or mine)[0] if (acting or mine) else None
        return Created(entry, state, seat)

    # ------------------------------------------------------------------ reading

    async def _fresh(self, game_id: str) -> GameEntry:
        """``cache.fresh``, without its read of the log when this replica follows the game's wakes
        already (a watcher here: the person who asks GetView or Suggest watches the game) and its
        entry holds every record they announced (``Wakes.current``)."""
        entry = self.cache.peek(game_id)
        if entry is not None and self.wakes.current(self.store.subject(game_id), entry):
            self.unread_views += 1
            return entry
        return await self.cache.fresh(game_id)

    async def view(self, ident: Identity, game_id: str, seat: int | None) -> Position:
        entry = await self._fresh(game_id)
        klog.bind(game_id=entry.game_id)
        return Position(entry, entry.seq, entry.state, viewer_seat(entry, ident, seat))

    async def legal_actions(
        self, ident: Identity, game_id: str, seat: int | None
    ) -> tuple[Position, list[Any]]:
        """The caller's seat's position and its legal actions (none when it is not to act)."""
        position = await self.view(ident, game_id, seat)
        if position.seat is None:
            raise PermissionDenied("you have no seat in this game: legal actions are a seat's own")
        entry = position.entry
        if position.seat not in entry.to_act():
            return position, []
        return position, list(entry.module.legal_actions(entry.state, position.seat))

    async def history(self, ident: Identity, game_id: str) -> GameEntry:
        if not ident.may_read_full:
            raise PermissionDenied("the full-information history is for the admin and analytics roles")
        entry = await self.cache.fresh(game_id)
        klog.bind(game_id=entry.game_id)
        return entry

    async def _watched(self, game_id: str, subject: str) -> GameEntry:
        """The entry a new watcher (subscribed to ``subject`` already) starts from: ``cache.fresh``,
        without its read of the log when this replica's watchers of the game keep the entry current
        already (``Wakes.current``, as ``_fresh``). A read of the log another watcher began after
        subscribing and has not finished is waited for first: the watchers that join a game
        together (its players, as it starts) share one read."""
        while True:
            entry = self.cache.peek(game_id)
            if entry is not None and self.wakes.current(subject, entry):
                self.unread_watches += 1
                return entry
            pending = self.wakes.reading(subject)
            if pending is None:
                break
            await asyncio.wait([pending])  # its outcome is judged again above (a failed read: ours)
        reconnects = self.wakes._reconnects()
        with self.wakes.read(subject):
            entry = await self.cache.fresh(game_id)
            self.wakes.synced(subject, reconnects)
        return entry

    async def watch(
        self, ident: Identity, game_id: str, seat: int | None, after_seq: int | None
    ) -> AsyncGenerator[Position, None]:
        """The positions a watcher gets: a snapshot (unless ``after_seq``), then every record after
        it with its events, until the game ends. A consumer builds each answer before it asks for
        the next (the entry moves on meanwhile); close the iterator when done (``aclosing``)."""
        if not valid_game_id(game_id):
            raise NotFound(f"no game {quote(game_id)}")
        # subscribed before the log is read: a move appended between the read and the subscription
        # would otherwise reach this watcher only at the next poll (WATCH_POLL seconds late)
        subject = self.store.subject(game_id)
        wake = await self.wakes.join(subject)
        try:
            entry = await self._watched(game_id, subject)
            klog.bind(game_id=entry.game_id)
            viewer = viewer_seat(entry, ident, seat)
            if after_seq is not None:
                sent = after_seq
            else:
                # the snapshot's seq is taken with its view, before the yield: a move landing while
                # the snapshot is on its way is then the follow's first update (no gap, no repeat)
                sent = entry.seq
                yield Position(entry, sent, entry.state, viewer)
            while True:
                if sent < entry.seq:
                    upto = entry.seq
                    if upto == sent + 1 and upto in entry.recent:  # the one record a wake announced
                        state, events = entry.recent[upto]
                        yield Position(entry, upto, state, viewer, events)
                        sent = upto
                        continue
                    # materialised first: the entry may move on (and forget recent states) meanwhile
                    for s, state, events in list(entry.replay(sent, upto)):
                        yield Position(entry, s, state, viewer, tuple(events))
                        sent = s
                    continue
                if entry.finished:
                    return
                try:
                    hint, closing = _announced(await wake.get(WATCH_POLL))
                except (TimeoutError, NatsTimeout):
                    hint, closing = None, False
                last = None
                if hint is None:  # a poll: the log's last record, the reconnect count first
                    reconnects = self.wakes._reconnects()
                    last = await self.store.last_sseq(entry.game_id)
                if _behind(entry, hint, closing, last):
                    async with entry.lock:
                        # the wake can come before the append's own ack: a move submitted to this
                        # replica is then committed while we wait for the lock, and the log need
                        # not be read (make bench, watch mode: one read per two moves otherwise)
                        if _behind(entry, hint, closing, last):
                            await self.cache.refresh(entry)
                    # told of a move our read of the log does not show yet (a stream follower
                    # still catching up, or a writer that lost its append): look again shortly,
                    # for up to one poll period, rather than only at the next poll
                    deadline = time.monotonic() + WATCH_POLL
                    while hint is not None and hint > entry.seq and time.monotonic() < deadline:
                        await asyncio.sleep(BEHIND_POLL)
                        async with entry.lock:
                            await self.cache.refresh(entry)
                if hint is None:  # the poll read the log: the entry is current again (a reconnect)
                    self.wakes.synced(subject, reconnects)
        finally:
            await self.wakes.leave(subject, wake)

    # ------------------------------------------------------------------ moves

    async def submit(
        self,
        ident: Identity,
        *,
        request_id: str,
        game_id: str,
        action: actions_pb2.Action | None,
        seat: int | None,
        turn_seq: int | None,
    ) -> Submitted:
        """``action``: the typed action (``None``: none was sent)."""
        rid = require_id(request_id, "request_id")
        if action is None:
            raise InvalidArgument("action is required")
        # an action sent before (as these very bytes) is read from the codec's memo: its game, engine
        # action and canonical form (the errors of a new one keep their order: action, game, legality)
        sent = action.SerializeToString()
        known = self.codec.parsed(sent)
        if known is None:
            action_json = kactions.to_json(action)
        entry = self.cache.cached(game_id) or await self.cache.get(game_id)
        klog.bind(game_id=entry.game_id)
        game = kactions.game_of(action) if known is None else known[0]
        if game != entry.game:
            raise InvalidArgument(f"a {game} action was sent to a {entry.game} game")
        if known is None:
            # stored and published in the canonical form of docs/rules/, whatever the spelling sent ("qd": "QD")
            engine_action = entry.module.action_from_json(action_json)
            action_json = {
                k: v for k, v in entry.module.action_to_json(engine_action, 0).items() if k != "player"
            }
            self.codec.remember_parsed(sent, game, engine_action, action_json)
        else:
            engine_action, action_json = known[1], known[2]
        async with entry.lock:
            for attempt in (0, 1):
                first = entry.requests.get((ident.sub, rid))
                if first is not None:
                    return self._first_answer(entry, first, ident, action_json)
                if entry.closed_into is not None:
                    raise FailedPrecondition(entry.closed_text())
                acting = _acting_seat(entry, ident, seat)
                if (
                    turn_seq is not None
                    and acting in entry.to_act()
                    and entry.clock[acting].turn_seq != turn_seq
                ):
                    if attempt == 0 and await self.cache.refresh(entry):
                        continue
                    raise FailedPrecondition(
                        f"the turn of seat {acting} that started at record {turn_seq} is over (it timed out "
                        f"and the clock played it); its turn now started at record {entry.clock[acting].turn_seq}"
                    )
                try:
                    move, state, events = entry.propose(
                        acting, engine_action, action_json, ident.sub, rid, self._now_ms()
                    )
                    break
                except IllegalAction:
                    # our cache may be behind the log: judge again on the latest position, once
                    if attempt == 0 and await self.cache.refresh(entry):
                        continue
                    raise
            data, full = entry.move_record_bytes(
                move, state, events, self.codec.proto(entry, engine_action, acting)
            )
            try:
                sseq = await self.store.append(entry.game_id, data, move.seq, entry.last_sseq, due=move.due)
            except Conflict:
                CONFLICTS.inc()
                await self.cache.refresh(entry)
                first = entry.requests.get((ident.sub, rid))
                if first is not None:
                    return self._first_answer(entry, first, ident, action_json)
                if entry.closed_into is not None:
                    raise FailedPrecondition(entry.closed_text()) from None
                # nothing of this request is in the log (the append that lost was its only write):
                # a retry with the same request id is judged afresh (docs/contract.md, "Retries")
                raise Aborted(
                    "another move reached this game first; retry with the same request_id"
                ) from None
            entry.commit(move, state, events, sseq)
            self.wakes.local(self.store.subject(entry.game_id), move.seq)
            _count_move(entry.game)
            self.faults.after_append(entry, move.seq)
            return Submitted(entry, move.seq, acting, state, events, ident, tuple(full))

    def _first_answer(
        self, entry: GameEntry, seq: int, ident: Identity, action_json: dict[str, Any]
    ) -> Submitted:
        REPLAYED.inc()
        if seq == 0:
            raise InvalidArgument("this request_id created the game; use a new one for each move")
        move = entry.moves[seq - 1]
        if move.is_seat_record:
            raise InvalidArgument(
                f"request_id {quote(move.rid)} was already used for a seat change (record {seq}); "
                "use a new request_id for a move"
            )
        if move.action != action_json:
            raise InvalidArgument(
                f"request_id {quote(move.rid)} was already used for another action "
                f"(move {seq}); use a new request_id for a new action"
            )
        state, events = entry.at(seq)
        return Submitted(entry, seq, move.seat, state, events, ident)

    async def write_locked(
        self,
        entry: GameEntry,
        seat: int,
        action: Any,
        action_json: dict[str, Any],
        by: str,
        rid: str,
        kind: str,
    ) -> int | None:
        """Append one record the service itself decided (a clock move, a seat record); the caller
        holds ``entry.lock`` and has refreshed the entry. Returns its seq, or None when another
        writer was first (the entry is refreshed: the caller judges again)."""
        move, state, events = entry.propose(seat, action, action_json, by, rid, self._now_ms(), kind)
        typed_action = None if action is None else self.codec.proto(entry, action, seat)
        data = entry.move_record_bytes(move, state, events, typed_action)[0]
        try:
            sseq = await self.store.append(entry.game_id, data, move.seq, entry.last_sseq, due=move.due)
        except Conflict:
            CONFLICTS.inc()
            await self.cache.refresh(entry)
            return None
        entry.commit(move, state, events, sseq)
        self.wakes.local(self.store.subject(entry.game_id), move.seq)
        if not move.is_seat_record:
            _count_move(entry.game)
        self.faults.after_append(entry, move.seq)
        return move.seq

    # ------------------------------------------------------------------ seats away and back

    async def change_seat(
        self, ident: Identity, *, request_id: str, game_id: str, seat: int | None, kind: str
    ) -> SeatChanged:
        """``kind``: ``clock.SEAT_AWAY`` (LeaveSeat) or ``clock.SEAT_RETURNED`` (ReturnToSeat)."""
        rid = require_id(request_id, "request_id")
        entry = await self.cache.get(game_id)
        klog.bind(game_id=entry.game_id)
        if ident.role == "service" and kind == kclock.SEAT_AWAY:
            if seat is None:
                raise InvalidArgument("name the seat to mark away")
            chosen = _check_seat(entry, seat)
            if entry.seats[chosen].startswith(BOT_PREFIX):
                raise InvalidArgument(f"seat {chosen} is a bot's: only a person's seat can be away")
        elif ident.role == "player":
            if seat is not None:
                _check_seat(entry, seat)
                if not may_act(entry, ident, seat):
                    raise PermissionDenied(f"seat {seat} is not yours")
                chosen = seat
            else:
                mine = own_seats(entry, ident)
                if not mine:
                    raise PermissionDenied("you have no seat in this game")
                if len(mine) > 1:
                    raise InvalidArgument(f"you hold several seats ({mine}): name one in `seat`")
                chosen = mine[0]
        else:
            what = "LeaveSeat" if kind == kclock.SEAT_AWAY else "ReturnToSeat"
            raise PermissionDenied(
                f"the {ident.role} role may not call {what}: a seat's player may "
                "(and the lobby may mark a seat away)"
            )
        async with entry.lock:
            await self.cache.refresh(entry)
            for _attempt in range(5):
                first = entry.requests.get((ident.sub, rid))
                if first is not None:
                    if first == 0 or not entry.moves[first - 1].is_seat_record:
                        raise InvalidArgument(f"request_id {quote(rid)} was already used for another call")
                    REPLAYED.inc()
                    return self._seat_changed(entry, first, entry.moves[first - 1].seat, True)
                if entry.finished:
                    raise FailedPrecondition(f"game {entry.game_id} is over")
                away = entry.clock[chosen].away
                if away == (kind == kclock.SEAT_AWAY):
                    return self._seat_changed(entry, entry.seq, chosen, False)
                seq = await self.write_locked(entry, chosen, None, {}, ident.sub, rid, kind)
                if seq is not None:
                    log.info("seat changed", seat=chosen, kind=kind)
                    return self._seat_changed(entry, seq, chosen, True)
        raise Aborted("the game kept moving; retry with the same request_id")

    @staticmethod
    def _seat_changed(entry: GameEntry, seq: int, seat: int, changed: bool) -> SeatChanged:
        state = entry.state if seq == entry.seq else entry.at(seq)[0]
        return SeatChanged(Position(entry, seq, state, seat), changed)

    # ------------------------------------------------------------------ closing

    async def close_game(self, ident: Identity, *, request_id: str, game_id: str, reason: str) -> Closed:
        """Close an unfinished game for good (its lobby was cancelled, its antes refunded). Idempotent:
        a game closed already (by any request, or by a resume) answers its closed position."""
        if ident.role != "service":
            raise PermissionDenied(
                "only the lobby closes games (when it cancels their lobby); players may "
                "abandon a game through the lobby's AbandonGame"
            )
        rid = require_id(request_id, "request_id")
        reason = reason.strip()
        if not reason or len(reason) > MAX_REASON:
            raise InvalidArgument(f"reason is required (1 to {MAX_REASON} characters): the players read it")
        klog.bind(game_id=game_id)
        try:
            try:
                entry = await self.cache.fresh(game_id)
            except NotFound:
                if not CHOSEN_GAME_ID.fullmatch(game_id):
                    raise  # no CreateGame can ever use this id: nothing to close
                tomb = await self._bury(game_id, ident, rid, reason)
                if tomb is not None:
                    return self._buried(tomb, ident, rid)
                # a creation (or another close) reached the log first: close what is there now
                entry = await self.cache.existing(game_id)
        except ClosedBeforeCreated as closed:  # closed before it was created: closed already
            return self._buried(closed.tomb, ident, rid)
        klog.bind(game_id=entry.game_id)
        async with entry.lock:
            for attempt in (0, 1):
                if entry.closed_into is not None:
                    break  # closed already: by this request (a retry), another, or a resume
                if entry.module.is_terminal(entry.state):
                    raise FailedPrecondition(f"game {entry.game_id} is finished: there is nothing to close")
                t = self._now_ms()
                data = entry.closed_record("", ident.sub, rid, t, reason).SerializeToString()
                try:
                    sseq = await self.store.append(
                        entry.game_id, data, entry.seq, entry.last_sseq, closing=True
                    )
                except Conflict:
                    # a move (or another close) reached the log first: judge again on the latest position
                    CONFLICTS.inc()
                    await self.cache.refresh(entry)
                    if attempt == 1 and entry.closed_into is None:
                        raise Aborted(
                            f"game {entry.game_id} changed while it was being closed; retry with the "
                            "same request_id"
                        ) from None
                    continue
                entry.close("", sseq, (ident.sub, rid, t), reason)
                self.wakes.local(self.store.subject(entry.game_id), entry.seq, closing=True)
                log.info("game closed", reason=reason[:200])
                self.faults.after_append(entry, entry.seq)
                break
            return Closed(
                entry.game_id,
                entry.closed_by[:2] == (ident.sub, rid),
                position=Position(entry, entry.seq, entry.state, None),
            )

    async def _bury(self, game_id: str, ident: Identity, rid: str, reason: str) -> Tombstone | None:
        """Close a game id that has no log yet: a tombstone (a GameClosed record at seq 0, no game)
        appended where its creation would go, expecting an empty log, so of a tombstone and a
        creation racing exactly one lands; a creation after it answers FAILED_PRECONDITION (the
        reason), never a playable game. None when something reached the log first."""
        t = self._now_ms()
        data = krec.closed_record(
            "", game_id, 0, t, into="", by=ident.sub, request_id=rid, reason=reason
        ).SerializeToString()
        try:
            sseq = await self.store.append(game_id, data, 0, 0, closing=True)
        except Conflict:
            CONFLICTS.inc()
            return None
        tomb = Tombstone(game_id, reason, ident.sub, rid, t, sseq)
        self.cache.bury(tomb)
        log.info("game closed before it was created (tombstone)", reason=reason[:200])
        return tomb

    @staticmethod
    def _buried(tomb: Tombstone, ident: Identity, rid: str) -> Closed:
        return Closed(tomb.game_id, (tomb.by, tomb.rid) == (ident.sub, rid), tomb=tomb)
