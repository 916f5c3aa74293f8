"""The stream's publish rate beside court-analytics' ingest rate, sampled from the same run.

``IngestProbe`` connects to NATS as the analytics identity (``court events``' credentials) and
samples, every ``every`` seconds, two numbers JetStream keeps itself:

* the public records stream's last sequence (``COURT_EVENTS``, ``$JS.API.STREAM.INFO``): every
  public record the projector published;
* court-analytics' durable consumer (``analytics``, ``COURT_ANALYTICS_DURABLE``): its records not
  yet acknowledged (``num_pending`` + ``num_ack_pending``, the lag its own
  ``court_analytics_records_lag`` metric shows). A record is acknowledged only once it is staged in
  the lake, so the stream's last sequence minus that lag is what the lake has ingested.

Over a window the publish rate is the last sequence's growth per second, the ingest rate the
growth of (last sequence - lag) per second, so both come from the same samples of the same
server. ``court simulate`` and ``make bench ONLY=analytics`` print them; when court-analytics is
not consuming (no durable yet) only the publish rate is given, and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

STREAM = "COURT_EVENTS"
DURABLE = "analytics"
QUIET = 2.0  # seconds without a new record, nothing behind: every record of the load has landed


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    last_seq: int  # the stream's last sequence: public records published so far
    lag: int | None  # records the durable has not acknowledged (None: no durable)

    @property
    def ingested(self) -> int | None:
        return None if self.lag is None else self.last_seq - self.lag


@dataclass
class IngestReport:
    seconds: float  # the measured window (start to the end of the load)
    published: int  # public records published in the window
    ingested: int | None  # records court-analytics acknowledged in the window (None: not consuming)
    lag_end: int | None  # records behind when the load ended
    lag_max: int | None  # the most records behind at any sample
    caught_up_after: float | None  # seconds after the load ended until the lag was 0 (None: not seen)
    published_all: int = 0  # records published from the start to the last sample (the load's last
    # records may still be projected when it ends)
    why: str = ""  # why there is no ingest figure

    @property
    def publish_rate(self) -> float:
        return self.published / self.seconds if self.seconds > 0 else 0.0

    @property
    def ingest_rate(self) -> float | None:
        if self.ingested is None or self.seconds <= 0:
            return None
        return self.ingested / self.seconds

    @property
    def ratio(self) -> float | None:
        rate = self.ingest_rate
        return None if rate is None or self.published == 0 else rate / self.publish_rate

    def summary(self) -> dict[str, Any]:
        def r(x: float | None, n: int = 1) -> float | None:
            return None if x is None else round(x, n)

        return {
            "window_s": round(self.seconds, 2),
            "published": self.published,
            "publish_per_s": round(self.publish_rate, 1),
            "ingested": self.ingested,
            "ingest_per_s": r(self.ingest_rate),
            "ingest_ratio": r(self.ratio, 3),
            "lag_end": self.lag_end,
            "lag_max": self.lag_max,
            "caught_up_after_s": r(self.caught_up_after),
            "published_all": self.published_all,
        }

    def line(self) -> str:
        head = (
            f"{STREAM}: {self.published} public records published in {self.seconds:.1f}s, "
            f"{self.publish_rate:.1f} records/s"
        )
        if self.ingested is None:
            return f"{head}; court-analytics: no ingest figure ({self.why})"
        caught = (
            f"every record landed {self.caught_up_after:.1f}s after the load ended "
            f"({self.published_all} records in all)"
            if self.caught_up_after is not None
            else f"still {self.lag_end} records behind when the probe stopped waiting"
        )
        return (
            f"{head}; court-analytics ingested {self.ingested} records, {self.ingest_rate or 0:.1f} "
            f"records/s ({(self.ratio or 0) * 100:.1f}% of the publish rate), at most {self.lag_max} "
            f"records behind, {self.lag_end} at the end of the load; {caught}"
        )


@dataclass
class IngestProbe:
    nats_url: str
    user: str = ""
    password: str = ""
    durable: str = DURABLE
    every: float = 2.0
    samples: list[Sample] = field(default_factory=list)
    why: str = ""
    _nc: Any = None
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect and take the first sample (raises when NATS cannot be reached or the stream is
        not there), then sample in the background until ``finish``."""
        import nats

        async def quiet(_exc: Exception) -> None:
            return None

        auth = (
            {"user": self.user, "password": self.password, "inbox_prefix": f"_INBOX_{self.user}"}
            if self.user
            else {}
        )
        self._nc = await nats.connect(
            self.nats_url, connect_timeout=3, max_reconnect_attempts=3, error_cb=quiet, **auth
        )
        try:
            self.samples.append(await self.sample())
        except BaseException:
            await self.close()
            raise
        self._task = asyncio.create_task(self._run())

    async def sample(self) -> Sample:
        js = self._nc.jetstream()
        info = await js.stream_info(STREAM)
        lag: int | None = None
        try:
            ci = await js.consumer_info(STREAM, self.durable)
            lag = int(ci.num_pending or 0) + int(ci.num_ack_pending or 0)
            self.why = ""
        except Exception as exc:  # noqa: BLE001 - no durable: court-analytics is not consuming
            self.why = (
                f"no durable consumer {self.durable!r} on {STREAM}: is court-analytics running? "
                f"({type(exc).__name__})"
            )
        return Sample(time.monotonic(), int(info.state.last_seq), lag)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            with contextlib.suppress(Exception):  # a missed sample is no error; the next one counts
                self.samples.append(await self.sample())

    async def finish(self, *, wait: float = 120.0) -> IngestReport:
        """The load has ended: take the window's last sample, then wait up to ``wait`` seconds for
        the lag to reach 0 (the stream's records all landed) and report."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        first = self.samples[0]
        end = await self.sample()
        self.samples.append(end)
        caught: float | None = None
        deadline = end.at + wait
        last = end
        quiet_from: Sample | None = None  # the first sample of the current run with nothing behind
        while last.lag is not None:
            if last.lag == 0:
                if quiet_from is None or last.last_seq != quiet_from.last_seq:
                    quiet_from = last
                elif last.at - quiet_from.at >= QUIET:
                    # nothing behind and nothing new for QUIET seconds: the load's last records (the
                    # projector publishes a move after the players saw it) are in the lake
                    caught = max(0.0, quiet_from.at - end.at)
                    break
            else:
                quiet_from = None
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(0.5, self.every))
            with contextlib.suppress(Exception):
                last = await self.sample()
                self.samples.append(last)
        lags = [s.lag for s in self.samples if s.lag is not None]
        window = [s for s in self.samples if s.at <= end.at]
        ingested = None
        if first.ingested is not None and end.ingested is not None:
            ingested = end.ingested - first.ingested
        return IngestReport(
            seconds=end.at - first.at,
            published=end.last_seq - first.last_seq,
            ingested=ingested,
            lag_end=end.lag,
            lag_max=max((s.lag for s in window if s.lag is not None), default=None) if lags else None,
            caught_up_after=caught,
            published_all=last.last_seq - first.last_seq,
            why=self.why
            or ("court-analytics was not consuming when the run started" if ingested is None else ""),
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.close()
