"""court_kit.jetstream against a real nats-server: connecting before the server is up, ensuring
streams and KV buckets, direct gets, and the pipelined publisher."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from court_kit import jetstream as kjs
from nats import errors as nats_errors
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
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


@contextlib.asynccontextmanager
async def _pulled(tmp_path: Path, stream: str, ack: AckPolicy) -> AsyncIterator[tuple[BinaryNats, Any, Any]]:
    """A nats-server with ``stream`` on ``<stream lowercased>.>`` and a pull subscription on
    its durable ``d``: (the server, the connection, the subscription)."""
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "t")
    try:
        js = nc.jetstream()
        subjects = f"{stream.lower()}.>"
        await kjs.ensure_stream(js, StreamConfig(name=stream, subjects=[subjects]))
        psub = await js.pull_subscribe(
            subjects, durable="d", stream=stream, config=ConsumerConfig(ack_policy=ack)
        )
        yield nats, nc, psub
    finally:
        await nc.close()
        nats.stop()


async def test_puller_takes_what_arrived_up_to_its_limit(tmp_path: Path) -> None:
    """kjs.Puller.next_batch with a ``limit`` (the analytics consumer's): the messages already
    delivered, at most ``limit``, in order, without a new request while the open one may still
    deliver."""
    async with _pulled(tmp_path, "R", AckPolicy.EXPLICIT) as (_, nc, psub):
        js = nc.jetstream()
        puller = kjs.Puller(psub, 64, expires=5.0)
        with pytest.raises(nats_errors.TimeoutError):
            await puller.next_batch(0.05)  # nothing delivered yet
        await js.publish("r.a", b"0")
        first = await puller.next_batch(5.0)
        assert [m.data for m in first] == [b"0"]
        for i in range(1, 4):
            await js.publish(f"r.{i}", str(i).encode())
        async with asyncio.timeout(10):
            while psub._sub._pending_queue.qsize() < 3:
                await asyncio.sleep(0.01)
        assert [m.data for m in await puller.next_batch(5.0, 2)] == [b"1", b"2"]
        assert [m.data for m in await puller.next_batch(5.0, 5)] == [b"3"]
        assert puller.outstanding == 64 - 4, "each message taken counts against the open request"


async def test_puller_keeps_requests_open_and_survives_a_server_restart(tmp_path: Path) -> None:
    """kjs.Puller: messages appended while its request is open arrive without a new request
    (nats-server counts the pull requests: one for the first 30 messages of a batch of 64); a
    request ending (408 at its expiry) opens another; after a nats-server restart, which forgets
    open requests, what is appended is delivered once the newest request has expired. Every
    message arrives once, in order."""
    async with _pulled(tmp_path, "P", AckPolicy.ALL) as (nats, nc, psub):
        js = nc.jetstream()
        puller = kjs.Puller(psub, 64, expires=1.0)
        requests: list[bytes] = []
        real_publish = nc.publish

        async def counting(subject: str, payload: bytes = b"", reply: str = "", headers: Any = None) -> None:
            if subject.startswith("$JS.API.CONSUMER.MSG.NEXT.P.d"):
                requests.append(payload)
            await real_publish(subject, payload, reply, headers)

        nc.publish = counting  # type: ignore[method-assign]
        got: list[bytes] = []

        async def take(n: int, timeout: float = 10.0) -> None:
            async with asyncio.timeout(timeout):
                while len(got) < n:
                    try:
                        msgs = await puller.next_batch(0.5)
                    except TimeoutError:
                        continue
                    got.extend(m.data for m in msgs)
                    await msgs[-1].ack_sync()

        with pytest.raises(TimeoutError):
            await puller.next_batch(0.2)  # nothing yet: the request is open
        for i in range(30):
            await js.publish(f"p.{i % 3}", str(i).encode())
        await take(30)
        assert len(requests) == 1, "30 messages of a 64 batch came on the one open request"
        await asyncio.sleep(1.3)  # the request expires (408): the next call opens another
        await js.publish("p.0", b"30")
        await take(31)
        assert len(requests) >= 2
        await asyncio.to_thread(nats.restart)  # forgets every open pull request
        async with asyncio.timeout(20):
            while not nc.is_connected:
                await asyncio.sleep(0.05)
        for i in range(31, 40):
            for _attempt in range(100):  # JetStream may take a moment to come back after the restart
                try:
                    await js.publish(
                        f"p.{i % 3}", str(i).encode(), timeout=1, headers={"Nats-Msg-Id": f"m{i}"}
                    )
                    break
                except Exception:  # noqa: BLE001 - no responders or a timeout while it recovers
                    await asyncio.sleep(0.1)
        await take(40, timeout=20)
        assert got == [str(i).encode() for i in range(40)], "every message once, in order"


async def _acks_pending(js: Any) -> int:
    """The durable ``d`` of stream ``A``: its messages delivered and not acknowledged."""
    return int((await js.consumer_info("A", "d")).num_ack_pending)


async def test_lazy_acks_leave_with_the_next_write_or_within_their_bound(tmp_path: Path) -> None:
    """kjs.LazyAcks: an ack is put on the connection's buffer, not written on its own: nats-server
    has not seen it until the connection writes something else (here a plain publish), or until
    ``within`` seconds have passed with nothing else to write. A nak with a delay is delivered
    again after that delay. An ack never goes twice (``MsgAlreadyAckdError``, as nats-py's own).
    The durable's state is read on a second connection (a request on the first would carry the ack)."""
    async with _pulled(tmp_path, "A", AckPolicy.EXPLICIT) as (nats, nc, psub):
        other = await kjs.connect(nats.url, "observer")
        try:
            ojs = other.jetstream()
            for i in range(3):
                await ojs.publish(f"a.{i}", str(i).encode())
            msgs = await psub.fetch(3, timeout=5)
            lazy = kjs.LazyAcks(nc, within=60.0)  # only another write sends it
            lazy.ack(msgs[0])
            await asyncio.sleep(0.2)
            assert await _acks_pending(ojs) == 3, "the ack waits on the buffer"
            with pytest.raises(nats_errors.MsgAlreadyAckdError):
                lazy.ack(msgs[0])
            await nc.publish("elsewhere", b"x")  # any write: the ack leaves with it
            async with asyncio.timeout(10):
                while await _acks_pending(ojs) != 2:
                    await asyncio.sleep(0.02)
            lazy.flush()  # nothing waiting: nothing happens

            soon = kjs.LazyAcks(nc, within=0.05)  # no other write: the timer sends it
            soon.ack(msgs[1])
            soon.nak(msgs[2], 0.3)
            async with asyncio.timeout(10):  # the ack arrived; the nak's message waits for its delay
                while await _acks_pending(ojs) != 1:
                    await asyncio.sleep(0.02)
            # delivered again after the nak's 0.3 s (without the nak: after the 30 s ack wait)
            again = await psub.fetch(1, timeout=5)
            assert [m.data for m in again] == [b"2"] and again[0].metadata.num_delivered == 2
            await again[0].ack_sync()
        finally:
            await other.close()


async def test_a_lazy_publish_leaves_with_the_next_write_or_within_its_bound(tmp_path: Path) -> None:
    """kjs.LazyAcks.publish (court_rules.botviews' pushed views): a core NATS message put on the
    buffer like an ack: a subscriber has it only once the connection writes something else, or
    ``within`` seconds later; in the order it was put; refused on a closed connection."""
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "pusher")
    sub_nc = await kjs.connect(nats.url, "reader")
    try:
        got: asyncio.Queue[bytes] = asyncio.Queue()

        async def cb(msg: Any) -> None:
            await got.put(msg.data)

        await sub_nc.subscribe("push.>", cb=cb)
        await sub_nc.flush()
        lazy = kjs.LazyAcks(nc, within=60.0)
        lazy.publish("push.a", b"1")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(got.get(), 0.2)  # waits on the buffer
        await nc.publish("push.b", b"2")  # any write: it leaves first, with it
        assert [await asyncio.wait_for(got.get(), 5) for _ in range(2)] == [b"1", b"2"]
        soon = kjs.LazyAcks(nc, within=0.05)
        soon.publish("push.c", b"3")  # nothing else written: the timer sends it
        assert await asyncio.wait_for(got.get(), 5) == b"3"
        await nc.close()
        with pytest.raises(nats_errors.ConnectionClosedError):
            soon.publish("push.d", b"4")
    finally:
        await sub_nc.close()
        if not nc.is_closed:
            await nc.close()
        nats.stop()


async def test_lazy_acks_lost_with_their_connection_mean_a_redelivery(tmp_path: Path) -> None:
    """The fault: the process dies (its connection closed, nothing flushed) while its acks still
    wait on the buffer. nats-server never saw them, so once the ack wait has passed it delivers
    those messages again, to the next consumer on the durable: nothing is lost, the consumer's
    redelivery handling (finding its work done) takes over, as after any lost ack."""
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "dies")
    survivor = await kjs.connect(nats.url, "survivor")
    try:
        js = survivor.jetstream()
        await kjs.ensure_stream(js, StreamConfig(name="L", subjects=["l.>"]))
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=1.0)
        await js.publish("l.a", b"a")
        await js.publish("l.b", b"b")
        psub = await nc.jetstream().pull_subscribe("l.>", durable="d", stream="L", config=config)
        msgs = await psub.fetch(2, timeout=5)
        lazy = kjs.LazyAcks(nc, within=60.0)
        for m in msgs:
            lazy.ack(m)
        nc._pending, nc._pending_data_size = [], 0  # the process dies: what waited is never written
        await nc.close()
        with pytest.raises(nats_errors.ConnectionClosedError):
            lazy.ack(msgs[0])
        psub2 = await js.pull_subscribe("l.>", durable="d", stream="L", config=config)
        again = await psub2.fetch(2, timeout=10)
        assert sorted(m.data for m in again) == [b"a", b"b"]
        assert all(m.metadata.num_delivered == 2 for m in again)
    finally:
        await survivor.close()
        if not nc.is_closed:
            await nc.close()
        nats.stop()


