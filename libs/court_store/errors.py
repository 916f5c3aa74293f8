"""Domain errors of the lobby and ranking services, mapped to gRPC status codes once, at the edge."""

from __future__ import annotations


class CourtError(Exception):
    """Root of every domain error; ``code`` names the gRPC status (``grpc.StatusCode`` member name)."""

    code = "INTERNAL"

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class InvalidArgument(CourtError):
    code = "INVALID_ARGUMENT"


class NotFound(CourtError):
    code = "NOT_FOUND"


class AlreadyExists(CourtError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(CourtError):
    code = "FAILED_PRECONDITION"


class PermissionDenied(CourtError):
    code = "PERMISSION_DENIED"


class Unauthenticated(CourtError):
    code = "UNAUTHENTICATED"


class Aborted(CourtError):
    """A lost race (the seat went to someone else, the game already started)."""

    code = "ABORTED"


class Unavailable(CourtError):
    code = "UNAVAILABLE"
