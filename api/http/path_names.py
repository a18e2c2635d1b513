"""Names in URL paths: RabbitMQ's HTTP API puts vhost `/` in a path as `%2F`.

Starlette matches routes on the percent-decoded path, where `/api/queues/%2F/q`
becomes `/api/queues///q` and matches nothing. `EncodedSlashMiddleware`
rebuilds the path from the raw bytes, decoding each segment but escaping `%`
and `/` again inside it, so a segment stays one path parameter; handlers
then call `path_name` on it to get the real name.
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from api.http.http_errors import error_body


def _escape_segment(raw: str) -> str:
    # strict: an escape that is not UTF-8 is refused (BadPathError), not turned
    # into U+FFFD, which would name a queue the client never meant.
    decoded = unquote(raw, errors="strict")
    return decoded.replace("%", "%25").replace("/", "%2F")


class BadPathError(ValueError):
    """A path segment's percent-escapes are not UTF-8."""


def routable_path(raw_path: str) -> str:
    """The path to route on; BadPathError if an escape is not UTF-8."""
    try:
        return "/".join(_escape_segment(segment) for segment in raw_path.split("/"))
    except UnicodeDecodeError as error:
        raise BadPathError(f"the path's percent-escapes are not UTF-8: {error.reason}") \
            from error


def path_name(parameter: str) -> str:
    """The name a path parameter stands for (`%2F` -> `/`)."""
    return unquote(parameter)


class EncodedSlashMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = scope.get("raw_path")
            if raw:
                scope = dict(scope)
                try:
                    scope["path"] = routable_path(raw.decode("latin-1").split("?", 1)[0])
                except BadPathError as error:
                    # 400 with the API's JSON error body; a WebSocket handshake is closed.
                    refusal = (WebSocketClose(1008, str(error)[:120])
                               if scope["type"] == "websocket"
                               else JSONResponse(error_body(400, str(error)), status_code=400))
                    await refusal(scope, receive, send)
                    return
        await self.app(scope, receive, send)
