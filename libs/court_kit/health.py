"""Readiness and liveness over the gRPC health protocol.

Every service answers ``grpc.health.v1.Health`` under these names:

* ``""`` (what a probe asks when it names no service) and the service's own full name (e.g.
  ``court.rules.v1.RulesService``): **readiness**. SERVING while the process can do its work:
  ``Readiness`` checks each required dependency every ``interval`` seconds (each check bounded by
  ``timeout``, so a dependency that hangs, accepting bytes and answering nothing, fails like one
  that refuses), and after ``failures`` failures in a row turns these names NOT_SERVING; the first
  good round turns them SERVING again. Defaults 2 s, 2 s, 2: NOT_SERVING within about 8 s of the
  dependency going, well inside 15 s. Settings ``COURT_READY_INTERVAL``, ``COURT_READY_TIMEOUT``,
  ``COURT_READY_FAILURES``.
* ``liveness`` (``LIVENESS``): **liveness**. SERVING for as long as the process runs its event
  loop, whatever its dependencies do: restarting a pod because NATS is away would not bring NATS
  back. It turns NOT_SERVING only when the process shuts down.

Required dependencies: rules and bot need NATS (JetStream), ranking NATS and its database, lobby
its database (the rules and ranking services it calls are other services with their own
readiness; the lobby answers UNAVAILABLE for calls that need them).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from . import logging as klog
from .loops import rest

log = klog.get_logger("court_kit.health")

LIVENESS = "liveness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

Check = Callable[[], Awaitable[None]]


def nats_check(nc: Any, timeout: float) -> Check:
    """NATS is up and JetStream answers: one ``$JS.API.INFO`` round trip (a hung server, say one
    stopped with SIGSTOP, keeps the TCP connection open but answers nothing: that times out)."""

    async def check() -> None:
        if not nc.is_connected:
            raise ConnectionError("not connected to NATS")
        msg = await nc.request("$JS.API.INFO", b"", timeout=timeout)
        if b'"error"' in msg.data:
            raise ConnectionError(
                f"JetStream: {json.loads(msg.data).get('error', {}).get('description', '?')}"
            )

    return check


def database_check(engine: Any, timeout: float) -> Check:
    """The database answers ``SELECT 1``. PostgreSQL gets a connection of its own (psycopg's async
    driver, so a stalled server or proxy is abandoned at the timeout instead of holding a thread);
    SQLite, a local file, is asked through the engine."""
    if engine.dialect.name != "postgresql":

        def select_one() -> None:
            with engine.connect() as c:
                c.exec_driver_sql("SELECT 1")

        async def check_sqlite() -> None:
            await asyncio.to_thread(select_one)

        return check_sqlite

    import psycopg

    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    state: dict[str, Any] = {"conn": None, "probe": None, "since": 0.0}

    async def probe() -> None:
        conn = state["conn"]
        if conn is None or conn.closed:
            conn = state["conn"] = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=max(1, int(timeout))
            )
        await conn.execute("SELECT 1")

    async def check_pg() -> None:
        # The probe is never cancelled: psycopg answers a cancellation by asking the server to
        # cancel the query and waits ~10 s for that, longer than a readiness check may take.
        # A probe that outlives ``timeout`` is left to finish on its own (with a fresh connection
        # next time), at most one at a time; one older than 30 s is forgotten.
        loop = asyncio.get_running_loop()
        pending = state["probe"]
        if pending is not None and not pending.done():
            if loop.time() - state["since"] < 30.0:
                raise TimeoutError("the previous database check is still waiting for an answer")
            pending = None
        task = pending if pending is not None and not pending.done() else None
        if task is None:
            task = asyncio.ensure_future(probe())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            state["probe"], state["since"] = task, loop.time()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            state["conn"] = None  # that connection is stuck; the next probe opens another
            raise TimeoutError(f"the database did not answer SELECT 1 within {timeout:g}s")
        state["probe"] = None
        exc = task.exception()
        if exc is not None:
            state["conn"] = None
            raise exc

    return check_pg


class Readiness:
    """Keeps the readiness names in step with the required dependencies (see the module doc)."""

    def __init__(
        self,
        health: HealthServicer,
        names: Sequence[str],
        checks: Mapping[str, Check],
        *,
        interval: float = 2.0,
        timeout: float = 2.0,
        failures: int = 2,
    ):
        self.health = health
        self.names = ("", *names)
        self.checks = dict(checks)
        self.interval = interval
        self.timeout = timeout
        self.threshold = max(1, failures)
        self.ready = True
        self.failing: dict[str, int] = {}
        self.round = asyncio.Condition()  # notified after every round (tests, tools)
        self._logs = {name: klog.StateLog(log, f"{name} check") for name in self.checks}

    async def _one(self, name: str, check: Check) -> str | None:
        try:
            await asyncio.wait_for(check(), self.timeout + 1.0)  # the checks bound themselves too
        except Exception as exc:  # noqa: BLE001 - any failure means "not there"
            return f"{type(exc).__name__}: {exc}"[:200] if str(exc) else type(exc).__name__
        return None

    async def check_once(self) -> bool:
        names = list(self.checks)
        errors = await asyncio.gather(*(self._one(n, self.checks[n]) for n in names))
        for name, error in zip(names, errors, strict=True):
            if error is None:
                self.failing.pop(name, None)
                self._logs[name].ok("dependency answers again", dependency=name)
            else:
                self.failing[name] = self.failing.get(name, 0) + 1
                self._logs[name].failed("dependency check failed", dependency=name, error=error)
        ready = not any(n >= self.threshold for n in self.failing.values())
        if ready != self.ready:
            self.ready = ready
            status = SERVING if ready else NOT_SERVING
            for n in self.names:
                await self.health.set(n, status)
            if ready:
                log.info("ready again: health SERVING")
            else:
                log.warning(
                    "not ready: health NOT_SERVING",
                    dependencies=sorted(n for n, c in self.failing.items() if c >= self.threshold),
                )
        async with self.round:
            self.round.notify_all()
        return ready

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.check_once()
            await rest(stop, self.interval)
