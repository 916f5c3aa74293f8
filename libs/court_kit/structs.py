"""JSON-like dicts to and from ``google.protobuf.Struct``.

A Struct stores every number as a double; ``to_dict`` gives integral numbers
back as ``int`` (engine views and results hold integers only), so a view read
through gRPC compares equal to the engine's own dict.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

Struct = struct_pb2.Struct


def to_struct(d: Mapping[str, Any] | None, into: Struct | None = None) -> Struct:
    s = Struct() if into is None else into
    if d:
        s.update(_plain(d))
    return s


def _plain(v: Any) -> Any:
    """Tuples to lists and non-string keys to strings (a Struct's keys are strings)."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def to_dict(s: Struct) -> dict[str, Any]:
    return {k: _value(v) for k, v in s.fields.items()}


def _value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        n = v.number_value
        return int(n) if n.is_integer() and abs(n) < 2**53 else n
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return to_dict(v.struct_value)
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    return None


# ---------------------------------------------------------------------------------------------
# A fast path: JSON-like values straight to Struct wire bytes. Setting a Struct field by field
# through the protobuf API costs a Python call per value; encoding the bytes here and letting
# upb parse them (``Struct.MergeFromString``) is several times cheaper for views and events.

_pack_double = struct.Struct("<d").pack


# the one-byte varints (0 to 127), for writers that inline ``varint``'s first case
SMALL_VARINTS = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    """A non-negative int in protobuf's varint encoding."""
    if n < 0x80:  # tags, small counts and seqs, short strings' lengths: one byte
        return SMALL_VARINTS[n]
    if n < 0x4000:  # a view's, an event's or a record's length: two
        return bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def int64_varint(n: int) -> bytes:
    """An int64 (or int32) field's value, negative ones in ten bytes as protobuf writes them."""
    return varint(n if n >= 0 else n + (1 << 64))


def timestamp_bytes(ms: int) -> bytes:
    """A ``google.protobuf.Timestamp`` of ``ms`` milliseconds since the epoch, serialized (as
    ``Timestamp.FromMilliseconds`` then ``SerializeToString``: fields at zero left out)."""
    seconds, nanos = ms // 1000, ms % 1000 * 1_000_000
    return (b"\x08" + int64_varint(seconds) if seconds else b"") + (b"\x10" + varint(nanos) if nanos else b"")


def field(number: int, value: int | bytes) -> bytes:
    """One field of a message, serialized: a varint, or a length-delimited (message) field (for
    messages written as bytes from parts serialized already: court_rules' answers, updates and
    archive, court_contract.records' move records)."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return b"".join((varint(number << 3 | 2), varint(len(value)), value))


_TRUE, _FALSE, _NULL = b"\x20\x01", b"\x20\x00", b"\x08\x00"
# Values and keys repeat endlessly in views and events (card names, small counts, field names):
# their encodings are memoised, bounded so odd inputs cannot grow the tables without limit.
_STR: dict[str, bytes] = {}
_NUM: dict[Any, bytes] = {}
_KEY: dict[str, bytes] = {}
_MEMO_LIMIT = 50_000
_SHORT = 32


def _str_value(v: str) -> bytes:
    b = _STR.get(v)
    if b is None:
        raw = v.encode()
        b = b"\x1a" + varint(len(raw)) + raw  # string_value
        if len(v) <= _SHORT and len(_STR) < _MEMO_LIMIT:
            _STR[v] = b
    return b


def _value_bytes(v: Any) -> bytes:
    t = type(v)
    if t is str:
        return _str_value(v)
    if t is int:
        b = _NUM.get(v)
        if b is None:
            b = b"\x11" + _pack_double(v)  # number_value
            if -1024 <= v <= 65536 and len(_NUM) < _MEMO_LIMIT:
                _NUM[v] = b
        return b
    if t is bool:
        return _TRUE if v else _FALSE  # bool_value
    if t is dict:
        inner = struct_bytes(v)
        n = len(inner)
        return (b"\x2a" + bytes((n,)) if n < 0x80 else b"\x2a" + varint(n)) + inner  # struct_value
    if t is list or t is tuple:
        parts = []
        for x in v:
            b = _value_bytes(x)
            n = len(b)
            parts.append((b"\x0a" + bytes((n,)) if n < 0x80 else b"\x0a" + varint(n)) + b)  # values
        inner = b"".join(parts)
        n = len(inner)
        return (b"\x32" + bytes((n,)) if n < 0x80 else b"\x32" + varint(n)) + inner  # list_value
    if t is float:
        return b"\x11" + _pack_double(v)
    if v is None:
        return _NULL
    if isinstance(v, bool):
        return _TRUE if v else _FALSE
    if isinstance(v, int | float):
        return b"\x11" + _pack_double(float(v))
    if isinstance(v, str):
        return _str_value(str(v))
    if isinstance(v, Mapping):
        return _value_bytes(dict(v))
    if isinstance(v, list | tuple):
        return _value_bytes(list(v))
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def _key(k: Any) -> bytes:
    b = _KEY.get(k)
    if b is None:
        raw = (k if type(k) is str else str(k)).encode()
        b = b"\x0a" + varint(len(raw)) + raw + b"\x12"  # map entry: key, then the value's tag
        if len(_KEY) < _MEMO_LIMIT:
            _KEY[k] = b
    return b


def struct_bytes(d: Mapping[Any, Any]) -> bytes:
    """The serialized ``Struct`` of a JSON-like mapping (keys become strings, tuples lists)."""
    parts = []
    for k, v in d.items():
        vb = _value_bytes(v)
        nv = len(vb)
        entry = _key(k) + (bytes((nv,)) if nv < 0x80 else varint(nv)) + vb
        ne = len(entry)
        parts.append((b"\x0a" + bytes((ne,)) if ne < 0x80 else b"\x0a" + varint(ne)) + entry)  # fields
    return b"".join(parts)


def fill_struct(s: Struct, d: Mapping[str, Any] | None) -> Struct:
    """``to_struct`` via ``struct_bytes``: the same message, faster."""
    if d:
        s.MergeFromString(struct_bytes(d))
    return s
