"""Per-message facts the queue core decides with, kept in compact arrays.

Offsets are dense, so the table is three parallel arrays indexed by
`offset - base_offset`: size in bytes, expiry time (0: never) and priority.
That is 13 bytes a message. The prefix below the queue's ack floor is dropped
from time to time (`forget_below`), so the table covers only messages that can
still be delivered.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from logbroker.message import Message, expiry_ms

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


def metas_of(messages: Sequence[Message], message_ttl_ms: int | None, now_ms: int
             ) -> list[MessageMeta]:
    """`meta_of` for a batch written at `now_ms`: the messages of a batch mostly carry
    the same properties, so each distinct (expiration, priority) is worked out once."""
    metas: list[MessageMeta] = []
    seen: dict[tuple[str | None, int | None], tuple[int, int]] = {}
    for message in messages:
        facts = message.expiration_and_priority()
        decided = seen.get(facts)
        if decided is None:
            expires = expiry_ms(message, message_ttl_ms, now_ms)
            decided = seen[facts] = (NO_EXPIRY if expires is None else expires,
                                     min(facts[1] or 0, 255))
        metas.append(MessageMeta(message.size_bytes, *decided))
    return metas


class MessageMetaTable:
    def __init__(self, base_offset: int = 0) -> None:
        self.base_offset = base_offset
        self._sizes = array("I")
        self._expiries = array("q")
        self._priorities = array("B")

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self._sizes)

    def append(self, offset: int, meta: MessageMeta) -> None:
        if offset != self.next_offset:
            raise ValueError(f"offset {offset} is not the next offset {self.next_offset}")
        self._sizes.append(meta.size_bytes)
        self._expiries.append(meta.expires_at_ms)
        self._priorities.append(meta.priority)

    def extend(self, first_offset: int, metas: Sequence[MessageMeta]) -> None:
        """`append` for consecutive offsets from `first_offset`."""
        if first_offset != self.next_offset:
            raise ValueError(f"offset {first_offset} is not the next offset {self.next_offset}")
        self._sizes.extend([meta.size_bytes for meta in metas])
        self._expiries.extend([meta.expires_at_ms for meta in metas])
        self._priorities.extend([meta.priority for meta in metas])

    def skip_to(self, offset: int) -> None:
        """Start over at `offset` (nothing below it will be asked for)."""
        self.base_offset = offset
        del self._sizes[:]
        del self._expiries[:]
        del self._priorities[:]

    def size_bytes(self, offset: int) -> int:
        return self._sizes[offset - self.base_offset]

    def expires_at_ms(self, offset: int) -> int:
        return self._expiries[offset - self.base_offset]

    def priority(self, offset: int) -> int:
        return self._priorities[offset - self.base_offset]

    def forget_below(self, offset: int) -> None:
        """Drop entries below `offset`; amortised so it is cheap to call often."""
        drop = min(offset, self.next_offset) - self.base_offset
        if drop < max(_COMPACT_MIN, len(self._sizes) // 2):
            return
        del self._sizes[:drop]
        del self._expiries[:drop]
        del self._priorities[:drop]
        self.base_offset += drop
