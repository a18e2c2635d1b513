"""One exception hierarchy for every failure the client reports.

`LogbrokerError` carries the HTTP `status` (0 when no node answered) and the
broker's `reason`. A refusal by the broker (a 4xx, or a 5xx that is not a
connection problem) raises the subclass for its status; failing to reach any
node raises `ConnectionFailed`, which the CLI turns into exit code 3.
"""

from __future__ import annotations

import json
from typing import Any


class LogbrokerError(Exception):
    """A failed operation: `status` is the HTTP status (0 if none), `reason` the broker's text."""

    default_status = 0
    default_error = "error"

    def __init__(self, reason: str, status: int | None = None, error: str | None = None,
                 field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = self.default_status if status is None else status
        self.error = error or self.default_error
        self.field = field

    def __str__(self) -> str:
        return self.reason


class BadRequest(LogbrokerError):
    default_status, default_error = 400, "bad_request"


class Unauthorized(LogbrokerError):
    default_status, default_error = 401, "not_authorised"


class AccessRefused(LogbrokerError):
    default_status, default_error = 403, "access_refused"


class NotFound(LogbrokerError):
    default_status, default_error = 404, "not_found"


class ResourceLocked(LogbrokerError):
    default_status, default_error = 409, "resource_locked"


class PayloadTooLarge(LogbrokerError):
    default_status, default_error = 413, "payload_too_large"


class Unavailable(LogbrokerError):
    default_status, default_error = 503, "unavailable"


class ProtocolError(LogbrokerError):
    """The node answered something this client does not understand."""

    default_error = "protocol_error"


class ConnectionFailed(LogbrokerError):
    """No node could be reached, or the connection was lost with the outcome unknown."""

    default_error = "connection_failed"


class InvalidUrl(LogbrokerError, ValueError):
    """A broker URL that cannot be used (a usage error, not a broker refusal)."""

    default_error = "invalid_url"


_CLASS_OF_STATUS: dict[int, type[LogbrokerError]] = {
    400: BadRequest, 401: Unauthorized, 403: AccessRefused, 404: NotFound,
    409: ResourceLocked, 413: PayloadTooLarge, 503: Unavailable,
}


def error_for(status: int, reason: str, error: str | None = None,
              field: str | None = None) -> LogbrokerError:
    """The exception for an HTTP status (or a WebSocket error frame's `code`)."""
    kind = _CLASS_OF_STATUS.get(status, LogbrokerError)
    return kind(reason or f"HTTP {status}", status, error, field)


def error_from_response(status: int, content: bytes) -> LogbrokerError:
    """Map an error answer (`{"error", "reason", "field"?}`, or anything else) to an exception."""
    body: Any = None
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        reason = str(body.get("reason") or body.get("detail") or body.get("error") or "")
        error = body.get("error")
        field = body.get("field")
        return error_for(status, reason, error if isinstance(error, str) else None,
                         field if isinstance(field, str) else None)
    text = content.decode("utf-8", "replace").strip()[:200]
    return error_for(status, text or f"HTTP {status}")
