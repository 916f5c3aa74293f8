"""A fault-injecting TCP proxy for the chaos tests (this machine's kernel has no netem).

A :class:`Proxy` listens on a loopback port and forwards every connection to one upstream port. Its
faults act per direction ("up": client to server, "down": server to client), alone or together:

* :meth:`Proxy.partition`: the link is down both ways: every open connection is reset and new ones
  are accepted and reset at once (the client sees a refused / reset connection) until :meth:`heal`;
* :meth:`Proxy.drop`: the bytes in one direction (or both) are silently discarded, the connection
  stays open (a one-way link loss: the sender believes it sent, the receiver waits);
* :meth:`Proxy.delay`: every chunk is held ``seconds`` plus a uniform ``jitter``, order kept;
* :meth:`Proxy.stall`: connections are accepted and bytes read but nothing is forwarded until
  :meth:`heal` (then what was held is delivered): a peer that accepts and never answers;
* :meth:`Proxy.cut_mid_message`: the next chunk in a direction is forwarded only in part, then the
  connection is reset on both sides (a message cut in the middle).

:meth:`Proxy.heal` lifts every fault. The proxy runs on an asyncio loop; :class:`ProxyThread` runs a
set of them on a loop of their own in a background thread, so a test whose own loop is busy (or a
synchronous nemesis) can drive them: its methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

UP, DOWN = "up", "down"
BOTH = (UP, DOWN)
CHUNK = 65536
T = TypeVar("T")


def _dirs(direction: str) -> tuple[str, ...]:
    if direction == "both":
        return BOTH
    if direction not in BOTH:
        raise ValueError(f"direction must be 'up', 'down' or 'both', not {direction!r}")
    return (direction,)


@dataclass
class _Faults:
    """One direction's faults."""

    dropped: bool = False
    delay: float = 0.0
    jitter: float = 0.0
    cut_next: bool = False
    flowing: asyncio.Event = field(default_factory=asyncio.Event)  # cleared while stalled

    def __post_init__(self) -> None:
        self.flowing.set()


