"""The periodic purge task the lobby and ranking services run (their TTL purges).

``PurgeTask(name, fn, interval)`` calls ``fn()`` (a blocking function returning the rows deleted
per kind) in a thread every ``interval`` seconds, first ``first_after`` seconds after start, and
logs what it deleted (one line per run that deleted something). Every replica runs it; the purges
are idempotent deletes, so two replicas purging at once delete each row once. A failed run (the
database restarting) is logged once per change of state and retried at the next interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from court_kit import logging as klog
from court_kit.loops import rest

log = klog.get_logger("court_store.purge")


class PurgeTask:
    def __init__(
        self, name: str, fn: Callable[[], dict[str, int]], *, interval: float, first_after: float = 60.0
    ):
        self.name = name
        self.fn = fn
        self.interval = interval
        self.first_after = min(first_after, interval)
        self.runs = 0
        self.deleted: dict[str, int] = {}
        self.ran = asyncio.Condition()  # notified after every run (tests)
        self._trouble = klog.StateLog(log, f"{name} purge")

    async def run_once(self) -> dict[str, int]:
        try:
            counts = await asyncio.to_thread(self.fn)
        except Exception as exc:  # noqa: BLE001 - the database may be restarting: try again next time
            self._trouble.failed("purge failed", purge=self.name, error=str(exc)[:200] or type(exc).__name__)
            counts = {}
        else:
            self._trouble.ok("purge works again", purge=self.name)
            if any(counts.values()):
                log.info("purged", purge=self.name, **counts)
        self.runs += 1
        for k, v in counts.items():
            self.deleted[k] = self.deleted.get(k, 0) + v
        async with self.ran:
            self.ran.notify_all()
        return counts

    async def run(self, stop: asyncio.Event) -> None:
        wait = self.first_after
        while not stop.is_set():
            if await rest(stop, wait):
                return
            await self.run_once()
            wait = self.interval
