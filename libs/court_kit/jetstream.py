"""NATS JetStream helpers: connect (reconnecting forever), the one place stream and KV
configurations are made (``stream_config``, ``kv_config``: bounded by limits taken from
settings), ensure streams and KV buckets, and JetStream's direct-get API (one request, many
messages).

Every JetStream publish a service makes awaits its ack and sets Nats-Msg-Id.

Limits. Every stream and bucket Court creates is bounded. Its defaults are in ``STREAM_LIMITS``
(docs/capacity.md explains them and sizes them for a deployment); each can be overridden from
the environment with the stream's own name as prefix::

    <NAME>_MAX_BYTES             e.g. COURT_GAMES_MAX_BYTES=200GiB (B, KB, MB, GB, TB, KiB .. TiB)
    <NAME>_MAX_AGE               e.g. COURT_EVENTS_MAX_AGE=30d (s, m, h, d; 0: no age limit)
    <NAME>_MAX_MSGS_PER_SUBJECT  e.g. COURT_GAMES_MAX_MSGS_PER_SUBJECT=20000 (-1: none)

and the replica count from COURT_STREAM_REPLICAS (1 by default, 3 in deploy/).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError

from . import logging as klog
from .settings import ConfigError

log = klog.get_logger("court_kit.jetstream")

# JetStream API error codes (nats-server's errors.json)
ERR_WRONG_LAST_SEQUENCE = 10071
ERR_STREAM_NAME_IN_USE = 10058


def connect_options(settings: Any) -> dict[str, Any]:
    """The NATS identity and TLS a service's settings name (COURT_NATS_USER/PASSWORD/CA)."""
    opts: dict[str, Any] = {}
    if settings.nats_user:
        opts.update(user=settings.nats_user, password=settings.nats_password)
    if settings.nats_ca:
        import ssl  # noqa: PLC0415

        opts["tls"] = ssl.create_default_context(cafile=settings.nats_ca)
    return opts


async def connect(
    servers: Sequence[str] | str,
    name: str,
    *,
    give_up_after: float | None = None,
    user: str = "",
    password: str = "",
    tls: Any = None,
    log_summary_every: float = 60.0,
    no_echo: bool = False,
) -> NATS:
    """Connect, waiting for the server as long as it takes (or ``give_up_after`` seconds, then
    ``TimeoutError``); once connected the client reconnects forever on its own. nats-py retries
    the first connection itself when reconnects are unlimited, every ``reconnect_time_wait``.

    Connection trouble is logged once per change of state ("nats unreachable" / "nats
    disconnected", then "nats reconnected") plus one summary line every ``log_summary_every``
    seconds while it lasts: never once per reconnect attempt.

    ``no_echo``: nats-server delivers nothing this connection publishes to this connection's own
    subscriptions (the rules service wakes its own watchers in process)."""
    urls = [servers] if isinstance(servers, str) else list(servers)
    state = klog.StateLog(log, "nats connection", summary_every=log_summary_every)

    async def on_error(exc: Exception) -> None:
        error = str(exc) or type(exc).__name__
        if state.down or not nc.is_connected:
            state.failed("nats unreachable", error=error, servers=urls)
        else:
            log.warning("nats error", error=error)

    async def on_disconnect() -> None:
        state.failed("nats disconnected", servers=urls)

    async def on_reconnect() -> None:
        state.ok("nats reconnected", server=str(nc.connected_url.netloc) if nc.connected_url else "")

    nc = NATS()
    nc._parse_header_lines = parse_header_lines  # type: ignore[method-assign]  # nats-py's, faster
    auth: dict[str, Any] = {}
    if user:
        # an inbox of its own: the permissions let each identity subscribe only to its own replies
        auth.update(user=user, password=password, inbox_prefix=f"_INBOX_{user}")
    if tls is not None:
        auth.update(tls=tls)
    attempt = nc.connect(
        servers=urls,
        **auth,
        name=name,
        no_echo=no_echo,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.25,  # type: ignore[arg-type]  # nats-py annotates int; it sleeps on a float
        connect_timeout=2,
        ping_interval=10,
        max_outstanding_pings=3,
        drain_timeout=5,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
    )
    try:
        if give_up_after is None:
            await attempt
        else:
            await asyncio.wait_for(attempt, give_up_after)
    except BaseException:  # given up, or cancelled (SIGTERM while waiting for NATS)
        with contextlib.suppress(Exception):
            await nc.close()
        raise
    state.ok("nats connected", server=str(nc.connected_url.netloc) if nc.connected_url else "")
    return nc


_WHITESPACE = re.compile(r"\s")  # str.isspace's characters (re's \s in a str pattern: the same test)


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """A message's header lines (``Name: value``, CRLF-separated) as nats-py's
    ``Client._parse_header_lines`` reads them, which ``connect`` sets on every connection it makes:
    the same names and values (a line with no colon, a name that is not ASCII or holds whitespace,
    skipped; names and values stripped; a value's bad UTF-8 replaced), with a name's whitespace
    found by one regex search instead of a generator over its characters (2.4 us less per message
    of three headers in process: the projector's every log record, JetStream's headers on it)."""
    out: dict[str, str] = {}
    for line in raw.split(b"\r\n"):
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if _WHITESPACE.search(key) is not None:
            continue
        out[key] = value.strip().decode("utf-8", "replace")
    return out


KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
DAY = 86400.0
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "k": KiB,
    "kib": KiB,
    "m": MiB,
    "mib": MiB,
    "g": GiB,
    "gib": GiB,
    "t": 1 << 40,
    "tib": 1 << 40,
}
_AGE_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": DAY}


def parse_size(name: str, raw: str) -> int:
    """``"200GiB"``, ``"512MB"``, ``"1048576"`` -> bytes; ``"-1"`` means no limit."""
    m = re.fullmatch(r"\s*(-1|\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", raw)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _SIZE_UNITS or (m.group(1) == "-1" and unit):
        raise ConfigError(
            f"{name} must be a size such as 200GiB, 512MB or a number of bytes (-1: no limit), "
            f"got {raw[:40]!r}"
        )
    return -1 if m.group(1) == "-1" else int(float(m.group(1)) * _SIZE_UNITS[unit])


def parse_age(name: str, raw: str) -> float:
    """``"30d"``, ``"12h"``, ``"90"`` (seconds) -> seconds; ``"0"`` means no limit."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", raw)
    if m is None:
        raise ConfigError(
            f"{name} must be a duration such as 30d, 12h, 15m or a number of seconds (0: none), "
            f"got {raw[:40]!r}"
        )
    return float(m.group(1)) * _AGE_UNITS[m.group(2)]


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of one stream or bucket. -1 / 0.0: no limit of that kind."""

    max_bytes: int
    max_age: float = 0.0  # seconds
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    # OLD: a full stream drops its oldest messages (a feed); NEW: it refuses new ones (a log
    # whose every message is an accepted move: refusing is visible, losing is not)
    discard: DiscardPolicy = DiscardPolicy.OLD
    compression: bool = False  # s2 on disk (the archive: written once, read rarely)

    def override(self, name: str, environ: Mapping[str, str]) -> Limits:
        """These limits with any ``<name>_MAX_BYTES`` / ``_MAX_AGE`` / ``_MAX_MSGS_PER_SUBJECT`` applied."""
        out = self
        if (raw := environ.get(f"{name}_MAX_BYTES")) is not None:
            out = replace(out, max_bytes=parse_size(f"{name}_MAX_BYTES", raw))
        if (raw := environ.get(f"{name}_MAX_AGE")) is not None:
            out = replace(out, max_age=parse_age(f"{name}_MAX_AGE", raw))
        if (raw := environ.get(f"{name}_MAX_MSGS_PER_SUBJECT")) is not None:
            try:
                n = int(raw)
            except ValueError:
                n = 0
            if n == 0 or n < -1:
                raise ConfigError(
                    f"{name}_MAX_MSGS_PER_SUBJECT must be a positive integer or -1 (none), got {raw[:40]!r}"
                )
            out = replace(out, max_msgs_per_subject=n)
        return out


# Defaults: small enough that every stream together (6 GiB) fits a developer's disk and the
# local stack's max_file_store (8 GiB, court_cli.stack); deploy/ sets production sizes from
# docs/capacity.md through the environment.
STREAM_LIMITS: dict[str, Limits] = {
    # the game logs (the full records), per shard stream COURT_GAMES_<shard>, each with these
    # limits: one subject per game; a game longer than 20,000 records is refused, never
    # truncated; finished games leave after COURT_FINISHED_RETENTION (court_rules.archive)
    "COURT_GAMES": Limits(
        max_bytes=2 * GiB, max_msgs_per_subject=20_000, max_msg_size=256 * KiB, discard=DiscardPolicy.NEW
    ),
    # the public records (the projector's feed): bots, ranking, analytics read them as they come
    "COURT_EVENTS": Limits(max_bytes=1 * GiB, max_age=30 * DAY, max_msg_size=256 * KiB),
    # finished games, one compressed message each, for replay after they left COURT_GAMES
    "COURT_GAMES_ARCHIVE": Limits(
        max_bytes=2 * GiB, max_age=365 * DAY, max_msgs_per_subject=1, max_msg_size=4 * MiB, compression=True
    ),
}


def limit_variables() -> set[str]:
    """Every ``COURT_<STREAM>_MAX_*`` variable the streams' limits read."""
    return {
        f"{name}_{suffix}"
        for name in STREAM_LIMITS
        for suffix in ("MAX_BYTES", "MAX_AGE", "MAX_MSGS_PER_SUBJECT")
    }


def stream_limits(name: str, environ: Mapping[str, str], default: Limits | None = None) -> Limits:
    """The limits of stream ``name``: ``default`` (else ``STREAM_LIMITS[name]``) with the
    environment's overrides (``environ`` is ``Settings.extra``: the COURT_ variables)."""
    base = default if default is not None else STREAM_LIMITS.get(name)
    if base is None:
        raise KeyError(f"no default limits for stream {name!r}: add it to STREAM_LIMITS or pass default=")
    return base.override(name, environ)


