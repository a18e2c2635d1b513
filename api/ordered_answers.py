"""`OrderedAnswers`: work that completes in any order, answered in the order it came.

Theory of operation
-------------------
A client's publishes run concurrently (their fsyncs and replications
interleave) but are answered in publish order: an AMQP channel's confirms
carry delivery tags 1, 2, 3, ... and a mandatory message's basic.return comes
before its confirm; a WebSocket's confirm frames follow its publish frames.
Both keep their entries here, first in, first out. When any entry's work
completes, its owner calls `changed`; one pass (scheduled once per loop
iteration, however many completed) hands the entries at the head that are
ready, in order, to `answer`, and stops at the first that is not; then
`end_of_pass` runs (an AMQP channel sends the confirms it gathered as one
frame per run).

Invariants: entries are answered exactly once and in the order they were
appended; nothing is answered after `close` (the connection or channel is
gone: the work still completes, unanswered).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["OrderedAnswers"]

E = TypeVar("E")


def _nothing() -> None:
    return None


class OrderedAnswers(Generic[E]):
    """A FIFO of entries, answered in order once ready (`ready(entry)`)."""

    def __init__(self, ready: Callable[[E], bool], answer: Callable[[E], None],
                 end_of_pass: Callable[[], None] = _nothing) -> None:
        self._ready = ready
        self._answer = answer
        self._end_of_pass = end_of_pass
        self._entries: deque[E] = deque()
        self._scheduled = False
        self.closed = False

    def __len__(self) -> int:
        """Entries not answered yet."""
        return len(self._entries)

    def append(self, entry: E) -> None:
        self._entries.append(entry)

    def changed(self) -> None:
        """Some entry may have become ready: run one pass soon (once per iteration)."""
        if not self._scheduled and not self.closed:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._pass)

    def close(self) -> None:
        """Answer nothing more."""
        self.closed = True
        self._entries.clear()

    def _pass(self) -> None:
        self._scheduled = False
        entries = self._entries
        while entries and not self.closed and self._ready(entries[0]):
            self._answer(entries.popleft())
        self._end_of_pass()
