"""Typed game messages (``court.games.v1``) to and from the engines' JSON forms.

The protos follow the conventions written at the top of protos/court/games/v1/common.proto
(field name = JSON key; ``optional`` = nullable unless ``omitted_when_unset``; the ``*List`` and
``NullableInt`` wrappers for nested lists and nulls in lists; ``secret`` = the owner-only part),
so one converter per message, compiled once from its descriptor, does every message:

* ``event_to_proto(game, event)``: an engine/service event, either a ``court_games.core.Event``
  (its ``data`` fill the public fields, its ``private`` part the ``secret``, ``owner`` is the
  owner or -1 for "nobody") or one of its dict forms: ``Event.full()`` (with ``"owner"``),
  ``Event.for_seat(None)`` (public) or ``Event.for_seat(seat)`` (private keys merged, no owner).
* ``event_from_proto(msg)``: the dict form the message holds: ``full()`` when ``owner`` is set,
  otherwise the public or owner's form. ``event_from_proto(event_to_proto(g, d)) == d`` for
  every form of every event (tests/contract/test_typed_events.py plays random games of all four games).
* ``public_event(msg)`` / ``event_for_seat(msg, seat)``: the projections of a full-form message
  (what ``Event.for_seat`` does to dicts), without going through dicts.
* ``options_to_proto`` / ``options_from_proto``, ``result_to_proto`` / ``result_from_proto``: the
  per-game ``GameOptions`` and ``GameResult`` oneofs.

Conversion errors (a missing or unknown key, a value of the wrong type) raise ``TypedError``
naming the message and the key: they mean an engine and its proto disagree.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from court_games.core import Event as EngineEvent
from court_games.core import InvalidOptions
from court_games.info import GameInfo
from court_games.registry import GAME_NAMES
from court_games.registry import GAMES as GAME_INFOS
from court_proto.court.games.v1 import common_pb2, events_pb2, views_pb2
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

Descriptor = Any  # google.protobuf.descriptor.Descriptor (upb's has no stubs mypy can follow)
FieldDescriptor = Any

Event = events_pb2.Event
GameOptions = events_pb2.GameOptions
GameResult = events_pb2.GameResult

GAMES = GAME_NAMES
NOBODY = -1  # Event.owner of a secret no player may see
SERVICE_KINDS = {
    "TurnStarted": "turn_started",
    "TurnTimedOut": "turn_timed_out",
    "SeatAway": "seat_away",
    "SeatReturned": "seat_returned",
}
_SERVICE_GAME_ENDED = "game_ended"  # the service's GameEnded {result, winners}; engines' have their own


class TypedError(ValueError):
    """A value that does not fit its typed message (an engine and its proto disagree)."""


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(snake: str) -> str:
    return "".join(p.capitalize() for p in snake.split("_"))


# ------------------------------------------------------------------------------- the kinds

_EVENT_FIELDS = Event.DESCRIPTOR.oneofs_by_name["kind"].fields


def _kinds(infos: Sequence[GameInfo]) -> dict[tuple[str, str], str]:
    """(game, "CardPlayed") -> its oneof case "hearts_card_played": each event kind of a game's
    facts (court_games.<game>.info) is the case <game>_<kind in snake case>."""
    return {(g.name, t): f"{g.name}_{_snake(t)}" for g in infos for t in g.event_kinds}


def _types(kinds: Mapping[tuple[str, str], str]) -> dict[str, str]:
    """oneof case -> the event's type ("CardPlayed"), the service's kinds included."""
    out = {case: t for (_, t), case in kinds.items()}
    out.update((k, _camel(k)) for k in (*SERVICE_KINDS.values(), _SERVICE_GAME_ENDED))
    return out


KIND_OF = _kinds(GAME_INFOS)
TYPE_OF = _types(KIND_OF)


def contract_mismatches(infos: Sequence[GameInfo] = GAME_INFOS) -> list[str]:
    """Where the games' facts and the generated messages disagree: an event kind with no case in
    ``court.games.v1.Event`` (or one holding another message), a case no game names, an options
    message that is not the one a game's facts name. Empty, or this module refuses to load."""
    kinds = _kinds(infos)
    types = _types(kinds)
    cases: dict[str, FieldDescriptor] = {fd.name: fd for fd in _EVENT_FIELDS}
    out = [f"no case {c} in court.games.v1.Event for {t}" for c, t in types.items() if c not in cases]
    out += [f"court.games.v1.Event case {c} is no game's event kind" for c in cases if c not in types]
    fd: FieldDescriptor
    for (game, type_), case in kinds.items():
        fd = cases.get(case)
        if fd is not None and fd.message_type.name != _camel(game) + type_:
            out.append(
                f"court.games.v1.Event case {case} holds {fd.message_type.name}, not {_camel(game)}{type_}"
            )
    for g in infos:
        fd = GameOptions.DESCRIPTOR.fields_by_name.get(g.name)
        if fd is None or fd.message_type.full_name != g.options_message:
            out.append(f"GameOptions has no case {g.name} holding {g.options_message}")
    return out


