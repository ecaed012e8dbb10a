"""Typed errors of gdn_serve: every failed call raises a GdnError subclass.

Each error carries the gRPC status code (`code`, a grpc.StatusCode) and the
server's message (`message`). The server's codes and what they mean
(README.md, "Use it"):

    InvalidArgument      bad input (shape, dtype, layer, NaN/Inf); nothing applied
    FailedPrecondition   a position behind the stored one; `expected_position`
                         is the position the (session, layer) is at
    NotFound             unknown session
    AlreadyExists        a session id already taken
    ResourceExhausted    the state cache is full
    Unavailable          server draining or unreachable (retried by the client)
    DeadlineExceeded     the call's timeout passed (a Forward waiting for an
                         earlier position is not applied)
    DataLoss             a damaged snapshot

Client-side checks (shapes, dtypes) raise InvalidArgument before anything is
sent, with `code` = grpc.StatusCode.INVALID_ARGUMENT.
"""

import re
from typing import Optional

import grpc

__all__ = [
    "GdnError", "InvalidArgument", "FailedPrecondition", "NotFound", "AlreadyExists",
    "ResourceExhausted", "Unavailable", "DeadlineExceeded", "DataLoss", "Internal",
    "from_rpc_error", "error_for_code",
]


class GdnError(Exception):
    """A failed gdn-server call: `code` (grpc.StatusCode) and `message` (str)."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return "%s: %s" % (self.code.name, self.message)


class InvalidArgument(GdnError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class FailedPrecondition(GdnError):
    """A position behind the stored one (or a snapshot of another layer config).

    `expected_position`: the position the server named ("expected position N"),
    or None when the message names none.
    """

    code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message, code)
        self.expected_position = parse_expected_position(message)


class NotFound(GdnError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(GdnError):
    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(GdnError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(GdnError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(GdnError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class DataLoss(GdnError):
    code = grpc.StatusCode.DATA_LOSS


class Internal(GdnError):
    code = grpc.StatusCode.INTERNAL


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, FailedPrecondition, NotFound, AlreadyExists, ResourceExhausted,
    Unavailable, DeadlineExceeded, DataLoss, Internal)}

# server/engine/admission.cc: "... is at position N; got position M (expected position N)"
_EXPECTED = re.compile(r"expected position (\d+)")


def parse_expected_position(message: str) -> Optional[int]:
    """The N of "expected position N" in a FAILED_PRECONDITION message, else None."""
    found = _EXPECTED.search(message or "")
    return int(found.group(1)) if found else None


def error_for_code(code: grpc.StatusCode, message: str) -> GdnError:
    """The GdnError subclass instance for a status code (GdnError for others)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return GdnError(message, code)
    return cls(message, code)


def from_rpc_error(error: grpc.RpcError) -> GdnError:
    """Maps a grpc.RpcError (sync or aio) to its typed GdnError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return error_for_code(code or grpc.StatusCode.UNKNOWN, details or "")