async def _until(check: Any, what: str, timeout: float = 10.0) -> None:
    """Wait until ``check()`` is true (at most ``timeout`` s: then fail, naming ``what``)."""
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def _restart(nats: BinaryNats, nc: Any) -> None:
    """nats-server killed (no word to anyone) and started again on its port and store; returns
    once the connection is back."""
    await asyncio.to_thread(nats.kill)
    await asyncio.to_thread(nats.start)
    await _until(lambda: nc.is_connected, "the connection back", 20)


async def _publish_once_back(nc: Any, subject: str, data: bytes) -> None:
    """Publish to JetStream as soon as it answers again after a restart."""
    js = nc.jetstream()
    for _attempt in range(100):
        try:
            await js.publish(subject, data, timeout=1)
            return
        except Exception:  # noqa: BLE001 - JetStream may take a moment to come back
            await asyncio.sleep(0.1)
    raise AssertionError("JetStream did not come back")


async def test_puller_counts_no_request_a_killed_server_forgot(tmp_path: Path) -> None:
    """nats-server killed (no word to anyone) while a request of the Puller's is open, then
    started again: once that request's expiry has passed, the Puller's next request counts only
    itself as open, so it asks again as soon as half of that batch has come, as on any request.
    Counting the forgotten one too, it would wait (up to an expiry at a time) for messages no
    request of the server's would deliver: the bot service's games crawled after a restart."""
    async with _pulled(tmp_path, "K", AckPolicy.EXPLICIT) as (nats, nc, psub):
        puller = kjs.Puller(psub, 8, expires=0.5)
        with pytest.raises(TimeoutError):
            await puller.next_batch(0.1)  # a request for 8 is open, nothing delivered
        assert puller.outstanding == 8
        await _restart(nats, nc)
        await asyncio.sleep(0.6)  # past the forgotten request's expiry
        await _publish_once_back(nc, "k.a", b"a")
        got = await puller.next_batch(10)
        assert [m.data for m in got] == [b"a"]
        assert puller.outstanding == 7, "the new request alone is open, less the message it brought"


