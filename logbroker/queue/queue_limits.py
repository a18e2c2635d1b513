"""What a queue's limits are, and what the queue says to a publish that meets them.

`QueueLimits` holds the limits a policy may change while the queue lives
(RabbitMQ's `x-max-length`, `x-max-length-bytes`, `x-overflow`, `x-expires`,
and whether a dead-letter exchange is set); `Overflow` is the `x-overflow`
behaviour; `Admission` is `QueueCore.admit`'s answer to a publish.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Overflow(enum.Enum):
    DROP_HEAD = "drop-head"
    REJECT_PUBLISH = "reject-publish"
    REJECT_PUBLISH_DLX = "reject-publish-dlx"


class Admission(enum.Enum):
    ACCEPT = "accept"
    REJECT = "reject"
    REJECT_DEAD_LETTER = "reject-dead-letter"


@dataclass(frozen=True)
class QueueLimits:
    """The limits a policy may change while the queue lives."""

    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: Overflow = Overflow.DROP_HEAD
    dead_letter: bool = False  # a dead-letter exchange is configured
    expires_ms: int | None = None

    @property
    def bounds_length(self) -> bool:
        """True when x-max-length or x-max-length-bytes is set."""
        return self.max_length is not None or self.max_length_bytes is not None
