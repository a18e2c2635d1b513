"""The delivery mark: which offsets may have been delivered before a crash.

A message delivered before a crash must come back with `redelivered=true`
(AMQP says a consumer may have seen it). Writing the exact highest delivered
offset on every delivery would cost a file write per message, so the mark is
persisted ahead of the deliveries, a step at a time: a crash then flags at
most one step's worth of never-delivered messages as redelivered, which the
specification allows. A clean close writes the exact value.
"""

from __future__ import annotations

import json
import os

from logbroker.queue.queue_recovery import read_delivery_mark
from segments.filesystem import FileSystem, write_file_atomically

DELIVERY_MARK_STEP = 4096
FILE_NAME = "delivery-mark"


class DeliveryMark:
    def __init__(self, fs: FileSystem, directory: str, persisted: int, log_end: int) -> None:
        self._fs = fs
        self._path = os.path.join(directory, FILE_NAME)
        self.persisted = persisted  # every offset below it may have been delivered
        self.delivered_below = min(persisted, log_end)  # exact, since this open

    @classmethod
    def open(cls, fs: FileSystem, directory: str, log_end: int) -> DeliveryMark:
        return cls(fs, directory, read_delivery_mark(fs, os.path.join(directory, FILE_NAME)),
                   log_end)

    def delivered(self, offset: int) -> None:
        self.delivered_below = max(self.delivered_below, offset + 1)
        if offset >= self.persisted:
            self._write(offset + DELIVERY_MARK_STEP)

    def raise_to(self, mark: int) -> None:
        """Everything below `mark` may have been delivered (by another node): say so on
        disk before anything else happens."""
        if mark > self.persisted:
            self._write(mark)
        self.delivered_below = max(self.delivered_below, mark)

    def close(self) -> None:
        if self.delivered_below or self.persisted:
            self._write(self.delivered_below)

    def _write(self, mark: int) -> None:
        self.persisted = mark
        data = json.dumps({"delivered_below": mark}).encode()
        write_file_atomically(self._fs, self._path, data)
