"""The driver's waiter tables: proposals awaiting their entry, callers awaiting an index.

A proposal is known by the (index, term) its entry got on the leader. It is
decided when the entry at that index is applied: the same term means it is
ours (the waiter gets the state machine's result, or the exception apply
raised); another term means ours was overwritten (`ProposalDropped`). A
proposal can also be given up on before that - when the leader loses
leadership before the entry commits, when a snapshot jumps past it, or when
the driver stops - and is then dropped too. "Dropped" therefore means "not
known to have been applied": a dropped entry may still commit later under a
new leader, so a caller that retries must tolerate duplicates.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable

from replication.raft.errors import ProposalRefused, RaftError
from replication.raft.messages import Entry


class ProposalDropped(RaftError):
    """The proposal's fate is unknown or lost: leadership moved, another entry took
    its index, or the driver stopped."""


class ProposalTimeout(RaftError):
    """The proposal (or the index waited for) was not applied in time; it may still be."""


class DriverStopped(ProposalDropped):
    """The driver was stopped, or failed (its storage broke): it takes no more requests."""


class ProposalTable:
    """Outstanding proposals by index, at most `limit` of them."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the proposal limit must be at least 1")
        self._limit = limit
        self._pending: dict[int, tuple[int, asyncio.Future[object]]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def check_capacity(self) -> None:
        """Raise ProposalRefused if no further proposal may wait (check before proposing)."""
        if len(self._pending) >= self._limit:
            raise ProposalRefused("too many pending proposals")

    def add(self, index: int, term: int) -> asyncio.Future[object]:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        previous = self._pending.get(index)
        if previous is not None:
            # This leader just appended at `index`, so whatever was there before is gone.
            _fail(previous[1], ProposalDropped(f"entry {index} was overwritten"))
        self._pending[index] = (term, future)
        return future

    def wait(self, index: int, term: int, timeout_s: float, node_id: str) -> Awaitable[object]:
        """Register the proposal at (index, term) now; await the result to wait for it."""
        future = self.add(index, term)

        async def waiting() -> object:
            try:
                return await asyncio.wait_for(future, timeout_s)
            except TimeoutError:
                raise ProposalTimeout(
                    f"{node_id}: entry {index} was not applied within {timeout_s}s"
                ) from None
            finally:
                self.discard(index, future)

        return waiting()

    def discard(self, index: int, future: asyncio.Future[object]) -> None:
        """Forget a waiter its caller gave up on (timeout, cancellation)."""
        current = self._pending.get(index)
        if current is not None and current[1] is future:
            del self._pending[index]

    def applied(self, entry: Entry, result: object, error: Exception | None) -> None:
        """`entry` was applied with `result` (or `apply` raised `error`)."""
        pending = self._pending.pop(entry.index, None)
        if pending is None:
            return
        term, future = pending
        if term != entry.term:
            _fail(future, ProposalDropped(
                f"entry {entry.index} of term {term} was replaced by one of term {entry.term}"
            ))
        elif error is not None:
            _fail(future, error)
        elif not future.done():
            future.set_result(result)

    def drop_uncommitted(self, commit_index: int, reason: str) -> None:
        """Drop proposals past `commit_index` (this node stopped leading)."""
        for index in [index for index in self._pending if index > commit_index]:
            _fail(self._pending.pop(index)[1], ProposalDropped(f"entry {index}: {reason}"))

    def drop_through(self, index: int, reason: str) -> None:
        """Drop proposals at or before `index` (a snapshot replaced them: fate unknown)."""
        for waiting in [waiting for waiting in self._pending if waiting <= index]:
            _fail(self._pending.pop(waiting)[1], ProposalDropped(f"entry {waiting}: {reason}"))

    def fail_all(self, error: RaftError) -> None:
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            _fail(future, error)


class AppliedWaiters:
    """Callers waiting for the applied index to reach some index."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._sequence = itertools.count()

    def add(self, index: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (index, next(self._sequence), future))
        return future

    async def wait(self, index: int, timeout_s: float, node_id: str) -> None:
        try:
            await asyncio.wait_for(self.add(index), timeout_s)
        except TimeoutError:
            raise ProposalTimeout(
                f"{node_id}: index {index} was not applied within {timeout_s}s"
            ) from None

    def advance(self, applied_index: int) -> None:
        while self._heap and self._heap[0][0] <= applied_index:
            future = heapq.heappop(self._heap)[2]
            if not future.done():
                future.set_result(None)

    def fail_all(self, error: RaftError) -> None:
        heap, self._heap = self._heap, []
        for _, _, future in heap:
            _fail(future, error)


def _fail(future: asyncio.Future[object] | asyncio.Future[None], error: BaseException) -> None:
    if future.done():
        return
    if isinstance(error, StopIteration):
        # Futures refuse StopIteration (it would end the awaiting generator).
        error = RuntimeError(f"the state machine raised {error!r}")
    future.set_exception(error)
