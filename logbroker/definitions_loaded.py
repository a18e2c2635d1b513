"""`DefinitionsLoaded`: whether this node's definitions (users included) can answer a
login yet, and a bounded wait until they can.

A clustered node that starts (or restarts) holds whatever its Raft log and snapshot
gave it, which may be nothing: the cluster's users are known only once the node
has heard a leader and applied everything committed (`ReplicaRoles.current`), and,
in a brand-new cluster, once the default user is bootstrapped. Before that, a
login checked against the local state would be refused as invalid, and clients
(pika, kombu, Celery) take a 403 as final. So the listeners hold a login until the
definitions are loaded, for at most `LOGIN_HOLD_S`, and past that refuse it with
`DefinitionsNotLoaded` (AMQP 320 CONNECTION_FORCED, HTTP 503): a "try again", never
"invalid credentials".

Loaded is a latch: a node that has been current once keeps answering logins from
its applied state when it later loses the leader (a minority still serves reads).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from logbroker.errors import BrokerError
from logbroker.metadata.reply_codes import CONNECTION_FORCED
from segments.clock import SYSTEM_CLOCK, Clock

__all__ = ["LOGIN_HOLD_S", "DefinitionsLoaded", "DefinitionsNotLoaded"]

#: How long a login waits for the definitions. A whole-cluster restart loads them in
#: well under a second; past this the cluster has no majority, and the client hears
#: so before its own handshake timeout (kombu's is 5 s, httpx's 5 s, pika's 15 s).
LOGIN_HOLD_S = 4.0
# Polled, not signalled: the metadata becomes current also when the Raft driver
# applies an entry that carries no command (a new leader's no-op), which tells no one.
# Only held logins poll, and only while a node starts.
POLL_S = 0.02


class DefinitionsNotLoaded(BrokerError):
    def __init__(self, node: str) -> None:
        super().__init__(CONNECTION_FORCED, (
            f"node {node} is starting: it has not loaded the cluster's definitions (users "
            "included) yet, so it cannot check a login; try again (a majority of the "
            "cluster's nodes must be reachable)"))


class DefinitionsLoaded:
    def __init__(self, node: str, loaded: Callable[[], bool],
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._node = node
        self._clock = clock
        self._loaded = loaded
        self._latched = False

    @property
    def ready(self) -> bool:
        if not self._latched:
            self._latched = self._loaded()
        return self._latched

    def check(self) -> None:
        """Raise `DefinitionsNotLoaded` unless a login can be checked now."""
        if not self.ready:
            raise DefinitionsNotLoaded(self._node)

    async def wait(self, timeout_s: float = LOGIN_HOLD_S) -> bool:
        """Until loaded, for at most `timeout_s`; whether it is."""
        deadline_ms = self._clock.monotonic_ms() + math.ceil(timeout_s * 1000)
        while not self.ready:
            now_ms = self._clock.monotonic_ms()
            # Past it, not at it: readings are whole milliseconds, and the hold must
            # last the whole `timeout_s` however the first one was rounded.
            if now_ms > deadline_ms:
                return False
            await asyncio.sleep(min(POLL_S, (deadline_ms + 1 - now_ms) / 1000))
        return True
