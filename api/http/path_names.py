"""Names in URL paths: RabbitMQ's HTTP API puts vhost `/` in a path as `%2F`.

Starlette matches routes on the percent-decoded path, where `/api/queues/%2F/q`
becomes `/api/queues///q` and matches nothing. `EncodedSlashMiddleware`
rebuilds the path from the raw bytes, decoding each segment but escaping `%`
and `/` again inside it, so a segment stays one path parameter; handlers
then call `path_name` on it to get the real name.
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send


def _escape_segment(raw: str) -> str:
    decoded = unquote(raw)
    return decoded.replace("%", "%25").replace("/", "%2F")


def routable_path(raw_path: str) -> str:
    return "/".join(_escape_segment(segment) for segment in raw_path.split("/"))


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
                scope["path"] = routable_path(raw.decode("latin-1").split("?", 1)[0])
        await self.app(scope, receive, send)
