"""Starting a game as a saga with a fixed identity, driven by any lobby replica under a lease.

``StartGame`` moves the lobby from ``open`` to ``starting`` in one transaction that fixes the new
game's id, its seed and the saga's id (``LobbyStore.begin_start``). From then on every step uses
exactly those, so any step may run again, on any replica, any number of times:

1. online games: the ranking service registers the game and takes every ante, keyed by (game id,
   player) (``RegisterGame``; a second call is a no-op answering the first answer);
2. the rules service creates the game under that id, with the saga's id as its request id (a
   second create returns the existing game);
3. the lobby row goes to ``started`` (``finish_start``), storing the StartGame request's answer.

The host may cancel a starting lobby (``CancelLobby``): the row is marked ``cancelling: <reason>``
and the driver, at its next lease renewal (before every step) or when ``finish_start`` is refused
for it, undoes the start as below, except that the lobby ends ``cancelled`` (closed) rather than
open. A game the rules service already created is closed there (``CloseGame``, keyed by the game
id: it refuses moves from then on) before any ante is refunded, and stays abandoned in ranking, so
it never pays out.

If a step answers a permanent error (anything but UNAVAILABLE / DEADLINE_EXCEEDED), the saga
compensates: the intent is recorded on the row first (``start_error`` = "compensating: ..."), then
the rules service closes the game (so a game whose antes are back never takes another move;
unreachable: the start stays marked and the next drive closes it first). A game not created yet
is closed too: the rules service keeps a tombstone for its id, so a CreateGame of this saga still
in flight, or retried later by any replica, is refused and never starts a game; "closed" either
way is success here. Then the ranking service refunds every ante once, keyed by the game id (``AbandonGame``: a game never
registered is marked void, so a late registration takes nothing), then the lobby goes back to
``open`` with the reason in ``start_error``, visible to its members. A transient error leaves the
lobby in ``starting``: the next drive carries on where it stopped.

A drive holds the lobby row's lease (``lease_owner``/``lease_until``, renewed in the background
every third of its length and checked before every step), so two replicas never drive one lobby
at once, and a driver that died is replaced once its lease expires. The replica that answers
StartGame takes the lease in ``begin_start``'s own transaction, so it drives the start it began:
another replica's sweep cannot slip in between. Every replica drives its leftover work at start-up and then every ``sweep`` seconds
(``COURT_START_SWEEP``, default 10 s; lease ``COURT_START_LEASE``, default 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from court_kit import errors as kerr
from court_kit import logging as klog
from court_kit.loops import rest

from .clients import Backends, is_transient
from .store import CANCELLING, COMPENSATING, STARTING, LobbyInfo, LobbyStore

T = TypeVar("T")
log = klog.get_logger("court_lobby.saga")
BOT_PREFIX = "bot:"
FAILED_PRECONDITION = int(grpc.StatusCode.FAILED_PRECONDITION.value[0])


class Faults:
    """Fault injection points for tests (the production instance does nothing)."""

    async def before_antes(self, info: LobbyInfo) -> None:
        """The lobby is starting (its identity fixed), nothing else done yet."""

    async def after_antes(self, info: LobbyInfo) -> None:
        """After the antes were taken, before the game is created."""

    async def after_game(self, info: LobbyInfo) -> None:
        """After the game was created, before the lobby is marked started."""

    async def after_close(self, info: LobbyInfo) -> None:
        """Undoing a start: after the rules service closed its game (or had none), before the refund."""


class Undo(Exception):
    """The host cancelled the lobby while it was starting: undo the start (its reason attached)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _close_reason(reason: str, online: bool) -> str:
    """What the players of a closed game read (the rules service takes at most 200 characters)."""
    text = f"its lobby's start was undone ({reason})" + ("; every ante is refunded" if online else "")
    return text if len(text) <= 200 else text[:197] + "..."


def _code(exc: BaseException) -> int:
    """The status code the StartGame caller gets for a start undone by ``exc`` (never OK)."""
    code = getattr(exc, "code", None)
    if not isinstance(code, grpc.StatusCode) or code == grpc.StatusCode.OK:
        return FAILED_PRECONDITION
    return int(code.value[0])


