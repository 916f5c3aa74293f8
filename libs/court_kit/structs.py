"""JSON-like dicts to and from ``google.protobuf.Struct``.

A Struct stores every number as a double; ``to_dict`` gives integral numbers
back as ``int`` (engine views and results hold integers only), so a view read
through gRPC compares equal to the engine's own dict.
"""

from __future__ import annotations

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
