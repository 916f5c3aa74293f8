"""Watching a game as a spectator: the rules service's ``WatchGame`` stream, drawn as it comes.

On a terminal the table is redrawn in place (rich ``Live``) with the latest moves beneath it; on
anything else (a pipe, CI, ``make run < /dev/null``) each move is one plain line. ``pace``
spaces the moves out so that people can follow a bot game, which otherwise plays in moments.
With a turn clock (docs/clock.md) the table shows the acting seats' time left and who is away,
and the live screen is redrawn every second between moves, so the countdown runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

import grpc
from court_client import event_dict, result_dict, view_dict
from court_proto.court.rules.v1 import rules_pb2
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from .catalog import GAME_TITLES, court_command
from .render import Names, clock_line, describe_event, render_view, result_line
from .session import CliError, Court, explain

LOG_LINES = 8


class Spectator:
    def __init__(
        self, console: Console, fancy: bool, *, pace: float = 0.0, title: str = "", footer: str = ""
    ):
        self.console = console
        self.fancy = fancy
        self.pace = pace
        self.title = title
        self.footer = footer
        self.shown_seq = -1
        self.moves_shown = 0
        self._shown = asyncio.Condition()
        self.final: rules_pb2.GameView | None = None

    async def wait_shown(self, seq: int) -> None:
        """Until the move ``seq`` has been drawn (the demo's autopilot keeps pace with the screen)."""
        async with self._shown:
            await self._shown.wait_for(lambda: self.shown_seq >= seq)

    async def _mark(self, seq: int) -> None:
        async with self._shown:
            self.shown_seq = seq
            self._shown.notify_all()

    def _screen(self, view: rules_pb2.GameView, names: Names, log: deque[str]) -> RenderableType:
        head = Text(
            f"{self.title or GAME_TITLES.get(view.game, view.game)} · game {view.game_id} · move {view.seq}",
            style="bold",
        )
        parts: list[RenderableType] = [
            head,
            render_view(view.game, view_dict(view), list(view.to_act), names, True),
        ]
        clock = clock_line(view, names)
        if clock:
            parts.append(Text(clock, style="yellow"))
        parts.append(
            Panel(Text("\n".join(log) or "…"), title="latest", title_align="left", border_style="dim")
        )
        if view.finished:
            parts.append(
                Text(
                    "Game over. "
                    + result_line(view.game, result_dict(view.result), list(view.result.winners), names),
                    style="bold green",
                )
            )
        if self.footer:
            parts.append(Text(self.footer, style="dim"))
        return Group(*parts)

    async def run(self, court: Court, game_id: str, seat: int | None = None) -> rules_pb2.GameView:
        """Draw every move until the game ends; the last view."""
        names: Names | None = None
        log: deque[str] = deque(maxlen=LOG_LINES)
        live: Live | None = None
        short = game_id[:9]
        latest: list[rules_pb2.GameView] = []  # the view on screen, for the countdown's redraws

        async def tick() -> None:  # the countdown: the live screen redrawn every second between moves
            while True:
                await asyncio.sleep(1.0)
                if live is not None and latest and names is not None:
                    live.update(self._screen(latest[0], names, log), refresh=True)

        ticker = asyncio.create_task(tick()) if self.fancy else None
        try:
            async for update in court.rules.watch(game_id, seat=seat):
                view = update.view
                if names is None:
                    names = await court.names_for(view)
                    if not self.fancy:
                        seats = ", ".join(names(i) for i in range(len(view.seats)))
                        self.console.print(
                            f"[{short}] watching {GAME_TITLES.get(view.game, view.game)} at move "
                            f"{view.seq}: {seats}",
                            markup=False,
                            soft_wrap=True,
                        )
                    else:
                        live = Live(console=self.console, auto_refresh=False, transient=False)
                        live.start()
                lines = [
                    line
                    for e in update.events
                    if (line := describe_event(view.game, event_dict(e), names, self.fancy)) is not None
                ]
                if live is not None:
                    log.extend(lines)
                    latest[:] = [view]
                    live.update(self._screen(view, names, log), refresh=True)
                else:
                    for line in lines:
                        self.console.print(
                            f"[{short} move {update.seq}] {line}", markup=False, soft_wrap=True
                        )
                self.moves_shown += 1
                await self._mark(update.seq)
                self.final = view
                if view.finished:
                    break
                if self.pace and lines:
                    await asyncio.sleep(self.pace)  # display pacing, so people can follow
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND and self.final is None:
                raise CliError(
                    f"game {game_id} does not exist (`{court_command()} games` lists your unfinished games)"
                ) from None
            raise CliError("the game stream broke: " + explain(err, "rules", court.endpoints.rules)) from None
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            if live is not None:
                live.stop()
        if self.final is None:
            raise CliError(f"game {game_id} sent nothing")
        if not self.fancy and self.final.finished and names is not None:
            self.console.print(
                f"[{short}] Game over. "
                + result_line(
                    self.final.game, result_dict(self.final.result), list(self.final.result.winners), names
                ),
                markup=False,
                soft_wrap=True,
            )
        return self.final
