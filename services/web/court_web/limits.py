"""Per-client limits of the edge, keyed by the client's address (court_web.http.client_address).

* calls: a token bucket per address (``COURT_WEB_RATE`` calls a second, burst ``COURT_WEB_BURST``);
  over it, ``resource_exhausted`` saying when to retry;
* open server streams (``WatchGame``) per address (``COURT_WEB_MAX_STREAMS_PER_CLIENT``); the next
  one is refused with ``resource_exhausted`` until one ends.

Both live in one replica's memory: with N replicas a client gets up to N times as much, which is
the point of a per-replica guard (it protects the replica; the services keep their own limits).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from court_kit.ratelimit import RateLimiter
from prometheus_client import Counter, Gauge

REFUSED = Counter("court_web_refused", "Calls the edge refused itself, by reason", ["reason"])
STREAMS = Gauge("court_web_streams_open", "Server streams (WatchGame) open through this edge replica")


class ClientLimits:
    def __init__(self, *, rate: float, burst: float, streams_per_client: int, max_clients: int = 100_000):
        self.calls = RateLimiter(rate, burst, max_keys=max_clients) if rate > 0 else None
        self.streams_per_client = streams_per_client
        self.open: dict[str, int] = {}

    def take_call(self, client: str) -> None:
        if self.calls is None:
            return
        wait = self.calls.take(client)
        if wait > 0:
            REFUSED.labels("rate").inc()
            raise ConnectError(
                Code.RESOURCE_EXHAUSTED,
                f"too many calls from your address; try again in {max(1, round(wait + 0.5))} s",
            )

    @contextlib.contextmanager
    def stream_slot(self, client: str) -> Iterator[None]:
        n = self.open.get(client, 0)
        if n >= self.streams_per_client:
            REFUSED.labels("streams").inc()
            raise ConnectError(
                Code.RESOURCE_EXHAUSTED,
                f"too many open streams from your address (at most {self.streams_per_client}); "
                "close one (e.g. a game you no longer watch) and try again",
            )
        self.open[client] = n + 1
        STREAMS.inc()
        try:
            yield
        finally:
            STREAMS.dec()
            left = self.open[client] - 1
            if left:
                self.open[client] = left
            else:
                del self.open[client]
