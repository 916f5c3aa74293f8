"""Stopping a process's background loops within a bound (shutdown and the tests' abrupt kill)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def stop_tasks(tasks: Iterable[asyncio.Task[None] | None], bound: float) -> set[asyncio.Task[None]]:
    """Cancel ``tasks`` (``None`` entries skipped) and wait for them at most ``bound`` seconds; a
    finished task's error is retrieved (a background loop's error at shutdown is no news). Returns
    the tasks still running: a cancellation swallowed below a loop (Python 3.11's ``wait_for`` can
    lose one that races its inner future) must not keep a shutdown waiting, so the caller closes
    NATS under them."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    if not live:
        return set()
    done, pending = await asyncio.wait(live, timeout=bound)
    for task in done:
        if not task.cancelled():
            task.exception()
    return pending
