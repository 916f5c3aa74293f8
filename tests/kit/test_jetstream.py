"""court_kit.jetstream against a real nats-server: connecting before the server is up, ensuring
streams and KV buckets, direct gets, and the pipelined publisher."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from court_kit import jetstream as kjs
from nats.js.api import StreamConfig
from nats.js.errors import APIError

from tests.fixtures.nats import BinaryNats


async def test_connect_waits_for_a_server_that_comes_up_later(tmp_path: Path) -> None:
    nats = BinaryNats(tmp_path / "nats")
    with pytest.raises(TimeoutError):  # nothing listens yet: it gives up when told to
        await kjs.connect(nats.url, "t", give_up_after=0.2)
    task = asyncio.create_task(kjs.connect(nats.url, "t"))
    await asyncio.to_thread(nats.start)
    nc = await asyncio.wait_for(task, 20)
    try:
        assert nc.is_connected
    finally:
        await nc.close()
        nats.stop()


async def test_streams_kv_direct_get_and_publisher(tmp_path: Path) -> None:
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "t")
    try:
        js = nc.jetstream()
        await kjs.ensure_stream(js, StreamConfig(name="T", subjects=["t.>"], allow_direct=True))
        await kjs.ensure_stream(js, StreamConfig(name="T", subjects=["t.>"], allow_direct=True))  # idempotent
        await kjs.ensure_stream(
            js, StreamConfig(name="T", subjects=["t.>", "u.>"], allow_direct=True)
        )  # update
        assert sorted((await js.stream_info("T")).config.subjects) == ["t.>", "u.>"]
        kvc = kjs.kv_config("court_test", description="t", environ={}, default=kjs.Limits(max_bytes=kjs.MiB))
        kv = await kjs.ensure_kv(js, kvc)
        await kv.put("k", b"v")
        assert (await (await kjs.ensure_kv(js, kvc)).get("k")).value == b"v"
        assert (await js.stream_info("KV_court_test")).config.max_bytes == kjs.MiB, "buckets are bounded too"

        pub = kjs.Publisher(nc)
        acks = await pub.publish_all(
            [(f"t.g.{i % 3}", f"m{i}".encode(), {"Nats-Msg-Id": f"id{i}"}) for i in range(10)]
        )
        assert len(acks) == 10
        again = await pub.publish_all([("t.g.0", b"m0", {"Nats-Msg-Id": "id0"})])
        assert b'"duplicate":true' in again[0].replace(b" ", b""), "Nats-Msg-Id de-duplicates"
        with pytest.raises(APIError) as info:
            await pub.publish_all([("t.g.0", b"x", {"Nats-Expected-Last-Subject-Sequence": "1"})])
        assert info.value.err_code == kjs.ERR_WRONG_LAST_SEQUENCE
        with pytest.raises(Exception):  # noqa: B017 - no stream takes this subject
            await pub.publish_all([("nowhere.x", b"x", {})], timeout=2)

        last = await kjs.direct_get_last(nc, "T", "t.g.>")
        assert last is not None and last.data == b"m9" and last.subject == "t.g.0"
        assert await kjs.direct_get_last(nc, "T", "t.none") is None
        got = await kjs.direct_get_batch(nc, "T", "t.g.1", batch=2)
        assert [m.data for m in got] == [b"m1", b"m4", b"m7"], "every message, across batches, in order"
        assert await kjs.direct_get_batch(nc, "T", "t.none") == []
        await pub.close()
    finally:
        await nc.close()
        nats.stop()