_MISMATCHES = contract_mismatches()
if _MISMATCHES:
    raise TypedError(
        "the games' facts (court_games.<game>.info) and protos/court/games/v1 disagree: "
        + "; ".join(_MISMATCHES)
    )


# ------------------------------------------------------------------------------- converters

_LIST_WRAPPERS = {
    common_pb2.CardList.DESCRIPTOR.full_name: "cards",
    common_pb2.StringList.DESCRIPTOR.full_name: "values",
    common_pb2.IntList.DESCRIPTOR.full_name: "values",
    common_pb2.BoolList.DESCRIPTOR.full_name: "values",
}
_PER_GAME = {events_pb2.GameOptions.DESCRIPTOR.full_name, events_pb2.GameResult.DESCRIPTOR.full_name}
_OMITTED = common_pb2.omitted_when_unset

ToProto = Callable[[Any, str], Any]  # (JSON value, game) -> a value protobuf accepts
FromProto = Callable[[Any], Any]  # field value -> JSON value


class _Field:
    __slots__ = ("name", "omitted", "nullable", "to", "frm", "repeated", "null_wrapper")

    def __init__(self, fd: FieldDescriptor):
        self.name = fd.name
        self.repeated = fd.is_repeated
        self.omitted = bool(fd.GetOptions().Extensions[_OMITTED])
        self.nullable = not self.repeated and fd.has_presence
        self.to: ToProto | None = None
        self.frm: FromProto | None = None
        self.null_wrapper = fd.message_type is not None and fd.message_type.name.startswith("Nullable")
        if fd.message_type is not None:
            self.to, self.frm = _value_converters(fd.message_type, nested=True)