async def _refused_pulls_back_off(js: Any, puller_class: Any, stream: str) -> tuple[Any, Any]:
    """Two readers of ``puller_class`` on a durable of ``stream`` with one waiting place: the
    first's request holds it, so the second's are refused at once (409, too many waiting
    requests), and it asks again only after a pause doubling from 10 ms (2 to 7 requests in
    0.5 s), never at once round after round. Returns the two readers (first, refused)."""
    subject = f"{stream.lower()}.>"
    crowded = await js.pull_subscribe(
        subject, durable="one", stream=stream, config=ConsumerConfig(max_waiting=1)
    )
    first = puller_class(crowded, 8, expires=5.0)
    second = puller_class(await js.pull_subscribe(subject, durable="one", stream=stream), 8)
    with pytest.raises(nats_errors.TimeoutError):
        await first.next_batch(0.1)  # its request holds the one waiting place
    with pytest.raises(nats_errors.TimeoutError):
        await second.next_batch(0.5)  # refused each time (409), waiting 10, 20, 40, ... ms
    assert 2 <= second.requests <= 7, f"{second.requests} requests in 0.5 s"
    return first, second


async def _raises_once_deleted(js: Any, puller_class: Any, psub: Any, stream: str) -> None:
    """A reader of ``puller_class`` on ``psub`` (the durable ``d`` of ``stream``) with its request
    open: the durable deleted under it, the request ends with 409 Consumer Deleted and the next
    with 503 (no consumer), each raised as ``JetStreamUnavailable``, two requests in all."""
    puller = puller_class(psub, 8, expires=5.0)
    with pytest.raises(nats_errors.TimeoutError):
        await puller.next_batch(0.1)
    await js.delete_consumer(stream, "d")
    with pytest.raises(kjs.JetStreamUnavailable, match="409"):
        await puller.next_batch(5.0)
    with pytest.raises(kjs.JetStreamUnavailable, match="503"):
        await puller.next_batch(5.0)
    assert puller.requests == 2


