"""The turn clock's driver: timeouts applied once, from JetStream (docs/clock.md).

Every game-log record after which the clock has work carries ``Court-Due`` (ms since the epoch:
the earliest deadline of a human seat to act, or the record's own time when an away seat is to
act), beside the deadlines in the record itself (``Record.deadlines``), and is appended on the
game's ``due`` subject (``court.games.<shard>.<game_id>.due``; every other record on ``.log``:
``court_contract.records.log_subject``). Every rules replica pulls from one durable, headers-only
consumer ``rules-clock`` on each game-log stream (``COURT_GAMES_<shard>``, every shard) that
follows the ``due`` subjects alone, so records with no clock work (a bot seat to act, a game
without a clock) never reach it, and each due record goes to one replica at a time:

* a record without ``Court-Due`` (none should arrive) is acknowledged at once;
* a record whose due time is still ahead is negatively acknowledged with that delay
  (``-NAK {"delay": ...}``): JetStream itself keeps it and delivers it again, to whichever
  replica pulls then, when it is due. Nothing waits in a process's memory;
* a record that is due: the replica brings the game up to date from the log. If a newer record
  exists, this one is acknowledged (the newer one carries its own due time). Otherwise the clock
  plays the seat: the autoplay level's move (``court_bots``, from the seat's own view) is
  appended as an ordinary record with ``by`` = ``court:clock`` and the request id
  ``clock-<game_id>-<turn seq>-<seat>`` (``clock.request_id``), with the same
  expected-last-subject-sequence check as every move: of a late human move and the timeout (or
  of two replicas' timeouts) exactly one is appended, the other sees the log changed and judges
  again on the new position.

Every "now" compared with a due time is ``clock`` (``RulesApp`` passes the NATS server's time,
``court_rules.servertime``, the same source the deadlines were written with): a replica's own
clock, however wrong, never fires a turn early.

A replica killed while holding a due record leaves it unacknowledged: JetStream delivers it to
another after ``ack_wait``. A nats-server restart keeps the consumer (file storage); what was
pending is delivered again, and a record delivered early is delayed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import random
import time
from collections.abc import Callable
from typing import Any

import court_bots
import nats.errors
from court_contract import records as krec
from court_kit import jetstream as kjs
from court_kit import logging as klog
from court_kit.errors import Unavailable
from court_kit.loops import rest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import Counter, Histogram

from . import clock as kclock
from .application import RulesApplication
from .games import GameCache, GameEntry
from .store import DUE_HEADER

log = klog.get_logger("court_rules.clock")

DURABLE = "rules-clock"
MAX_CHAIN = 64  # clock moves (and lost races) one delivery may make in one game before yielding
CLOCK_MOVES = Counter("court_rules_clock_moves_total", "Moves the turn clock made", ["game", "kind"])
LATENESS = Histogram(
    "court_rules_clock_lateness_seconds",
    "Deadline to the clock's appended move",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


def position_rng(secret: str, *parts: Any) -> random.Random:
    key = ":".join(str(p) for p in parts).encode()
    return random.Random(int.from_bytes(hmac.new(secret.encode(), key, hashlib.sha256).digest()[:16], "big"))


def autoplay_action(entry: GameEntry, seat: int, level: str, secret: str) -> Any:
    """The autoplay level's move for ``seat`` from the seat's own view (what a person there sees),
    a legal one always (a random legal move should an adapter ever propose an illegal one)."""
    module = entry.module
    legal = module.legal_actions(entry.state, seat)
    rng = position_rng(secret, entry.game_id, entry.seq, seat)
    # the seat's view as its player gets it (the JSON form of the typed view: nothing hidden leaks)
    view = json.loads(json.dumps(module.view(entry.state, seat)))
    try:
        action = court_bots.choose(entry.game, view, seat, level, rng).action
    except Exception:  # noqa: BLE001 - a broken adapter must not freeze the table
        log.exception("autoplay bot failed; playing a random legal move", game=entry.game, seat=seat)
        action = None
    if action not in legal:
        action = legal[rng.randrange(len(legal))]
    return action


class ClockDriver:
    def __init__(
        self,
        application: RulesApplication,
        cache: GameCache,
        *,
        secret: str,
        clock: Callable[[], float] = time.time,
        ack_wait: float = 10.0,
        max_pending: int = 100_000,
        concurrency: int = 16,
    ):
        self.application = application
        self.cache = cache
        self.store = cache.store
        self.acks = kjs.LazyAcks(self.store.nc)  # acks and delays leave with the next write
        self._secret = secret
        self._clock = clock
        self.ack_wait = ack_wait
        self.max_pending = max_pending
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def run(self, stop: asyncio.Event) -> None:
        """Follow every game-log shard until ``stop``."""
        try:
            await asyncio.gather(*(self._follow(i, stop) for i in range(self.store.shards)))
        finally:
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _follow(self, shard: int, stop: asyncio.Event) -> None:
        psub = None
        stream = krec.game_stream(shard)
        trouble = klog.StateLog(log, f"turn clock {stream}")
        try:
            while not stop.is_set():
                try:
                    if psub is None:
                        psub = await self.store.js.pull_subscribe(
                            krec.due_subjects(shard),
                            durable=DURABLE,
                            stream=stream,
                            config=ConsumerConfig(
                                ack_policy=AckPolicy.EXPLICIT,
                                ack_wait=self.ack_wait,
                                headers_only=True,
                                deliver_policy=DeliverPolicy.ALL,
                                max_ack_pending=self.max_pending,
                                max_deliver=-1,
                                max_waiting=512,
                            ),
                        )
                    try:
                        # a fetch per batch, not court_kit.jetstream.Puller: with requests kept open
                        # the records come one by one; make bench did not show the Puller saving this
                        # process CPU (its runs varied more than the difference)
                        msgs = await psub.fetch(256, timeout=1.0)
                    except (TimeoutError, nats.errors.TimeoutError):
                        continue
                    for m in msgs:
                        await self._dispatch(m)
                    trouble.ok("turn clock running again")
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep going: NATS may be restarting
                    trouble.failed("turn clock pass failed", error=str(exc) or type(exc).__name__)
                    await kjs.unsubscribe_quietly(psub)
                    psub = None
                    await rest(stop, 1.0)
        finally:
            await kjs.unsubscribe_quietly(psub)

    async def _dispatch(self, msg: Any) -> None:
        raw = (msg.headers or {}).get(DUE_HEADER)
        if raw is None:
            self.acks.ack(msg)
            return
        wait = int(raw) - self.now_ms()
        if wait > 0:
            self.acks.nak(msg, wait / 1000)
            return
        await self._slots.acquire()
        task = asyncio.get_running_loop().create_task(self._handle(msg))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _handle(self, msg: Any) -> None:
        gid = krec.game_id_of_log_subject(msg.subject)
        sseq = msg.metadata.sequence.stream
        try:
            verdict = await self.play(gid, sseq)
        except Unavailable as exc:
            log.warning("turn clock could not reach the game store; will retry", game_id=gid, error=str(exc))
            with contextlib.suppress(Exception):
                self.acks.nak(msg, 0.5)
            return
        except Exception:  # noqa: BLE001 - one broken game must not stop the clock
            log.exception("turn clock failed on a game", game_id=gid)
            with contextlib.suppress(Exception):
                self.acks.nak(msg, 5.0)
            return
        if verdict is None:
            self.acks.ack(msg)
        else:
            self.acks.nak(msg, max(0.0, verdict / 1000))

    async def play(self, game_id: str, sseq: int) -> int | None:
        """Handle one due record of ``game_id`` (stream sequence ``sseq``): None when it is done
        with (acknowledge), else the milliseconds until it is due again (delay it)."""
        entry = await self.cache.get(game_id)
        async with entry.lock:
            if entry.last_sseq <= sseq:
                # (an entry already past this record needs no read: a newer record is in the log,
                # and it carries its own due time; the usual case, a person who moved in time)
                await self.cache.refresh(entry)
            played = 0
            for _attempt in range(MAX_CHAIN):
                if entry.last_sseq > sseq or entry.finished:
                    return None  # a newer record carries its own due time
                now = self.now_ms()
                due = kclock.due(entry.clock, entry.to_act(), entry.humans, now)
                if not due:
                    if played:
                        return None  # the newest record (ours) carries the next due time
                    nd = entry.next_due()
                    return None if nd is None else max(1, nd - now)
                seat, kind = due[0]
                state = entry.clock[seat]
                rid = kclock.request_id(entry.game_id, state.turn_seq, seat)
                level = entry.clock_settings.level
                action = await asyncio.to_thread(autoplay_action, entry, seat, level, self._secret)
                action_json = {
                    k: v for k, v in entry.module.action_to_json(action, seat).items() if k != "player"
                }
                seq = await self.application.write_locked(
                    entry, seat, action, action_json, kclock.CLOCK_BY, rid, kind
                )
                if seq is None:
                    continue  # another writer was first: judge again on the new position
                CLOCK_MOVES.labels(entry.game, kind).inc()
                if kind == kclock.TIMEOUT and state.deadline is not None:
                    LATENESS.observe(max(0.0, (entry.moves[seq - 1].t - state.deadline) / 1000))
                log.info("clock played a seat", seat=seat, kind=kind, seq=seq, turn_seq=state.turn_seq)
                # go on with this game at once (other seats due in a simultaneous phase, an away
                # seat to act again) rather than wait for the new record's own delivery; that
                # delivery then finds nothing left to do
                sseq = entry.last_sseq
                played += 1
            return None if played else 50  # 50: kept losing races, look again shortly
