"""Permission checks: configure / write / read regexes per user and vhost.

As `rabbit_auth_backend_internal:check_resource_access/4`: the user's regex for
the operation is matched with `re:run` (an unanchored search) against the
resource name; an empty regex stands for `^$` and so matches nothing; a user
without permissions in the vhost may do nothing there. As
`rabbit_access_control`, the default exchange `""` is checked under the name
`amq.default` (queues cannot be named `""`: an empty name asks the server for
one, and the generated name is what gets checked).

`check_access` raises RabbitMQ's 403 (`configure access to queue 'q' in vhost
'/' refused for user 'bob'`); `check_vhost_access` RabbitMQ's 530 for
`connection.open` (`access to vhost 'v' refused for user 'bob'`).
"""

from __future__ import annotations

import functools
import re
from typing import Literal, Protocol

from logbroker.metadata.errors import MetadataError, rs
from logbroker.metadata.records import PermissionRecord
from logbroker.metadata.reply_codes import ACCESS_REFUSED, NOT_ALLOWED

Permission = Literal["configure", "write", "read"]


class PermissionSource(Protocol):
    """What the checks need from the state (MetadataState provides it)."""

    def permissions(self, user: str, vhost: str) -> PermissionRecord | None: ...


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern or "^$")
    except re.error:
        return None


def resource_name_for_check(name: str) -> str:
    return "amq.default" if name == "" else name


def is_permitted(
    state: PermissionSource, user: str, vhost: str, resource_name: str, permission: Permission
) -> bool:
    record = state.permissions(user, vhost)
    if record is None:
        return False
    compiled = _compile(getattr(record, permission))
    name = resource_name_for_check(resource_name)
    return compiled is not None and compiled.search(name) is not None


def can_configure(state: PermissionSource, user: str, vhost: str, resource_name: str) -> bool:
    return is_permitted(state, user, vhost, resource_name, "configure")


def can_write(state: PermissionSource, user: str, vhost: str, resource_name: str) -> bool:
    return is_permitted(state, user, vhost, resource_name, "write")


def can_read(state: PermissionSource, user: str, vhost: str, resource_name: str) -> bool:
    return is_permitted(state, user, vhost, resource_name, "read")


def can_access_vhost(state: PermissionSource, user: str, vhost: str) -> bool:
    """A user may open a connection to a vhost once it has permissions there."""
    return state.permissions(user, vhost) is not None


def check_access(
    state: PermissionSource,
    user: str,
    vhost: str,
    kind: Literal["queue", "exchange"],
    name: str,
    permission: Permission,
) -> None:
    """Raise 403 ACCESS_REFUSED unless `user` has `permission` on the resource."""
    if not is_permitted(state, user, vhost, name, permission):
        shown = resource_name_for_check(name) if kind == "exchange" else name
        raise MetadataError(
            ACCESS_REFUSED,
            f"{permission} access to {rs(kind, vhost, shown)} refused for user '{user}'",
        )


def check_vhost_access(state: PermissionSource, user: str, vhost: str) -> None:
    if not can_access_vhost(state, user, vhost):
        raise MetadataError(NOT_ALLOWED, f"access to vhost '{vhost}' refused for user '{user}'")


def validate_regex(pattern: str) -> str | None:
    """None if `pattern` compiles, else why not."""
    try:
        re.compile(pattern)
    except re.error as error:
        return str(error)
    return None