class _Plan:
    """How one message converts: its public fields and its ``secret`` part.

    ``kwargs`` and ``fill`` are compiled per message (Python source built from the descriptor),
    so a conversion is a straight run of dict lookups and attribute reads; a value that does not
    fit is diagnosed afterwards by the field-by-field ``_slow_kwargs``.
    """

    __slots__ = ("cls", "name", "fields", "secret", "secret_keys", "_kw", "fill")

    def __init__(self, desc: Descriptor, only: frozenset[str] | None = None):
        """``only``: a plan for part of the message, the fields of these names (their keys are
        then all a dict may hold; see ``view_part_kwargs``)."""
        self.cls = desc._concrete_class
        self.name = desc.full_name
        self.fields: list[_Field] = []
        self.secret: _Plan | None = None
        for fd in desc.fields:
            if only is not None and fd.name not in only:
                continue
            if fd.name == "secret":
                self.secret = _plan(fd.message_type)
            else:
                self.fields.append(_Field(fd))
        self.secret_keys = frozenset(f.name for f in self.secret.fields) if self.secret else frozenset()
        # Compiled on first use, not here: importing this module builds a plan for every message
        # (all event kinds of all games), and compiling them all took ~45 ms of CPU in each process
        # (each service start, each test worker), most of them never used by that process. The
        # source is built from the descriptors alone, so a first use compiles what import would have.
        self._kw: Callable[[Mapping[str, Any], str], dict[str, Any]] = self._first_kw
        self.fill: Callable[[Any, dict[str, Any]], dict[str, Any]] = self._first_fill

    def _first_kw(self, d: Mapping[str, Any], game: str) -> dict[str, Any]:
        self._compile()
        return self._kw(d, game)

    def _first_fill(self, m: Any, out: dict[str, Any]) -> dict[str, Any]:
        self._compile()
        return self.fill(m, out)

    def _compile(self) -> None:
        env: dict[str, Any] = {"_Extra": _Extra}
        kw = ["def kw(d, game):", "    out = {}"]
        fill = ["def fill(m, out):"]
        required = 0
        omitted = any(f.omitted for f in self.fields)
        if omitted:
            kw.append("    n = 0")
        for i, f in enumerate(self.fields):
            key = repr(f.name)
            attr = f"getattr(m, {key})" if keyword.iskeyword(f.name) else f"m.{f.name}"
            if f.to is not None:
                env[f"to{i}"], env[f"frm{i}"] = f.to, f.frm
            # dict -> kwargs
            ind = "    "
            if f.omitted:
                kw.append(f"    if {key} in d:")
                kw.append("        n += 1")
                ind = "        "
            else:
                required += 1
            kw.append(f"{ind}v = d[{key}]")
            if f.repeated:
                value = "v" if f.to is None else f"[to{i}(x, game) for x in v]"
                kw.append(f"{ind}out[{key}] = {value}")
            else:
                value = "v" if f.to is None else f"to{i}(v, game)"
                if f.nullable and not f.null_wrapper:
                    kw.append(f"{ind}if v is not None:")
                    kw.append(f"{ind}    out[{key}] = {value}")
                elif f.null_wrapper:
                    kw.append(f"{ind}out[{key}] = {value}")
                else:  # protobuf takes None for "unset": it would come back as 0 or ""
                    kw.append(f"{ind}if v is None:")
                    kw.append(f"{ind}    raise _Extra")
                    kw.append(f"{ind}out[{key}] = {value}")
            # message -> dict
            if f.repeated:
                fill.append(
                    f"    out[{key}] = list({attr})"
                    if f.frm is None
                    else f"    out[{key}] = [frm{i}(x) for x in {attr}]"
                )
                continue
            value = attr if f.frm is None else f"frm{i}({attr})"
            if f.nullable:
                fill.append(f"    if m.HasField({key}):")
                fill.append(f"        out[{key}] = {value}")
                if not f.omitted:
                    fill.append("    else:")
                    fill.append(f"        out[{key}] = None")
            else:
                fill.append(f"    out[{key}] = {value}")
        kw.append(f"    if len(d) != {required}{' + n' if omitted else ''}:")
        kw.append("        raise _Extra")
        kw.append("    return out")
        fill.append("    return out")
        exec(
            compile("\n".join(kw) + "\n\n" + "\n".join(fill), f"<court_contract.typed {self.name}>", "exec"),
            env,
        )
        self._kw = env["kw"]
        self.fill = env["fill"]

    # dict -> message ------------------------------------------------------------------------

    def kwargs(self, d: Mapping[str, Any], game: str, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The constructor arguments of the fields in ``d`` (keys in ``skip`` are left to the caller)."""
        if not skip:
            try:
                return self._kw(d, game)
            except (KeyError, TypeError, ValueError, AttributeError, _Extra) as exc:
                if isinstance(exc, TypedError):
                    raise
        return self._slow_kwargs(d, game, skip)

    def _slow_kwargs(self, d: Mapping[str, Any], game: str, skip: frozenset[str]) -> dict[str, Any]:
        if not isinstance(d, Mapping):
            raise TypedError(f"{self.name}: expected an object, got {d!r}")
        out: dict[str, Any] = {}
        used = 0
        for f in self.fields:
            name = f.name
            if name in skip:
                continue
            if name in d:
                v = d[name]
                used += 1
            elif f.omitted:
                continue
            else:
                raise TypedError(f"{self.name}: the key {name!r} is missing from {dict(d)!r}")
            if v is None and not f.null_wrapper:
                if not f.nullable:
                    raise TypedError(f"{self.name}.{name} cannot be null")
                continue
            to = f.to
            if to is None:
                out[name] = v
            elif f.repeated:
                if not isinstance(v, list | tuple):
                    raise TypedError(f"{self.name}.{name} must be a list, got {v!r}")
                out[name] = [to(x, game) for x in v]
            else:
                out[name] = to(v, game)
        if used + len(skip & d.keys()) != len(d):
            extra = sorted(set(d) - {f.name for f in self.fields} - skip)
            raise TypedError(f"{self.name} has no field for the key(s) {', '.join(map(repr, extra))}")
        return out

    def build(self, d: Mapping[str, Any], game: str) -> Any:
        try:
            return self.cls(**self._kw(d, game))
        except TypedError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, _Extra) as exc:
            first = exc
        kw = self._slow_kwargs(d, game, frozenset())
        try:
            return self.cls(**kw)
        except (TypeError, ValueError) as exc:
            raise TypedError(f"{self.name}: {exc} (from {dict(d)!r})") from None
        raise TypedError(f"{self.name}: {first!r} (from {d!r})")  # pragma: no cover

    # message -> dict ------------------------------------------------------------------------

    def to_dict(self, msg: Any) -> dict[str, Any]:
        return self.fill(msg, {})


class _Extra(Exception):
    """Raised by compiled converters: the dict has keys no field takes."""


_PLANS: dict[str, _Plan] = {}


def _plan(desc: Descriptor) -> _Plan:
    plan = _PLANS.get(desc.full_name)
    if plan is None:
        plan = _PLANS[desc.full_name] = _Plan.__new__(_Plan)
        plan.__init__(desc)  # type: ignore[misc]  # registered first: messages may nest
    return plan


def _value_converters(desc: Descriptor, nested: bool = False) -> tuple[ToProto, FromProto]:
    """The converters of a message type. ``nested``: for a field of another message, whose
    ``to`` gives the constructor arguments (a dict) rather than a message: protobuf builds a
    field given as a dict in place, where a message given would be built, then copied into its
    parent, level by level (make bench: a view nests three or four deep, and half the time its
    conversion took was those copies). Key errors are raised by the nested converter, naming
    its message; a value of the wrong type is refused by the outermost message's constructor."""
    name = desc.full_name
    cls = desc._concrete_class
    make: Callable[..., Any] = dict if nested else cls
    if name in _LIST_WRAPPERS or (
        desc.name.endswith("List") and len(desc.fields) == 1 and desc.fields[0].is_repeated
    ):
        key = desc.fields[0].name
        if desc.fields[0].message_type is not None:
            to_item, from_item = _value_converters(desc.fields[0].message_type, nested=True)
            return (lambda v, game: make(**{key: [to_item(x, game) for x in v]})), (
                lambda m: [from_item(x) for x in getattr(m, key)]
            )
        return (lambda v, game: make(**{key: v})), (lambda m: list(getattr(m, key)))
    if desc.name.startswith("Nullable"):
        return (lambda v, game: make(value=v) if v is not None else make()), (
            lambda m: m.value if m.HasField("value") else None
        )
    if name in _PER_GAME or (
        desc.oneofs and desc.oneofs[0].name == "game" and len(desc.fields) == len(GAMES)
    ):
        plans = {fd.name: _plan(fd.message_type) for fd in desc.fields}

        def to(v: Any, game: str) -> Any:
            if nested:
                return {game: plans[game].kwargs(v, game)}
            return cls(**{game: plans[game].build(v, game)})

        def frm(m: Any) -> Any:
            game = m.WhichOneof("game")
            if game is None:
                raise TypedError(f"{name} names no game")
            return plans[game].to_dict(getattr(m, game))

        return to, frm
    plan = _plan(desc)
    return (plan.kwargs if nested else plan.build), plan.to_dict


_KIND_PLANS: dict[str, _Plan] = {fd.name: _plan(fd.message_type) for fd in _EVENT_FIELDS}


# ------------------------------------------------------------------------------- events


def kind_of(game: str, type_: str, data: Mapping[str, Any]) -> str:
    """The ``Event.kind`` oneof case of an event of ``game``."""
    if type_ == "GameEnded" and "result" in data:
        return _SERVICE_GAME_ENDED
    kind = SERVICE_KINDS.get(type_) or KIND_OF.get((game, type_))
    if kind is None:
        raise TypedError(
            f"no typed event for {game} {type_!r}: add a message to protos/court/games/v1/{game}.proto"
        )
    return kind


def _from_engine(game: str, event: EngineEvent, secret: bool, owner: bool) -> Any:
    """The event's message, its kind and secret built in place from their constructor arguments
    (protobuf builds a message field given as a dict: no inner message built, then copied)."""
    kind = kind_of(game, event.type, event.data)
    plan = _KIND_PLANS[kind]
    try:
        kw = plan.kwargs(event.data, game)
        # protobuf builds a message field from a dict; its stubs allow only the message
        fields: dict[str, Any] = {kind: kw}
        if event.private:
            if plan.secret is None:
                raise TypedError(f"{plan.name} has no secret part for {dict(event.private)!r}")
            if secret:
                kw["secret"] = plan.secret.kwargs(event.private, game)
                if owner:
                    return Event(owner=NOBODY if event.owner is None else event.owner, **fields)
        return Event(**fields)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TypedError):
            raise
        raise TypedError(f"{plan.name}: {exc} (from {event!r})") from None


