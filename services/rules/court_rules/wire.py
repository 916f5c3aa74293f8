"""Protobuf's wire format, for messages the service writes as bytes from parts it has serialized
already (``court_rules.views``: answers and updates; ``court_rules.store``: a game's archive)."""

from __future__ import annotations

from court_kit.structs import varint


def field(number: int, value: int | bytes) -> bytes:
    """One field of a message, serialized: a varint, or a length-delimited (message) field."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return b"".join((varint(number << 3 | 2), varint(len(value)), value))
