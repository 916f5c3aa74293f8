"""The engines' view dicts written straight as the wire bytes of their typed messages.

``court_contract.typed.view_part_kwargs`` turns a view (or part of one) into the constructor
arguments of its ``court.games.v1`` message, which protobuf then builds and serializes: make
bench's in-process figures put that at about 15 us of the 23 us a position's shared part costs
(kwargs 4.6, construction 8.4, serialization 2.1). The messages of the views hold only int32,
bool, string and message fields, under the conventions of protos/court/games/v1/common.proto
(``*List`` and ``Nullable*`` wrappers, ``omitted_when_unset``, one case per game), so their bytes
are written here directly, by an encoder compiled per message from its descriptor (as
``typed._Plan`` compiles its converters), with the encodings of recurring values (card names,
phases, small numbers) memoised.

It accepts exactly the dicts the converter accepts when they are made of plain values (``int``,
``bool``, ``str``, ``dict``, ``list``/``tuple``); anything else (a missing or extra key, a value
of another type, a number out of range) raises ``Unsupported`` and the caller takes the
converter's path, which builds the same message or raises the ``TypedError`` that names the
field. The bytes parse to the message the converter builds (tests/rules/test_viewwire.py: random
games of every game, every seat and the spectator).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from court_contract import typed
from court_kit.structs import SMALL_VARINTS, int64_varint, varint
from court_proto.court.games.v1 import common_pb2, views_pb2
from google.protobuf.descriptor import FieldDescriptor

Encoder = Callable[[Any, str], bytes]  # (JSON value, game) -> the message's bytes (no tag, no length)


class Unsupported(Exception):
    """A value this encoder does not write (the converter's path takes it, or names the error)."""


_MEMO_LIMIT = 4096  # encodings kept per string field (card names, phases: a few dozen in practice)


def _int32(v: Any) -> bytes:
    """An int32's varint (negative: ten bytes, as protobuf writes them)."""
    if v.__class__ is not int or not -0x80000000 <= v <= 0x7FFFFFFF:
        raise Unsupported
    if 0 <= v < 0x80:
        return SMALL_VARINTS[v]
    return int64_varint(v)


def _bool(v: Any) -> bytes:
    if v is True:
        return b"\x01"
    if v is False:
        return b"\x00"
    raise Unsupported


def _string(memo: dict[str, bytes], tag: bytes, v: Any, keep_empty: bool) -> bytes:
    """A string field, tag and length included (an implicit field's empty string: nothing)."""
    if v.__class__ is not str:
        raise Unsupported
    raw = v.encode()
    b = tag + varint(len(raw)) + raw if raw or keep_empty else b""
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[v] = b
    return b


def _seq(v: Any) -> Any:
    if v.__class__ is not list and v.__class__ is not tuple:
        raise Unsupported
    return v


def _tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


_ENCODERS: dict[tuple[str, frozenset[str] | None, bool], Any] = {}


def _message_encoder(desc: Any, only: frozenset[str] | None = None, diff: bool = False) -> Any:
    """The encoder of a message given as a dict (``only``: of the fields of these names, as
    ``typed._Plan``'s part plans). ``diff``: it takes a third argument, the list of each field's
    last (value, bytes), and reuses the bytes of a field whose value equals the last one's."""
    key = (desc.full_name, only, diff)
    enc = _ENCODERS.get(key)
    if enc is None:
        # a message that holds itself, however deep, calls this until it is compiled (none does today)
        _ENCODERS[key] = lambda *args: _ENCODERS[key](*args)
        fields = [fd for fd in desc.fields if only is None or fd.name in only]
        try:
            enc = _ENCODERS[key] = _compile(desc, fields, diff=diff)
        except BaseException:
            del _ENCODERS[key]
            raise
    return enc


def _value_encoder(desc: Any) -> Encoder:
    """The encoder of a message field's JSON value, by the conventions ``typed._value_converters``
    follows: a list wrapper is its list, a ``Nullable*`` its value or null, a per-game oneof the
    game's message, any other message its dict."""
    fields = desc.fields
    if desc.full_name in typed._LIST_WRAPPERS or (
        desc.name.endswith("List") and len(fields) == 1 and fields[0].is_repeated
    ):
        enc: Encoder = _compile(desc, fields[:1], wrapper="list")
        return enc
    if desc.name.startswith("Nullable"):
        enc = _compile(desc, fields[:1], wrapper="nullable")
        return enc
    if desc.oneofs and desc.oneofs[0].name == "game" and len(fields) == len(typed.GAMES):
        cases = {fd.name: (_tag(fd.number, 2), _message_encoder(fd.message_type)) for fd in fields}

        def per_game(v: Any, game: str) -> bytes:
            tag, enc = cases[game]
            b: bytes = enc(v, game)
            return tag + varint(len(b)) + b

        return per_game
    enc = _message_encoder(desc)
    return enc


def _value_lines(i: int, fd: Any, env: dict[str, Any]) -> list[str]:
    """The lines that write field ``fd``'s value ``v`` (not None) to ``out``."""
    repeated = fd.is_repeated
    presence = not repeated and fd.has_presence
    ftype = fd.type
    if ftype == FieldDescriptor.TYPE_MESSAGE:
        env[f"E{i}"] = _value_encoder(fd.message_type)
        env[f"T{i}"] = _tag(fd.number, 2)
        if repeated:
            return [
                "for x in _seq(v):",
                f"    b = E{i}(x, game)",
                f"    out.append(T{i} + varint(len(b)) + b)",
            ]
        return [f"b = E{i}(v, game)", f"out.append(T{i} + varint(len(b)) + b)"]
    if ftype == FieldDescriptor.TYPE_INT32:
        if repeated:  # packed, as protobuf writes proto3's repeated scalars
            env[f"T{i}"] = _tag(fd.number, 2)
            return [
                "if _seq(v):",
                "    p = b''.join([_B[x] if x.__class__ is int and 0 <= x < 128 else _int32(x) for x in v])",
                f"    out.append(T{i} + varint(len(p)) + p)",
            ]
        env[f"T{i}"] = _tag(fd.number, 0)
        if presence:
            return [f"out.append(T{i} + _int32(v))"]
        return [
            "if v.__class__ is not int:",
            "    raise Unsupported",
            "if v:",
            f"    out.append(T{i} + (_B[v] if 0 < v < 128 else _int32(v)))",
        ]
    if ftype == FieldDescriptor.TYPE_BOOL:
        if repeated:
            env[f"T{i}"] = _tag(fd.number, 2)
            return [
                "if _seq(v):",
                "    p = b''.join([_bool(x) for x in v])",
                f"    out.append(T{i} + varint(len(p)) + p)",
            ]
        env[f"T{i}"] = _tag(fd.number, 0) + b"\x01"
        env[f"F{i}"] = _tag(fd.number, 0) + b"\x00"
        lines = ["if v is True:", f"    out.append(T{i})", "elif v is not False:", "    raise Unsupported"]
        return lines + (["else:", f"    out.append(F{i})"] if presence else [])
    if ftype == FieldDescriptor.TYPE_STRING:
        env[f"T{i}"] = _tag(fd.number, 2)
        env[f"S{i}"] = {}
        if repeated:
            return [f"out.extend([S{i}.get(x) or _string(S{i}, T{i}, x, True) for x in _seq(v)])"]
        return [
            f"b = S{i}.get(v)",
            f"out.append(_string(S{i}, T{i}, v, {presence}) if b is None else b)",
        ]
    raise NotImplementedError(f"{fd.containing_type.full_name}.{fd.name}: field type {ftype}")


def _compile(desc: Any, fields: list[Any], wrapper: str = "", diff: bool = False) -> Any:
    """Python source per message: one straight run of lookups and appends (``wrapper``: the
    message of a list wrapper or a ``Nullable*``, whose JSON value is its one field's; ``diff``:
    see ``_message_encoder``). A dict is checked as the converter checks it: every key it must
    have, none it has no field for, no null where the field takes none."""
    env: dict[str, Any] = {
        "Unsupported": Unsupported,
        "_B": SMALL_VARINTS,
        "_int32": _int32,
        "varint": varint,
        "_bool": _bool,
        "_string": _string,
        "_seq": _seq,
    }
    src = [f"def enc(d, game{', last' if diff else ''}):", "    out = []"]
    if wrapper:
        fd = fields[0]
        src.append("    v = _seq(d)" if wrapper == "list" else "    v = d")
        if wrapper == "nullable":
            src += ["    if v is None:", "        return b''"]
        src += ["    " + line for line in _value_lines(0, fd, env)]
        src.append("    return b''.join(out)")
        return _exec(desc, src, env)
    required = 0
    omitted_any = False
    for i, fd in enumerate(fields):
        name = fd.name
        if name == "secret":
            raise NotImplementedError(f"{desc.full_name}: a secret part (events only)")
        msg = fd.message_type
        null_wrapper = msg is not None and msg.name.startswith("Nullable")
        body = _value_lines(i, fd, env)
        if null_wrapper:
            pass  # None is the wrapper's null: written as an empty message
        elif not fd.is_repeated and fd.has_presence:
            body = ["if v is not None:", *("    " + line for line in body)]
        else:
            body = ["if v is None:", "    raise Unsupported", *body]
        if diff and fd.is_repeated and msg is not None:  # element by element: one changes at a time
            body = [
                f"c = last[{i}]",
                "if c is not None and c[0] == v:",
                "    out.append(c[1])",
                "else:",
                "    pe = c[2] if c is not None else ()",
                "    es = []",
                "    for j, x in enumerate(_seq(v)):",
                "        if j < len(pe) and pe[j][0] == x:",
                "            es.append(pe[j])",
                "        else:",
                f"            b = E{i}(x, game)",
                f"            es.append((x, T{i} + varint(len(b)) + b))",
                "    b = b''.join([e[1] for e in es])",
                "    out.append(b)",
                f"    last[{i}] = (v, b, es)",
            ]
        elif diff:
            body = [
                f"c = last[{i}]",
                "if c is not None and c[0] == v:",
                "    out.append(c[1])",
                "else:",
                "    m = len(out)",
                *("    " + line for line in body),
                "    b = b''.join(out[m:])",
                "    del out[m:]",
                "    out.append(b)",
                f"    last[{i}] = (v, b, None)",
            ]
        if fd.GetOptions().Extensions[common_pb2.omitted_when_unset]:
            omitted_any = True
            src += [f"    if {name!r} in d:", "        n += 1", f"        v = d[{name!r}]"]
            src += ["        " + line for line in body]
        else:
            required += 1
            src.append(f"    v = d[{name!r}]")
            src += ["    " + line for line in body]
    if omitted_any:
        src.insert(2, "    n = 0")
    src.append(f"    if len(d) != {required}{' + n' if omitted_any else ''}:")
    src.append("        raise Unsupported")
    src.append("    return b''.join(out)")
    return _exec(desc, src, env)


def _exec(desc: Any, src: list[str], env: dict[str, Any]) -> Any:
    exec(compile("\n".join(src), f"<court_rules.viewwire {desc.full_name}>", "exec"), env)
    return env["enc"]


_VIEW_CASES = {fd.name: fd.number for fd in views_pb2.View.DESCRIPTOR.fields}


def view_part(game: str, part: Mapping[str, Any], keys: frozenset[str], last: list[Any]) -> bytes:
    """``part`` of ``game``'s view (the fields named ``keys``, as ``typed.view_part_kwargs``) as
    the bytes of a ``court.games.v1.View`` holding it. ``last``: the part's fields' last values
    and bytes (``new_last``), kept by the caller from one position to the next: a field whose
    value equals its last one's (``==``: most of them, move to move) is not written again, its
    last bytes are (they encode an equal value; an engine does not change a field's type from one
    position to the next, so 1 and True, which compare equal, do not meet in one field).
    ``Unsupported``: take the converter's path."""
    enc = _PARTS.get((game, keys))
    if enc is None:
        number = _VIEW_CASES.get(game)
        if number is None:
            raise Unsupported
        try:
            enc = _message_encoder(
                views_pb2.View.DESCRIPTOR.fields_by_name[game].message_type, keys, diff=True
            )
        except NotImplementedError:
            enc = _unsupported  # a message this module does not write: the converter's, always
        _PARTS[(game, keys)] = enc
        _TAGS[game] = _tag(number, 2)
    try:
        b: bytes = enc(part, game, last)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise Unsupported from exc
    return _TAGS[game] + varint(len(b)) + b


_PARTS: dict[tuple[str, frozenset[str]], Any] = {}


def _unsupported(*args: Any) -> bytes:
    raise Unsupported


_TAGS: dict[str, bytes] = {}


def new_last(keys: frozenset[str]) -> list[Any]:
    """An empty ``last`` for ``view_part``: no field written yet."""
    return [None] * len(keys)
