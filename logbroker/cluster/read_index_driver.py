"""`ReadIndexDriver`: runs the `ReadIndex` core over narrow ports (no asyncio here).

The node asks it on every beat and at every new term (`ask`, after
`leader_changed`) and whenever it needs to know whether its applied
metadata is current (`current`). It asks the question the core wants of
the Raft leader through `ReadIndexPorts.ask` (`metadata.read_index` on the
node), hands the answer back to the core with the leader known at that
moment, and, when the answer counts, tells the node (`confirmed`: the replica
roles waiting for current metadata catch up).

Invariants: the core holds at most one question; the port calls back once per
question (an answer, or None for none), so a lost answer is asked again on
the next `ask`; before the node's Raft exists nothing is current or asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from logbroker.cluster.read_index import AskReadIndex, RaftPosition, ReadIndex

__all__ = ["ReadIndexDriver", "ReadIndexPorts"]


@dataclass(frozen=True, slots=True)
class ReadIndexPorts:
    position: Callable[[], RaftPosition | None]  # None: the node's Raft is not open yet
    # Ask that leader its commit index; call back once with it (None: no answer).
    ask: Callable[[str, Callable[[int | None], None]], None]
    confirmed: Callable[[], None]  # the metadata may be current now


class ReadIndexDriver:
    def __init__(self, core: ReadIndex, ports: ReadIndexPorts) -> None:
        self.core = core
        self._ports = ports

    def current(self) -> bool:
        """Whether this node's applied metadata is as new as the cluster's."""
        position = self._ports.position()
        return position is not None and self.core.current(position)

    def leader_changed(self) -> None:
        """A new term: forget what the old leader said and ask the new one at once."""
        self.core.leader_changed()
        self.ask()

    def ask(self) -> None:
        position = self._ports.position()
        question = self.core.want(position) if position is not None else None
        if question is not None:
            self._ports.ask(question.leader,
                            lambda commit: self._answered(question, commit))

    def _answered(self, question: AskReadIndex, commit: int | None) -> None:
        position = self._ports.position()
        leader_now = position.leader if position is not None else None
        if self.core.answered(question.request, leader_now, commit):
            self._ports.confirmed()
