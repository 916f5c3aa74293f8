"""The fault-injecting proxy against a real echo server and a real nats-server: each fault does what
a client on the far side of a broken link would see."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout

from tests.chaos.proxy import Proxy, ProxyThread
from tests.fixtures.nats import BinaryNats

WAIT = 10.0  # an upper bound on an event that should come at once


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


@pytest.fixture
async def proxy(echo: int) -> AsyncIterator[Proxy]:
    p = await Proxy(echo, "echo").start()
    yield p
    await p.close()


async def _open(p: Proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", p.port)


async def _roundtrip(r: asyncio.StreamReader, w: asyncio.StreamWriter, data: bytes) -> bytes:
    w.write(data)
    await w.drain()
    return await asyncio.wait_for(r.readexactly(len(data)), WAIT)


async def test_forwards_both_ways_untouched(proxy: Proxy) -> None:
    r, w = await _open(proxy)
    payload = bytes(range(256)) * 1000
    assert await _roundtrip(r, w, payload) == payload
    assert proxy.bytes == {"up": len(payload), "down": len(payload)}
    w.close()


async def test_partition_resets_open_connections_and_refuses_new_ones_until_healed(proxy: Proxy) -> None:
    r, w = await _open(proxy)
    assert await _roundtrip(r, w, b"before") == b"before"
    proxy.partition()
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(r.read(1) or r.readexactly(1), WAIT)  # reset, or end of stream
    r2, w2 = await _open(proxy)  # the kernel accepts; the proxy resets at once
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(_roundtrip(r2, w2, b"during"), WAIT)
    assert proxy.refused == 1
    proxy.heal()
    r3, w3 = await _open(proxy)
    assert await _roundtrip(r3, w3, b"after") == b"after"
    w3.close()


async def test_one_way_drop_loses_that_direction_only(proxy: Proxy) -> None:
    r, w = await _open(proxy)
    proxy.drop("down")  # the request reaches the server; its answer is lost
    w.write(b"lost answer")
    await w.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.readexactly(1), 0.5)
    assert proxy.bytes["up"] == len(b"lost answer")
    assert proxy.dropped == {"up": 0, "down": len(b"lost answer")}
    proxy.heal()
    assert await _roundtrip(r, w, b"again") == b"again"  # the connection itself lived on
    proxy.drop("up")
    w.write(b"never arrives")
    await w.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.readexactly(1), 0.5)
    assert proxy.dropped["up"] == len(b"never arrives")
    w.close()


async def test_delay_and_jitter_hold_every_chunk_and_keep_order(proxy: Proxy) -> None:
    r, w = await _open(proxy)
    proxy.delay(0.2, jitter=0.1, direction="up")
    t0 = time.monotonic()
    for i in range(20):
        w.write(f"{i:03d}".encode())
        await w.drain()
    got = await asyncio.wait_for(r.readexactly(60), WAIT)
    assert time.monotonic() - t0 >= 0.2  # a lower bound only: the delay is the point
    assert got == b"".join(f"{i:03d}".encode() for i in range(20))
    w.close()


async def test_stall_accepts_and_never_answers_until_healed(proxy: Proxy) -> None:
    proxy.stall()
    r, w = await _open(proxy)  # accepted
    w.write(b"held")
    await w.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.readexactly(1), 0.5)
    assert proxy.accepted == 1 and proxy.bytes["up"] == 4  # read and held, not lost
    proxy.heal()
    assert await asyncio.wait_for(r.readexactly(4), WAIT) == b"held"
    w.close()


async def test_cut_mid_message_delivers_part_then_resets(proxy: Proxy) -> None:
    r, w = await _open(proxy)
    proxy.cut_mid_message("down")
    w.write(b"0123456789")
    await w.drain()
    got = b""
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(r.read(100), WAIT):
            got += chunk
    assert got == b"01234", got  # half the message, then the connection is gone
    assert proxy.cuts == 1
    assert await _roundtrip(*(await _open(proxy)), b"next") == b"next"  # a one-shot fault


async def test_upstream_down_closes_the_client_connection(echo: int) -> None:
    from tests.fixtures.nats import free_port

    p = await Proxy(free_port(), "nowhere").start()
    r, _ = await _open(p)
    with contextlib.suppress(ConnectionError):
        assert await asyncio.wait_for(r.read(1), WAIT) == b""
    await p.close()


# ---- a real NATS client through the proxy


@pytest.fixture
def proxies() -> Iterator[ProxyThread]:
    pt = ProxyThread()
    yield pt
    pt.close()


async def test_nats_client_through_the_proxy_sees_disconnect_stall_and_delay(
    nats_server: BinaryNats, proxies: ProxyThread
) -> None:
    p = proxies.add("nats", nats_server.port)
    disconnected, reconnected = asyncio.Event(), asyncio.Event()

    async def on_disconnect() -> None:
        disconnected.set()

    async def on_reconnect() -> None:
        reconnected.set()

    nc = await nats.connect(
        f"nats://{p.address}",
        reconnect_time_wait=0.1,
        max_reconnect_attempts=-1,
        ping_interval=20,  # a stall must not look like a dead server here: partitions and cuts reset
        max_outstanding_pings=2,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
    )
    direct = await nats.connect(nats_server.url)
    try:

        async def reply(msg: nats.aio.msg.Msg) -> None:
            await msg.respond(msg.data)

        await direct.subscribe("echo", cb=reply)
        await direct.flush()
        assert (await nc.request("echo", b"hi", timeout=WAIT)).data == b"hi"

        # delay: requests still answered, none faster than the delay
        proxies.do(["nats"], "delay", 0.3, direction="up")
        t0 = time.monotonic()
        assert (await nc.request("echo", b"slow", timeout=WAIT)).data == b"slow"
        assert time.monotonic() - t0 >= 0.3
        proxies.heal_all()

        # stall: the request times out and the connection stays up (no disconnect yet)
        proxies.do(["nats"], "stall")
        with pytest.raises(NatsTimeout):
            await nc.request("echo", b"stalled", timeout=0.5)
        assert not disconnected.is_set()
        proxies.heal_all()
        assert (await nc.request("echo", b"flows", timeout=WAIT)).data == b"flows"

        # partition: the client sees a disconnect, then reconnects once the link heals
        proxies.do(["nats"], "partition")
        await asyncio.wait_for(disconnected.wait(), WAIT)
        with pytest.raises(Exception):  # noqa: B017 - a timeout or "connection closed/reconnecting"
            await nc.request("echo", b"cut off", timeout=0.5)
        proxies.heal_all()
        await asyncio.wait_for(reconnected.wait(), WAIT)
        assert (await nc.request("echo", b"back", timeout=WAIT)).data == b"back"

        # a cut in the middle of a message: the client reconnects and goes on
        disconnected.clear()
        reconnected.clear()
        proxies.do(["nats"], "cut_mid_message", "up")
        with contextlib.suppress(Exception):
            await nc.request("echo", b"x" * 5000, timeout=1)
        await asyncio.wait_for(disconnected.wait(), WAIT)
        await asyncio.wait_for(reconnected.wait(), WAIT)
        assert (await nc.request("echo", b"whole", timeout=WAIT)).data == b"whole"
        assert p.cuts == 1
    finally:
        await nc.close()
        await direct.close()