async def test_puller_raises_for_a_deleted_consumer_and_never_spins(tmp_path: Path) -> None:
    """kjs.Puller (the bot service's and the analytics consumer's reader): the consumer deleted
    under its open request (409 Consumer Deleted), then asked again (no consumer: 503, no
    responders): each raises ``JetStreamUnavailable``, so the reader attaches again (and
    re-creates the consumer). Before, it took either status as "that request ended" and asked
    again at once, round after round, and its caller only ever saw a timeout. A request refused
    at once with nothing (here: too many waiting requests, 409) makes the next wait first,
    doubling up to 1 s: a reader never spins on nats-server."""
    async with _pulled(tmp_path, "Y", AckPolicy.EXPLICIT) as (_, nc, psub):
        js = nc.jetstream()
        first, second = await _refused_pulls_back_off(js, kjs.Puller, "Y")
        with pytest.raises(nats_errors.TimeoutError):
            await second.next_batch(0.1)  # the next call waits out the pause too: no request at once
        assert second.requests <= 8
        await _raises_once_deleted(js, kjs.Puller, psub, "Y")
        await js.publish("y.a", b"a")  # a message for the crowded consumer: delivered as before
        got = await first.next_batch(5.0)
        assert [m.data for m in got] == [b"a"]


async def _collect(puller: kjs.OneShotPuller, n: int) -> list[Any]:
    """``n`` messages from ``puller``: what one request brings is handed over as nats-py's read loop
    parses it, so a write of several messages read in two turns comes as two batches."""
    out: list[Any] = []
    while len(out) < n:
        out += await puller.next_batch(5.0)
    return out


