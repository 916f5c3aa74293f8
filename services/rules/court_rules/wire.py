"""Protobuf's wire format, for messages the service writes as bytes from parts it has serialized
already (``court_rules.views``: answers and updates; ``court_rules.store``: a game's archive)."""

from __future__ import annotations

_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    if n < 0x80:  # the tags, short games' seqs: one byte
        return _BYTE[n]
    if n < 0x4000:  # a view's, an event's or a record's length: two
        return bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    """One field of a message, serialized: a varint, or a length-delimited (message) field."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return b"".join((varint(number << 3 | 2), varint(len(value)), value))
