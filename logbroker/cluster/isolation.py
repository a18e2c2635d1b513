"""`Isolation`: the queues led by a node that lost the controller stop taking writes (pure).

Theory of operation. The controller may move the queues led here once it has
not heard from this node for the session timeout. Symmetrically, a node
that is not the Raft leader and has heard nothing from it (no Raft message
from the leader, no new term) for `session_timeout_ms` assumes it has been
cut off: the replication gates of the queues it leads are isolated (no
publishes, acks held) until the leader is heard again, when they rejoin.

Invariants:
- the Raft leader is never isolated by this rule (it is the controller);
- a new term counts the silence from the moment it began, not from the last
  message of the old leader;
- a gate is isolated (or rejoins) once per change, never twice in a row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

REASON = "the queue's leader node has lost the cluster's controller"


class Gate(Protocol):
    """A queue leader's replication gate (`ReplicationGate`)."""

    @property
    def isolated(self) -> str | None: ...

    def isolate(self, reason: str) -> None: ...

    def rejoin(self) -> None: ...


class Isolation:
    def __init__(self, session_timeout_ms: int, now_ms: int) -> None:
        self._timeout_ms = session_timeout_ms
        self._heard_ms = now_ms

    def heard(self, now_ms: int) -> None:
        """The Raft leader was heard, or a new term began."""
        self._heard_ms = now_ms

    def lost(self, now_ms: int, leading: bool) -> bool:
        return not leading and now_ms - self._heard_ms > self._timeout_ms

    def check(self, gates: Iterable[tuple[str, Gate]], now_ms: int, leading: bool
              ) -> list[tuple[str, bool]]:
        """Isolate or rejoin each queue's gate; return the changes (queue, isolated)."""
        lost = self.lost(now_ms, leading)
        changes: list[tuple[str, bool]] = []
        for name, gate in gates:
            if lost and gate.isolated is None:
                gate.isolate(REASON)
                changes.append((name, True))
            elif not lost and gate.isolated is not None:
                gate.rejoin()
                changes.append((name, False))
        return changes
