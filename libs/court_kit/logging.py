"""One structlog setup for every service.

JSON lines (``COURT_LOG_FORMAT=json``, the default) with ``timestamp`` (ISO
8601, UTC), ``level``, ``service``, ``event`` and whatever context is bound:
the request id and game id are bound per call with ``bind(...)`` (structlog
contextvars, so they follow the asyncio task). ``console`` renders for people.
Standard-library logging (grpc, nats) goes through the same renderer.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(service: str, fmt: str = "json", level: str = "info", stream: Any = None) -> None:
    """Route structlog and stdlib logging to one renderer on ``stream`` (default stderr)."""
    lvl = _LEVELS.get(level, logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_service(service),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
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


def bind(**values: Any) -> None:
    """Bind context (``request_id``, ``game_id``, ...) to every log line of this task."""
    structlog.contextvars.bind_contextvars(**values)


def clear() -> None:
    structlog.contextvars.clear_contextvars()
