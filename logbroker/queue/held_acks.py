"""`HeldAcks`: the acks a replicated queue's leader takes while they cannot count.

Theory of operation. A leader cut off from the controller for the session
timeout is isolated: another leader may have been elected meanwhile, so its
acks must not settle anything the new leader would not know. It holds them
(`hold`) until it hears the controller again, still leading the same epoch,
and they count then (`take`): dropping them would leave their messages
unacked on a live channel for ever. A fenced leader holds nothing: the new
leader redelivers those messages. Past `limit` held offsets, further acks
are dropped too (their messages are redelivered later), so an isolation
cannot grow memory without bound.

Invariants: nothing is held for a fenced leader; no ack is added while
`limit` or more offsets are held; `take` hands each held offset out once.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["HELD_ACKS_MAX", "HeldAcks"]

HELD_ACKS_MAX = 1_000_000


class HeldAcks:
    def __init__(self, limit: int = HELD_ACKS_MAX) -> None:
        self._limit = limit
        self._held: list[int] = []

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, offsets: Sequence[int], fenced: bool) -> None:
        """Acks the leader cannot settle now: kept unless it is fenced or holds enough."""
        if not fenced and len(self._held) < self._limit:
            self._held.extend(offsets)

    def take(self) -> list[int]:
        """Everything held (the leader rejoined: the acks count now)."""
        held, self._held = self._held, []
        return held
