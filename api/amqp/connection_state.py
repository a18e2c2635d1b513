"""The states of one AMQP connection and the groups the machine tests them by.

::

    AWAITING_HEADER -header-> STARTING -start-ok-> TUNING -tune-ok-> OPENING
      -open-> OPEN_PENDING (OpenRequested; input paused) -accept_open-> OPEN
    any -> CLOSING (server sent connection.close; waits for close-ok) -> CLOSED
    any -> CLOSED (client close, lost frame sync, timeouts, bad header)
"""

from __future__ import annotations

import enum

__all__ = ["ENDING_STATES", "HANDSHAKE_STATES", "NOT_READING_STATES", "ConnectionState"]


class ConnectionState(enum.Enum):
    AWAITING_HEADER = "awaiting_header"
    STARTING = "starting"
    TUNING = "tuning"
    OPENING = "opening"
    OPEN_PENDING = "open_pending"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


#: Not open yet: the handshake timeout runs.
HANDSHAKE_STATES = frozenset(
    {
        ConnectionState.AWAITING_HEADER,
        ConnectionState.STARTING,
        ConnectionState.TUNING,
        ConnectionState.OPENING,
        ConnectionState.OPEN_PENDING,
    }
)
#: Input is not processed (the broker decides on connection.open, or it is over).
NOT_READING_STATES = frozenset({ConnectionState.OPEN_PENDING, ConnectionState.CLOSED})
#: Closing or closed: broker commands are dropped.
ENDING_STATES = frozenset({ConnectionState.CLOSING, ConnectionState.CLOSED})
