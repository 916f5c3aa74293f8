"""Reading typed lines without blocking the event loop (so game updates keep arriving while a
person thinks), and the console the client writes to."""

from __future__ import annotations

import asyncio
import os
import sys

from rich.console import Console

from .catalog import OPTIONS


def console() -> tuple[Console, bool]:
    """The console as ``court``'s global options ask (``--plain``: court_cli.catalog.OPTIONS)."""
    return make_console(OPTIONS["plain"])


def make_console(plain: bool = False) -> tuple[Console, bool]:
    """The console and whether it is fancy (a terminal: colours, suit symbols, live tables)."""
    if not plain:
        console = Console(highlight=False, emoji=False, markup=False)
        if console.is_terminal:
            return console, True
    return Console(
        no_color=True,
        force_terminal=False,
        highlight=False,
        emoji=False,
        markup=False,
        width=120,
        soft_wrap=True,
    ), False


class LineReader:
    """Lines from a file descriptor (stdin), read as they come; ``None`` at end of input."""

    def __init__(self, fd: int | None = None):
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._buf = b""
        self._eof = False

    async def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def on_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self.fd, on_ready)
        except (OSError, ValueError):  # a regular file or /dev/null: reading never blocks
            ready.set_result(None)
        else:
            try:
                await ready
            finally:
                loop.remove_reader(self.fd)
        chunk = os.read(self.fd, 65536)
        if chunk:
            self._buf += chunk
        else:
            self._eof = True

    async def readline(self) -> str | None:
        while b"\n" not in self._buf:
            if self._eof:
                if self._buf:
                    line, self._buf = self._buf, b""
                    return line.decode(errors="replace").rstrip("\r")
                return None
            await self._fill()
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace").rstrip("\r")
