"""Playing one game at the terminal: the table, the legal actions as a numbered list, typed moves.

The seat's own view comes from the rules service (``GetView``, then ``WatchGame`` for every later
move), so the client shows exactly what the seat may know. Moves go through ``SubmitAction``
with a fresh request id each (court_client retries a lost answer with the same id). An illegal
move is answered by the server with the reason; the client prints it and asks again.

Turn clock (docs/clock.md): the table and the waiting line show each acting seat's time left and
who is away (the view's ``seat_clocks``), the prompt the seat's own time left; a move names the
turn it was chosen in (``turn_seq``), so one that arrives after its turn timed out is refused
rather than played in the next turn; the prompt follows the stream, so a turn that ends without
the person closes it. Sitting down at a game whose seat was marked away (``court resume`` after a
disconnect) takes it back (``ReturnToSeat``); a seat marked away while the person sits there is
taken back with Enter.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import grpc
from court_client import action, action_json, event_dict, result_dict, view_dict
from court_games.core import GameError
from court_proto.court.rules.v1 import rules_pb2
from rich.columns import Columns
from rich.console import Console
from rich.text import Text

from .catalog import GAME_TITLES, court_command, rules_help
from .moves import HELP, parse
from .render import (
    Names,
    clock_line,
    describe_action,
    describe_event,
    render_view,
    result_line,
    short_form,
)
from .session import CliError, Court, LeftTable, explain
from .termio import LineReader

MANY = 14  # more legal actions than this are shown in columns, without the words


class Table:
    """One seat at one game."""

    def __init__(self, court: Court, console: Console, fancy: bool, reader: LineReader, *, level: str = ""):
        self.court = court
        self.console = console
        self.fancy = fancy
        self.reader = reader
        self.hint_level = level
        self.names: Names | None = None
        self.view: rules_pb2.GameView | None = None
        self._held: deque[Any] = deque()  # updates taken from the stream while a prompt waited
        self._line: asyncio.Future[str | None] | None = None  # the person's line being typed

    # ------------------------------------------------------------------ output

    def say(self, text: str | Text, style: str = "") -> None:
        self.console.print(text, style=style or None, soft_wrap=True)

    def show_table(self) -> None:
        v = self.view
        assert v is not None and self.names is not None
        self.console.rule(f"{GAME_TITLES.get(v.game, v.game)} · game {v.game_id} · move {v.seq}", style="dim")
        self.console.print(render_view(v.game, view_dict(v), list(v.to_act), self.names, self.fancy))
        line = clock_line(v, self.names)
        if line:
            self.say(Text("  " + line, style="yellow"))

    def show_events(self, events: Sequence[Any]) -> None:
        assert self.view is not None and self.names is not None
        for e in events:
            d = dict(e) if isinstance(e, dict) else event_dict(e)
            line = describe_event(self.view.game, d, self.names, self.fancy)
            if line:
                self.say(Text("  • " + line, style="cyan" if d.get("type", "").endswith("Ended") else ""))

    def show_choices(self, legal: list[dict[str, Any]]) -> None:
        assert self.view is not None and self.names is not None
        game = self.view.game
        vd = view_dict(self.view)
        forms = [short_form(game, a) for a in legal]
        if len(legal) > MANY:
            items = [Text(f"{i + 1:>2}) {form}") for i, form in enumerate(forms)]
            self.console.print(Columns(items, padding=(0, 3), equal=True))
            return
        width = max(len(f) for f in forms) + 2
        for i, a in enumerate(legal):
            line = Text(f"  {i + 1:>2}) ")
            line.append(f"{forms[i]:<{width}}", style="bold")
            line.append(" " + describe_action(game, a, self.names, vd, self.fancy), style="dim")
            self.console.print(line)

    # ------------------------------------------------------------------ play

    async def play(self, game_id: str, seat: int | None = None) -> str:
        """Play until the game ends or the person leaves: ``"finished"`` or ``"left"``."""
        self.view = await self.court.call(self.court.rules.get_view, game_id, seat)
        if not self.view.HasField("your_seat"):
            raise CliError(
                f"you have no seat in game {game_id}; watch it with `{court_command()} watch {game_id}`"
            )
        seat = self.view.your_seat
        self.names = await self.court.names_for(self.view)
        if not self.view.finished and any(c.seat == seat and c.away for c in self.view.seat_clocks):
            back = await self.court.call(self.court.rules.return_to_seat, game_id, seat)
            self.view = back.view
            self.say(
                Text("You are back in your seat (the bot played it while you were away).", style="bold green")
            )
        updates: asyncio.Queue[rules_pb2.GameUpdate | BaseException] = asyncio.Queue()
        pump = asyncio.create_task(self._pump(game_id, seat, self.view.seq, updates))
        try:
            self.show_table()
            return await self._loop(game_id, seat, updates)
        except (asyncio.CancelledError, KeyboardInterrupt):  # Ctrl-C: asyncio.run cancels us
            self.say("")
            self._left(game_id)
            raise LeftTable(game_id) from None
        finally:
            pump.cancel()
            if self._line is not None:
                self._line.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump

    async def _pump(self, game_id: str, seat: int, after: int, out: asyncio.Queue[Any]) -> None:
        """Every later move into ``out``; an expired token is refreshed and the stream resumed."""
        while True:
            try:
                async for update in self.court.rules.watch(game_id, seat=seat, after_seq=after):
                    after = update.seq
                    await out.put(update)
                return
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.UNAUTHENTICATED and await self.court.refresh():
                    continue
                await out.put(
                    CliError("lost the game stream: " + explain(err, "rules", self.court.endpoints.rules))
                )
                return

    async def _loop(self, game_id: str, seat: int, updates: asyncio.Queue[Any]) -> str:
        waiting_said = -1
        while True:
            v = self.view
            assert v is not None and self.names is not None
            if v.finished:
                self.show_table()
                self.say(
                    Text(
                        "Game over. "
                        + result_line(v.game, result_dict(v.result), list(v.result.winners), self.names),
                        style="bold green",
                    )
                )
                return "finished"
            if seat in v.to_act and v.legal_actions:
                outcome = await self._turn(game_id, seat, updates)
                if outcome == "left":
                    return "left"
                continue
            if waiting_said != v.seq:
                waiting = ", ".join(self.names.short(s) for s in v.to_act)
                clock = clock_line(v, self.names)
                self.say(Text(f"  … waiting for {waiting}" + (f" ({clock})" if clock else ""), style="dim"))
                waiting_said = v.seq
            if _away(v, seat):
                if await self._away(game_id, seat, updates) == "left":
                    return "left"
                continue
            got = self._held.popleft() if self._held else await updates.get()
            if isinstance(got, BaseException):
                raise got
            if got.seq <= v.seq:
                continue
            self.show_events(got.events)
            self.view = got.view
            if seat in self.view.to_act and self.view.legal_actions:
                self.show_table()

    def _catch_up(self, updates: asyncio.Queue[Any]) -> bool:
        """Take in the moves others made while the person thinks (simultaneous phases: Hearts passing, a
        Mutual Swap), so that the prompt's move number is the position's; True when the legal actions changed."""
        assert self.view is not None
        before = list(self.view.legal_actions)
        while self._held or not updates.empty():
            got = self._held.popleft() if self._held else updates.get_nowait()
            if isinstance(got, BaseException):
                raise got
            if got.seq > self.view.seq:
                self.show_events(got.events)
                self.view = got.view
        return list(self.view.legal_actions) != before

    async def _turn(self, game_id: str, seat: int, updates: asyncio.Queue[Any]) -> str:
        v = self.view
        assert v is not None and self.names is not None
        legal = [action_json(a) for a in v.legal_actions]
        self.show_choices(legal)
        while True:
            if self._catch_up(updates):
                return "moved"  # the position changed under us: the loop shows it afresh
            v = self.view
            assert v is not None  # set before the first turn; only ever replaced by a newer view
            choices = f"{len(legal)} choice{'s' if len(legal) != 1 else ''}"
            left = _time_left(v, seat)
            head = f"move {v.seq} · your turn ({choices}; h for help)"
            self.console.print(Text(f"{head}{left} > ", style="bold yellow"), end="")
            line = await self._line_in_turn(seat, updates, _Countdown.of(v, seat, head, left, self))
            if line is _TURN_OVER:
                continue  # the next round shows the new position (or the loop the away seat)
            if line is None:
                self.say("")
                return self._left(game_id)
            p = parse(v.game, line, legal)
            if p.kind == "empty":
                continue
            if p.kind == "error":
                self.say(Text(f"  {p.message}", style="red"))
                continue
            if p.kind == "command":
                if p.command == "quit":
                    return self._left(game_id)
                if p.command == "help":
                    self.say(rules_help(v.game))
                    self.say(HELP.get(v.game, ""))
                    self.say(
                        "Type a number from the list, a short form as shown in bold, or the canonical JSON. "
                        "`hint` asks a bot, `t` shows the table, `q` leaves (the game stays saved)."
                    )
                elif p.command == "table":
                    self.show_table()
                    self.show_choices(legal)
                elif p.command == "hint":
                    await self._hint(game_id, seat)
                continue
            act = legal[p.index] if p.kind == "pick" else dict(p.action or {})
            try:
                typed = action(v.game, act)
            except GameError as exc:
                self.say(Text(f"  Not an action of {GAME_TITLES[v.game]}: {exc}", style="red"))
                continue
            try:
                reply = await self.court.rules.submit(game_id, typed, seat, turn_seq=_turn_seq(v, seat))
            except grpc.aio.AioRpcError as err:
                if err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
                    self.say(Text(f"  Not allowed: {err.details()}", style="red"))
                    continue
                if err.code() == grpc.StatusCode.UNAUTHENTICATED and await self.court.refresh():
                    continue
                raise CliError(explain(err, "rules", self.court.endpoints.rules)) from None
            self.say(
                Text(
                    f"  You: {describe_action(v.game, act, self.names, view_dict(v), self.fancy)}",
                    style="green",
                )
            )
            self.show_events(reply.events)
            before = _stage(view_dict(v))
            self.view = reply.view
            if (
                seat in self.view.to_act
                and self.view.legal_actions
                and not self.view.finished
                and _stage(view_dict(self.view)) != before
            ):
                # our own move opened a new hand, round or phase and we act again at once (the last card of a
                # Hearts hand, then the next hand's pass): show the new table before the new choices
                self.show_table()
            return "moved"

    async def _next(
        self, updates: asyncio.Queue[Any], timeout: float | None = None
    ) -> tuple[bool | None, Any]:
        """Whichever comes first: the person's next line ``(True, line)`` or the stream's next
        update ``(False, update)``; ``(None, None)`` when ``timeout`` seconds pass with neither. A line
        still being typed is kept for the next call."""
        if self._line is None:
            self._line = asyncio.ensure_future(self.reader.readline())
        line = self._line
        get = asyncio.ensure_future(updates.get())
        try:
            await asyncio.wait({line, get}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not get.done():
                get.cancel()
        if get.done() and not get.cancelled():
            return False, get.result()
        if not line.done():
            return None, None
        self._line = None
        return True, line.result()

    async def _line_in_turn(
        self, seat: int, updates: asyncio.Queue[Any], countdown: _Countdown | None = None
    ) -> Any:
        """The person's answer to the prompt, or ``_TURN_OVER`` when the stream says the turn
        ended first (timed out, the seat marked away, the game over): the prompt is stale then.
        ``countdown``: the prompt's time left is redrawn each second while the person types."""
        assert self.view is not None
        v = self.view
        while True:
            is_line, got = await self._next(updates, countdown.wait() if countdown else None)
            if is_line is None:
                if countdown is not None:
                    countdown.draw()
                continue
            if is_line:
                return got
            if isinstance(got, BaseException):
                raise got
            self._held.append(got)  # shown in order by the next _catch_up or the loop
            nv = got.view
            if got.seq > v.seq and (
                nv.finished
                or _away(nv, seat)
                or seat not in nv.to_act
                or _turn_seq(nv, seat) != _turn_seq(v, seat)
                or list(nv.legal_actions) != list(v.legal_actions)
            ):
                self.say("")  # ends the prompt's line
                if self._line is not None and self._line.done():
                    self._line = None  # typed for the turn that is over: not played in the next
                    self.say(Text("  Too late: that turn is over.", style="red"))
                return _TURN_OVER

    async def _away(self, game_id: str, seat: int, updates: asyncio.Queue[Any]) -> str:
        """The seat is marked away while the person is at the table (their time ran out twice, or
        they left it): the clock plays it at once. Enter takes it back (ReturnToSeat), q leaves."""
        assert self.view is not None
        self.say(
            Text(
                "  You are away: the bot plays your seat. Press Enter to take it back (q leaves the table).",
                style="bold yellow",
            )
        )
        while True:
            is_line, got = (False, self._held.popleft()) if self._held else await self._next(updates)
            if not is_line:
                if isinstance(got, BaseException):
                    raise got
                if got.seq > self.view.seq:
                    self.show_events(got.events)
                    self.view = got.view
                if self.view.finished or not _away(self.view, seat):
                    return "moved"
                continue
            if got is None or got.strip().lower() in ("q", "quit"):
                if got is None:
                    self.say("")
                return self._left(game_id)
            back = await self.court.call(self.court.rules.return_to_seat, game_id, seat)
            if back.view.seq >= self.view.seq:
                self.view = back.view
            self.say(Text("  You are back in your seat.", style="bold green"))
            return "moved"

    async def _hint(self, game_id: str, seat: int) -> None:
        assert self.view is not None and self.names is not None
        try:
            mine = self.view if self.view.HasField("your_seat") and self.view.your_seat == seat else None
            s = await self.court.bot.suggest(game_id, seat, self.hint_level, timeout=10, view=mine)
        except grpc.aio.AioRpcError as err:
            self.say(Text(f"  No hint: {explain(err, 'bot', self.court.endpoints.bot)}", style="red"))
            return
        a = action_json(s.action)
        self.say(
            Text(
                f"  Hint: {short_form(self.view.game, a)}  ({describe_action(self.view.game, a, self.names, view_dict(self.view), self.fancy)})"
                + (f" — {s.explanation}" if s.explanation else ""),
                style="magenta",
            )
        )

    def _left(self, game_id: str) -> str:
        self.say(
            Text(
                f"You left the table. The game is saved: `{court_command()} resume {game_id}` sits you down "
                "again.",
                style="bold",
            )
        )
        return "left"


