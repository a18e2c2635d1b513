"""Who is asking: HTTP basic auth with the broker's users, and RabbitMQ's management tags.

Tags grant management access as in RabbitMQ: `management` sees the vhosts it has
permissions in, `policymaker` also sets policies there, `monitoring` sees every
vhost, node and connection, `administrator` does everything (users,
permissions, vhosts, definitions). The data-plane paths (publish, get,
leases, replay, WebSocket) need no tag, only the user's AMQP permissions,
as an AMQP client would.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPBasic, HTTPBasicCredentials

from api.http.api_context import ApiContext, api_context
from api.http.http_errors import ApiError
from logbroker.broker_config import Session
from logbroker.definitions_loaded import DefinitionsNotLoaded

_basic = HTTPBasic(auto_error=False, realm="logbroker")
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="logbroker"'}
MANAGEMENT_TAGS = frozenset({"management", "policymaker", "monitoring", "administrator"})


@dataclass(frozen=True)
class Principal:
    user: str
    tags: frozenset[str]

    @property
    def is_admin(self) -> bool:
        return "administrator" in self.tags

    @property
    def sees_all_vhosts(self) -> bool:
        return bool(self.tags & {"administrator", "monitoring"})

    @property
    def is_management(self) -> bool:
        return bool(self.tags & MANAGEMENT_TAGS)

    @property
    def may_set_policies(self) -> bool:
        return bool(self.tags & {"administrator", "policymaker"})


def authenticate(ctx: ApiContext, user: str, password: str, peer: str | None) -> Principal:
    try:
        name = ctx.broker.access.authenticate(user, password, peer)
    except DefinitionsNotLoaded as error:  # a starting node: "try again", not 401
        raise ApiError(503, error.text, headers={"Retry-After": "1"}) from None
    record = ctx.broker.state.user(user) if name is not None else None
    if record is None:
        raise ApiError(401, "Not authorised: wrong user name or password", headers=_CHALLENGE)
    return Principal(record.name, frozenset(record.tags))


def credentials_from_header(value: str | None) -> tuple[str, str] | None:
    """user and password from an `Authorization: Basic ...` header value."""
    if not value or not value.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(value[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


async def principal(
    request: Request,
    credentials: HTTPBasicCredentials | None = Depends(_basic),  # noqa: B008
    ctx: ApiContext = Depends(api_context),  # noqa: B008
) -> Principal:
    if credentials is None:
        raise ApiError(401, "Not authorised: basic authentication required", headers=_CHALLENGE)
    peer = request.client.host if request.client else None
    await ctx.broker.definitions_loaded.wait()  # a starting node may not know the users yet
    return authenticate(ctx, credentials.username, credentials.password, peer)


async def management_user(who: Principal = Depends(principal)) -> Principal:  # noqa: B008
    if not who.is_management:
        raise ApiError(403, f"user '{who.user}' has no management tag")
    return who


async def monitoring_user(who: Principal = Depends(principal)) -> Principal:  # noqa: B008
    if not who.sees_all_vhosts:
        raise ApiError(403, f"user '{who.user}' needs the monitoring or administrator tag")
    return who


async def admin_user(who: Principal = Depends(principal)) -> Principal:  # noqa: B008
    if not who.is_admin:
        raise ApiError(403, f"user '{who.user}' needs the administrator tag")
    return who


def visible_vhost(ctx: ApiContext, who: Principal, vhost: str) -> None:
    """404 for a vhost that does not exist, 403 for one the user has no access to."""
    if ctx.broker.state.vhost(vhost) is None:
        raise ApiError(404, f"vhost '{vhost}' not found")
    if not who.sees_all_vhosts and ctx.broker.state.permissions(who.user, vhost) is None:
        raise ApiError(403, f"access to vhost '{vhost}' refused for user '{who.user}'")


def visible_vhosts(ctx: ApiContext, who: Principal) -> list[str]:
    return [v.name for v in ctx.broker.state.vhosts()
            if who.sees_all_vhosts or ctx.broker.state.permissions(who.user, v.name) is not None]


def session(ctx: ApiContext, who: Principal, vhost: str) -> Session:
    """The AMQP-equivalent session a REST call acts in (404 / 403 on the vhost first)."""
    if ctx.broker.state.vhost(vhost) is None:
        raise ApiError(404, f"vhost '{vhost}' not found")
    if ctx.broker.state.permissions(who.user, vhost) is None:
        raise ApiError(403, f"access to vhost '{vhost}' refused for user '{who.user}'")
    return Session(connection_id=ctx.connection_id, user=who.user, vhost=vhost)