def stream_config(
    name: str,
    subjects: Sequence[str],
    *,
    description: str,
    environ: Mapping[str, str],
    replicas: int = 1,
    default: Limits | None = None,
    duplicate_window: float = 120.0,
    allow_direct: bool = True,
) -> StreamConfig:
    """The configuration of a Court stream: file storage, limits retention, bounded by
    ``stream_limits(name, environ, default)``, ``replicas`` copies (COURT_STREAM_REPLICAS)."""
    lim = stream_limits(name, environ, default)
    return StreamConfig(
        name=name,
        subjects=list(subjects),
        description=description,
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=replicas,
        max_bytes=lim.max_bytes,
        max_age=lim.max_age or None,
        max_msgs_per_subject=lim.max_msgs_per_subject,
        max_msg_size=lim.max_msg_size,
        discard=lim.discard,
        discard_new_per_subject=lim.discard == DiscardPolicy.NEW and lim.max_msgs_per_subject > 0,
        compression=StoreCompression.S2 if lim.compression else None,
        allow_direct=allow_direct,
        duplicate_window=duplicate_window,
    )


def kv_config(
    bucket: str,
    *,
    description: str,
    environ: Mapping[str, str],
    default: Limits,
    replicas: int = 1,
    history: int = 1,
    memory: bool = False,
) -> KeyValueConfig:
    """A bounded KV bucket: ``default`` limits (``max_age`` is the keys' TTL) with overrides
    ``COURT_KV_<BUCKET>_MAX_BYTES`` / ``_MAX_AGE`` from the environment."""
    lim = default.override(f"COURT_KV_{bucket.upper()}", environ)
    return KeyValueConfig(
        bucket=bucket,
        description=description,
        history=history,
        replicas=replicas,
        max_bytes=lim.max_bytes,
        ttl=lim.max_age or None,
        max_value_size=lim.max_msg_size,
        storage=StorageType.MEMORY if memory else StorageType.FILE,
    )


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    """Create the stream, or update it to ``config`` when it exists with another configuration."""
    try:
        await js.add_stream(config)
    except BadRequestError as exc:
        if exc.err_code != ERR_STREAM_NAME_IN_USE:
            raise
        await js.update_stream(config)


async def ensure_kv(js: JetStreamContext, config: KeyValueConfig) -> Any:
    """Open bucket ``config.bucket``, creating it (bounded, see ``kv_config``) when missing."""
    try:
        return await js.key_value(config.bucket)
    except (NotFoundError, nats.js.errors.BucketNotFoundError):
        return await js.create_key_value(config)


@dataclass(frozen=True, slots=True)
class StoredMsg:
    subject: str
    seq: int
    data: bytes
    headers: dict[str, str]


def _stored(msg: Any) -> StoredMsg:
    h = dict(msg.headers or {})
    return StoredMsg(
        subject=h.get("Nats-Subject", ""), seq=int(h.get("Nats-Sequence", "0")), data=msg.data, headers=h
    )


async def unsubscribe_quietly(sub: Any) -> None:
    """Unsubscribe ``sub`` (``None``: nothing to do) and let no error out: the connection may be
    gone already. A pull subscription's pending request would otherwise hold up the connection's
    drain at shutdown; after a failure the loop subscribes afresh."""
    if sub is not None:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


class JetStreamUnavailable(Exception):
    """JetStream did not answer in time (server down, leader election); retry later."""


async def direct_get_last(nc: NATS, stream: str, subject: str, *, timeout: float = 2.0) -> StoredMsg | None:
    """The last message on ``subject`` (wildcards allowed) via the direct-get API; ``None`` when none."""
    try:
        msg = await nc.request(f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout=timeout)
    except (TimeoutError, nats.errors.NoRespondersError) as exc:
        raise JetStreamUnavailable(f"direct get on {stream} timed out") from exc
    status = (msg.headers or {}).get("Status")
    if status == "404":
        return None
    if status:
        raise JetStreamUnavailable(
            f"direct get on {stream} answered {status} {(msg.headers or {}).get('Description', '')}"
        )
    return _stored(msg)


async def direct_get_batch(
    nc: NATS, stream: str, subject: str, *, start_seq: int = 1, batch: int = 1000, timeout: float = 5.0
) -> list[StoredMsg]:
    """Every message on ``subject`` from stream sequence ``start_seq`` on, in order.

    One direct-get batch request (nats-server 2.11+) per ``batch`` messages.
    """
    out: list[StoredMsg] = []
    seq = start_seq
    while True:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        try:
            req = json.dumps({"seq": seq, "next_by_subj": subject, "batch": batch}).encode()
            await nc.publish(f"$JS.API.DIRECT.GET.{stream}", req, reply=inbox)
            got = 0
            while True:
                try:
                    msg = await sub.next_msg(timeout=timeout)
                except TimeoutError as exc:
                    raise JetStreamUnavailable(f"direct get batch on {stream} timed out") from exc
                h = msg.headers or {}
                status = h.get("Status")
                if status == "204" or status == "404":  # end of batch / nothing (more)
                    break
                if status:
                    raise JetStreamUnavailable(
                        f"direct get batch on {stream} answered {status} {h.get('Description', '')}"
                    )
                m = _stored(msg)
                out.append(m)
                got += 1
                pending = h.get("Nats-Num-Pending")
                if got >= batch or pending == "0":
                    if pending == "0":
                        return out
                    break
        finally:
            await sub.unsubscribe()
        if got < batch:
            return out
        seq = out[-1].seq + 1


