"""`HeldMessages`: written messages on their way to being ready in the queue core.

Theory of operation. The core makes messages ready strictly in offset order
(`QueueCore.enqueue`), and only what its shell lets through: on a single
node a message is ready as soon as it is written (as on RabbitMQ), on a
replicated queue's leader only once it is below the high watermark (every
in-sync replica has persisted it). A written message that cannot enter the
core yet waits here, and `release` hands the core, in offset order, every
held message from the core's next offset up to the limit. A write that lands
where the core expects it, with no limit and nothing held, goes straight in,
as one batch (`written`): the usual single-node case.

A promoted leader's messages below `delivered_below` may have been delivered
by its predecessor (queue_opening): they enter the core flagged so.

Invariants: a message enters the core at most once, in offset order, and
never at or above the limit; every held offset is at or past the core's
next offset.
"""

from __future__ import annotations

from collections.abc import Iterable

from logbroker.queue.effects import Effect
from logbroker.queue.message_meta import MessageMeta, MetaRun
from logbroker.queue.queue_core import QueueCore

__all__ = ["HeldMessages"]


class HeldMessages:
    def __init__(self, held: dict[int, MessageMeta] | None = None, delivered_below: int = 0
                 ) -> None:
        self._held: dict[int, MessageMeta] = dict(held or {})
        self.delivered_below = delivered_below

    def __len__(self) -> int:
        return len(self._held)

    def written(self, core: QueueCore, base_offset: int, metas: MetaRun, limit: int | None
                ) -> tuple[int, list[Effect]]:
        """The messages of `metas` are written from `base_offset`: make ready what may be
        (below `limit`, None: no limit) and hold the rest. Returns how many messages
        became ready and the core's effects."""
        if limit is None and not self._held and base_offset == core.next_offset:
            return len(metas), core.enqueue_many(base_offset, metas, self.delivered_below)
        self.hold(base_offset, metas)
        return self.release(core, limit)

    def hold(self, base_offset: int, metas: Iterable[MessageMeta]) -> None:
        for index, meta in enumerate(metas):
            self._held[base_offset + index] = meta

    def release(self, core: QueueCore, limit: int | None) -> tuple[int, list[Effect]]:
        """Make the held messages ready in offset order, from the core's next offset up to
        `limit`. Returns how many became ready and the core's effects, in order."""
        effects: list[Effect] = []
        released = 0
        while (offset := core.next_offset) in self._held and (limit is None or offset < limit):
            effects += core.enqueue(offset, self._held.pop(offset),
                                    offset < self.delivered_below)
            released += 1
        return released, effects