class Starter:
    def __init__(
        self,
        store: LobbyStore,
        backends: Backends,
        render: Callable[[LobbyInfo], bytes],
        *,
        lease: float = 30.0,
        sweep: float = 10.0,
        faults: Faults | None = None,
    ):
        self.store = store
        self.backends = backends
        self.render = render
        self.lease = lease
        self.sweep_every = sweep
        self.faults = faults or Faults()
        self.drives = 0  # drives that ended the saga (tests, metrics)
        # this replica's name as a lease holder: StartGame's transaction leases the lobby to it
        self.owner = f"lobby-{uuid.uuid4().hex}"
        self._driving: dict[str, asyncio.Future[bool]] = {}

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    async def drive(self, lobby_id: str) -> bool:
        """Carry the lobby's start on, under its lease. True when it is no longer starting.

        Concurrent drives of one lobby in this replica (duplicate StartGame calls, the sweep) share
        one task; it goes on even when the caller that began it gives up."""
        task = self._driving.get(lobby_id)
        if task is None:
            task = asyncio.ensure_future(self._drive(lobby_id))
            self._driving[lobby_id] = task
            task.add_done_callback(
                lambda t: self._driving.pop(lobby_id, None) if self._driving.get(lobby_id) is t else None
            )
        return await asyncio.shield(task)

    async def _drive(self, lobby_id: str) -> bool:
        owner = self.owner
        info = await self._run(self.store.acquire_lease, lobby_id, owner, self.lease)
        if info is None:
            return (await self._run(self.store.lobby, lobby_id)).status != STARTING
        keep = asyncio.create_task(self._keep(lobby_id, owner))
        try:
            await self._steps(info, owner)
            self.drives += 1
            return True
        except kerr.Unavailable as exc:
            log.warning(
                "start saga paused; it goes on at the next drive", lobby_id=lobby_id, error=str(exc)[:200]
            )
            return False
        finally:
            keep.cancel()
            with contextlib.suppress(Exception):
                await self._run(self.store.release_lease, lobby_id, owner)

    async def _keep(self, lobby_id: str, owner: str) -> None:
        """Renew the lease every third of its length while the steps run, so a slow step (a backend
        retrying for longer than the lease) never lets another replica drive the lobby at once;
        only a dead or stuck driver's lease runs out."""
        while True:
            await asyncio.sleep(self.lease / 3)
            with contextlib.suppress(Exception):  # the database away for a moment: the next renewal
                if await self._run(self.store.renew_lease, lobby_id, owner, self.lease) is None:
                    return  # lost (or the start ended): the step's own renewal notices

    async def _renew(self, info: LobbyInfo, owner: str, undoing: bool = False) -> None:
        """Before each step: still ours, and (unless ``undoing`` already) not cancelled by the host
        (``Undo``) meanwhile."""
        mark = await self._run(self.store.renew_lease, info.id, owner, self.lease)
        if mark is None:
            raise kerr.Unavailable(f"lost the lease on lobby {info.id}; another replica drives it")
        if mark.startswith(CANCELLING) and not undoing:
            raise Undo(mark[len(CANCELLING) :])

    async def _steps(self, info: LobbyInfo, owner: str) -> None:
        assert info.game_id and info.start_rid and info.seed is not None
        for prefix in (COMPENSATING, CANCELLING):
            if info.start_error and info.start_error.startswith(prefix):
                await self._compensate(info, owner, info.start_error[len(prefix) :], None)
                return
        seats = [s.account_id or f"{BOT_PREFIX}{s.bot_level}" for s in info.seated]
        try:
            await self.faults.before_antes(info)
            await self._renew(info, owner)  # cancelled already? then nothing is taken at all
            if info.online:
                await self.backends.register_game(
                    info.game_id,
                    info.game,
                    True,
                    info.ante,
                    info.seed,
                    [(p, s.name) for p, s in zip(seats, info.seated, strict=True)],
                )
                await self.faults.after_antes(info)
            await self._renew(info, owner)
            await self.backends.create_game(
                info.game,
                seats,
                info.options,
                info.seed,
                request_id=info.start_rid,
                game_id=info.game_id,
                clock=info.clock,
                online=info.online,
            )
            await self.faults.after_game(info)
            await self._renew(info, owner)
        except Undo as undo:
            await self._compensate(info, owner, undo.reason, None)
            return
        except kerr.ServiceError as exc:
            if is_transient(exc):
                raise
            await self._compensate(info, owner, f"the game could not start: {str(exc)[:200]}", exc)
            return
        done = await self._run(self.store.finish_start, info.id, info.start_rid, self.render)
        if done.status == STARTING:  # the host cancelled it after the last renewal: refused, so undo it
            await self._compensate(info, owner, (done.start_error or "")[len(CANCELLING) :], None)
            return
        log.info("game started", lobby_id=info.id, game_id=info.game_id, online=info.online, ante=info.ante)

    async def _compensate(self, info: LobbyInfo, owner: str, reason: str, exc: BaseException | None) -> None:
        await self._run(self.store.mark_compensating, info.id, info.start_rid, reason)
        await self._renew(info, owner, undoing=True)
        try:
            # the game first, then the antes: a refunded game is never left accepting moves. Keyed by
            # the game id (one request id for every retry, any replica); the rules service away: the
            # start stays marked and the next drive (the sweep) closes it before refunding anything
            closed = await self.backends.close_game(info.started_game_id, _close_reason(reason, info.online))
        except kerr.FailedPrecondition as err:
            # the rules service's game has ended: it was created and played, so it did start
            log.error(
                "a failed start's game has ended; marking the lobby started",
                lobby_id=info.id,
                error=str(err)[:200],
            )
            await self._run(self.store.finish_start, info.id, info.start_rid, self.render, True)
            return
        await self.faults.after_close(info)
        if closed:
            log.info("the undone start's game is closed", lobby_id=info.id, game_id=info.game_id)
        if info.online:
            await self._renew(info, owner, undoing=True)
            try:
                await self.backends.abandon_game(
                    info.started_game_id
                )  # every ante back, once, keyed by the game id
            except kerr.FailedPrecondition as err:
                # the game has ended in ranking: it was created and played, so it did start
                log.error(
                    "a failed start's game has ended; marking the lobby started",
                    lobby_id=info.id,
                    error=str(err)[:200],
                )
                await self._run(self.store.finish_start, info.id, info.start_rid, self.render, True)
                return
        code = _code(exc) if exc is not None else FAILED_PRECONDITION
        await self._run(self.store.fail_start, info.id, info.start_rid, reason, code)
        log.warning(
            "start undone; the lobby is open again (or closed, if its host cancelled it)",
            lobby_id=info.id,
            game_id=info.game_id,
            reason=reason[:200],
        )

    async def sweep(self) -> int:
        """Drive every lobby left in ``starting`` whose lease is free; returns how many ended."""
        ended = 0
        for lobby_id in await self._run(self.store.starting):
            with contextlib.suppress(Exception):
                ended += bool(await self.drive(lobby_id))
        return ended

    async def run(self, stop: asyncio.Event) -> None:
        """At start-up and then every ``sweep_every`` seconds, until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.sweep()
            except Exception as exc:  # noqa: BLE001 - the database away for a moment: next round
                log.warning("start sweep failed", error=str(exc)[:200] or type(exc).__name__)
            await rest(stop, self.sweep_every)