async def test_one_shot_puller_brings_what_is_pending_in_one_request_and_waits_for_a_quiet_stream(
    tmp_path: Path,
) -> None:
    """kjs.OneShotPuller: messages appended while no request is open wait in the stream and come
    in one batch, on one request (nats-server ends it with a 408 once they are delivered); on a
    quiet stream the request waits in nats-server and the next message comes as soon as it is
    appended; ``delay`` holds the next request back, so what is appended meanwhile joins its
    batch. Every message once, in order."""
    async with _pulled(tmp_path, "O", AckPolicy.EXPLICIT) as (_, nc, psub):
        js = nc.jetstream()
        puller = kjs.OneShotPuller(psub, 64, expires=5.0)
        for i in range(5):
            await js.publish(f"o.{i}", str(i).encode())
        got = await _collect(puller, 5)
        assert [m.data for m in got] == [b"0", b"1", b"2", b"3", b"4"]
        assert puller.requests == 1, "what was pending came on one request"
        assert puller.waited < 5.0
        waiting = asyncio.create_task(puller.next_batch(5.0))
        await _until(lambda: puller.requests == 2, "the next request (the last one ended)")
        assert not waiting.done(), "nothing pending: the request waits in nats-server"
        await js.publish("o.5", b"5")
        got += await asyncio.wait_for(waiting, 5.0)
        assert [m.data for m in got[5:]] == [b"5"] and puller.requests == 2
        later = asyncio.create_task(puller.next_batch(5.0, delay=0.5))
        for i in range(6, 9):  # appended during the delay: no request open, they wait
            await js.publish(f"o.{i}", str(i).encode())
        got += await asyncio.wait_for(later, 5.0)
        got += await _collect(puller, 9 - len(got))  # (the rest of that one request's write)
        assert [m.data for m in got[6:]] == [b"6", b"7", b"8"] and puller.requests == 3
        for i in range(9, 19):  # more pending than a batch: a request ends with its batch (no status)
            await js.publish(f"o.{i}", str(i).encode())
        small = kjs.OneShotPuller(psub, 4, expires=5.0)
        while len(got) < 19:
            batch = await small.next_batch(1.0)
            assert len(batch) <= 4, "a batch never holds more than the request asked for"
            got += batch
        assert [m.data for m in got[9:]] == [str(i).encode() for i in range(9, 19)]
        assert small.requests == 3, "a request that delivered its whole batch is over: the next asks at once"
        for m in got:
            await m.ack()
        async with asyncio.timeout(5):
            while (info := await js.consumer_info("O", "d")).num_ack_pending or info.num_pending:
                await asyncio.sleep(0.02)
        assert info.delivered.stream_seq == 19 and info.num_redelivered == 0, "each once"


async def test_one_shot_puller_asks_again_after_a_server_restart_forgot_its_request(tmp_path: Path) -> None:
    """nats-server killed while a request of the OneShotPuller's waits (the restarted server
    forgets it without a word): once the request's expiry and grace have passed it is taken for
    forgotten and another is sent, which brings what was appended after the restart."""
    async with _pulled(tmp_path, "F", AckPolicy.EXPLICIT) as (nats, nc, psub):
        puller = kjs.OneShotPuller(psub, 8, expires=0.5)
        puller.GRACE = 0.2
        with pytest.raises(nats_errors.TimeoutError):
            await puller.next_batch(0.1)  # a request waits, nothing delivered
        assert puller.requests == 1
        await _restart(nats, nc)
        await _publish_once_back(nc, "f.a", b"a")
        got = await puller.next_batch(10)
        assert [m.data for m in got] == [b"a"]
        assert puller.requests == 2, "one more request, once the first was taken for forgotten"


async def test_one_shot_puller_raises_for_a_deleted_consumer_and_never_spins(tmp_path: Path) -> None:
    """The consumer deleted under a waiting request (409 Consumer Deleted) and asked again (no
    consumer: 503, no responders): each raises ``JetStreamUnavailable``, so the reader attaches
    again. A request refused at once with nothing (here: too many waiting requests, 409) makes
    the next wait first, doubling: a reader never spins on nats-server."""
    async with _pulled(tmp_path, "X", AckPolicy.EXPLICIT) as (_, nc, psub):
        js = nc.jetstream()
        first, second = await _refused_pulls_back_off(js, kjs.OneShotPuller, "X")
        await _raises_once_deleted(js, kjs.OneShotPuller, psub, "X")


