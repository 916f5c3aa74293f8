"""Domain errors to gRPC status codes: the one place the mapping lives.

Services raise the engines' errors (``court_games.core.GameError``, a ``court_base.BadInput``:
this module does not import the engines) or the ``ServiceError`` subclasses below; the edge interceptor (``court_kit.server.EdgeInterceptor``)
turns them into a status with the error's message. Anything else is a bug:
INTERNAL, logged with its traceback, and the client sees no internals.
"""

from __future__ import annotations

import grpc
from court_base import BadInput

from .checks import BadPageToken, clip
from .tokens import TokenError


class ServiceError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidArgument(ServiceError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class FailedPrecondition(ServiceError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class NotFound(ServiceError):
    code = grpc.StatusCode.NOT_FOUND


class PermissionDenied(ServiceError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(ServiceError):
    code = grpc.StatusCode.UNAUTHENTICATED


class Aborted(ServiceError):
    """Lost an optimistic-concurrency race; the caller retries with the same request id."""

    code = grpc.StatusCode.ABORTED


class Unavailable(ServiceError):
    """A dependency (NATS, a database) is unreachable for now; retry with the same request id."""

    code = grpc.StatusCode.UNAVAILABLE


class AlreadyExists(ServiceError):
    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(ServiceError):
    """A rate limit: the message says when to try again."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The status code and message for a known error; ``None`` for a bug. The message is clipped
    (``checks.clip``), so no input echoed into it can push the status past gRPC's metadata limit."""
    st = _status_for(exc)
    return None if st is None else (st[0], clip(st[1]))


def _status_for(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    if isinstance(exc, BadPageToken):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, ServiceError):
        return exc.code, str(exc)
    if isinstance(exc, TokenError):
        return grpc.StatusCode.UNAUTHENTICATED, str(exc)
    if isinstance(exc, BadInput):  # an engine's IllegalAction (NotYourTurn included) is not_now
        code = grpc.StatusCode.FAILED_PRECONDITION if exc.not_now else grpc.StatusCode.INVALID_ARGUMENT
        return code, str(exc)
    return None