_TURN_OVER = object()


class _Countdown:
    """The prompt's ``· 37 s left`` counting down on a terminal while the person types: each second the
    number is rewritten in place (the cursor saved, moved to the number on the prompt's line, restored),
    so what the person has typed so far stays as it is. Drawn at the same width as at first (the
    prompt's other text does not move); skipped when a typed line is waiting to be read (Enter was
    pressed: the cursor is on the next line by then)."""

    def __init__(self, table: Table, deadline_ms: int, column: int, width: int):
        self.table = table
        self.deadline_ms = deadline_ms
        self.column = column
        self.width = width
        self.shown = -1

    @classmethod
    def of(cls, v: rules_pb2.GameView, seat: int, head: str, left: str, table: Table) -> _Countdown | None:
        c = _seat_clock(v, seat)
        if c is None or not table.fancy or not left:
            return None
        from rich.cells import cell_len

        number = left.split(" s left", 1)[0].removeprefix(" · ")
        return cls(table, c.deadline.ToMilliseconds(), cell_len(head + " · "), len(number))

    def seconds_left(self) -> int:
        return max(0, (self.deadline_ms - int(time.time() * 1000) + 999) // 1000)

    def wait(self) -> float:
        """Seconds until the shown number next changes (at least a few milliseconds)."""
        ms_into = (self.deadline_ms - int(time.time() * 1000)) % 1000
        return max(0.005, (ms_into or 1000) / 1000 + 0.002)

    def draw(self) -> None:
        left = self.seconds_left()
        if left == self.shown or _line_waiting(self.table.reader.fd):
            return
        self.shown = left
        out = self.table.console.file
        move = f"\x1b[{self.column}C" if self.column else ""
        out.write(f"\x1b7\r{move}\x1b[1;33m{str(left).rjust(self.width)}\x1b[0m\x1b8")
        out.flush()


def _line_waiting(fd: int) -> bool:
    """A typed line is waiting on ``fd`` (a terminal in canonical mode reports a whole line)."""
    import select

    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _away(v: rules_pb2.GameView, seat: int) -> bool:
    return any(c.seat == seat and c.away for c in v.seat_clocks)


def _seat_clock(v: rules_pb2.GameView, seat: int) -> rules_pb2.SeatClock | None:
    """The seat's clock while it is to act in a game with a clock (its deadline is set)."""
    return next((c for c in v.seat_clocks if c.seat == seat and c.HasField("deadline")), None)


def _turn_seq(v: rules_pb2.GameView, seat: int) -> int | None:
    """The turn a move chosen in this view is for (None: no clock, so no turn to name)."""
    c = _seat_clock(v, seat)
    return None if c is None else c.turn_seq


def _time_left(v: rules_pb2.GameView, seat: int) -> str:
    """`` · 37 s left`` for a seat with a deadline (its server time minus this machine's clock)."""
    c = _seat_clock(v, seat)
    if c is None:
        return ""
    left = max(0, (c.deadline.ToMilliseconds() - int(time.time() * 1000) + 999) // 1000)
    return f" · {left} s left" + (f" (of it {c.bank_ms // 1000} s bank)" if c.bank_ms else "")


def _stage(v: dict[str, Any]) -> tuple[Any, ...]:
    """Where a game stands, coarsely: its round, phase and hand number (a Hearts view's ``hand`` is a number;
    other games use ``hand`` for the seat's cards, which change with every move and are left out)."""
    hand = v.get("hand")
    return (v.get("round"), v.get("phase"), hand if isinstance(hand, int | float) else None)