async def test_send_publish_puts_the_bytes_nats_py_would_and_checks_alike(tmp_path: Path) -> None:
    """kjs.send_publish (the Publisher's publish): the very command nats-py's ``publish`` puts on
    the connection's buffer, headers included (names and values stripped, an empty name left out,
    line breaks in a value sent as spaces), and the same errors for what nats-py refuses; a
    subscriber reads the same message either way."""
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "t")
    try:
        cases: list[tuple[str, bytes, str, dict[str, str] | None]] = [
            ("t.a", b"data", "_INBOX.x.1", {"Nats-Msg-Id": "g1-2", "Court-Seq": "2"}),
            ("t.b", b"", "", None),
            ("t.c", b"x" * 300, "r.1", {" Spaced ": " v ", "": "dropped", "Line": "a\r\nb"}),
            ("t.d", b"y", "r.2", {}),
        ]
        sub = await nc.subscribe("t.*")
        for subject, data, reply, headers in cases:
            before = len(nc._pending)
            await nc.publish(subject, data, reply=reply, headers=headers)
            theirs = nc._pending[before:]
            before = len(nc._pending)
            await kjs.send_publish(nc, subject, data, reply, headers)
            assert nc._pending[before:] == theirs, f"the same bytes for {subject}"
            a, b = await sub.next_msg(5), await sub.next_msg(5)
            assert (a.subject, a.reply, a.data, a.headers) == (b.subject, b.reply, b.data, b.headers)
            if subject == "t.c":
                assert b.headers == {"Spaced": "v", "Line": "a  b"}
        for bad_subject in ("t. x", "t.\r\nPUB x 1", ""):
            with pytest.raises(nats_errors.BadSubjectError):
                await kjs.send_publish(nc, bad_subject, b"", "r", None)
        with pytest.raises(nats_errors.BadSubjectError):
            await kjs.send_publish(nc, "t.a", b"", "r 1", None)
        with pytest.raises(nats_errors.BadHeaderError):
            await kjs.send_publish(nc, "t.a", b"", "r", {"No:colons": "v"})
        with pytest.raises(nats_errors.MaxPayloadError):
            await kjs.send_publish(nc, "t.a", b"x" * (nc.max_payload + 1), "r", None)
    finally:
        await nc.close()
        nats.stop()
    with pytest.raises(nats_errors.ConnectionClosedError):
        await kjs.send_publish(nc, "t.a", b"", "r", None)


def test_stream_seq_and_delivery_count_read_the_reply_as_nats_py_metadata_does() -> None:
    """kjs.stream_seq and kjs.delivery_count: the stream sequence and delivery count nats-py's
    ``msg.metadata`` reads, from either form of JetStream's ack subject, and the same error for a
    message that has none."""
    from nats.aio.msg import Msg

    replies = [
        "$JS.ACK.COURT_GAMES_0.court-projector.1.12345.12000.1733425000123456789.17",
        "$JS.ACK.hub.ACCHASH.COURT_GAMES_0.court-projector.2.777.700.1733425000123456789.0.rnd",
        "$JS.ACK._.ACCHASH.S.c.1.9.8.1733425000123456789.3",  # the 11-token form (no random token)
    ]
    for reply in replies:
        m = Msg(None, subject="court.games.0.g.m", reply=reply)  # type: ignore[arg-type]
        assert kjs.stream_seq(m) == m.metadata.sequence.stream
        assert kjs.delivery_count(m) == m.metadata.num_delivered
    for reply in ("", "_INBOX.abc.1", "$JS.ACK.too.short"):
        for read in (kjs.stream_seq, kjs.delivery_count):
            with pytest.raises(nats_errors.NotJSMessageError):
                read(Msg(None, subject="x", reply=reply))  # type: ignore[arg-type]


