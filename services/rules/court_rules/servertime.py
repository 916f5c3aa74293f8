"""The turn clock's one time source: the NATS server's clock, not the replica's (docs/clock.md).

Every time the rules service writes into a record (a record's ``t``, so every deadline derived
from it) and every "now" the turn clock fires against is read from ``ServerClock.now``: this
replica's local clock (``time.monotonic`` by default; only its rate matters) plus an offset to the
clock of the nats-server that leads the game-log stream, the server that stamps every record it
stores. The offset is measured from ``$JS.API.STREAM.INFO.<stream>``, whose answer carries the
server's time (``ts``): with the request sent at local ``t0`` and the answer back at ``t1``, the
server's time at ``(t0 + t1) / 2`` is ``ts`` give or take half the round trip. A sample is taken
every ``interval`` seconds; of the last ``window`` samples the one with the shortest round trip
gives the offset (a delayed or jittered link makes a sample's round trip long, not its offset
wrong by more than half of it). A sample that cannot agree with the kept one within both samples'
half round trips means a clock stepped (the server's, or a local wall clock given as ``local``):
the older samples are dropped and the new one is used.

So a replica whose own clock is 5 s ahead writes the same deadlines and fires them at the same
moments as one whose clock is right: two replicas agree to within the sum of their two offsets'
errors (half a round trip each: a millisecond or less on a LAN), not to within their clocks' skew.
What is assumed instead is that the NATS servers' clocks agree (NTP), as JetStream's own message
timestamps and ``max_age`` already assume: a new stream leader brings its clock along.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from court_kit import logging as klog
from court_kit.loops import rest

log = klog.get_logger("court_rules.servertime")


def parse_time(raw: str) -> float:
    """An RFC 3339 time as the nats-server writes it (up to nanoseconds, ``Z`` or an offset) in
    seconds since the epoch."""
    text = raw.strip()
    zone = "+00:00"
    if text.endswith(("Z", "z")):
        text = text[:-1]
    elif len(text) > 6 and text[-6] in "+-" and text[-3] == ":":
        text, zone = text[:-6], text[-6:]
    whole, _, frac = text.partition(".")
    return datetime.fromisoformat(whole + zone).timestamp() + (float(f"0.{frac}") if frac else 0.0)


class ServerClock:
    def __init__(
        self,
        nc: Any,
        stream: str,
        *,
        local: Callable[[], float] = time.monotonic,
        interval: float = 5.0,
        window: int = 12,
        timeout: float = 2.0,
    ):
        self.nc = nc
        self.stream = stream
        self.local = local
        self.interval = interval
        self.timeout = timeout
        self._samples: deque[tuple[float, float]] = deque(maxlen=window)  # (round trip, offset)
        self._best: tuple[float, float] | None = None

    @property
    def synced(self) -> bool:
        return self._best is not None

    @property
    def uncertainty(self) -> float:
        """Half the round trip of the sample in use (seconds): how far ``now`` may be off."""
        return self._best[0] / 2 if self._best is not None else float("inf")

    def now(self) -> float:
        """The server's time now, seconds since the epoch (``sync`` must have succeeded once)."""
        if self._best is None:
            raise RuntimeError("ServerClock.now before the first sample of the server's time")
        return self.local() + self._best[1]

    def add(self, rtt: float, offset: float) -> None:
        """Keep one sample (round trip and offset, seconds)."""
        best = self._best
        if best is not None and abs(offset - best[1]) > (rtt + best[0]) / 2:
            # the two cannot both be right: a clock stepped since; the old samples are stale
            log.warning("clock offset to the nats-server jumped", by_seconds=round(offset - best[1], 4))
            self._samples.clear()
        self._samples.append((rtt, offset))
        self._best = min(self._samples)

    async def sample(self) -> None:
        t0 = self.local()
        msg = await self.nc.request(f"$JS.API.STREAM.INFO.{self.stream}", b"", timeout=self.timeout)
        t1 = self.local()
        answer = json.loads(msg.data)
        if "ts" not in answer:
            raise RuntimeError(
                f"stream info of {self.stream} has no server time: {answer.get('error', answer)}"
            )
        self.add(t1 - t0, parse_time(answer["ts"]) - (t0 + t1) / 2)

    async def sync(self, stop: asyncio.Event | None = None, samples: int = 3) -> None:
        """Take samples until ``samples`` succeeded (start-up: JetStream is up by then), so the
        first offset is already the best of a few round trips."""
        trouble = klog.StateLog(log, f"server time from {self.stream}")
        taken = 0
        while True:
            try:
                await self.sample()
                taken += 1
                if taken >= samples:
                    trouble.ok("server time measured")
                    return
                continue
            except Exception as exc:  # noqa: BLE001 - NATS may be electing a leader
                trouble.failed("could not read the server's time", error=str(exc) or type(exc).__name__)
            if stop is not None and stop.is_set():
                return
            await asyncio.sleep(0.5)

    async def run(self, stop: asyncio.Event) -> None:
        """Sample every ``interval`` seconds until ``stop``; a failed sample keeps the offset."""
        trouble = klog.StateLog(log, f"server time from {self.stream}")
        while not stop.is_set():
            if await rest(stop, self.interval):
                return
            try:
                await self.sample()
                trouble.ok("server time measured again")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the last offset while NATS is away
                trouble.failed("could not read the server's time", error=str(exc) or type(exc).__name__)