def event_for_seat_to_proto(game: str, event: EngineEvent, seat: int | None) -> Any:
    """``event.for_seat(seat)`` as a message, straight from the engine event (no owner field)."""
    mine = seat is not None and bool(event.private) and seat == event.owner
    return _from_engine(game, event, mine, False)


def event_to_proto(game: str, event: EngineEvent | Mapping[str, Any]) -> Any:
    """The typed ``Event`` of an engine or service event (see the module doc for the forms)."""
    if isinstance(event, EngineEvent):
        return _from_engine(game, event, True, True)
    d = event
    type_ = d.get("type")
    if not isinstance(type_, str):
        raise TypedError(f'an event needs a string "type", got {dict(d)!r}')
    body = {k: v for k, v in d.items() if k != "type" and k != "owner"}
    kind = kind_of(game, type_, body)
    plan = _KIND_PLANS[kind]
    secret = plan.secret
    try:
        if "owner" in d:  # the full form: the secret's keys are its own
            if secret is None:
                raise TypedError(f"{plan.name} has no secret part, yet the event names an owner: {dict(d)!r}")
            kw = plan.kwargs(body, game, plan.secret_keys)
            kw["secret"] = secret.cls(
                **secret.kwargs({k: body[k] for k in plan.secret_keys if k in body}, game)
            )
            owner = d["owner"]
            return Event(owner=NOBODY if owner is None else owner, **{kind: plan.cls(**kw)})
        # public or owner's form: keys fill the public fields first, the rest is the secret
        public_names = {f.name for f in plan.fields}
        rest = {k: v for k, v in body.items() if k not in public_names}
        if rest and secret is not None and rest.keys() <= plan.secret_keys:
            kw = plan.kwargs({k: v for k, v in body.items() if k in public_names}, game)
            kw["secret"] = secret.cls(**secret.kwargs(rest, game))
        else:
            kw = plan.kwargs(body, game)
        return Event(**{kind: plan.cls(**kw)})
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TypedError):
            raise
        raise TypedError(f"{plan.name}: {exc} (from {dict(d)!r})") from None


