"""``court events tail``: the public game records, live, filtered by game, game id and event type.

The example analytics consumer. It reads JetStream's ``COURT_EVENTS`` stream (contract v2,
docs/contract.md: subjects ``court.events.<game>.<game_id>``, one ``court.events.v2.Record`` per
game step, written by the projector) with an ordered, ephemeral consumer: nothing is acknowledged
or kept on the server, and only the public records are read (never a game log,
``court.games.>``). Each record prints as its events, one line each: ``#<seq>.<index> <type>``
(a creation first prints ``GameCreated`` with its seats, a resumed game's closing record
``GameClosed``); ``--type`` keeps the lines of those types, ``--json`` prints whole records.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import nats
from court_contract import records as krec
from court_proto.court.events.v2 import records_pb2
from google.protobuf.json_format import MessageToDict
from nats.js.api import DeliverPolicy
from rich.console import Console

from .session import CliError

STREAM = "COURT_EVENTS"


def subject_for(game: str = "", game_id: str = "") -> str:
    for part, what in ((game, "game"), (game_id, "game id")):
        if any(ch in part for ch in ".*> "):
            raise CliError(f"the {what} {part!r} may not hold '.', '*', '>' or spaces")
    return f"{krec.PUBLIC_PREFIX}{game or '*'}.{game_id or '*'}"


def _fields(data: object) -> str:
    items = data.items() if isinstance(data, dict) else ()
    return " ".join(f"{k}={json.dumps(v, separators=(',', ':'), default=str)}" for k, v in items)


def lines_for(rec: records_pb2.Record) -> list[tuple[str, str]]:
    """``(type, line)`` for each event of a public record, in order."""
    when = rec.time.ToDatetime().strftime("%H:%M:%S.%f")[:-3] if rec.HasField("time") else "--:--:--"
    head = f"{when} {rec.game:<12} {rec.game_id}"
    out: list[tuple[str, str]] = []
    body = rec.WhichOneof("body")
    if body == "created":
        out.append(
            ("GameCreated", f"{head} #{rec.seq}.0 GameCreated " + _fields({"seats": list(rec.created.seats)}))
        )
    elif body == "closed":
        out.append(("GameClosed", f"{head} #{rec.seq}.0 GameClosed " + _fields({"into": rec.closed.into})))
    first = len(out)
    for i, ev in enumerate(krec.events_of(rec), start=first):
        data = dict(ev.data)
        data.pop("type", None)
        out.append((ev.type, f"{head} #{rec.seq}.{i} {ev.type} {_fields(data)}".rstrip()))
    return out


async def tail(
    nats_url: str,
    console: Console,
    *,
    game: str = "",
    game_id: str = "",
    types: Sequence[str] = (),
    from_start: bool = False,
    count: int = 0,
    as_json: bool = False,
    idle_exit: float = 0.0,
    user: str = "",
    password: str = "",
) -> int:
    """Print matching events as they come (``count``: stop after that many lines, with ``as_json``
    records; ``idle_exit``: stop after that many quiet seconds). Returns how many were printed."""
    subject = subject_for(game, game_id)
    wanted = set(types)

    async def quiet(_exc: Exception) -> None:  # failures are told once, below, not as tracebacks
        return None

    try:
        auth = {"user": user, "password": password, "inbox_prefix": f"_INBOX_{user}"} if user else {}
        nc = await nats.connect(
            nats_url,
            connect_timeout=3,
            max_reconnect_attempts=2,
            allow_reconnect=True,
            error_cb=quiet,
            **auth,
        )
    except Exception as exc:  # noqa: BLE001 - any connection failure is told the same way
        raise CliError(
            f"cannot reach NATS at {nats_url} ({exc or type(exc).__name__}): is the stack running? "
            "Start it with `make run`."
        ) from None
    shown = 0
    try:
        js = nc.jetstream()
        try:
            sub = await js.subscribe(
                subject,
                stream=STREAM,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.ALL if from_start else DeliverPolicy.NEW,
            )
        except Exception as exc:  # noqa: BLE001
            raise CliError(
                f"cannot read the {STREAM} stream: {exc} (has the rules service ever run?)"
            ) from None
        if not as_json:
            console.print(
                f"tailing {subject}"
                + (f" types {', '.join(sorted(wanted))}" if len(wanted) > 1 else "")
                + (" from the start" if from_start else " (new events; --from-start for history)"),
                style="dim",
            )
        while count == 0 or shown < count:
            try:
                msg = await (sub.next_msg(timeout=idle_exit) if idle_exit else sub.next_msg(timeout=None))
            except (TimeoutError, nats.errors.TimeoutError):
                break
            except nats.errors.ConnectionClosedError:
                raise CliError(f"lost the connection to NATS at {nats_url} (the stack stopped?)") from None
            try:
                rec = krec.decode(msg.data)
            except ValueError:
                continue  # not a v2 record: nothing this reader can show
            lines = [(t, line) for t, line in lines_for(rec) if not wanted or t in wanted]
            if not lines:
                continue
            if as_json:
                console.print(
                    json.dumps(MessageToDict(rec, preserving_proto_field_name=True), sort_keys=True),
                    soft_wrap=True,
                    markup=False,
                )
                shown += 1
                continue
            for _t, line in lines:
                if count and shown >= count:
                    break
                console.print(line, soft_wrap=True, markup=False)
                shown += 1
    finally:
        await asyncio.shield(nc.close())
    return shown
