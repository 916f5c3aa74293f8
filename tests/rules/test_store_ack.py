"""The append's wait for its JetStream ack (court_rules.store.wait_ack, ack_seq): the ack's bytes when
it comes, TimeoutError when it does not come in time, the caller's cancellation reaching the
future; the stream sequence read from a PubAck as JSON would read it."""

from __future__ import annotations

import asyncio
import json

import pytest
from court_rules.store import ack_seq, wait_ack


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
