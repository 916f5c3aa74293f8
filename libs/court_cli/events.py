"""``court events tail``: the public game event stream, live, filtered by game, game id and type.

The example analytics consumer. It reads JetStream's ``COURT_EVENTS`` stream (subjects
``court.events.<game>.<game_id>.<type>``, protobuf ``court.events.v1.GameEvent`` bodies) with an
ordered, ephemeral consumer: nothing is acknowledged or kept on the server, and only the public
subjects are read (the full-information ``court.full.>`` subjects are not).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import nats
from court_kit.structs import to_dict
from court_proto.court.events.v1 import events_pb2
from google.protobuf.json_format import MessageToDict
from nats.js.api import DeliverPolicy
from rich.console import Console

from .session import CliError

STREAM = "COURT_EVENTS"


def subject_for(game: str = "", game_id: str = "", types: Sequence[str] = ()) -> str:
    one_type = types[0] if len(types) == 1 else "*"
    for part, what in ((game, "game"), (game_id, "game id"), (one_type, "type")):
        if part != "*" and any(ch in part for ch in ".*> "):
            raise CliError(f"the {what} {part!r} may not hold '.', '*', '>' or spaces")
    return f"court.events.{game or '*'}.{game_id or '*'}.{one_type}"


def line_for(ev: events_pb2.GameEvent) -> str:
    payload = to_dict(ev.payload)
    payload.pop("type", None)
    fields = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in payload.items())
    when = ev.time.ToDatetime().strftime("%H:%M:%S.%f")[:-3] if ev.HasField("time") else "--:--:--"
    return f"{when} {ev.game:<12} {ev.game_id} #{ev.seq}.{ev.index} {ev.type} {fields}"


async def tail(nats_url: str, console: Console, *, game: str = "", game_id: str = "", types: Sequence[str] = (),
               from_start: bool = False, count: int = 0, as_json: bool = False, idle_exit: float = 0.0,
               user: str = "", password: str = "") -> int:
    """Print matching events as they come (``count``: stop after that many; ``idle_exit``: stop after
    that many quiet seconds). Returns how many were printed."""
    subject = subject_for(game, game_id, types)
    wanted = set(types)
    async def quiet(_exc: Exception) -> None:  # failures are told once, below, not as tracebacks
        return None

    try:
        auth = {"user": user, "password": password, "inbox_prefix": f"_INBOX_{user}"} if user else {}
        nc = await nats.connect(nats_url, connect_timeout=3, max_reconnect_attempts=2, allow_reconnect=True,
                                error_cb=quiet, **auth)
    except Exception as exc:  # noqa: BLE001 - any connection failure is told the same way
        raise CliError(f"cannot reach NATS at {nats_url} ({exc or type(exc).__name__}): is the stack running? "
                       "Start it with `make run`.") from None
    shown = 0
    try:
        js = nc.jetstream()
        try:
            sub = await js.subscribe(subject, stream=STREAM, ordered_consumer=True,
                                     deliver_policy=DeliverPolicy.ALL if from_start else DeliverPolicy.NEW)
        except Exception as exc:  # noqa: BLE001
            raise CliError(f"cannot read the {STREAM} stream: {exc} (has the rules service ever run?)") from None
        if not as_json:
            console.print(f"tailing {subject}" + (f" types {', '.join(sorted(wanted))}" if len(wanted) > 1 else "")
                          + (" from the start" if from_start else " (new events; --from-start for history)"),
                          style="dim")
        while count == 0 or shown < count:
            try:
                msg = await (sub.next_msg(timeout=idle_exit) if idle_exit else sub.next_msg(timeout=None))
            except (TimeoutError, nats.errors.TimeoutError):
                break
            except nats.errors.ConnectionClosedError:
                raise CliError(f"lost the connection to NATS at {nats_url} (the stack stopped?)") from None
            ev = events_pb2.GameEvent.FromString(msg.data)
            if wanted and ev.type not in wanted:
                continue
            if as_json:
                console.print(json.dumps(MessageToDict(ev, preserving_proto_field_name=True), sort_keys=True),
                              soft_wrap=True, markup=False)
            else:
                console.print(line_for(ev), soft_wrap=True, markup=False)
            shown += 1
    finally:
        await asyncio.shield(nc.close())
    return shown