class _Conn:
    def __init__(self, proxy: Proxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.proxy = proxy
        self.client_r, self.client_w = reader, writer
        self.server_w: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.closed = False

    async def run(self) -> None:
        try:
            server_r, self.server_w = await asyncio.open_connection("127.0.0.1", self.proxy.upstream_port)
        except OSError:
            self.abort()  # the server is down: so is the connection through the proxy
            return
        if self.closed:  # partitioned while connecting
            self.abort()
            return
        self.tasks = [
            asyncio.create_task(self._pump(self.client_r, self.server_w, UP)),
            asyncio.create_task(self._pump(server_r, self.client_w, DOWN)),
        ]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.abort()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, direction: str) -> None:
        faults = self.proxy.faults[direction]
        queue: asyncio.Queue[tuple[float, bytes, bool] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def deliver() -> None:
            while True:
                item = await queue.get()
                if item is None:
                    with contextlib.suppress(OSError):
                        dst.write_eof()
                    return
                at, data, cut = item
                wait = at - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                await faults.flowing.wait()
                if self.closed or dst.is_closing():
                    return
                dst.write(data)
                with contextlib.suppress(OSError, ConnectionError):
                    await dst.drain()
                if cut:
                    self.proxy.cuts += 1
                    self.abort()
                    return

        sender = asyncio.create_task(deliver())
        last = 0.0
        try:
            while True:
                data = await src.read(CHUNK)
                if not data:
                    queue.put_nowait(None)
                    break
                self.proxy.bytes[direction] += len(data)
                if faults.dropped:
                    self.proxy.dropped[direction] += len(data)
                    continue
                at = loop.time() + faults.delay + (random.uniform(0, faults.jitter) if faults.jitter else 0)
                last = at = max(at, last)  # jitter never reorders a byte stream
                if faults.cut_next:
                    faults.cut_next = False
                    queue.put_nowait((at, data[: max(1, len(data) // 2)], True))
                    break
                queue.put_nowait((at, data, False))
            await sender
        except (OSError, ConnectionError):
            pass
        finally:
            sender.cancel()

    def abort(self) -> None:
        self.closed = True
        for w in (self.client_w, self.server_w):
            if w is None:
                continue
            sock = w.get_extra_info("socket")
            if sock is not None:  # SO_LINGER 0: close with a reset, as a dead link or host does
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            w.transport.abort()
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.proxy.conns.discard(self)


class Proxy:
    """One proxied link: 127.0.0.1:``port`` forwards to 127.0.0.1:``upstream_port``."""

    def __init__(self, upstream_port: int, name: str = ""):
        self.upstream_port = upstream_port
        self.name = name or f"proxy->{upstream_port}"
        self.port = 0
        self.faults = {d: _Faults() for d in BOTH}
        self.partitioned = False
        self.conns: set[_Conn] = set()
        self.accepted = 0
        self.refused = 0
        self.cuts = 0
        self.bytes = dict.fromkeys(BOTH, 0)
        self.dropped = dict.fromkeys(BOTH, 0)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int = 0) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(self, reader, writer)
        if self.partitioned:
            self.refused += 1
            conn.abort()
            return
        self.accepted += 1
        self.conns.add(conn)
        await conn.run()

    # ---- faults (call on the proxy's loop, or through ProxyThread)

    def partition(self) -> None:
        """Both ways down: open connections reset, new ones reset on accept."""
        self.partitioned = True
        for c in list(self.conns):
            c.abort()

    def drop(self, direction: str = "both") -> None:
        for d in _dirs(direction):
            self.faults[d].dropped = True

    def delay(self, seconds: float, jitter: float = 0.0, direction: str = "both") -> None:
        for d in _dirs(direction):
            self.faults[d].delay, self.faults[d].jitter = seconds, jitter

    def stall(self, direction: str = "both") -> None:
        for d in _dirs(direction):
            self.faults[d].flowing.clear()

    def cut_mid_message(self, direction: str = "both") -> None:
        """The next chunk in ``direction`` (on whichever connection sends one first) is cut in half
        and the connection reset."""
        for d in _dirs(direction):
            self.faults[d].cut_next = True

    def reset(self) -> None:
        """Reset every open connection now (new ones are accepted as usual)."""
        for c in list(self.conns):
            c.abort()

    def heal(self) -> None:
        self.partitioned = False
        for f in self.faults.values():
            f.dropped = False
            f.delay = f.jitter = 0.0
            f.cut_next = False
            f.flowing.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self.conns):
            c.abort()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)


class ProxyThread:
    """Proxies on an event loop of their own in a daemon thread; every method is thread-safe and may
    be called from any thread (including another event loop's, where it blocks only briefly)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.proxies: dict[str, Proxy] = {}
        self._thread = threading.Thread(target=self.loop.run_forever, name="chaos-proxies", daemon=True)
        self._thread.start()

    def _call(self, fn: Callable[[], T]) -> T:
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return fut.result(30)

    def add(self, name: str, upstream_port: int) -> Proxy:
        proxy = Proxy(upstream_port, name)
        asyncio.run_coroutine_threadsafe(proxy.start(), self.loop).result(30)
        self.proxies[name] = proxy
        return proxy

    def do(self, names: Iterable[str], fault: str, *args: Any, **kwargs: Any) -> None:
        """Apply ``fault`` (a Proxy method name: partition, drop, delay, stall, cut_mid_message,
        reset, heal) to the named proxies."""
        chosen = [self.proxies[n] for n in names]

        def run() -> None:
            for p in chosen:
                getattr(p, fault)(*args, **kwargs)

        self._call(run)

    def heal_all(self) -> None:
        self.do(list(self.proxies), "heal")

    def close(self) -> None:
        async def close_all() -> None:
            await asyncio.gather(*(p.close() for p in self.proxies.values()))

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
