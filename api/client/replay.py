"""Paged replay over REST: where the replay stands and when it is done.

A page answers `next_offset` (where the next page starts) and `end_offset`
(where the log ends now). The replay is done at `to_offset` (exclusive), when
it reaches the end of the log, or if a page makes no progress.
"""

from __future__ import annotations

from api.client import calls
from api.client.calls import Call
from api.client.messages import ReplayPage


class ReplayCursor:
    """The state of one paged replay; `start_offset`/`end_offset` are known after a page."""

    def __init__(self, from_offset: int | None = None, from_timestamp: int | None = None,
                 to_offset: int | None = None) -> None:
        if (from_offset is None) == (from_timestamp is None):
            raise ValueError("give exactly one of from_offset and from_timestamp")
        for name, value in (("from_offset", from_offset), ("from_timestamp", from_timestamp),
                            ("to_offset", to_offset)):
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative")
        self.from_timestamp = from_timestamp
        self.to_offset = to_offset
        self.next_offset: int | None = from_offset
        self.start_offset: int | None = None
        self.end_offset: int | None = None
        self.done = to_offset is not None and from_offset is not None and from_offset >= to_offset

    def call(self, vhost: str, queue: str, max_messages: int, max_bytes: int
             ) -> Call[ReplayPage]:
        from_timestamp = self.from_timestamp if self.next_offset is None else None
        return calls.replay_page(vhost, queue, self.next_offset, from_timestamp, self.to_offset,
                                 max_messages, max_bytes)

    def advance(self, page: ReplayPage) -> None:
        previous = self.next_offset
        if self.start_offset is None:
            self.start_offset = page.records[0].offset if page.records else page.next_offset
        self.end_offset = page.end_offset
        self.next_offset = page.next_offset
        stalled = not page.records and previous is not None and page.next_offset <= previous
        reached_to = self.to_offset is not None and page.next_offset >= self.to_offset
        self.done = reached_to or page.next_offset >= page.end_offset or stalled

    @property
    def total(self) -> int | None:
        """How many offsets the replay covers, once the first page told the log's end."""
        if self.start_offset is None or self.end_offset is None:
            return None
        stop = self.end_offset if self.to_offset is None else min(self.to_offset,
                                                                   self.end_offset)
        return max(0, stop - self.start_offset)
