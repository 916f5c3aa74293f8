"""gRPC server bootstrap shared by every service.

* ``create_server(address, edge=...) -> (server, port)``: a grpc.aio server bound to ``address``
  (port 0 picks a free one, so tests bind 0), its servicers served behind ``edge``.
* ``await add_health_and_reflection(server, names) -> HealthServicer``: the gRPC
  health protocol (every name, "" and ``liveness`` SERVING; ``court_kit.health`` says which name
  is readiness and which liveness) and server reflection.
* ``await start_server(settings, names, add_servicers) -> (server, port, health)``: a service's
  server as every ``app.py`` starts it: the two above, the edge, its servicers, started.
* ``EdgeInterceptor``: per call, verifies the bearer token, binds the request
  id to the log context, exposes the caller via ``current_identity()``,
  records metrics, and maps domain errors to status codes
  (``court_kit.errors.status_for``): the one edge where that happens. Installed on the server
  (``install``): each handler wrapped once and served as grpc looks it up, with no interceptor.
* ``serve_until_signalled``: on SIGTERM/SIGINT health goes NOT_SERVING, the
  server stops with a grace period, then the cleanups run (``nc.drain()``).
* ``run_service``: every service's console script (``court-rules`` and the rest). Its signal
  handlers are installed before anything else happens, so SIGTERM at any moment (while settings
  load, while it waits for NATS or the database at start-up, while serving) stops the process:
  during start-up at once, when serving gracefully (health NOT_SERVING, in-flight calls get
  COURT_SHUTDOWN_GRACE seconds, default 6, then the clean-ups at most 2 s more), and in every case
  within COURT_SHUTDOWN_GRACE + 3 s (the process exits then even if a clean-up hangs). This holds
  for a service running as PID 1 in a container too (no init needed): PID 1 ignores only signals
  it has no handler for. A second SIGTERM/SIGINT exits at once.
* ``run_loop(main, loop)``: run a coroutine to completion on the event loop COURT_EVENT_LOOP names
  (``uvloop``, the default, or ``asyncio``); ``run_service`` and make bench's ceiling use it, so
  both run on the same loop.
* The cycle collector, once a service has started (``tune_gc``): what start-up made (modules,
  descriptors, caches) is frozen out of every later collection (``gc.freeze``: a full collection
  no longer walks it, 90-130 ms a time in rules and analytics under make bench's load), and a
  young collection runs every COURT_GC_THRESHOLD (default 5,000) new containers instead of 700
  (docs/capacity.md: a larger one made fewer but longer pauses for no less time). 0 leaves
  Python's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import gc
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from . import logging as klog
from .errors import InvalidArgument, Unauthenticated, status_for
from .health import LIVENESS, Check, Readiness
from .metrics import GRPC
from .settings import ConfigError, Settings, listen_host_port
from .tokens import Identity, TokenError, Verifier, preflight

log = klog.get_logger("court_kit.server")
T = TypeVar("T")

_IDENTITY: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("court_identity", default=None)
_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("court_request_id", default="")
# the metadata grpc looked a call's handler up with, and the id of the task it did so in
# (_BehindEdge.service; the id, not the task: the task's own context holding the task would make a
# reference cycle of every call's task, left for the cycle collector)
_LOOKED_UP: contextvars.ContextVar[tuple[int, Any] | None] = contextvars.ContextVar(
    "court_edge_looked_up", default=None
)

OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
MAX_MESSAGE = 8 * 1024 * 1024
MAX_STREAMS = 100


def loop_factory(loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop factory COURT_EVENT_LOOP names (``None``: the standard library's)."""
    if loop == "asyncio":
        return None
    if loop != "uvloop":
        raise ConfigError(f"COURT_EVENT_LOOP must be uvloop or asyncio, got {loop[:20]!r}")
    try:
        import uvloop  # noqa: PLC0415 - only the processes that run on it import it
    except ImportError:
        raise ConfigError(
            "COURT_EVENT_LOOP is uvloop but uvloop is not installed here: install it "
            "(it is a dependency of court) or set COURT_EVENT_LOOP=asyncio"
        ) from None
    return uvloop.new_event_loop


