"""`AccessControl`: who may connect to a broker and what they may do there.

Checks follow RabbitMQ: a user authenticates with a password, users listed in
`loopback_users` (guest, by default) only from this machine; configure to
declare or delete, write to publish or bind into, read to consume, get, purge or
bind from. The answers come from the applied metadata (users, vhosts,
permissions), so every node of a cluster answers alike. It decides only: it
reads the metadata it is handed and raises or answers, nothing else.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Literal

from logbroker.broker_config import BrokerConfig, Session
from logbroker.definitions_loaded import DefinitionsLoaded
from logbroker.errors import BrokerError
from logbroker.metadata import MetadataState, check_access, check_vhost_access, verify_password

__all__ = ["AccessControl", "Permission"]

logger = logging.getLogger("logbroker.broker")
Permission = Literal["configure", "write", "read"]


class AccessControl:
    def __init__(self, config: BrokerConfig, state: Callable[[], MetadataState],
                 definitions_loaded: DefinitionsLoaded) -> None:
        self._config = config
        self._state = state
        self._definitions_loaded = definitions_loaded

    def authenticate(self, user: str, password: str | None,
                     peer_host: str | None) -> str | None:
        """The user name, or None for a wrong password; raises `DefinitionsNotLoaded`
        while a starting node cannot tell (never a refusal it cannot back). Password
        None: a verified client certificate names the user (EXTERNAL), who must exist."""
        self._definitions_loaded.check()
        record = self._state().user(user)
        if record is None or (password is not None and not verify_password(
            password, record.password_hash, record.hashing_algorithm
        )):
            return None
        if user in self._config.loopback_users and not _is_loopback(peer_host):
            logger.warning("user %r may connect only from localhost (peer %s)", user, peer_host)
            return None
        return user

    def check_vhost(self, user: str, vhost: str) -> None:
        state = self._state()
        if state.vhost(vhost) is None:
            raise BrokerError(530, f"vhost {vhost} not found")
        check_vhost_access(state, user, vhost)

    def check(self, session: Session, kind: Literal["queue", "exchange"], name: str,
              permission: Permission) -> None:
        check_access(self._state(), session.user, session.vhost, kind, name, permission)


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return True  # not a network connection (in-process)
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"
