"""What the services' background loops share: a pause that a stop cuts short."""

from __future__ import annotations

import asyncio
import contextlib


async def rest(stop: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds``, or less once ``stop`` is set. True when ``stop`` is set: the loop ends."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()
