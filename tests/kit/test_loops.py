"""The background loops' shared pieces: ``court_kit.loops.rest`` and ``kjs.unsubscribe_quietly``."""

from __future__ import annotations

import asyncio
import time

from court_kit import jetstream as kjs
from court_kit.loops import rest

from tests.fixtures.nats import BinaryNats


async def test_rest_waits_its_time_unless_stopped() -> None:
    stop = asyncio.Event()
    t0 = time.monotonic()
    assert await rest(stop, 0.05) is False  # not stopped: the whole pause, and the loop goes on
    assert time.monotonic() - t0 >= 0.05
    asyncio.get_running_loop().call_later(0.05, stop.set)
    t0 = time.monotonic()
    assert await rest(stop, 60.0) is True  # stopped meanwhile: back at once, and the loop ends
    assert time.monotonic() - t0 < 30.0
    assert await rest(stop, 60.0) is True  # stopped before: no wait at all


class _Gone:
    calls = 0

    async def unsubscribe(self) -> None:
        self.calls += 1
        raise ConnectionError("the connection is gone")


async def test_unsubscribe_quietly_lets_no_error_out(tmp_path) -> None:
    await kjs.unsubscribe_quietly(None)  # nothing subscribed: nothing to do
    gone = _Gone()
    await kjs.unsubscribe_quietly(gone)  # the connection gone: tried once, no error
    assert gone.calls == 1
    nats = BinaryNats(tmp_path)
    await asyncio.to_thread(nats.start)
    nc = await kjs.connect(nats.url, "t")
    try:
        got: list[bytes] = []

        async def take(msg) -> None:
            got.append(msg.data)

        sub = await nc.subscribe("t.x", cb=take)
        await kjs.unsubscribe_quietly(sub)
        await nc.publish("t.x", b"after")
        await nc.flush()
        await asyncio.sleep(0.05)
        assert got == []  # unsubscribed for real: nothing delivered after
        await kjs.unsubscribe_quietly(sub)  # a second time: an error inside, none out
    finally:
        await nc.close()
        await asyncio.to_thread(nats.stop)