class _Deliver:
    """Stands in for the future nats-py hands a request's reply to (``Subscription._future``): every
    message of the subscription goes to ``handle`` at once, in the read loop's turn."""

    __slots__ = ("handle",)

    def __init__(self, handle: Callable[[Any], None]):
        self.handle = handle

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return False

    def set_result(self, msg: Any) -> None:
        self.handle(msg)


_SUBJECT_INVALID = re.compile(r"[ \t\r\n]")  # nats-py's publish check (no CRLF injection)
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # nats-py's, RFC 7230's token
_HEADER_KEYS: set[str] = set()  # header names already checked against _HEADER_KEY
_HEADER_LINE_BREAKS = {ord("\r"): " ", ord("\n"): " "}


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """A NATS header block (``NATS/1.0``, one ``Name: value`` line each, a blank line), as nats-py
    encodes it: names and values stripped, an empty name left out, a name that is not an
    RFC 7230 token refused (``nats.errors.BadHeaderError``), a line break in a value sent as a
    space. Names are checked once per process (a service sends a handful of names)."""
    lines = ["NATS/1.0\r\n"]
    for k, v in headers.items():
        if k not in _HEADER_KEYS:
            key = k.strip()
            if not key:
                continue
            if not _HEADER_KEY.fullmatch(key):
                raise nats.errors.BadHeaderError(key)
            if key != k:
                k = key
            else:
                _HEADER_KEYS.add(k)
        v = v.strip()
        if "\r" in v or "\n" in v:
            v = v.translate(_HEADER_LINE_BREAKS)
        lines.append(f"{k}: {v}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode()


async def send_publish(
    nc: NATS, subject: str, data: bytes, reply: str, headers: Mapping[str, str] | None, *, now: bool = False
) -> None:
    """``nc.publish(subject, data, reply, headers)``: the same checks, errors and bytes on the wire
    (``tests/kit/test_jetstream.py`` compares them), the command built in one formatting step.
    nats-py's own encoding of a header block (a regex match per name, ``str.translate`` per value)
    cost more than the rest of the publish: with the append's three headers 5.8 to 9.2 us against
    3.2 to 3.7 in process (the rules service's append, each of the projector's public records).

    ``now``: written to the socket at once when nothing waits in the socket's buffer (no
    back-pressure to wait out), with whatever the connection's buffer holds before it, instead of
    by nats-py's flusher task in a later turn of the loop (``write_now``): for a publish that no
    other of the same turn would join (the rules service's append: one per call, each its own
    write either way), the flusher's wake-up, its turn and its ``drain`` are saved."""
    c: Any = nc
    if not subject or _SUBJECT_INVALID.search(subject) or _SUBJECT_INVALID.search(reply):
        raise nats.errors.BadSubjectError
    if c.is_closed:
        raise nats.errors.ConnectionClosedError
    if c.is_draining_pubs:
        raise nats.errors.ConnectionDrainingError
    size = len(data)
    if not c.is_connected and (c._max_pending_size <= 0 or size + c._pending_data_size > c._max_pending_size):
        raise nats.errors.OutboundBufferLimitError
    if size > c._max_payload:
        raise nats.errors.MaxPayloadError
    if headers is None:
        cmd = b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), size, data)
    else:
        hdr = encode_headers(headers)
        cmd = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
            subject.encode(),
            reply.encode(),
            len(hdr),
            len(hdr) + size,
            hdr,
            data,
        )
    c.stats["out_msgs"] += 1
    c.stats["out_bytes"] += size
    c._pending.append(cmd)
    c._pending_data_size += len(cmd)
    if c._max_pending_size > 0 and c._pending_data_size > c._max_pending_size:
        await c._flush_pending(force_flush=True)
    if now and write_now(c):
        return
    queue = c._flush_queue
    if queue is not None and queue.empty():
        flusher = c._flusher_task
        if c.is_connected and flusher is not None and not flusher.done():
            # the flusher woken as nats-py's ``_flush_pending`` wakes it, with a future of its
            # loop's own making: ``asyncio.Future()`` asks for the running loop, which costs
            # Python 3.11 a ``getpid`` system call each time
            queue.put_nowait(flusher.get_loop().create_future())
        else:
            await c._flush_pending()  # not connected (kept for the reconnect), or no flusher


def write_now(nc: NATS) -> bool:
    """Write what the connection's buffer holds to its socket at once, as nats-py's flusher would,
    when it may go now: connected, a flusher running (it takes over on a failure), and nothing in
    the socket's own buffer (the flusher would wait for it to drain first). False: left to the
    flusher (the caller wakes it). A failed write leaves the buffer as it was, for the flusher to
    write again or to fail on (nats-py's own handling of a broken connection then follows)."""
    c: Any = nc
    flusher = c._flusher_task
    if flusher is None or flusher.done() or not c._pending_data_size:
        return False
    writer = getattr(c._transport, "_io_writer", None)
    if writer is None or not c.is_connected or c.is_connecting:
        return False
    transport = writer.transport
    if transport.is_closing() or transport.get_write_buffer_size():
        return False
    try:
        transport.writelines(c._pending)
    except Exception:  # noqa: BLE001 - the flusher's own write meets it again and handles it
        return False
    c._pending = []
    c._pending_data_size = 0
    return True


