"""Per-message facts the queue core decides with, kept in compact arrays.

Offsets are dense, so the table is three parallel arrays indexed by
`offset - base_offset`: size in bytes, expiry time (0: never) and priority.
That is 13 bytes a message; 5 while no message in the table expires (the
expiry column is None then, and made when the first one that does comes: most
queues have no TTL, and a restart with millions queued then allocates nothing
for it). The prefix below the queue's ack floor is dropped from time to time
(`forget_below`), so the table covers only messages that can still be
delivered.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from logbroker.message import Message, expirations_and_priorities, expiry_from, expiry_ms

NO_EXPIRY = 0
_COMPACT_MIN = 4096


@dataclass(slots=True)  # one per message: not frozen, which would cost 3x to build
class MessageMeta:
    size_bytes: int
    expires_at_ms: int = NO_EXPIRY
    priority: int = 0


def meta_of(message: Message, message_ttl_ms: int | None, now_ms: int) -> MessageMeta:
    """The facts the core keeps about `message`, published (or first written) at `now_ms`."""
    expires = expiry_ms(message, message_ttl_ms, now_ms)
    _, priority = message.expiration_and_priority()
    return MessageMeta(message.size_bytes, NO_EXPIRY if expires is None else expires,
                       min(priority or 0, 255))


@dataclass(slots=True)
class MetaRun:
    """The metas of consecutive messages (one written batch), column by column: a
    batch costs three lists, not an object per message."""

    sizes: list[int]
    expiries: list[int]
    priorities: list[int]

    @classmethod
    def of(cls, metas: Sequence[MessageMeta]) -> MetaRun:
        return cls([m.size_bytes for m in metas], [m.expires_at_ms for m in metas],
                   [m.priority for m in metas])

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, index: int) -> MessageMeta:
        return MessageMeta(self.sizes[index], self.expiries[index], self.priorities[index])

    def __iter__(self) -> Iterator[MessageMeta]:
        return map(MessageMeta, self.sizes, self.expiries, self.priorities)


def metas_of(messages: Sequence[Message], message_ttl_ms: int | None, now_ms: int) -> MetaRun:
    """`meta_of` for a batch written at `now_ms`. The messages of a batch mostly carry
    the same properties, so each distinct (expiration, priority) is worked out once."""
    facts = expirations_and_priorities(messages)
    sizes = [message.size_bytes for message in messages]
    if facts.count(facts[0]) == len(facts):
        expires, priority = _decided(facts[0], message_ttl_ms, now_ms)
        return MetaRun(sizes, [expires] * len(facts), [priority] * len(facts))
    seen: dict[tuple[str | None, int | None], tuple[int, int]] = {}
    for fact in facts:
        if fact not in seen:
            seen[fact] = _decided(fact, message_ttl_ms, now_ms)
    decided = [seen[fact] for fact in facts]
    return MetaRun(sizes, [d[0] for d in decided], [d[1] for d in decided])


def _decided(facts: tuple[str | None, int | None], message_ttl_ms: int | None, now_ms: int
             ) -> tuple[int, int]:
    expires = expiry_from(facts[0], message_ttl_ms, now_ms)
    return NO_EXPIRY if expires is None else expires, min(facts[1] or 0, 255)


@dataclass(slots=True)
class MetaColumns:
    """The metas of consecutive offsets as the table stores them: what a restart loads
    (from the per-segment sidecars) without an object per message."""

    sizes: array[int]  # "I"
    expiries: array[int] | None  # "q"; None: none of them expires
    priorities: array[int]  # "B"

    @classmethod
    def empty(cls) -> MetaColumns:
        return cls(array("I"), None, array("B"))

    @classmethod
    def zeros(cls, count: int) -> MetaColumns:
        """`count` entries to be filled with `put` (allocated once: a restart's peak)."""
        # Repeating a one-item array allocates once: no temporary `bytes` of the size.
        return cls(array("I", [0]) * count, None, array("B", [0]) * count)

    @classmethod
    def of(cls, metas: Iterable[MessageMeta]) -> MetaColumns:
        columns = cls.empty()
        for meta in metas:
            columns.append(meta)
        return columns

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, index: int) -> MessageMeta:
        expiry = NO_EXPIRY if self.expiries is None else self.expiries[index]
        return MessageMeta(self.sizes[index], expiry, self.priorities[index])

    def append(self, meta: MessageMeta) -> None:
        self.expiries = _with_expiries(self.expiries, len(self.sizes), [meta.expires_at_ms])
        self.sizes.append(meta.size_bytes)
        self.priorities.append(meta.priority)

    def put(self, position: int, other: MetaColumns) -> None:
        """Overwrite the entries from `position` with `other`'s."""
        end = position + len(other)
        if end > len(self):
            raise ValueError(f"{len(other)} entries from {position} overrun {len(self)}")
        self.sizes[position:end] = other.sizes
        self.priorities[position:end] = other.priorities
        if other.expiries is not None and self.expiries is None:
            self.expiries = array("q", [NO_EXPIRY]) * len(self)
        if self.expiries is not None:
            self.expiries[position:end] = (other.expiries if other.expiries is not None
                                           else array("q", [NO_EXPIRY]) * len(other))

    def sliced(self, start: int, end: int) -> MetaColumns:
        expiries = None if self.expiries is None else self.expiries[start:end]
        return MetaColumns(self.sizes[start:end], expiries, self.priorities[start:end])


