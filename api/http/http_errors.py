"""How refusals become HTTP answers: always a JSON body, never a 500 for a client mistake.

RabbitMQ's management API answers `{"error": ..., "reason": ...}`; we keep that
shape and add `field` for schema violations, so a client can tell which input
was wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from logbroker.errors import BrokerError
from logbroker.metadata.reply_codes import ReplyCode

# AMQP reply code -> HTTP status.
_STATUS_OF_REPLY: dict[int, int] = {
    ReplyCode.ACCESS_REFUSED: 403,
    ReplyCode.NOT_FOUND: 404,
    ReplyCode.RESOURCE_LOCKED: 409,  # exclusive queue of another connection
    ReplyCode.PRECONDITION_FAILED: 400,  # inequivalent arguments, invalid values
    ReplyCode.NOT_ALLOWED: 403,  # vhost access refused
    ReplyCode.NOT_IMPLEMENTED: 501,
    ReplyCode.CONTENT_TOO_LARGE: 413,
    ReplyCode.INTERNAL_ERROR: 503,  # a cluster peer is unreachable, no quorum in time
    ReplyCode.CONNECTION_FORCED: 503,  # a starting node cannot check logins yet
}
_ERROR_OF_STATUS = {400: "bad_request", 401: "not_authorised", 403: "access_refused",
                    404: "not_found", 405: "method_not_allowed", 409: "resource_locked",
                    413: "payload_too_large", 501: "not_implemented", 503: "unavailable"}


class ApiError(Exception):
    """A refusal with an HTTP status; `field` names the offending input."""

    def __init__(self, status: int, reason: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.field = field
        self.headers = headers


def at_node(host: str, http_port: int, reason: str) -> ApiError:
    """421 Misdirected Request: `reason`, then "at <the node's URL>", which also goes in
    `X-Queue-Leader-Url` for clients that follow it (a replay, a batch's commit)."""
    url = f"http://{host}:{http_port}"
    return ApiError(421, f"{reason} at {url}", headers={"X-Queue-Leader-Url": url})


def error_body(status: int, reason: str, field: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": _ERROR_OF_STATUS.get(status, "error"), "reason": reason}
    if field is not None:
        body["field"] = field
    return body


def status_of(error: BrokerError) -> int:
    return _STATUS_OF_REPLY.get(error.reply_code, 400)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_request: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(error_body(error.status, error.reason, error.field),
                            status_code=error.status, headers=error.headers)

    @app.exception_handler(BrokerError)
    async def broker_error(_request: Request, error: BrokerError) -> JSONResponse:
        status = status_of(error)
        return JSONResponse(error_body(status, error.text), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        field, reason = invalid_input(error.errors())
        return JSONResponse(error_body(400, reason, field), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own 400 is a body it could not read ("There was an error parsing the body")
        field = "body" if error.status_code == 400 else None
        return JSONResponse(error_body(error.status_code, str(error.detail), field),
                            status_code=error.status_code, headers=error.headers)


def invalid_input(problems: Sequence[Any]) -> tuple[str, str]:
    """(field, reason) of a request that failed validation: the first problem's location.

    A body that is not JSON at all is the `body` field (its location ends with the
    character position of the syntax error, which names no field).
    """
    first = problems[0] if problems else {}
    if first.get("type") == "json_invalid":
        context = first.get("ctx", {}).get("error", "")
        return "body", f"body: invalid JSON{f' ({context})' if context else ''}"
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    field = ".".join(location) or "body"
    return field, f"{field}: {first.get('msg', 'invalid input')}"