class Publisher:
    """Lean pipelined JetStream publishes: every ack comes back on one wildcard reply subscription.

    ``publish`` sends at once and returns a future for the ack (the raw PubAck JSON), so a caller
    can put several messages on the wire before waiting; messages from one connection reach a
    stream in the order sent. It does what nats-py's ``publish_async`` does at a fraction of the
    per-message cost (no task per call), which matters at a dozen publishes per game move.
    """

    def __init__(self, nc: NATS):
        self.nc = nc
        self._prefix = ""
        self._sub: Any = None
        self._futures: dict[str, asyncio.Future[bytes]] = {}
        self._n = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # the connection's (``_ensure``)

    async def _ensure(self) -> None:
        if self._sub is None:
            prefix = f"{self.nc.new_inbox()}."
            sub = await self.nc.subscribe(prefix + "*")
            # each ack handed over as nats-py's read loop parses it, as nats-py answers its own
            # requests (a subscription's ``_future``), not through the subscription's queue and a
            # task of its own: one task switch per publish fewer (make bench ONLY=service)
            sub._future = _Deliver(self._on_ack)  # type: ignore[assignment]  # nats-py calls cancelled, set_result
            self._sub = sub
            self._prefix = prefix
            self._loop = asyncio.get_running_loop()

    def _on_ack(self, msg: Any) -> None:
        fut = self._futures.pop(msg.subject[len(self._prefix) :], None)
        if fut is None or fut.done():
            return
        if msg.headers and msg.headers.get("Status") == "503":
            fut.set_exception(nats.js.errors.NoStreamResponseError())
            return
        data = msg.data
        if b'"error"' in data:
            try:
                APIError.from_error(json.loads(data)["error"])  # raises the typed error
            except APIError as exc:
                fut.set_exception(exc)
            return
        fut.set_result(data)

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None, *, now: bool = False
    ) -> asyncio.Future[bytes]:
        """``now``: ``send_publish``'s (written at once when the socket's buffer is empty)."""
        if self._sub is None:
            await self._ensure()
        assert self._loop is not None
        self._n += 1
        token = str(self._n)
        fut: asyncio.Future[bytes] = self._loop.create_future()  # (no running-loop lookup: getpid)
        self._futures[token] = fut
        try:
            await send_publish(self.nc, subject, data, self._prefix + token, headers, now=now)
        except BaseException:
            self._futures.pop(token, None)
            raise
        return fut

    def forget(self, futures: Sequence[asyncio.Future[bytes]]) -> None:
        """Stop waiting for these acks (after a timeout)."""
        for token, f in list(self._futures.items()):
            if f in futures:
                del self._futures[token]
        for f in futures:
            if not f.done():
                f.cancel()
            elif not f.cancelled():
                f.exception()  # retrieved: no "never retrieved" warning

    async def publish_all(
        self, messages: Sequence[tuple[str, bytes, dict[str, str]]], *, timeout: float = 5.0
    ) -> list[bytes]:
        """Publish in order without waiting between messages, then await every ack (raising the
        first failure). After a failure any subset may be stored: republish the whole set (with
        ``Nats-Msg-Id`` headers JetStream stores nothing twice)."""
        futures: list[asyncio.Future[bytes]] = []
        try:
            for subject, data, headers in messages:
                futures.append(await self.publish(subject, data, headers))
            done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout)
        except BaseException:
            self.forget(futures)
            raise
        for result in done:
            if isinstance(result, BaseException):
                raise result
        return [r for r in done if not isinstance(r, BaseException)]

    async def close(self) -> None:
        await unsubscribe_quietly(self._sub)
        self._sub = None
        self.forget(list(self._futures.values()))


