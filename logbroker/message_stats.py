"""What the node's publishers were answered, counted for the overview's `message_stats`.

The queues count what they take and hand out (`QueueCounters`); these are the
channel-level counts no queue sees: messages published (routed or not),
confirms sent and unroutable mandatory messages returned. One integer
increment each, made by the front ends.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MessageStats:
    publish: int = 0  # messages received from publishers, any protocol
    confirm: int = 0  # publisher confirms (basic.ack) sent
    return_unroutable: int = 0  # basic.return of unroutable mandatory messages
