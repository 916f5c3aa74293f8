"""Playing the bot seats: public game records in, moves out.

The projector publishes one public record (``court.events.v2.Record``, docs/contract.md) per game
step on ``court.events.<game>.<game_id>`` in the ``COURT_EVENTS`` stream; each carries ``to_act``
(the seats to act next) and ``to_act_players`` (their ids; a bot seat is ``bot:<level>``,
optionally ``bot:<level>:<name>``). A record with no bot seat to act is acknowledged at once
(``not_bot``); the others are turns.

**One handler per turn, across replicas.** Every replica pulls from one durable JetStream
consumer, ``court-bot`` (explicit acks, ``ack_wait`` from COURT_BOT_ACK_WAIT). JetStream gives
each event to one replica at a time; a replica keeps pull requests open for as many as it has
workers (``TurnConsumer``), holds a record it has no free worker for yet reserved, and
keeps a turn it is working on reserved with in-progress acks. A replica that dies holding a turn
stops extending it, so after ``ack_wait`` JetStream redelivers it to another replica. This is the
JetStream form of a NATS queue group, with the durability a plain queue group lacks.

**The consumer deleted under the replicas** (by hand, a restore): their open pull requests end
with 409 Consumer Deleted, the next with 503 (``court_kit.jetstream.Puller`` raises for either);
each replica attaches again a second later and the first re-creates ``court-bot`` where the old
one left off: from its ack floor as last read (``FLOOR_EVERY``; every record after it delivered
again, those already played found stale as below), or, when no floor was read yet, as when first
created (COURT_BOT_CATCHUP back). What a player sees: the bots pause about a second, then play
on, each move once.

**A turn plays at most once**, even when delivered twice (a replica died after submitting but
before acking, or an ack was lost):

* the handler reads the bot seat's view; if the game has moved past the event's ``seq`` (or is
  over) the turn is stale: acked and dropped (the newer position has its own record). A view is
  read once per turn, and not at all when the rules service handed it over already: each of the
  bot's submit answers carries the views of the position it made for every bot seat to act there
  (``SubmitActionResponse.view`` and ``next``), kept by position and seat (``ViewShelf``,
  bounded) until that position's turn comes (a bot following a bot: one RPC per move, not two);
  after a person's move the rules replica that applied it pushes the bot seats' views on
  ``court.botviews.<game_id>`` (core NATS, every replica subscribed: ``court_rules.botviews``,
  docs/contract.md), kept on the same shelf.
  Such a view is exactly the one a read at the turn's ``seq`` would return; when the game has
  moved on since, the submit is refused and the fresh view read then says the turn is stale;
* the move is submitted with request id ``bot-<game_id>-<seq>-<seat>`` under the one bot
  identity every replica shares, so two handlers of one position send the same id and the rules
  service applies it once (a repeat gets the first answer; the same id with another action, as
  a time-bounded search may produce, is refused with INVALID_ARGUMENT, counted as ``duplicate``);
* a turn is stale only when the game has moved on **as the log says**: a view past the event's
  ``seq``, or the game over. A rules replica may answer from behind: its cache was loaded before
  other replicas wrote (it took over from a replica that died), or its NATS server is a stream
  follower still catching up (direct gets may be served by any replica). So a view *behind* the
  event is retried shortly (``BEHIND_DELAY``), not dropped; and a submit refused with ABORTED or
  FAILED_PRECONDITION is checked against a fresh view: moved on, it is stale; still this
  position, the same move is sent again under the same request id (the rules service applies it
  once), and if that keeps failing the turn is put back. Dropping such a turn would stall the game
  for good: nothing else brings that position's TurnStarted again.
* what the log says is also what this replica has seen of it (``Progress``): a newer record of the
  game delivered, the answer to its own move, a view pushed after a person's move. A turn of an
  older position is stale at once, without a view or a submit (its game has moved on; the newer
  position brings its own turn). And a replica takes the turns of one game one after another
  (``OneAtATime``; other games meanwhile): two turns of one game at once (a person moving in a
  simultaneous phase, as Hearts' passing) used to both decide, one submit being refused and
  read a view to learn it was stale.

One event plays one move: the first bot seat in ``to_act`` the service can play. In a
simultaneous phase (Hearts passing, Mutual Swap votes) the next bot seat moves on the next event.

Turns the service cannot play now (a level with no adapter in this build, an unknown level, the
rules service unreachable, a token it refuses) are logged as errors, counted, and put back
(``nak`` with a delay) so a later or newer replica plays them: never dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import grpc
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.loops import rest
from court_proto.court.events.v2 import records_pb2
from court_proto.court.rules.v1 import rules_pb2
from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from .decide import Decider, NoAdapter, UnknownLevel, position_rng
from .metrics import ERRORS, TURN_SECONDS, TURNS
from .upstream import BotRules

log = klog.get_logger("court_bot.turns")

STREAM = krec.PUBLIC_STREAM  # the public records (protos/court/events/v2)
TURN_SUBJECT = krec.PUBLIC_PREFIX + "*.*"  # every public record: each says who acts next
VIEWS_SUBJECT = krec.BOT_VIEWS_PREFIX + "*"  # bot seats' views pushed after a person's move
DURABLE = "court-bot"
BOT_PREFIX = "bot:"
FETCH_WAIT = 1.0  # seconds the pull loop waits for a record at a time (how soon it notices a stop)
PULL_EXPIRES = 5.0  # seconds an open pull request lives (a nats-server restart forgets it: renewed then)
FLOOR_EVERY = 5.0  # seconds between reads of the consumer's ack floor (where a re-created one starts)
FLOOR_TIMEOUT = 1.0  # seconds a read of the floor may take (the pull loop waits for it)
RECENT = 20_000  # handled turns remembered for tests and debugging
UNAVAILABLE_DELAY = 1.0  # seconds before a turn is retried when the rules service did not answer
BEHIND_DELAY = 0.25  # seconds before a turn is retried when the rules replica had not seen it yet
VIEWS_KEPT = 4096  # views from submit answers kept for the turns they are for (ViewShelf)
GAMES_KEPT = 4096  # games whose newest position a replica remembers (Progress)
RESUBMITS = 3  # same-id resubmits of a move refused by a replica that was behind (ABORTED, ...)


class Outcome(StrEnum):
    PLAYED = "played"
    STALE = "stale"
    BEHIND = "behind"  # the rules replica had not seen the turn yet: put back for a moment
    DUPLICATE = "duplicate"
    NOT_BOT = "not_bot"
    RETRY = "retry"
    FAILED = "failed"


OUTCOMES = {o: TURNS.labels(o.value) for o in Outcome}  # court_bot_turns_total's series, looked up once


def request_id(game_id: str, seq: int, seat: int) -> str:
    """The one request id of the bot move for ``seat`` at position ``seq`` of a game."""
    return f"bot-{game_id}-{seq}-{seat}"


def bot_level(player: str) -> str | None:
    """``bot:<level>`` (or ``bot:<level>:<name>``) -> level; ``None`` for a person."""
    if not player.startswith(BOT_PREFIX):
        return None
    return player[len(BOT_PREFIX) :].split(":", 1)[0]


@dataclass(frozen=True, slots=True)
class Turn:
    game: str
    game_id: str
    seq: int
    to_act: tuple[int, ...]
    players: tuple[str, ...]

    @classmethod
    def from_record(cls, rec: records_pb2.Record) -> Turn:
        to_act = tuple(int(s) for s in rec.to_act)
        players = tuple(rec.to_act_players)
        if len(to_act) != len(players):
            raise ValueError("the record lists to_act and to_act_players of different lengths")
        return cls(rec.game, rec.game_id, int(rec.seq), to_act, players)

    def bot_seats(self) -> list[tuple[int, str]]:
        """(seat, level) of every bot seat to act, in ``to_act`` order."""
        out = []
        for seat, player in zip(self.to_act, self.players, strict=True):
            level = bot_level(player)
            if level is not None:
                out.append((seat, level))
        return out


@dataclass(frozen=True, slots=True)
class Handled:
    """What one delivery of one turn event came to."""

    game_id: str
    seq: int
    outcome: Outcome
    seat: int | None = None
    level: str | None = None
    delivered: int = 1  # JetStream's delivery count (2+: a redelivery)
    retry_after: float | None = None
    replica: str = ""


class Faults:
    """Hooks for tests (a crash between submit and ack, two handlers of one position)."""

    async def before_submit(self, turn: Turn, seat: int) -> None:
        """Called after deciding, before the move is submitted."""

    async def decided(self, turn: Turn, seat: int, action: Any) -> None:
        """Called with the decided action (``actions_pb2.Action``) just before ``before_submit``."""

    async def after_submit(self, turn: Turn, seat: int, reply: rules_pb2.SubmitActionResponse) -> None:
        """Called after the rules service accepted the move, before the event is acked."""


class Journal:
    """The turns this replica handled, newest last, with a way to wait for one."""

    def __init__(self, limit: int = RECENT):
        self.entries: deque[Handled] = deque(maxlen=limit)
        self._changed: asyncio.Event | None = None  # made when someone waits

    def add(self, h: Handled) -> None:
        self.entries.append(h)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def played(self) -> list[Handled]:
        return [h for h in self.entries if h.outcome is Outcome.PLAYED]

    async def wait_for(self, predicate: Callable[[list[Handled]], bool], timeout: float = 15.0) -> None:
        async def loop() -> None:
            while not predicate(list(self.entries)):
                if self._changed is None:
                    self._changed = asyncio.Event()
                await self._changed.wait()

        await asyncio.wait_for(loop(), timeout)


class ViewShelf:
    """Views the rules service handed over in submit answers, by (game id, seq, seat), until the
    turn of that position takes them (once); the oldest go beyond ``limit``."""

    def __init__(self, limit: int = VIEWS_KEPT):
        self.limit = limit
        self._views: OrderedDict[tuple[str, int, int], rules_pb2.GameView] = OrderedDict()
        self.taken = 0  # views served from here (tests, the bench)

    def put(self, reply: rules_pb2.SubmitActionResponse) -> None:
        for v in (reply.view, *reply.next):
            self.put_view(v)

    def put_view(self, v: rules_pb2.GameView) -> None:
        """Keep ``v`` if its seat is to act in it (a view pushed twice is kept once)."""
        if v.HasField("your_seat") and not v.finished and v.your_seat in v.to_act:
            self._views[(v.game_id, int(v.seq), int(v.your_seat))] = v
            if len(self._views) > self.limit:
                self._views.popitem(last=False)

    def take(self, game_id: str, seq: int, seat: int) -> rules_pb2.GameView | None:
        v = self._views.pop((game_id, seq, seat), None)
        if v is not None:
            self.taken += 1
        return v


class Progress:
    """The newest position of each game the log is known to have reached, from what this replica
    saw: records delivered, the answers to its own moves, views pushed after a person's move (each
    written to the log before it was sent). A turn of an older position is stale: the game moved
    on as the log says. Bounded: the games seen least recently are forgotten (a turn of one is
    then judged by its view, as without this)."""

    def __init__(self, limit: int = GAMES_KEPT):
        self.limit = limit
        self._seqs: OrderedDict[str, int] = OrderedDict()

    def saw(self, game_id: str, seq: int) -> None:
        old = self._seqs.get(game_id)
        if old is None:
            self._seqs[game_id] = seq
            if len(self._seqs) > self.limit:
                self._seqs.popitem(last=False)
        elif seq > old:
            self._seqs[game_id] = seq
            self._seqs.move_to_end(game_id)

    def past(self, game_id: str, seq: int) -> bool:
        """Whether the game is known to have moved past position ``seq``."""
        return self._seqs.get(game_id, -1) > seq


class OneAtATime:
    """The turns of one game handled one after another (``take`` then ``give``), those of other
    games meanwhile. Uncontended, a take is a dictionary entry: no lock, no future."""

    def __init__(self) -> None:
        self._held: dict[str, deque[asyncio.Future[None]]] = {}  # key -> its waiters, in order

    async def take(self, key: str) -> None:
        waiting = self._held.get(key)
        if waiting is None:
            self._held[key] = deque()
            return
        turn = asyncio.get_running_loop().create_future()
        waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give(key)  # handed over just as it was cancelled: on to the next
            else:
                with contextlib.suppress(ValueError):  # (a give may have passed over it already)
                    waiting.remove(turn)
            raise

    def give(self, key: str) -> None:
        """Done with ``key``: the next waiter takes it."""
        waiting = self._held[key]
        while waiting:
            turn = waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        del self._held[key]

    def __len__(self) -> int:
        return len(self._held)


class TurnHandler:
    """Plays one turn event: read the bot seat's view (or take the one a submit answer brought),
    decide, submit."""

    def __init__(
        self,
        rules: BotRules,
        decider: Decider,
        secret: str,
        *,
        retry_delay: float = 30.0,
        faults: Faults | None = None,
        replica: str = "",
    ):
        self.rules = rules
        self.decider = decider
        self._secret = secret
        self.retry_delay = retry_delay
        self.faults = faults or Faults()
        self.replica = replica
        self.shelf = ViewShelf()
        self.progress = Progress()

    async def handle(self, turn: Turn, delivered: int = 1) -> Handled:
        klog.bind(game_id=turn.game_id, seq=turn.seq, game=turn.game)
        t0 = time.perf_counter()

        def done(
            outcome: Outcome,
            seat: int | None = None,
            level: str | None = None,
            retry_after: float | None = None,
        ) -> Handled:
            return Handled(turn.game_id, turn.seq, outcome, seat, level, delivered, retry_after, self.replica)

        seats = turn.bot_seats()
        if not seats:
            return done(Outcome.NOT_BOT)
        if self.progress.past(turn.game_id, turn.seq):  # a newer position was seen: no call needed
            return done(Outcome.STALE)
        refused: list[str] = []
        for seat, level in seats:
            try:
                self.decider.check_level(turn.game, level)
            except (UnknownLevel, NoAdapter) as exc:
                kind = "unknown_level" if isinstance(exc, UnknownLevel) else "no_adapter"
                log.error("cannot play this bot seat", seat=seat, level=level, error=str(exc))
                ERRORS.labels(kind).inc()
                refused.append(str(exc))
                continue
            view = self.shelf.take(turn.game_id, turn.seq, seat)
            if view is None:
                try:
                    view = await self.rules.view(turn.game_id, seat)
                except grpc.aio.AioRpcError as err:
                    return self._rules_failed("reading the view", err, done, seat, level)
            if view.finished or view.seq > turn.seq:
                log.debug("stale turn", now=view.seq)
                return done(Outcome.STALE, seat, level)
            if view.seq < turn.seq:
                # the replica that answered has not caught up with the log yet: not stale, early
                log.info("the rules replica is behind this turn; retrying shortly", now=view.seq)
                return done(Outcome.BEHIND, seat, level, retry_after=BEHIND_DELAY)
            if seat not in view.to_act:  # cannot happen at the event's own seq; keep the guard
                continue
            rng = position_rng(self._secret, turn.game_id, turn.seq, seat)
            choice = await self.decider.decide_view(view, seat, level, rng, purpose="turn")
            rid = request_id(turn.game_id, turn.seq, seat)
            await self.faults.decided(turn, seat, choice.action)
            await self.faults.before_submit(turn, seat)
            reply = None
            for attempt in range(RESUBMITS + 1):
                try:
                    reply = await self.rules.submit(turn.game_id, seat, choice.action, rid)
                    break
                except grpc.aio.AioRpcError as err:
                    code = err.code()
                    if code == grpc.StatusCode.INVALID_ARGUMENT:
                        # our action comes from the legal list of this very position: the request id
                        # was used already (another handler of this turn played it)
                        log.info("another handler played this turn", seat=seat, reason=err.details())
                        return done(Outcome.DUPLICATE, seat, level)
                    if code not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED):
                        return self._rules_failed("submitting", err, done, seat, level)
                    # refused: either the game moved on, or the replica judged on a cached position
                    # older than the log's (ABORTED: "retry with the same request_id"). Ask again.
                    try:
                        now = await self.rules.view(turn.game_id, seat)
                    except grpc.aio.AioRpcError as err2:
                        return self._rules_failed("reading the view", err2, done, seat, level)
                    if now.finished or now.seq > turn.seq:
                        log.info("the game moved on before the bot's move", seat=seat, reason=err.details())
                        return done(Outcome.STALE, seat, level)
                    log.info(
                        "the rules replica refused the move on an older position; sending it again",
                        seat=seat,
                        code=code.name,
                        reason=err.details(),
                        now=now.seq,
                        attempt=attempt + 1,
                    )
            if reply is None:
                return done(Outcome.BEHIND, seat, level, retry_after=BEHIND_DELAY)
            self.progress.saw(turn.game_id, int(reply.seq))
            self.shelf.put(reply)
            TURN_SECONDS.observe(time.perf_counter() - t0)
            log.debug("played", seat=seat, level=level, move=reply.seq, ms=round(choice.seconds * 1000, 2))
            await self.faults.after_submit(turn, seat, reply)
            return done(Outcome.PLAYED, seat, level)
        if refused:
            return done(Outcome.RETRY, seats[0][0], seats[0][1], retry_after=self.retry_delay)
        return done(Outcome.STALE)

    def _rules_failed(
        self, what: str, err: grpc.aio.AioRpcError, done: Callable[..., Handled], seat: int, level: str
    ) -> Handled:
        code = err.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED):
            log.warning("rules service unavailable", what=what, code=code.name, reason=err.details())
            ERRORS.labels("rules_unavailable").inc()
            return done(Outcome.RETRY, seat, level, retry_after=UNAVAILABLE_DELAY)
        if code == grpc.StatusCode.NOT_FOUND:
            log.error("turn event for an unknown game", what=what, reason=err.details())
            ERRORS.labels("unknown_game").inc()
            return done(Outcome.FAILED, seat, level)
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            log.error(
                "the rules service refused the bot identity (is its key in COURT_TOKEN_KEYS?)",
                what=what,
                code=code.name,
                reason=err.details(),
            )
            ERRORS.labels("refused").inc()
            return done(Outcome.RETRY, seat, level, retry_after=self.retry_delay)
        log.error("the rules service answered an error", what=what, code=code.name, reason=err.details())
        ERRORS.labels("rules_error").inc()
        return done(Outcome.RETRY, seat, level, retry_after=self.retry_delay)


class Reservation:
    """A taken turn kept reserved: an in-progress ack every ``every`` s until ``cancel``. A timer,
    not a task per turn: almost every turn ends before its first in-progress ack is due."""

    def __init__(self, msg: Any, every: float):
        self.msg = msg
        self.every = every
        self._loop = asyncio.get_running_loop()
        self._sending: set[asyncio.Task[None]] = set()
        self._handle = self._loop.call_later(every, self._tick)

    def _tick(self) -> None:
        task = self._loop.create_task(self._in_progress())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        self._handle = self._loop.call_later(self.every, self._tick)

    async def _in_progress(self) -> None:
        with contextlib.suppress(Exception):
            await self.msg.in_progress()

    def cancel(self) -> None:
        self._handle.cancel()


class TurnConsumer:
    """One pull loop per replica on the shared consumer (``court_kit.jetstream.Puller``: pull
    requests for ``concurrency`` records kept open, not a request per record), handing each
    record to a task of its own, at most ``concurrency`` at once; a record waits for a free slot
    reserved (in-progress acks), and one taken but not started when the replica stops is put back
    (nak). Acks and naks leave with the connection's next write (``court_kit.jetstream.LazyAcks``):
    with the pull request no longer written per record, a record costs the bot no write of its own.
    """

    def __init__(
        self,
        nc: NATS,
        handler: TurnHandler,
        *,
        concurrency: int = 8,
        ack_wait: float = 10.0,
        catchup: float = 600.0,
        journal: Journal | None = None,
    ):
        self.nc = nc
        self.js = nc.jetstream(timeout=5.0)
        self.handler = handler
        self.concurrency = concurrency
        self.ack_wait = ack_wait
        self.catchup = catchup
        self.journal = journal or Journal()
        self.acks = kjs.LazyAcks(nc)
        self._stopping = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []  # the pull loop
        self._turns: set[asyncio.Task[None]] = set()  # the records being handled
        self._slots = asyncio.Semaphore(concurrency)
        self._games = OneAtATime()  # one turn of a game at a time in this replica
        self.attached = asyncio.Event()  # set once the consumer exists and the loop is pulling
        self._views_sub: Any = None  # court.botviews.*: views the rules service pushes (ViewShelf)
        self.pushed = 0  # views pushed by the rules service and kept (tests, the bench)
        self.floor_every = FLOOR_EVERY
        self.floor = 0  # the consumer's ack floor (a stream sequence) as last read; 0: none read
        self._floor_at = 0.0  # (loop time) when the floor is read next

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._pull(), name="court-bot-turns")]

    async def stop(self, grace: float) -> None:
        """Take no new turns; let the ones in hand finish (up to ``grace`` seconds after the pulls end)."""
        self._stopping.set()
        if not self._workers:
            return
        _done, pending = await asyncio.wait(self._workers, timeout=FETCH_WAIT + grace)
        for t in pending:
            t.cancel()
        for t in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._turns:
            _done, pending = await asyncio.wait(list(self._turns), timeout=grace)
            for t in pending:
                t.cancel()
            for t in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        self.acks.flush()

    async def kill(self) -> None:
        """Abrupt (tests: a replica dying): turns in hand are neither acked nor put back."""
        self._stopping.set()
        tasks = [*self._workers, *self._turns]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def ensure_consumer(self) -> None:
        try:
            info = await self.js.consumer_info(STREAM, DURABLE)
        except NotFoundError:
            info = None
        if info is not None:
            self._saw_floor(info)
            if (
                info.config.ack_wait is None
                or abs(info.config.ack_wait - self.ack_wait) > 1e-3
                or info.config.filter_subject != TURN_SUBJECT
            ):
                # COURT_BOT_ACK_WAIT changed, or a v1 consumer (TurnStarted subjects): the last
                # replica started wins (the rest stays as created)
                await self.js.add_consumer(
                    STREAM, replace(info.config, ack_wait=self.ack_wait, filter_subject=TURN_SUBJECT)
                )
                log.info("updated the shared turn consumer", ack_wait=self.ack_wait)
            return
        # it was there and is gone (deleted under us): on from where it left off, unless the stream
        # was made anew; else as when first created
        start = await kjs.resume_after(self.js, STREAM, self.floor)
        if start is None:
            self.floor = 0
            start = {
                "deliver_policy": DeliverPolicy.BY_START_TIME,
                "opt_start_time": datetime.now(UTC) - timedelta(seconds=self.catchup),
            }
        config = ConsumerConfig(
            durable_name=DURABLE,
            name=DURABLE,
            filter_subject=TURN_SUBJECT,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=-1,
            **start,
            max_ack_pending=20_000,
            max_waiting=4096,
            description="Court bot service: every public record (the turns), one replica each",
        )
        try:
            await self.js.add_consumer(STREAM, config)
            if self.floor:
                log.warning(
                    "the shared turn consumer was gone: re-created where it left off",
                    durable=DURABLE,
                    start_seq=self.floor + 1,
                )
            else:
                log.info("created the shared turn consumer", durable=DURABLE, ack_wait=self.ack_wait)
        except Exception:
            # another replica may have created it a moment ago (with its own start time)
            await self.js.consumer_info(STREAM, DURABLE)

    async def _read_floor(self) -> None:
        """Where a consumer re-created after a deletion would start; NotFoundError: it is gone (the
        pull loop attaches again). A read that times out (JetStream restarting) is tried next time."""
        self._floor_at = asyncio.get_running_loop().time() + self.floor_every
        try:
            info = await self.js.consumer_info(STREAM, DURABLE, timeout=FLOOR_TIMEOUT)
        except (TimeoutError, NatsTimeout):
            return
        self._saw_floor(info)

    def _saw_floor(self, info: Any) -> None:
        self.floor = kjs.ack_floor(info, self.floor)

    async def _pull(self) -> None:
        psub = None
        puller: kjs.Puller | None = None
        trouble = klog.StateLog(log, "turn consumer")
        while not self._stopping.is_set():
            try:
                if psub is None:
                    if self._views_sub is None:  # kept across reconnects by the client
                        self._views_sub = await self.nc.subscribe(VIEWS_SUBJECT, cb=self._view_pushed)
                    await self.ensure_consumer()
                    psub = await self.js.pull_subscribe_bind(durable=DURABLE, stream=STREAM)
                    puller = kjs.Puller(psub, self.concurrency, expires=PULL_EXPIRES)
                    self.attached.set()
                    trouble.ok("turn consumer attached again")
                assert puller is not None
                if asyncio.get_running_loop().time() >= self._floor_at:
                    await self._read_floor()
                if not await self._slot():  # a free slot before taking more records
                    break
                self._slots.release()
                try:
                    msgs = await puller.next_batch(FETCH_WAIT)
                except (TimeoutError, NatsTimeout):
                    continue
                await self._take(msgs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep consuming: NATS or the stream may be coming up
                trouble.failed("turn consumer not ready", error=str(exc) or type(exc).__name__)
                ERRORS.labels("consumer").inc()
                await kjs.unsubscribe_quietly(psub)
                psub = None
                await rest(self._stopping, 1.0)
        await kjs.unsubscribe_quietly(psub)
        await kjs.unsubscribe_quietly(self._views_sub)
        self._views_sub = None

    async def _view_pushed(self, msg: Any) -> None:
        """A bot seat's view the rules service pushed after a person's move (``court_rules.botviews``):
        kept for that position's turn. Only a cache: one that is malformed is dropped, and the
        turn then reads its view."""
        try:
            view = rules_pb2.GameView.FromString(msg.data)
        except Exception:  # noqa: BLE001 - the turn reads its view instead
            ERRORS.labels("bad_view").inc()
            return
        self.handler.progress.saw(view.game_id, int(view.seq))
        self.handler.shelf.put_view(view)
        self.pushed += 1

    async def _take(self, msgs: list[Any]) -> None:
        """A batch of delivered records, all read first (so each turn knows of the newer records
        beside it, ``Progress``); a record with no bot seat to act (a person's turn, the game over)
        is acknowledged at once, with no task; one that does not decode is dropped (it can never be
        played); each turn goes to a task of its own (``_start``)."""
        turns: list[tuple[Any, Turn]] = []
        bad: list[Any] = []
        for msg in msgs:
            try:
                turn = Turn.from_record(krec.decode(msg.data))
            except Exception as exc:  # noqa: BLE001 - a malformed record can never be played
                log.error("dropping a malformed turn record", subject=msg.subject, error=str(exc))
                ERRORS.labels("bad_event").inc()
                bad.append(msg)
                continue
            self.handler.progress.saw(turn.game_id, turn.seq)
            if turn.bot_seats():
                turns.append((msg, turn))
                continue
            with contextlib.suppress(Exception):
                self.acks.ack(msg)
            OUTCOMES[Outcome.NOT_BOT].inc()
        for msg in bad:
            with contextlib.suppress(Exception):
                await msg.term()
        for msg, turn in turns:
            await self._start(msg, turn)

    async def _start(self, msg: Any, turn: Turn) -> None:
        """Hand a turn to a task of its own once a slot is free (kept reserved meanwhile); a
        record taken as the replica stops is put back at once, for another replica."""
        if self._slots.locked():
            keepalive = self._keep_reserved(msg)
            try:
                free = await self._slot()
            finally:
                keepalive.cancel()
        else:  # a slot is free now: taken without waiting, so nothing to keep reserved meanwhile
            free = await self._slot()
        if not free:
            with contextlib.suppress(Exception):
                self.acks.nak(msg)
            return
        task = asyncio.create_task(self._process(msg, turn))
        self._turns.add(task)
        task.add_done_callback(self._done)

    async def _slot(self) -> bool:
        """Wait for a free slot (taken: True); False when the replica stops first."""
        if not self._slots.locked():
            await self._slots.acquire()
            return True
        acquire = asyncio.ensure_future(self._slots.acquire())
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({acquire, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not acquire.done():
                acquire.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await acquire
        if acquire.cancelled():
            return False
        if self._stopping.is_set():
            self._slots.release()
            return False
        return True

    def _done(self, task: asyncio.Task[None]) -> None:
        self._turns.discard(task)
        self._slots.release()

    async def _process(self, msg: Any, turn: Turn) -> None:
        klog.clear()
        delivered = kjs.delivery_count(msg)  # its reply subject parsed for bot turns only
        keepalive = self._keep_reserved(msg)
        try:
            await self._games.take(turn.game_id)
            try:
                handled = await self.handler.handle(turn, delivered)
            finally:
                self._games.give(turn.game_id)
        except Exception:  # noqa: BLE001 - a bug: log it, put the turn back for a later try
            log.exception("handling a turn failed")
            ERRORS.labels("internal").inc()
            handled = Handled(
                turn.game_id,
                turn.seq,
                Outcome.RETRY,
                delivered=delivered,
                retry_after=self.handler.retry_delay,
                replica=self.handler.replica,
            )
        finally:
            keepalive.cancel()
        try:
            if handled.outcome in (Outcome.RETRY, Outcome.BEHIND):
                self.acks.nak(msg, handled.retry_after)
            else:
                self.acks.ack(msg)
        except Exception as exc:  # noqa: BLE001 - the turn comes back after ack_wait; it plays once anyway
            log.warning("could not ack a turn", error=str(exc) or type(exc).__name__)
        OUTCOMES[handled.outcome].inc()
        self.journal.add(handled)

    def _keep_reserved(self, msg: Any) -> Reservation:
        """In-progress acks while a turn is worked on, so a slow turn is not handed to another replica."""
        return Reservation(msg, self.ack_wait / 3)