def event_from_proto(msg: Any) -> dict[str, Any]:
    """The event's dict form (``full()`` with ``"owner"`` when the message names one)."""
    kind = msg.WhichOneof("kind")
    if kind is None:
        raise TypedError("the event sets no kind")
    plan = _KIND_PLANS[kind]
    inner = getattr(msg, kind)
    out: dict[str, Any] = plan.fill(inner, {"type": TYPE_OF[kind]})
    if plan.secret is not None and inner.HasField("secret"):
        plan.secret.fill(inner.secret, out)
    if msg.HasField("owner"):
        out["owner"] = None if msg.owner == NOBODY else msg.owner
    return out


def event_type(msg: Any) -> str:
    """The engine type of an event message ("RoundEnded", ...; "" when it sets no kind)."""
    kind = msg.WhichOneof("kind")
    return TYPE_OF[kind] if kind is not None else ""


def engine_event_from_proto(msg: Any) -> EngineEvent:
    """The ``court_games.core.Event`` a message holds (its secret as ``private``; ``owner`` None
    when the message names none or names nobody)."""
    kind = msg.WhichOneof("kind")
    if kind is None:
        raise TypedError("the event sets no kind")
    plan = _KIND_PLANS[kind]
    inner = getattr(msg, kind)
    private = None
    if plan.secret is not None and inner.HasField("secret"):
        private = plan.secret.fill(inner.secret, {})
    owner = msg.owner if msg.HasField("owner") and msg.owner != NOBODY else None
    return EngineEvent(TYPE_OF[kind], plan.fill(inner, {}), private, owner)