def test_parse_header_lines_reads_every_line_as_nats_py_does() -> None:
    """kjs.parse_header_lines (set on every connection kjs.connect makes): the names and values
    nats-py's own ``_parse_header_lines`` reads, for every ASCII character in a name and a value,
    and for the lines it skips (no colon, a non-ASCII name, whitespace inside a name)."""
    from nats.aio.client import Client

    theirs = Client._parse_header_lines
    blocks = [
        b"Nats-Expected-Last-Subject-Sequence: 12\r\nNats-Expected-Last-Subject: court.games.0.g.*\r\n"
        b"Court-Seq: 3\r\n\r\n",
        b"A:b\r\nC:\tpadded \t \r\n D :e\r\nno colon\r\n\r\n:empty name\r\nX: a:b: c\r\n",
        b"Caf\xc3\xa9: v\r\nK: caf\xc3\xa9\r\nBad: \xff\xfe\r\nDup: 1\r\nDup: 2\r\n\r\n",
        b"",
        b"\r\n\r\n",
    ]
    for c in range(128):
        ch = bytes([c])
        blocks.append(b"N" + ch + b"ame: v" + ch + b"x\r\n")
        blocks.append(ch + b"Name: " + ch + b"\r\n")
    for raw in blocks:
        assert kjs.parse_header_lines(raw) == theirs(raw), raw


async def test_a_connection_reads_headers_with_parse_header_lines(tmp_path: Path) -> None:
    """A connection kjs.connect makes parses a message's headers with kjs.parse_header_lines, and
    a subscriber reads them as sent."""
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "t")
    try:
        assert nc._parse_header_lines is kjs.parse_header_lines
        sub = await nc.subscribe("h.x")
        await nc.publish("h.x", b"d", headers={"Court-Seq": "7", "Nats-Msg-Id": "g-7"})
        msg = await sub.next_msg(5)
        assert msg.headers == {"Court-Seq": "7", "Nats-Msg-Id": "g-7"}
    finally:
        await nc.close()
        nats.stop()


async def test_a_publish_sent_now_is_written_at_once_and_kept_while_disconnected(tmp_path: Path) -> None:
    """kjs.send_publish(now=True) (the rules service's append): the connection's buffer, a lazy
    publish queued before it first, is on the socket when the call returns, without waking
    nats-py's flusher; a subscriber gets both, in order. While the connection is down the publish
    stays in the buffer (as without ``now``) and leaves once it is back."""
    nats = BinaryNats(tmp_path / "nats")
    nats.start()
    nc = await kjs.connect(nats.url, "t")
    try:
        sub = await nc.subscribe("n.*")
        await nc.flush()
        kjs.LazyAcks(nc).publish("n.lazy", b"first")  # waits on the buffer for the next write
        await kjs.send_publish(nc, "n.now", b"second", "", {"Court-Seq": "2"}, now=True)
        assert nc._pending == [] and nc._pending_data_size == 0, "written before the call returned"
        assert nc._flush_queue is not None and nc._flush_queue.empty(), "the flusher was not woken"
        a, b = await sub.next_msg(5), await sub.next_msg(5)
        assert (a.subject, a.data) == ("n.lazy", b"first")
        assert (b.subject, b.data, b.headers) == ("n.now", b"second", {"Court-Seq": "2"})

        await asyncio.to_thread(nats.stop)
        async with asyncio.timeout(10):
            while nc.is_connected:
                await asyncio.sleep(0.02)
        await kjs.send_publish(nc, "n.now", b"third", "", None, now=True)
        assert nc._pending and nc._pending[-1].endswith(b"third\r\n"), "kept for the reconnect"
        await asyncio.to_thread(nats.start)
        async with asyncio.timeout(20):
            while not nc.is_connected:
                await asyncio.sleep(0.05)
        c = await sub.next_msg(10)
        assert (c.subject, c.data) == ("n.now", b"third")
    finally:
        await nc.close()
        nats.stop()