def run_loop(main: Coroutine[Any, Any, T], loop: str = "uvloop") -> T:
    """``asyncio.run(main)`` on the event loop named ``loop`` (``uvloop`` or ``asyncio``)."""
    try:
        factory = loop_factory(loop)
    except ConfigError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def current_identity() -> Identity:
    """The verified caller of the current call (set by ``EdgeInterceptor``)."""
    ident = _IDENTITY.get()
    if ident is None:
        raise Unauthenticated("missing bearer token: send metadata 'authorization: Bearer <token>'")
    return ident


def current_request_id() -> str:
    return _REQUEST_ID.get()


def _read(path: str, what: str) -> bytes:
    try:
        return open(path, "rb").read()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path!r}: {exc.strerror}") from None


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS for the gRPC server when COURT_TLS_CERT/KEY are set (then plaintext clients are refused)."""
    if not settings.tls_cert:
        return None
    return grpc.ssl_server_credentials(
        [(_read(settings.tls_key, "COURT_TLS_KEY"), _read(settings.tls_cert, "COURT_TLS_CERT"))]
    )


def client_channel(
    target: str, settings: Settings, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A channel to another service: TLS verified against COURT_TLS_CA when set, else plaintext."""
    opts = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        *options,
    ]
    if settings.tls_ca:
        creds = grpc.ssl_channel_credentials(root_certificates=_read(settings.tls_ca, "COURT_TLS_CA"))
        return grpc.aio.secure_channel(target, creds, options=opts)
    return grpc.aio.insecure_channel(target, options=opts)


def create_server(
    address: str,
    *,
    edge: EdgeInterceptor | None = None,
    interceptors: Sequence[Any] = (),
    options: Iterable[tuple[str, Any]] = (),
    settings: Settings | None = None,
) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server on ``address``. With ``settings``: its TLS, message size and stream limits.
    With ``edge``: every servicer added to it afterwards is served behind that edge
    (``EdgeInterceptor.install``)."""
    max_message = settings.max_message_bytes if settings is not None else MAX_MESSAGE
    max_streams = settings.max_streams if settings is not None else MAX_STREAMS
    server = grpc.aio.server(
        interceptors=list(interceptors),
        options=[
            ("grpc.so_reuseport", 0),  # a taken port is an error, not a silent second listener
            ("grpc.max_receive_message_length", max_message),
            ("grpc.max_send_message_length", max_message),
            ("grpc.max_concurrent_streams", max_streams),  # per client connection
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            *options,
        ],
    )
    _generic_handlers_only(server)
    if edge is not None:
        edge.install(server)
    creds = server_credentials(settings) if settings is not None else None
    try:
        if creds is not None:
            port = server.add_secure_port(listen_host_port(address), creds)
        else:
            port = server.add_insecure_port(listen_host_port(address))
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {address!r}: {exc}") from exc
    if not port:
        raise ConfigError(f"cannot listen on {address!r}: the address is taken or invalid")
    return server, port


def _generic_handlers_only(server: grpc.aio.Server) -> None:
    """Serve every method through the generic handlers the generated ``add_*_to_server`` also
    installs, never as a pre-registered method.

    grpcio's aio server (1.62 and later) keeps one pending request task per registered method and,
    after every call, waits on all of them again (``asyncio.wait``, ``FIRST_COMPLETED``, in
    Python): a cost per call that grows with the service's method count (13 for the rules service,
    health and reflection included). Served through the generic handler instead, a call waits on
    one task. ``make bench``, bot mode, side by side: the rules server's CPU per move 5 % lower
    (about 40 us), the ratio to the ceiling 0.41 to 0.44. ``tests/kit/test_server.py`` checks that
    a started server holds no per-method tasks and still serves every kind of call."""

    def generic_instead(service_name: str, method_handlers: Any) -> None:
        return None  # the same handlers arrived through add_generic_rpc_handlers

    server.add_registered_method_handlers = generic_instead


async def add_health_and_reflection(
    server: grpc.aio.Server,
    service_names: Sequence[str],
    *,
    reflection_on: bool = True,
    health_listen: str = "",
) -> HealthServicer:
    """Health (always) and server reflection (``reflection_on``: COURT_REFLECTION, off in prod).

    ``health_listen`` (COURT_HEALTH_LISTEN) also serves the same health, and nothing else, on a
    plaintext port of its own, stopped with ``server``: the kubelet's gRPC probes cannot speak TLS."""
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    if health_listen:
        probe = grpc.aio.server(
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.max_receive_message_length", 4096),
                ("grpc.max_concurrent_streams", 16),
            ]
        )
        _generic_handlers_only(probe)
        health_pb2_grpc.add_HealthServicer_to_server(health, probe)
        if not probe.add_insecure_port(listen_host_port(health_listen)):
            raise ConfigError(f"cannot listen on COURT_HEALTH_LISTEN {health_listen!r}")
        await probe.start()
        main_stop = server.stop

        async def stop_both(grace: float | None) -> None:
            await main_stop(grace)
            await probe.stop(None)

        server.stop = stop_both
    for name in ("", LIVENESS, *service_names):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    if reflection_on:
        names = (
            *service_names,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        )
        reflection.enable_server_reflection(names, server)
    return health