def public_event(msg: Any) -> Any:
    """The public form of an event: without its secret part and owner (a copy)."""
    kind = msg.WhichOneof("kind")
    if kind is None or (
        not msg.HasField("owner")
        and (_KIND_PLANS[kind].secret is None or not getattr(msg, kind).HasField("secret"))
    ):
        return msg
    out = Event()
    out.CopyFrom(msg)
    out.ClearField("owner")
    inner = getattr(out, kind)
    if _KIND_PLANS[kind].secret is not None:
        inner.ClearField("secret")
    return out


def event_for_seat(msg: Any, seat: int | None) -> Any:
    """The event as ``seat`` may see it (``None``: a spectator), like ``Event.for_seat``."""
    if seat is not None and msg.HasField("owner") and msg.owner == seat:
        out = Event()
        out.CopyFrom(msg)
        out.ClearField("owner")
        return out
    return public_event(msg)


# ------------------------------------------------------------------------------- options, results

_OPTIONS_PLAN = _plan(GameOptions.DESCRIPTOR)
_OPTIONS_TO, _OPTIONS_FROM = _value_converters(GameOptions.DESCRIPTOR)
_RESULT_TO, _RESULT_FROM = _value_converters(GameResult.DESCRIPTOR)


def options_to_proto(game: str, options: Mapping[str, Any]) -> Any:
    """``GameOptions`` from an engine's ``options_to_dict`` form (every key present)."""
    if game not in GAMES:
        raise TypedError(f"unknown game {game!r}")
    return _OPTIONS_TO(options, game)


def options_from_proto(msg: Any) -> dict[str, Any]:
    """The options a ``GameOptions`` sets (a request's may leave fields out: their defaults)."""
    return _OPTIONS_FROM(msg)  # type: ignore[no-any-return]


def _unknown_numbers(msg: Message) -> list[int]:
    fields = UnknownFieldSet(msg)
    return sorted({fields[i].field_number for i in range(len(fields))})


def requested_options(game: str, msg: Any) -> dict[str, Any]:
    """A request's options for ``game`` as the engine's dict of the fields set (``{}``: no case set,
    every default). ``InvalidOptions`` (INVALID_ARGUMENT) when they are another game's, or carry
    fields this server does not know (a newer client's option: ignoring it would play other rules)."""
    unknown = _unknown_numbers(msg)
    if unknown:
        raise InvalidOptions(
            f"options for a game this server does not know (field {', '.join(map(str, unknown[:5]))} "
            f"of GameOptions); its games are {', '.join(GAMES)}: set options.{game} "
            f"(or no options, for the defaults)"
        )
    case = msg.WhichOneof("game")
    if case is None:
        return {}
    if case != game:
        raise InvalidOptions(
            f"the options are for {case} but the game is {game}: set options.{game} "
            f"(or no options, for the defaults)"
        )
    inner = getattr(msg, case)
    unknown = _unknown_numbers(inner)
    if unknown:
        known = ", ".join(f.name for f in inner.DESCRIPTOR.fields)
        shown = ", ".join(map(str, unknown[:5])) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        raise InvalidOptions(
            f"unknown option(s) for {game}: field number(s) {shown} of "
            f"{inner.DESCRIPTOR.name}, which this server does not know; known: {known}"
        )
    return _OPTIONS_FROM(msg)  # type: ignore[no-any-return]


