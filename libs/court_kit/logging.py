"""One structlog setup for every service.

JSON lines (``COURT_LOG_FORMAT=json``, the default) with ``timestamp`` (ISO
8601, UTC), ``level``, ``service``, ``event`` and whatever context is bound:
the request id and game id are bound per call with ``bind(...)`` (structlog
contextvars, so they follow the asyncio task). ``console`` renders for people.
Standard-library logging (grpc, nats) goes through the same renderer.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(service: str, fmt: str = "json", level: str = "info", stream: Any = None) -> None:
    """Route structlog and stdlib logging to one renderer on ``stream`` (default stderr)."""
    lvl = _LEVELS.get(level, logging.INFO)
    shared: list[Any] = [
        merge_context,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_service(service),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(lvl)


def _add_service(service: str) -> Any:
    def add(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
        event.setdefault("service", service)
        return event

    return add


def get_logger(name: str | None = None, **initial: Any) -> Any:
    return structlog.get_logger(name, **initial)


# The bound context: one immutable dict per task (a ContextVar, so it follows the asyncio task
# and a task's binds never reach its parent), replaced whole on each bind: one set per call,
# where structlog.contextvars keeps a ContextVar per key.
_CONTEXT: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "court_log_context", default=MappingProxyType({})
)


def merge_context(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """The structlog processor adding the bound context (the event's own keys win)."""
    ctx = _CONTEXT.get()
    return {**ctx, **event} if ctx else event


def bind(**values: Any) -> None:
    """Bind context (``request_id``, ``game_id``, ...) to every log line of this task."""
    _CONTEXT.set({**_CONTEXT.get(), **values})


def bind_only(**values: Any) -> None:
    """``clear()`` then ``bind(**values)``, in one step (the gRPC edge, at the start of each call)."""
    _CONTEXT.set(values)


def bound() -> dict[str, Any]:
    """The context bound in this task."""
    return dict(_CONTEXT.get())


def clear() -> None:
    _CONTEXT.set({})


class StateLog:
    """Rate-limited logging of a retry loop: one line per change of state plus a periodic summary.

    ``failed(...)`` logs the first failure (a warning), then only counts, writing one summary line
    ("still failing", with the count and the last error) every ``summary_every`` seconds while the
    failures go on; ``ok(...)`` logs the recovery once (with how long it took and how many tries
    failed). A loop that retries every 250 ms while NATS is down thus writes one line when NATS
    goes, one a minute while it stays away, and one when it is back, instead of four a second.
    """

    def __init__(self, logger: Any, what: str, *, summary_every: float = 60.0, clock: Any = None):
        import time

        self.log = logger
        self.what = what
        self.summary_every = summary_every
        self._clock = clock or time.monotonic
        self.down = False
        self.failures = 0
        self._since = 0.0
        self._last_summary = 0.0
        self._last: dict[str, Any] = {}

    def failed(self, event: str, **kw: Any) -> None:
        now = self._clock()
        if not self.down:
            self.down, self.failures, self._since, self._last_summary = True, 1, now, now
            self.log.warning(event, **kw)
            return
        self.failures += 1
        self._last = kw
        if now - self._last_summary >= self.summary_every:
            self._last_summary = now
            self.log.warning(
                f"{self.what} still failing",
                failures=self.failures,
                failing_for_s=round(now - self._since, 1),
                last_event=event,
                **kw,
            )

    def ok(self, event: str, **kw: Any) -> None:
        if self.down:
            self.down = False
            self.log.info(event, failures=self.failures, after_s=round(self._clock() - self._since, 1), **kw)
            self.failures = 0