async def start_server(
    settings: Settings,
    service_names: Sequence[str],
    add_servicers: Callable[[grpc.aio.Server], object] = lambda server: None,
    *,
    edge: bool = True,
    public_methods: Iterable[str] = (),
) -> tuple[grpc.aio.Server, int, HealthServicer]:
    """A service's gRPC server, started: on ``settings.listen`` with its TLS and limits
    (``create_server``), behind the ``EdgeInterceptor`` (``edge``: tokens verified with the key set
    of ``settings``, ``public_methods`` without one; a process that serves only health, the
    projector and analytics, has none), its servicers added by ``add_servicers(server)``, then
    health and reflection (``add_health_and_reflection``: COURT_REFLECTION, COURT_HEALTH_LISTEN).
    Returns the server, its port and the health servicer."""
    server, port = create_server(
        settings.listen,
        settings=settings,
        edge=EdgeInterceptor(Verifier.for_service(settings), public_methods=public_methods) if edge else None,
    )
    add_servicers(server)
    health = await add_health_and_reflection(
        server,
        service_names,
        reflection_on=settings.reflection,
        health_listen=settings.health_listen,
    )
    await server.start()
    return server, port, health


class _Undecodable:
    """A request the method's deserializer refused (the handler answers INVALID_ARGUMENT)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def _lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """The deserializer, answering a request protobuf cannot parse (nested past its depth limit of
    100, malformed) with ``_Undecodable`` instead of raising, which gRPC would answer UNKNOWN."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # noqa: BLE001 - google.protobuf.message.DecodeError and kin
            return _Undecodable(str(exc))

    return parse


def _check_decoded(request: Any) -> None:
    if isinstance(request, _Undecodable):
        depth = "MaxDepth" in request.reason
        raise InvalidArgument(
            "the request could not be decoded: "
            + (
                "it nests too deeply (protobuf decodes at most 100 levels of messages)"
                if depth
                else "it is not a valid message of this method"
            )
        )


def _metadata(metadata: Iterable[tuple[str, str]] | None) -> tuple[str, str]:
    token = rid = ""
    for key, value in metadata or ():
        if key == "authorization":
            token = value[7:].strip() if value[:7].lower() == "bearer " else value.strip()
        elif key == "x-request-id":
            rid = value
    return token, rid


