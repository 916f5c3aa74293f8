"""Typed actions (``court.rules.v1.Action``) to and from the canonical JSON of docs/rules/.

The proto is laid out so the conversion is mechanical: the per-game oneof case
is the canonical ``type``, inner field names are the canonical keys. Three
spellings differ: ``pile`` and ``source`` are enums (``PILE_LEFT`` <->
``"left"``), and Court Wars' ``remove`` is a oneof of ``guards: m`` (-> ``m``)
and ``defeat: true`` (-> ``"court"``). The acting ``player`` is not part of a
typed action; ``to_json`` leaves it out unless given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from court_base import quote
from court_games.core import InvalidAction
from court_games.registry import GAME_NAMES
from court_games.registry import GAMES as GAME_INFOS
from court_proto.court.rules.v1 import actions_pb2 as pb
from google.protobuf import descriptor_pool, message_factory

# game -> its action message, named by the game's info (court_games.<game>.info.INFO.action_message)
_GAME_MESSAGES: dict[str, Any] = {
    g.name: message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(g.action_message))
    for g in GAME_INFOS
}
_ENUMS: dict[str, tuple[Any, str]] = {"pile": (pb.Pile, "PILE_"), "source": (pb.DrawSource, "DRAW_SOURCE_")}
_REMOVE_FIELDS = ("guards", "defeat")


def game_of(action: pb.Action) -> str:
    game = action.WhichOneof("game")
    if game is None:
        raise InvalidAction(f"the action names no game: set one of {', '.join(GAME_NAMES)}")
    return game


def to_json(action: pb.Action, player: int | None = None) -> dict[str, Any]:
    """The canonical JSON form of a typed action (``InvalidAction`` when it is empty)."""
    game = game_of(action)
    inner = getattr(action, game)
    kind = inner.WhichOneof("kind")
    if kind is None:
        raise InvalidAction(f"the {game} action sets no action type: one of {', '.join(_kinds(game))}")
    msg = getattr(inner, kind)
    out: dict[str, Any] = {"type": kind}
    if player is not None:
        out["player"] = player
    for fd in msg.DESCRIPTOR.fields:
        name = fd.name
        if name in _REMOVE_FIELDS:
            continue
        value = getattr(msg, name)
        if name in _ENUMS:
            enum, prefix = _ENUMS[name]
            if value:
                if value not in enum.values():  # proto3 enums are open: any int32 arrives
                    raise InvalidAction(f"{name} {value} is not one of {_enum_choices(enum, prefix)}")
                out[name] = enum.Name(value)[len(prefix) :].lower()
        elif fd.is_repeated:
            out[name] = list(value)
        else:
            out[name] = value
    if kind == "attack":
        which = msg.WhichOneof("remove")
        if which == "guards":
            out["remove"] = msg.guards
        elif which == "defeat" and msg.defeat:
            out["remove"] = "court"
    return out


def from_json(game: str, d: Mapping[str, Any]) -> pb.Action:
    """A typed action from canonical JSON (``player`` ignored); ``InvalidAction`` on a bad form."""
    if game not in _GAME_MESSAGES:
        raise InvalidAction(f"unknown game {quote(game)}; games: {', '.join(GAME_NAMES)}")
    if not isinstance(d, Mapping):
        raise InvalidAction(f"an action is a JSON object with a type, got {quote(d)}")
    kind = d.get("type")
    outer = _GAME_MESSAGES[game]
    kinds = _kinds(game)
    if kind is None:
        raise InvalidAction(f'the {game} action has no "type"; types: {", ".join(kinds)}')
    if kind not in kinds:
        raise InvalidAction(f"unknown {game} action type {quote(kind)}; types: {', '.join(kinds)}")
    msg_cls = outer.DESCRIPTOR.fields_by_name[kind].message_type._concrete_class
    fields = msg_cls.DESCRIPTOR.fields_by_name
    values: dict[str, Any] = {}
    for key, value in d.items():
        if key in ("type", "player"):
            continue
        if kind == "attack" and key == "remove":
            if value == "court":
                values["defeat"] = True
            elif isinstance(value, int) and not isinstance(value, bool):
                values["guards"] = value
            else:
                raise InvalidAction(f'remove must be a number of guards or "court", got {quote(value)}')
            continue
        fd = fields.get(key)
        if fd is None or key in _REMOVE_FIELDS:
            raise InvalidAction(f"unknown field {quote(key)} for a {game} {kind} action")
        if key in _ENUMS:
            enum, prefix = _ENUMS[key]
            try:
                values[key] = enum.Value(prefix + str(value).upper())
            except ValueError:
                raise InvalidAction(
                    f"{key} {quote(value)} is not one of {_enum_choices(enum, prefix)}"
                ) from None
        else:
            values[key] = _checked(fd, key, value)
    return pb.Action(**{game: outer(**{kind: msg_cls(**values)})})


def _enum_choices(enum: Any, prefix: str) -> str:
    return ", ".join(n[len(prefix) :].lower() for n in enum.keys()[1:])


def _kinds(game: str) -> list[str]:
    return [f.name for f in _GAME_MESSAGES[game].DESCRIPTOR.oneofs_by_name["kind"].fields]


def _checked(fd: Any, key: str, value: Any) -> Any:
    t = fd.type
    if fd.is_repeated:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise InvalidAction(f"{key} must be a list of cards, got {quote(value)}")
        return list(value)
    if t == fd.TYPE_STRING:
        if not isinstance(value, str):
            raise InvalidAction(f"{key} must be a string, got {quote(value)}")
        return value
    if t == fd.TYPE_BOOL:
        if not isinstance(value, bool):
            raise InvalidAction(f"{key} must be true or false, got {quote(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise InvalidAction(f"{key} must be an integer, got {quote(value)}")
    return value
