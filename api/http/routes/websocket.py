"""`/ws`: authenticate the WebSocket upgrade, then serve it with a `WsSession`.

Credentials come from the upgrade's `Authorization: Basic` header or, for
clients that cannot set headers (browsers), `?user=&password=`; the vhost
from `?vhost=` (default "/"). A refusal must reach the client as a close code
it can tell apart (4401 bad credentials, 4403 vhost unknown or refused),
which only an accepted socket can carry: so accept first, then check.
The protocol itself is in docs/http-api.md, "WebSocket: /ws".
"""

from __future__ import annotations

import itertools
import logging

from fastapi import APIRouter, WebSocket

from api.http.api_context import ApiContext
from api.http.auth import Principal, authenticate, credentials_from_header
from api.http.http_errors import ApiError
from api.http.ws_session import WsSession
from logbroker.connections import ConnectionInfo
from logbroker.errors import BrokerError

router = APIRouter()
logger = logging.getLogger(__name__)

CLOSE_BAD_AUTH = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TRY_AGAIN = 1013  # RFC 6455 "Try Again Later": a starting node without its users
_MAX_REASON_BYTES = 123  # a close frame's reason must fit in a control frame
_serial = itertools.count(1)


@router.websocket("/ws")
async def websocket_endpoint(socket: WebSocket) -> None:
    ctx: ApiContext = socket.app.state.context
    await socket.accept()
    await ctx.broker.definitions_loaded.wait()  # a starting node may not know the users yet
    try:
        who = _principal(ctx, socket)
    except ApiError as error:
        await _refuse(socket, CLOSE_TRY_AGAIN if error.status == 503 else CLOSE_BAD_AUTH,
                      error.reason)
        return
    vhost = socket.query_params.get("vhost", "/")
    try:
        ctx.broker.access.check_vhost(who.user, vhost)
    except BrokerError as error:
        await _refuse(socket, CLOSE_FORBIDDEN, error.text)
        return
    refusal = ctx.broker.connections.refusal(
        vhost, ctx.broker.state.vhost_limit(vhost, "max-connections"))
    if refusal is not None:  # the node's and the vhost's limits count every protocol
        logger.warning("WebSocket from %s: %s", socket.client, refusal)
        await _refuse(socket, CLOSE_TRY_AGAIN, refusal)
        return
    connection_id = f"ws:{next(_serial)}"
    peer = socket.client
    session = WsSession(ctx, socket, who, vhost, connection_id)
    ctx.broker.connections.add(ConnectionInfo(
        connection_id, "WebSocket", peer.host if peer else "", peer.port if peer else 0,
        who.user, vhost, channels=1, close=session.force_close))
    logger.debug("WebSocket %s opened by '%s' on vhost '%s'", connection_id, who.user, vhost)
    try:
        await session.run()
    finally:
        ctx.broker.connections.remove(connection_id)
        logger.debug("WebSocket %s closed", connection_id)


def _principal(ctx: ApiContext, socket: WebSocket) -> Principal:
    credentials = credentials_from_header(socket.headers.get("authorization"))
    if credentials is None:
        user, password = socket.query_params.get("user"), socket.query_params.get("password")
        if user is None or password is None:
            raise ApiError(401, "Not authorised: basic authentication or ?user=&password= "
                                "required")
        credentials = (user, password)
    peer = socket.client.host if socket.client else None
    return authenticate(ctx, credentials[0], credentials[1], peer)


async def _refuse(socket: WebSocket, code: int, reason: str) -> None:
    short = reason.encode()[:_MAX_REASON_BYTES].decode(errors="ignore")
    await socket.close(code, short)