class EdgeInterceptor:
    """Auth, request ids, logging context, metrics and error mapping for every call.

    ``public_methods`` (full names such as ``/court.lobby.v1.LobbyService/Login``)
    run without a token; health and reflection always do.

    Each method's wrapped handler is built once and kept (the servicer's handlers are fixed
    when it is added to the server): per call the edge reads the metadata, verifies the token
    (``Verifier`` caches verified tokens), sets the logging context once and counts the call in
    plain per-method counters (``court_kit.metrics.GRPC``).

    It is installed on a server (``install``, which ``create_server(edge=...)`` and
    ``start_server`` call), not passed to it as an interceptor: grpc serves the wrapped handlers
    straight from its handler lookup, which is synchronous, where a grpc.aio server interceptor
    costs a chain of coroutines per call to reach the same handler; and the edge reads the call's
    metadata as grpc's lookup was given it (``_BehindEdge``), not a second copy out of grpc's
    core (``invocation_metadata()`` builds one anew on each read). Server instructions per call
    (callgrind, sequential calls, a bare handler): no edge 341k, the edge as an interceptor 383k,
    installed 367k: the edge's own cost down from 42k to 26k, of which the metadata copy was 13k
    and the coroutine chain 3k.
    """

    def __init__(self, verifier: Verifier, *, public_methods: Iterable[str] = ()):
        self._verifier = verifier
        self._public = frozenset(public_methods)
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # the server's (``_task_id``)

    def _task_id(self) -> int:
        """``id(asyncio.current_task())``, the running loop looked up once, not per call: Python
        3.11's ``get_running_loop`` makes a ``getpid`` system call each time, and the edge asks for
        the current task twice a call (``_BehindEdge.service``, ``_enter``). Asked of the loop kept
        from the last lookup; no current task there (none, or that loop is not the one running
        now) means a lookup, which keeps the running loop for the next calls."""
        loop = self._loop
        if loop is not None:
            task = asyncio.current_task(loop)
            if task is not None:
                return id(task)
        loop = self._loop = asyncio.get_running_loop()
        return id(asyncio.current_task(loop))

    def install(self, server: grpc.aio.Server) -> None:
        """Serve every handler added to ``server`` from now on behind the edge, with no interceptor:
        each generic handler added is served through ``_BehindEdge``, which answers grpc's lookup of
        a call's handler with the edge-wrapped one (``handler``), in the same synchronous lookup."""
        add = server.add_generic_rpc_handlers

        def add_behind_edge(handlers: Sequence[grpc.GenericRpcHandler]) -> None:
            add(tuple(_BehindEdge(self, h) for h in handlers))

        server.add_generic_rpc_handlers = add_behind_edge

    def handler(self, method: str, handler: grpc.RpcMethodHandler | None) -> grpc.RpcMethodHandler | None:
        """``handler`` (the servicer's, for ``method``) behind the edge: wrapped once, then kept."""
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        if handler is None:
            return None
        wrapped = handler if method.startswith(OPEN_PREFIXES) else self._wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        public = method in self._public
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, method, public),
                request_deserializer=_lenient(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream, method, public),
                request_deserializer=_lenient(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        return handler  # client- and bidi-streaming calls: none of ours yet

    def _enter(self, context: grpc.aio.ServicerContext, method: str, public: bool) -> None:
        looked_up = _LOOKED_UP.get()
        if looked_up is not None and looked_up[0] == self._task_id():
            metadata = looked_up[1]  # this call's, as grpc found its handler in this very task
        else:
            metadata = context.invocation_metadata()  # a second copy out of grpc's core
        token, rid = _metadata(metadata)
        rid = rid or uuid.uuid4().hex
        _REQUEST_ID.set(rid)
        if public and not token:
            _IDENTITY.set(None)
            klog.bind_only(request_id=rid, method=method)
            return
        try:
            ident = self._verifier.verify(token)  # TokenError -> UNAUTHENTICATED
        except TokenError:
            klog.bind_only(request_id=rid, method=method)
            raise
        _IDENTITY.set(ident)
        klog.bind_only(request_id=rid, method=method, sub=ident.sub, role=ident.role)

    async def _fail(self, context: grpc.aio.ServicerContext, exc: Exception) -> None:
        """Abort the call with the status ``exc`` maps to (raises ``grpc.aio.AbortError``)."""
        st = status_for(exc)
        if st is None:
            log.exception("unhandled error", error_type=type(exc).__name__)
            st = (grpc.StatusCode.INTERNAL, "internal error (logged with the request id)")
        elif st[0] in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED):
            log.info("call failed", code=st[0].name, reason=st[1])
        await context.abort(st[0], st[1])

    def _unary(self, inner: Any, method: str, public: bool) -> Any:
        stats = GRPC.method(method)
        perf_counter = time.perf_counter

        async def behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            t0 = perf_counter()
            stats.in_flight += 1
            code = "OK"
            try:
                self._enter(context, method, public)
                _check_decoded(request)
                return await inner(request, context)
            except grpc.aio.AbortError:
                code = "ABORTED_BY_HANDLER"
                raise
            except Exception as exc:  # noqa: BLE001 - mapped to a status here, once
                code = _status_name(exc)
                await self._fail(context, exc)
            finally:
                stats.in_flight -= 1
                stats.done(code, perf_counter() - t0)

        return behavior

    def _stream(self, inner: Any, method: str, public: bool) -> Any:
        stats = GRPC.method(method)

        async def behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            stats.in_flight += 1
            code = "OK"
            try:
                self._enter(context, method, public)
                _check_decoded(request)
                async for item in inner(request, context):
                    yield item
            except grpc.aio.AbortError:
                code = "ABORTED_BY_HANDLER"
                raise
            except asyncio.CancelledError:
                code = "CANCELLED"  # the client went away, or the server is stopping
                raise
            except Exception as exc:  # noqa: BLE001
                code = _status_name(exc)
                await self._fail(context, exc)
            finally:
                stats.in_flight -= 1
                stats.codes[code] = stats.codes.get(code, 0) + 1  # a stream's lifetime is no handling time

        return behavior