def _with_expiries(expiries: array[int] | None, length: int, incoming: Sequence[int]
                   ) -> array[int] | None:
    """`expiries` (of `length` entries) extended with `incoming`; None while none of
    them expires."""
    if expiries is None:
        if not any(incoming):  # NO_EXPIRY is 0
            return None
        expiries = array("q", [NO_EXPIRY]) * length
    expiries.extend(incoming)
    return expiries


class MessageMetaTable:
    def __init__(self, base_offset: int = 0) -> None:
        self.base_offset = base_offset
        self._sizes = array("I")
        self._expiries: array[int] | None = None  # None: no message here expires
        self._priorities = array("B")

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self._sizes)

    def append(self, offset: int, meta: MessageMeta) -> None:
        if offset != self.next_offset:
            raise ValueError(f"offset {offset} is not the next offset {self.next_offset}")
        self._expiries = _with_expiries(self._expiries, len(self._sizes), [meta.expires_at_ms])
        self._sizes.append(meta.size_bytes)
        self._priorities.append(meta.priority)

    def extend(self, first_offset: int, run: MetaRun) -> None:
        """`append` for consecutive offsets from `first_offset`."""
        if first_offset != self.next_offset:
            raise ValueError(f"offset {first_offset} is not the next offset {self.next_offset}")
        self._expiries = _with_expiries(self._expiries, len(self._sizes), run.expiries)
        self._sizes.extend(run.sizes)
        self._priorities.extend(run.priorities)

    def extend_columns(self, first_offset: int, columns: MetaColumns) -> None:
        """`extend` from columns already in the table's form (a restart's)."""
        if first_offset != self.next_offset:
            raise ValueError(f"offset {first_offset} is not the next offset {self.next_offset}")
        if not self._sizes:  # a restart's millions: adopted, not copied
            self._sizes, self._expiries = columns.sizes, columns.expiries
            self._priorities = columns.priorities
            return
        if columns.expiries is not None:
            self._expiries = _with_expiries(self._expiries, len(self._sizes), columns.expiries)
        elif self._expiries is not None:
            self._expiries.extend(array("q", [NO_EXPIRY]) * len(columns))
        self._sizes.extend(columns.sizes)
        self._priorities.extend(columns.priorities)

    def size_bytes(self, offset: int) -> int:
        return self._sizes[offset - self.base_offset]

    def expires_at_ms(self, offset: int) -> int:
        if self._expiries is None:
            return NO_EXPIRY
        return self._expiries[offset - self.base_offset]

    def priority(self, offset: int) -> int:
        return self._priorities[offset - self.base_offset]

    def forget_below(self, offset: int) -> None:
        """Drop entries below `offset`; amortised so it is cheap to call often."""
        drop = min(offset, self.next_offset) - self.base_offset
        if drop < max(_COMPACT_MIN, len(self._sizes) // 2):
            return
        del self._sizes[:drop]
        if self._expiries is not None:
            del self._expiries[:drop]
        del self._priorities[:drop]
        self.base_offset += drop