def result_to_proto(game: str, result: Mapping[str, Any]) -> Any:
    if game not in GAMES:
        raise TypedError(f"unknown game {game!r}")
    return _RESULT_TO(result, game)


def result_from_proto(msg: Any) -> dict[str, Any]:
    return _RESULT_FROM(msg)  # type: ignore[no-any-return]


def message_to_dict(msg: Message) -> dict[str, Any]:
    """Any ``court.games.v1`` message to its JSON form (views, results' parts)."""
    return _plan(msg.DESCRIPTOR).to_dict(msg)


def message_from_dict(cls: Any, d: Mapping[str, Any], game: str) -> Any:
    """A ``court.games.v1`` message of class ``cls`` from its JSON form."""
    return _plan(cls.DESCRIPTOR).build(d, game)


# ------------------------------------------------------------------------------- views

View = views_pb2.View
_VIEW_TO, _VIEW_FROM = _value_converters(View.DESCRIPTOR)


def view_to_proto(game: str, view: Mapping[str, Any]) -> Any:
    """The typed ``View`` of an engine's ``view(state, seat)``."""
    if game not in GAMES:
        raise TypedError(f"unknown game {game!r}")
    return _VIEW_TO(view, game)


_VIEW_KW, _ = _value_converters(View.DESCRIPTOR, nested=True)


def view_kwargs(game: str, view: Mapping[str, Any]) -> dict[str, Any]:
    """``view_to_proto``'s value as the constructor argument of a message's ``View`` field (a
    dict protobuf builds in place: no copy of a finished View). A value of the wrong type is
    refused only by that constructor: call ``view_to_proto`` then for the TypedError."""
    if game not in GAMES:
        raise TypedError(f"unknown game {game!r}")
    return _VIEW_KW(view, game)  # type: ignore[no-any-return]


_VIEW_PARTS: dict[tuple[str, frozenset[str]], _Plan] = {}


def view_part_kwargs(game: str, part: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """``view_kwargs`` of part of a view: ``part`` holds the keys of the fields named ``keys``, and
    no other (every such key a view has, bar those omitted when unset). Two parts with disjoint
    ``keys`` that make up a whole view, each in its own message, serialized and concatenated, are
    that view's message serialized (a message field met twice on the wire is merged): the service
    builds the part every seat shares once per position (``public_view``; ``keys`` the view's fields
    not in the engine's ``SEAT_KEYS``) and only the seat's own (``seat_view``) per seat."""
    plan = _VIEW_PARTS.get((game, keys))
    if plan is None:
        if game not in GAMES:
            raise TypedError(f"unknown game {game!r}")
        desc: Descriptor = View.DESCRIPTOR.fields_by_name[game].message_type
        plan = _VIEW_PARTS[(game, keys)] = _Plan(desc, keys)
    return {game: plan.kwargs(part, game)}


def view_fields(game: str) -> frozenset[str]:
    """The names of the fields of ``game``'s view message (the keys of its JSON form)."""
    if game not in GAMES:
        raise TypedError(f"unknown game {game!r}")
    desc: Descriptor = View.DESCRIPTOR.fields_by_name[game].message_type
    return frozenset(fd.name for fd in desc.fields)


def view_from_proto(msg: Any) -> dict[str, Any]:
    """The engine's view dict back from a ``View`` (equal to ``module.view(state, seat)``)."""
    return _VIEW_FROM(msg)  # type: ignore[no-any-return]