class _BehindEdge(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no types
    """A generic handler added to a server with the edge installed: its handlers, edge-wrapped."""

    __slots__ = ("_edge", "_inner")

    def __init__(self, edge: EdgeInterceptor, inner: grpc.GenericRpcHandler):
        self._edge, self._inner = edge, inner

    # grpc calls ``service`` in the call's own task, right before it runs the handler there: the
    # metadata kept here, with that task, is this call's (``_enter`` takes it only in that task)
    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        _LOOKED_UP.set((self._edge._task_id(), details.invocation_metadata))
        return self._edge.handler(details.method, self._inner.service(details))


def _status_name(exc: Exception) -> str:
    st = status_for(exc)
    return "INTERNAL" if st is None else st[0].name


async def serve_until_signalled(
    server: grpc.aio.Server,
    health: HealthServicer | None,
    *,
    grace: float = 10.0,
    cleanups: Sequence[Callable[[], Awaitable[Any]]] = (),
    stop: asyncio.Event | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then shut down gracefully."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    try:
        await stop.wait()
        log.info("shutting down", grace=grace)
        if health is not None:
            await health.enter_graceful_shutdown()
        await server.stop(grace)
        for cleanup in cleanups:
            try:
                await cleanup()
            except Exception:  # noqa: BLE001 - keep shutting down
                log.exception("cleanup failed during shutdown")
        log.info("stopped")
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


class ServiceApp(Protocol):
    """What ``run_service`` needs of a started service: its server, health and clean-up, and
    (optionally) ``dependencies()`` (name -> check, for readiness), ``service_names`` (its gRPC
    services, whose health names follow readiness) and ``quiesce()`` (stop taking background work
    at the start of a shutdown)."""

    server: grpc.aio.Server
    health: HealthServicer

    async def close(self) -> None: ...


CLEANUP_BUDGET = 2.0  # seconds the clean-ups (drain NATS, close the database) get after the grace
HARD_EXIT_MARGIN = 3.0  # after grace + this, the process exits whatever is still running


class _Signals:
    """SIGTERM/SIGINT from the first line of ``main``: before the event loop exists they are
    recorded (and start-up is skipped); with the loop running they set ``stop``; a second one, or
    one arriving after the hard deadline, ends the process at once."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None
        self.hard_deadline: float | None = None
        self._previous: dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.received is not None:
            os.write(2, f"court: second signal {signal.Signals(signum).name}: exiting now\n".encode())
            os._exit(128 + signum)
        self.received = signum
        if self.loop is not None and self.stop is not None:
            self.loop.call_soon_threadsafe(self.stop.set)

    def attach(self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
        self.loop, self.stop = loop, stop
        if self.received is not None:
            stop.set()

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, previous)


def _hard_exit_after(seconds: float, code: int) -> None:
    """A daemon thread that ends the process if a shutdown overruns (a hung clean-up, a thread
    blocked on a dead database): Kubernetes would SIGKILL it anyway, only later."""

    def watchdog() -> None:
        time.sleep(seconds)
        os.write(2, f"court: shutdown took longer than {seconds:.0f}s: exiting now\n".encode())
        os._exit(code)

    threading.Thread(target=watchdog, name="court-shutdown-watchdog", daemon=True).start()


GC_THRESHOLD = 5_000  # new containers between young collections (Python's default: 700)


def tune_gc(threshold: int = GC_THRESHOLD) -> None:
    """Freeze what start-up made out of every later collection, and collect the young generation
    every ``threshold`` new containers (0: Python's defaults, nothing frozen)."""
    if threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)


async def _serve(
    name: str, start: Callable[[Settings], Awaitable[ServiceApp]], settings: Settings, signals: _Signals
) -> None:
    stop = asyncio.Event()
    signals.attach(asyncio.get_running_loop(), stop)
    grace = settings.shutdown_grace
    if stop.is_set():
        log.info("stopped before starting", signal=signals.received)
        return
    starting: asyncio.Future[Any] = asyncio.ensure_future(start(settings))
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        # SIGTERM while waiting for NATS or the database: nothing is serving yet, so stop now
        _hard_exit_after(CLEANUP_BUDGET + HARD_EXIT_MARGIN, 0)
        log.info("stopping during start-up", signal=signals.received)
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(starting, CLEANUP_BUDGET)
        log.info("stopped")
        if any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
        ):
            # a start-up thread is still blocked (connecting to a database that does not answer):
            # nothing was serving and nothing needs cleaning, so do not wait for it
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(0)
        return
    stopping.cancel()
    app = starting.result()  # a start-up error (ConfigError, ...) is raised here
    tune_gc(settings.extra_int("GC_THRESHOLD", GC_THRESHOLD))
    readiness = None
    ready_stop = asyncio.Event()
    ready_task = None
    deps: dict[str, Check] = app.dependencies() if hasattr(app, "dependencies") else {}
    if deps:
        readiness = Readiness(
            app.health,
            getattr(app, "service_names", ()),
            deps,
            interval=settings.extra_float("READY_INTERVAL", 2.0, lo=0.05),
            timeout=settings.extra_float("READY_TIMEOUT", 2.0, lo=0.05),
            failures=settings.extra_int("READY_FAILURES", 2, lo=1, hi=100),
        )
        ready_task = asyncio.create_task(readiness.run(ready_stop))
    await stop.wait()
    t0 = time.monotonic()
    _hard_exit_after(grace + HARD_EXIT_MARGIN, 0)
    log.info("shutting down", grace=grace, signal=signals.received)
    ready_stop.set()
    if ready_task is not None:
        ready_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await ready_task
    await app.health.enter_graceful_shutdown()
    if hasattr(app, "quiesce"):
        with contextlib.suppress(Exception):
            await app.quiesce()
    await app.server.stop(grace)
    left = grace + CLEANUP_BUDGET - (time.monotonic() - t0)
    try:
        await asyncio.wait_for(app.close(), max(0.5, min(CLEANUP_BUDGET, left)))
    except TimeoutError:
        log.warning("clean-up did not finish in time; exiting anyway")
    except Exception:  # noqa: BLE001 - keep shutting down
        log.exception("cleanup failed during shutdown")
    log.info("stopped", shutdown_s=round(time.monotonic() - t0, 2))


def run_service(
    name: str,
    start: Callable[[Settings], Awaitable[ServiceApp]],
    argv: Sequence[str] | None = None,
    *,
    check: Callable[[Settings], object] | None = None,
    migrate: Callable[[Settings], None] | None = None,
) -> int:
    """The ``court-<name>`` console script: settings from the environment, logging, serve until
    SIGTERM/SIGINT with a graceful shutdown (see the module doc for the timing). ``check``
    validates the service's own settings before anything starts; ``migrate`` adds the ``migrate``
    command (migrate the schema and exit). Exit status 2 on a configuration error, with the
    reason on stderr (or in the log once logging is set up)."""
    signals = _Signals()  # first: a SIGTERM from here on is never lost, nor ignored as PID 1
    try:
        parser = argparse.ArgumentParser(prog=f"court-{name}", description=f"Court's {name} service.")
        if migrate is not None:
            parser.add_argument(
                "command",
                nargs="?",
                default="serve",
                choices=("serve", "migrate"),
                help="serve (default), or migrate the database schema and exit",
            )
        args = parser.parse_args(argv)
        try:
            settings = Settings.load(name)
            preflight(settings)  # keys and secrets: missing, default, development or short ones stop us here
            if check is not None:
                check(settings)
        except ConfigError as exc:
            print(f"court-{name}: configuration error: {exc}", file=sys.stderr)
            return 2
        klog.configure_logging(name, settings.log_format, settings.log_level)
        try:
            if migrate is not None and args.command == "migrate":
                if signals.received is None:
                    migrate(settings)
                return 0
            run_loop(_serve(name, start, settings, signals), settings.event_loop)
        except ConfigError as exc:
            log.error("cannot start", error=str(exc))
            return 2
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        signals.restore()
