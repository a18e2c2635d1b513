"""Flush the connections one read wrote to at the end of that read.

A publish read on one connection writes deliveries into other connections'
output (their consumers). Flushing those on the next loop iteration (as
output from timers and fsync completions is) would cost a loop turn, and the
executor hand-off of the publish's fsync queued before it, on every message's
way to its consumer. During a read, connections written to are collected here
instead and flushed once the read is handled, right after the reader's own
publishes and acks are done.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OutputRound"]


class OutputRound:
    """Shared by the connections of one listener (one event loop)."""

    def __init__(self) -> None:
        self.active = False  # a connection's read is being handled
        self._flushes: list[Callable[[], None]] = []

    def add(self, flush: Callable[[], None]) -> None:
        """Run `flush` when the read being handled is done (only while `active`)."""
        self._flushes.append(flush)

    def end(self) -> None:
        """The read is handled: flush what it wrote to. Output written by these
        flushes (more deliveries as a socket drains) waits for the next turn."""
        self.active = False
        flushes, self._flushes = self._flushes, []
        for flush in flushes:
            flush()
