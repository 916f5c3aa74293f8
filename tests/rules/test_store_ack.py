"""The append's wait for its JetStream ack (court_rules.store.wait_ack, AckDeadlines, ack_seq): the ack's bytes when
it comes, TimeoutError when it does not come in time, the caller's cancellation reaching the
future; the stream sequence read from a PubAck as JSON would read it."""

from __future__ import annotations

import asyncio
import json

import pytest
from court_kit.errors import Unavailable
from court_rules.store import TIMER_SLACK, AckDeadlines, GameStore, ack_seq, wait_ack


@pytest.mark.parametrize(
    "ack",
    [
        b'{"stream":"COURT_GAMES_0","seq":42}',
        b'{"stream":"COURT_GAMES_3","seq":1,"domain":"hub"}',
        b'{"stream":"COURT_GAMES_0","seq":18446744073709551615,"duplicate":true}',
        b'{"stream": "S", "seq": 7}',  # spaced: not the server's spelling; read by json
        b'{"domain":"x\\"seq\\":9","stream":"S","seq":5}',  # a quoted "seq": inside a string
    ],
)
def test_ack_seq_reads_what_json_reads(ack: bytes) -> None:
    assert ack_seq(ack) == json.loads(ack)["seq"]


async def test_the_ack_arriving_later_is_returned() -> None:
    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, fut.set_result, b"ack")
    assert await wait_ack(fut, 5.0) == b"ack"


async def test_no_ack_in_time_is_a_timeout_and_the_future_fails() -> None:
    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await wait_ack(fut, 0.02)
    assert fut.done() and isinstance(fut.exception(), TimeoutError)


async def test_a_failed_ack_raises_its_error() -> None:
    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    fut.set_exception(ValueError("refused"))
    with pytest.raises(ValueError, match="refused"):
        await wait_ack(fut, 5.0)


async def test_cancelling_the_caller_cancels_the_wait() -> None:
    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(wait_ack(fut, 5.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert fut.cancelled()


# AckDeadlines: the appends' waits, one timer for all


def _waits(n: int) -> tuple[AckDeadlines, list[asyncio.Future[bytes]]]:
    """A fresh shared timer and ``n`` ack futures of the running loop, none answered yet."""
    loop = asyncio.get_running_loop()
    return AckDeadlines(), [loop.create_future() for _ in range(n)]


async def test_waits_sharing_one_timer_get_their_acks_or_time_out_each_at_its_own_time() -> None:
    """Five waits begun at least 10 ms apart with a 0.1 s timeout: the acked ones return their acks, the
    others fail with TimeoutError (their futures too), none before its own time is up (less the
    loop's timer slack) and each in the order it began; one timer serves them all."""
    loop = asyncio.get_running_loop()
    acks, futs = _waits(5)
    began: list[float] = []
    ended: dict[int, float] = {}

    async def wait(i: int) -> bytes:
        began.append(loop.time())
        try:
            return await acks.wait(futs[i], 0.1)
        finally:
            ended[i] = loop.time()

    tasks = []
    for i in range(5):
        tasks.append(asyncio.ensure_future(wait(i)))
        await asyncio.sleep(0)  # the wait begins
        if i in (1, 3):
            futs[i].set_result(b"ack %d" % i)
        await asyncio.sleep(0.01)  # the next one begins later: a later deadline
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[1] == b"ack 1" and results[3] == b"ack 3"
    for i in (0, 2, 4):
        assert isinstance(results[i], TimeoutError) and isinstance(futs[i].exception(), TimeoutError)
        assert ended[i] - began[i] >= 0.1 - TIMER_SLACK - 0.001
    assert ended[0] <= ended[2] <= ended[4]


async def test_a_cancelled_wait_cancels_its_future_and_the_timer_still_serves_the_others() -> None:
    acks, (first, second) = _waits(2)
    waiting = asyncio.ensure_future(acks.wait(first, 0.05))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert first.cancelled()
    with pytest.raises(TimeoutError):
        await acks.wait(second, 0.05)
    assert isinstance(second.exception(), TimeoutError)


async def test_a_shorter_timeout_than_an_earlier_wait_s_still_ends_in_time() -> None:
    """A wait whose time is up before that of one begun earlier (the store's timeout lowered
    meanwhile, as tests do) still ends at its own time, not the earlier one's."""
    loop = asyncio.get_running_loop()
    acks, (long, short) = _waits(2)
    waiting = asyncio.ensure_future(acks.wait(long, 5.0))
    await asyncio.sleep(0)
    t0 = loop.time()
    with pytest.raises(TimeoutError):
        await acks.wait(short, 0.05)
    assert loop.time() - t0 < 1.0
    long.set_result(b"ack")
    assert await waiting == b"ack"


async def test_a_failed_or_present_ack_is_answered_at_once() -> None:
    acks, (failed, there) = _waits(2)
    failed.set_exception(ValueError("refused"))
    with pytest.raises(ValueError, match="refused"):
        await acks.wait(failed, 5.0)
    there.set_result(b"ack")
    assert await acks.wait(there, 5.0) == b"ack"


class _NoAcks:
    """A publisher whose messages leave but whose acks never come back (a slow or restarting
    nats-server), recording the futures the store gives up on."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.forgotten: list[asyncio.Future[bytes]] = []

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str], *, now: bool = False
    ) -> asyncio.Future[bytes]:
        self.sent.append(subject)
        return asyncio.get_running_loop().create_future()

    def forget(self, futures: list[asyncio.Future[bytes]]) -> None:
        self.forgotten += futures


class _Conn:
    def jetstream(self, timeout: float) -> None:
        return None


async def test_an_append_whose_ack_never_comes_is_unavailable_in_time_and_so_is_the_next() -> None:
    """What a player sees when the log's ack is lost: UNAVAILABLE within the store's timeout,
    saying to retry with the same request id (the move is judged again then: the idempotency by
    request id and the expected sequence make the retry safe); the store stops waiting for that
    ack, and the next append times out in time as well (the shared timer is set again)."""
    store = GameStore(_Conn())  # type: ignore[arg-type]
    store.publisher = publisher = _NoAcks()  # type: ignore[assignment]
    store.timeout = 0.05
    loop = asyncio.get_running_loop()
    for seq in (1, 2):
        t0 = loop.time()
        with pytest.raises(Unavailable, match="retry with the same request id"):
            await store.append("g1", b"record", seq, seq - 1)
        assert 0.05 - TIMER_SLACK - 0.001 <= loop.time() - t0 < 2.0
    assert len(publisher.sent) == 2 and len(publisher.forgotten) == 2
    assert all(isinstance(f.exception(), TimeoutError) for f in publisher.forgotten)
