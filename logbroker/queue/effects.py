"""What the queue core asks its shell to do, in the order it must be done.

The shell carries effects out strictly in order: a `DeadLetter` is published
(and confirmed) before the `Settle` that follows it is written to the cursor
log, so a crash in between re-delivers instead of losing the message.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DeadLetterReason(enum.Enum):
    # The values are the ones RabbitMQ writes into x-death headers.
    REJECTED = "rejected"
    EXPIRED = "expired"
    MAXLEN = "maxlen"


@dataclass(slots=True)  # one per delivery: not frozen, which would cost 3x to build
class Deliver:
    """Send the message at `offset` to consumer `consumer_tag` (None: a basic.get)."""

    offset: int
    consumer_tag: str | None
    channel_key: str
    redelivered: bool
    no_ack: bool


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Republish the message at `offset` to the queue's dead-letter exchange."""

    offset: int
    reason: DeadLetterReason


@dataclass(frozen=True, slots=True)
class Settle:
    """The offsets in `[lo, hi)` are done with: append them to the cursor log."""

    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class QueueExpired:
    """The queue went unused for its `x-expires` time: delete it."""


Effect = Deliver | DeadLetter | Settle | QueueExpired


def with_settles(effects: list[Effect], settled: list[int]) -> list[Effect]:
    """Append `Settle` effects for `settled`, coalesced into half-open ranges."""
    if not settled:
        return effects
    ordered = sorted(settled)
    lo = hi = ordered[0]
    for offset in ordered:
        if offset == hi:
            hi += 1
            continue
        effects.append(Settle(lo, hi))
        lo, hi = offset, offset + 1
    effects.append(Settle(lo, hi))
    return effects
