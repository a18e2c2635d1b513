"""`StagedParts`: the messages of transactional batches that are staged, not yet committed.

A producer stages batch `seq` in parts (each part one request of a Spark
task, say), then commits a list of parts: only those are published, the
batch's other parts (a failed task attempt's) are discarded with them. This
object only keeps parts and decides; `ProducerBatches` does the publishing.

Theory of operation: a part is immutable once staged and belongs to one batch
key (vhost, producer, seq). `take(key, tokens)` hands over the listed parts
in the order listed and forgets the whole batch; it changes nothing when a
token is unknown, so the caller can answer with the missing ones. A batch
untouched for `timeout_ms` is dropped by `expire(now_ms)`.

Invariants: `bytes_held` is the sum of the sizes of the parts held and never
exceeds `max_bytes`; no batch holds more than `max_batch_bytes`; at most
`max_batches` batches are open. Time comes in as `now_ms`; tokens come from
the caller (its randomness), so the same calls give the same state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from logbroker.message import Message


class BatchKey(NamedTuple):
    vhost: str
    producer: str
    seq: int


@dataclass(frozen=True)
class StagedPart:
    token: str
    messages: tuple[Message, ...]
    size_bytes: int


@dataclass
class _OpenBatch:
    parts: dict[str, StagedPart] = field(default_factory=dict)
    size_bytes: int = 0
    touched_ms: int = 0


@dataclass(frozen=True)
class OpenBatch:
    """What a producer's view shows of a batch being staged."""

    seq: int
    parts: int
    messages: int
    size_bytes: int
    expires_at_ms: int


class StagingLimit(Exception):
    """Staging this part would pass a limit; nothing was staged."""

    def __init__(self, text: str, too_large: bool) -> None:
        super().__init__(text)
        self.text = text
        self.too_large = too_large  # the batch itself is too large, not the node busy


class UnknownParts(Exception):
    """A commit named parts that are not staged (expired, aborted, never staged, or
    lost when the broker restarted)."""

    def __init__(self, tokens: Sequence[str]) -> None:
        super().__init__(", ".join(tokens))
        self.tokens = tuple(tokens)


@dataclass(frozen=True)
class StagingLimits:
    max_bytes: int = 512 << 20  # all open batches of the node
    max_batch_bytes: int = 256 << 20  # one batch: it is routed in one go
    max_batches: int = 10_000
    timeout_ms: int = 15 * 60 * 1000  # a batch untouched this long is abandoned


class StagedParts:
    def __init__(self, limits: StagingLimits | None = None) -> None:
        self.limits = limits or StagingLimits()
        self._open: dict[BatchKey, _OpenBatch] = {}
        self.bytes_held = 0

    def stage(self, key: BatchKey, token: str, messages: Sequence[Message], now_ms: int
              ) -> StagedPart:
        size = sum(len(message.body) for message in messages)
        batch = self._open.get(key)
        limits = self.limits
        if (batch.size_bytes if batch else 0) + size > limits.max_batch_bytes:
            raise StagingLimit(f"batch {key.seq} of producer '{key.producer}' would hold more "
                               f"than {limits.max_batch_bytes} bytes; commit smaller batches",
                               too_large=True)
        if self.bytes_held + size > limits.max_bytes:
            raise StagingLimit(f"the node holds {self.bytes_held} staged bytes, at most "
                               f"{limits.max_bytes}; commit or abort batches first",
                               too_large=False)
        if batch is None:
            if len(self._open) >= limits.max_batches:
                raise StagingLimit(f"the node has {limits.max_batches} batches open; commit "
                                   "or abort batches first", too_large=False)
            batch = self._open[key] = _OpenBatch()
        part = StagedPart(token, tuple(messages), size)
        batch.parts[token] = part
        batch.size_bytes += size
        batch.touched_ms = now_ms
        self.bytes_held += size
        return part

    def take(self, key: BatchKey, tokens: Sequence[str]) -> list[StagedPart]:
        """The listed parts in order; the batch is forgotten (its other parts discarded).
        Raises UnknownParts, changing nothing, if any token is not staged for `key`."""
        batch = self._open.get(key)
        parts = batch.parts if batch is not None else {}
        missing = [token for token in tokens if token not in parts]
        if missing:
            raise UnknownParts(missing)
        self.discard(key)
        return [parts[token] for token in dict.fromkeys(tokens)]

    def discard(self, key: BatchKey) -> int:
        """Forget batch `key`; how many parts it had."""
        batch = self._open.pop(key, None)
        if batch is None:
            return 0
        self.bytes_held -= batch.size_bytes
        return len(batch.parts)

    def expire(self, now_ms: int) -> list[BatchKey]:
        """Drop the batches untouched for the timeout; their keys."""
        deadline = now_ms - self.limits.timeout_ms
        expired = [key for key, batch in self._open.items() if batch.touched_ms <= deadline]
        for key in expired:
            self.discard(key)
        return expired

    def open_batches(self, vhost: str, producer: str) -> list[OpenBatch]:
        return [OpenBatch(key.seq, len(batch.parts),
                          sum(len(part.messages) for part in batch.parts.values()),
                          batch.size_bytes, batch.touched_ms + self.limits.timeout_ms)
                for key, batch in self._open.items()
                if key.vhost == vhost and key.producer == producer]