class LazyAcks:
    """Acknowledgements that leave with the connection's next write instead of a write of their own.

    nats-py writes what was published in one event-loop turn in one socket write (its flusher
    task), so an ack sent on its own costs a write system call; on loopback that write carries the
    receiver's TCP work too, and in make bench ONLY=stack the flusher's writes were a quarter of the
    rules process's Python time. Nobody waits for an ack, so ``ack`` puts it on the connection's
    outgoing buffer without waking the flusher: it leaves with whatever the process writes next (a
    move's append, a public record, a pull request) or, at the latest, ``within`` seconds later
    (a timer, one per connection). The message's ack wait must be well above ``within``.

    Nothing is weaker than an ack sent at once: an ack is fire-and-forget, so either may be lost
    with the connection, and a message whose ack never reached nats-server is delivered again
    after its ack wait (every consumer here handles a redelivery: it finds its work done).
    ``msg`` is nats-py's JetStream ``Msg``; ``nak(msg, delay)`` puts it back the same way."""

    def __init__(self, nc: NATS, within: float = 0.02):
        self.nc = nc
        self.within = within
        self._timer: asyncio.TimerHandle | None = None
        self.queued = 0  # acks put on the buffer (tests)

    def ack(self, msg: Any) -> None:
        self._send(msg, b"")

    def nak(self, msg: Any, delay: float | None = None) -> None:
        """Negative: delivered again (after ``delay`` seconds when given)."""
        payload = b"-NAK"
        if delay:
            payload += b" " + json.dumps({"delay": int(delay * 10**9)}).encode()
        self._send(msg, payload)

    def _send(self, msg: Any, payload: bytes) -> None:
        if not msg.reply:
            raise nats.errors.NotJSMessageError
        nc: Any = self.nc
        if nc.is_closed:
            raise nats.errors.ConnectionClosedError
        if msg._ackd:
            raise nats.errors.MsgAlreadyAckdError(msg)
        self._put(msg.reply, payload)
        msg._ackd = True

    def publish(self, subject: str, payload: bytes) -> None:
        """A core NATS message nobody answers or waits for (``court_rules.botviews``), on an ack's
        terms: it leaves with the connection's next write, or ``within`` seconds later at most."""
        nc: Any = self.nc
        if nc.is_closed:
            raise nats.errors.ConnectionClosedError
        self._put(subject, payload)

    def _put(self, subject: str, payload: bytes) -> None:
        nc: Any = self.nc
        cmd = b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload)
        nc._pending.append(cmd)
        nc._pending_data_size += len(cmd)
        nc.stats["out_msgs"] += 1
        nc.stats["out_bytes"] += len(payload)
        self.queued += 1
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.within, self.flush)

    def flush(self) -> None:
        """Wake the flusher now if acks still wait on the buffer (the timer's work; ``close``)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        nc: Any = self.nc
        if nc._pending_data_size and nc.is_connected and nc._flush_queue is not None:
            if nc._flush_queue.empty():
                nc._flush_queue.put_nowait(asyncio.get_running_loop().create_future())


_V1_ACK_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>


def _ack_field(msg: Any, field: int) -> int:
    """Field ``field`` (its ``Msg.Ack`` index, in the form with a domain and an account hash before
    the stream) of a JetStream message's ack subject, read as nats-py's ``msg.metadata`` reads it
    from either of JetStream's two forms, without the rest of its ``Metadata`` (a timestamp and
    three objects per message). ``nats.errors.NotJSMessageError`` for a message with no
    JetStream reply."""
    tokens = Msg.Metadata._get_metadata_fields(msg.reply)
    v1 = len(tokens) == _V1_ACK_TOKENS  # the form without the domain and the account hash
    return int(tokens[field - 2] if v1 else tokens[field])


def stream_seq(msg: Any) -> int:
    """A JetStream message's stream sequence, ``msg.metadata.sequence.stream`` (7 us against 0.4 in
    process; the projector reads one per record)."""
    return _ack_field(msg, Msg.Ack.StreamSeq)


def delivery_count(msg: Any) -> int:
    """JetStream's delivery count of ``msg`` (2+: a redelivery), ``msg.metadata.num_delivered``
    (1 % of the bot service's time in make bench ONLY=stack, read through ``metadata``)."""
    return _ack_field(msg, Msg.Ack.NumDelivered)


def ack_floor(info: Any, floor: int = 0) -> int:
    """A consumer's ack floor from its ``ConsumerInfo`` (the stream sequence up to which every
    message is acknowledged), or ``floor`` when it has none yet: where a reader keeps the point a
    consumer deleted under it is created again from (``resume_after``)."""
    acked = info.ack_floor
    return int(acked.stream_seq) if acked is not None and acked.stream_seq else floor


async def resume_after(js: Any, stream: str, floor: int) -> dict[str, Any] | None:
    """The start (``ConsumerConfig`` fields) of a durable created again after it was deleted under
    its readers, on from ``floor``, its ack floor as last read (``ack_floor``): every message after
    it delivered again. None when there is no floor (0) or ``stream`` was made anew since (its
    sequences started over: its last one is below the floor): then as when first created."""
    if not floor or floor > (await js.stream_info(stream)).state.last_seq:
        return None
    return {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": floor + 1}


class _PullReader:
    """What ``Puller`` and ``OneShotPuller`` share: a pull consumer's reader, and what it does with
    a status that ends one of its requests (``_ended``): no consumer to ask (503, no responders) or
    the consumer deleted under the request (409 Consumer Deleted) is kept as
    ``JetStreamUnavailable``, raised (``_raise_failed``) once the messages delivered before it are
    taken, so the caller attaches again; a request that ended at once with nothing delivered makes
    the next one wait first, 10 ms doubling up to 1 s, so a reader never spins on nats-server."""

    def __init__(self, psub: Any, batch: int, expires: float):
        self.psub = psub
        self.batch = batch
        self.expires = expires
        self.requests = 0  # requests sent (tests)
        self._pause = 0.0  # the last wait after a request that ended with nothing (doubles)
        self._not_before = 0.0  # (loop time) no request before then (after one that ended with nothing)
        self._failed: JetStreamUnavailable | None = None  # raised once what came before it is taken

    def _ended(self, status: str, msg: Any, *, empty: bool) -> None:
        """A request ended with ``status`` (not 100, a heartbeat); ``empty``: at once, with nothing."""
        description = (msg.headers or {}).get("Description", "")
        if status == "503" or (status == "409" and "deleted" in description.lower()):
            self._failed = JetStreamUnavailable(
                f"pull request on {self.psub._nms} answered {status} {description}".rstrip()
            )
        elif empty:
            self._pause = min(max(self._pause * 2, 0.01), 1.0)
            self._not_before = asyncio.get_running_loop().time() + self._pause

    def _raise_failed(self) -> None:
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed


class Puller(_PullReader):
    """A pull consumer read with pull requests kept open, as nats.go's ``Consume`` does, instead of
    ``fetch`` per batch. ``fetch`` costs each call a no-wait request, a "no messages" status back
    and, when nothing was there, a second, lingering request: at a few messages per batch that is
    one or two requests and status messages per message delivered (make bench: the projector's;
    the turn clock keeps ``fetch``, see court_rules.clockdriver). Here one request for ``batch`` messages stays open for ``expires``
    seconds and messages flow as they are appended; a new request goes out when half of the
    outstanding ones have arrived, when a request ended (408 / 409 status) or when the newest
    request has expired (a nats-server restart forgets open requests without a word).

    As ``OneShotPuller``: no consumer to ask (503, no responders) or the consumer deleted under
    an open request (409 Consumer Deleted) raises ``JetStreamUnavailable`` (the caller attaches
    again, re-creating the consumer), and a request ended at once with nothing delivered (a 409
    such as too many waiting requests) makes the next request wait a little first (doubling up
    to 1 s), so a reader never spins on nats-server.

    ``psub`` is nats-py's ``PullSubscription`` (its subject and inbox are read from it)."""

    def __init__(self, psub: Any, batch: int, *, expires: float = 5.0):
        super().__init__(psub, batch, expires)
        self.outstanding = 0  # messages the open requests may still deliver
        self.renew_at = 0.0  # (monotonic) when the newest request has expired
        self._since_ask = 0  # messages delivered since the newest request was sent

    async def _request(self) -> None:
        body = json.dumps({"batch": self.batch, "expires": int(self.expires * 1_000_000_000)}).encode()
        now = asyncio.get_running_loop().time()
        if now >= self.renew_at:
            # every request made so far has expired (the newest last): none may deliver anything
            # more, whatever was counted for them (a nats-server restart forgets open requests
            # without a word, and a request that delivered its whole batch ends without one)
            self.outstanding = 0
        await self.psub._nc.publish(self.psub._nms, body, self.psub._deliver)
        self.requests += 1
        self._since_ask = 0
        self.outstanding += self.batch
        self.renew_at = now + self.expires

    async def next_batch(self, timeout: float, limit: int | None = None) -> list[Any]:
        """The messages delivered so far (at least one; at most ``limit``, default ``batch``),
        waiting at most ``timeout`` s for the first: ``nats.errors.TimeoutError`` when none came;
        ``JetStreamUnavailable`` when the consumer is gone (after the messages delivered before)."""
        loop = asyncio.get_running_loop()
        if self._failed is not None and self.psub._sub._pending_queue.empty():
            self._raise_failed()
        now = loop.time()
        if (self.outstanding <= self.batch // 2 or now >= self.renew_at) and now >= self._not_before:
            await self._request()
        sub = self.psub._sub
        out: list[Any] = []
        deadline = now + timeout
        queue = sub._pending_queue
        limit = self.batch if limit is None else limit
        while not out:
            if queue.empty():  # (next_msg makes a task and a timer: only when there is a wait)
                self._raise_failed()
                now = loop.time()
                left = deadline - now
                if left <= 0:
                    raise nats.errors.TimeoutError
                if self.outstanding <= 0 or now >= self.renew_at:  # no request open for us
                    if now < self._not_before:  # the last one ended at once with nothing: wait first
                        await asyncio.sleep(min(self._not_before - now, left))
                    else:
                        await self._request()
                    continue
                self._take(await sub.next_msg(timeout=left), out)
            self._drain(out, limit)
        return out

    def _drain(self, out: list[Any], limit: int) -> None:
        """Move what is already delivered into ``out``, until it holds ``limit`` messages."""
        sub = self.psub._sub
        queue = sub._pending_queue
        while len(out) < limit and not queue.empty():
            msg = queue.get_nowait()
            sub._pending_size -= len(msg.data)
            self._take(msg, out)

    def _take(self, msg: Any, out: list[Any]) -> None:
        status = JetStreamContext.is_status_msg(msg)
        if not status:
            self.outstanding -= 1
            self._since_ask += 1
            self._pause = 0.0
            out.append(msg)
            return
        if status == "100":  # a heartbeat (none asked)
            return
        # 408 (request expired), 409 (consumer changes, limits reached), 503 (no consumer): an
        # ended request delivers nothing more; count none open (a spare request at worst, itself
        # bounded by its expiry)
        self.outstanding = 0
        # ended with nothing since the newest request (a 409 such as too many waiting requests;
        # not 408, an expired request): the next request waits a little, doubling
        self._ended(status, msg, empty=status != "408" and not self._since_ask)


class OneShotPuller(_PullReader):
    """A pull consumer read one batch per request, each asking for what the consumer holds when it
    arrives: ``no_wait`` with ``expires``, JetStream's one-shot request (nats-server 2.9 on) is held
    until a message is there, then delivers what is pending, at most ``batch``, and ends (with a
    404 or 408 status when it delivered fewer). ``Puller``'s requests stay open, so nats-server writes each message to the reader
    as it is appended and the reader's event loop wakes and reads once per message, however busy
    the stream; here the messages appended while the reader works on a batch (and during a
    ``delay`` it takes before asking again: the projector's linger) wait in the stream and come
    in one write, read at once. A reader that keeps up with a quiet stream is not held up: its
    request waits in nats-server and the next message is delivered as soon as it is stored.

    A request is sent only when none is open; one that no status ended within ``expires`` (and a
    little more) is taken for forgotten (a nats-server restart forgets open requests without a
    word) and another is sent. A request ended with nothing delivered (another reader's request
    holds what is pending: 408 "Requests Pending"; a 409 such as too many waiting requests) makes
    the next wait a little first (doubling up to 1 s), so readers sharing a consumer never spin;
    no consumer to ask (503, no responders) or a consumer deleted under the request raises
    ``JetStreamUnavailable``: the caller attaches again.

    Messages are handed over as nats-py's read loop parses them (as ``Publisher``'s acks are),
    not through the subscription's queue: no queue operations per message and no running-loop
    lookup (a ``getpid`` call each on Python 3.11) per batch. What one request brings is bounded
    by ``batch``, so nothing piles up unread.

    ``psub`` is nats-py's ``PullSubscription`` (its subject and inbox are read from it; its
    messages go to this reader alone from then on)."""

    GRACE = 1.0  # s past a request's expiry before it is taken for forgotten

    def __init__(self, psub: Any, batch: int, *, expires: float = 5.0):
        super().__init__(psub, batch, expires)
        self.waited = float("inf")  # s from the last request to its first message (inf: none yet)
        self._open_until = 0.0  # (loop time) when the open request is taken for forgotten; 0: none
        self._asked = 0.0  # (loop time) when the open request was sent
        self._delivered = 0  # messages the open request has delivered
        self._body = json.dumps(
            {"batch": batch, "no_wait": True, "expires": int(expires * 1_000_000_000)}
        ).encode()
        self._arrived: deque[Any] = deque()  # messages handed over, not yet taken
        self._waiter: asyncio.Future[None] | None = None  # set when a message arrives
        self._loop: asyncio.AbstractEventLoop | None = None
        psub._sub._future = _Deliver(self._deliver)

    def _deliver(self, msg: Any) -> None:
        self._arrived.append(msg)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_batch(self, timeout: float, *, delay: float = 0.0) -> list[Any]:
        """The next batch: at least one message, at most ``batch``, those delivered so far. When no
        request is open one is sent, ``delay`` s from now (what is appended meanwhile joins the
        batch). ``nats.errors.TimeoutError`` when none came within ``timeout`` s of the call (a
        request may stay open: the next call waits on it)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        out: list[Any] = []
        while True:
            while self._arrived and len(out) < self.batch:
                self._take(self._arrived.popleft(), out, loop)
            if out:
                return out
            self._raise_failed()
            now = loop.time()
            if now >= deadline:
                raise nats.errors.TimeoutError
            if now >= self._open_until:  # none open (or a forgotten one): ask, when it is time
                at = max(now + delay, self._not_before)
                delay = 0.0
                if at > now:
                    await self._wait(loop, min(at, deadline) - now, woken=False)
                    continue  # (a forgotten request's late messages are taken first)
                await self.psub._nc.publish(self.psub._nms, self._body, self.psub._deliver)
                self.requests += 1
                self._asked = loop.time()
                self._open_until = self._asked + self.expires + self.GRACE
                self._delivered = 0
                continue
            await self._wait(loop, min(deadline, self._open_until) - now, woken=True)

    async def _wait(self, loop: asyncio.AbstractEventLoop, seconds: float, *, woken: bool) -> None:
        """``seconds`` s, or less when ``woken`` and a message arrives (a future and a timer of the
        loop's own making: no running-loop lookup)."""
        fut: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _resolve, fut)
        if woken:
            self._waiter = fut
        try:
            await fut
        finally:
            timer.cancel()
            if self._waiter is fut:
                self._waiter = None

    def _take(self, msg: Any, out: list[Any], loop: asyncio.AbstractEventLoop) -> None:
        status = JetStreamContext.is_status_msg(msg)
        if not status:
            if not self._delivered:
                self.waited = loop.time() - self._asked
            self._delivered += 1
            if self._delivered >= self.batch:
                self._open_until = 0.0  # its whole batch delivered: it has ended (with no status)
            self._pause = 0.0
            out.append(msg)
            return
        if status == "100":  # a heartbeat (none asked)
            return
        self._open_until = 0.0  # the request has ended
        # ended at once with nothing (another reader's request holds what is pending; a 409)
        self._ended(status, msg, empty=not self._delivered and loop.time() - self._asked < self.expires)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
