"""Replay subscriptions of one WebSocket: a queue's log as `record` frames, optionally followed.

Theory of operation
-------------------
Each subscription is one task reading the queue's log a page at a time
(`read_page`, the REST replay's reader: non-destructive, settled messages
included while retention keeps them). Every record frame is awaited into the
outbox, so a client that reads slowly slows its replay down and at most one
page is held in memory. When the task reaches the log's end (or `to_offset`)
it sends `caught_up` once; without `follow` it is done. With `follow` it
sleeps on the queue's `appends` (woken by every append, or after
`FOLLOW_WAIT_S` to notice a deleted queue) and goes on reading.

A subscription ends on `stop_replay`, when the socket closes (its task is
cancelled), when its queue is deleted, or when a following replay reaches
`to_offset`; the last two send `replay_stopped` with a `reason`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from api.http.routes.replay import read_page
from api.http.ws_frames import Frame, FrameError
from api.http.ws_outbox import SMALL_FRAME_BYTES, Outbox
from logbroker.queue.queue_shell import QueueShell

logger = logging.getLogger(__name__)

MAX_REPLAYS = 64  # concurrent subscriptions per socket
PAGE_MESSAGES = 256
PAGE_BYTES = 1 << 20
FOLLOW_WAIT_S = 1.0

Alive = Callable[[], bool]


def stopped_frame(subscription: str, reason: str | None = None) -> Frame:
    frame: Frame = {"op": "replay_stopped", "subscription": subscription}
    if reason is not None:
        frame["reason"] = reason
    return frame


class Replays:
    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._serial = itertools.count(1)

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, subscription: str | None, shell: QueueShell, offset: int,
              to_offset: int | None, follow: bool, alive: Alive) -> str:
        """Start a replay from `offset`; returns its subscription name."""
        if len(self._tasks) >= MAX_REPLAYS:
            raise FrameError(400, f"at most {MAX_REPLAYS} replays per connection")
        name = subscription or self._new_name()
        if name in self._tasks:
            raise FrameError(400, f"subscription '{name}' is already running", "subscription",
                             name)
        task = asyncio.ensure_future(
            _guarded(self._outbox, name, shell, offset, to_offset, follow, alive))
        self._tasks[name] = task
        task.add_done_callback(lambda _done: self._forget(name, task))
        return name

    async def stop(self, subscription: str) -> None:
        """Stop a subscription; once this returns, none of its records is queued any more."""
        task = self._tasks.pop(subscription, None)
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    def _new_name(self) -> str:
        while (name := f"replay-{next(self._serial)}") in self._tasks:
            pass
        return name

    def _forget(self, name: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(name) is task:
            del self._tasks[name]


async def _guarded(outbox: Outbox, name: str, shell: QueueShell, offset: int,
                   to_offset: int | None, follow: bool, alive: Alive) -> None:
    try:
        await _replay(outbox, name, shell, offset, to_offset, follow, alive)
    except Exception as error:  # a storage error ends this replay, not the socket
        logger.exception("replay %s of queue '%s' failed", name, shell.name)
        await outbox.send(stopped_frame(name, f"error: {error}"))


async def _replay(outbox: Outbox, name: str, shell: QueueShell, offset: int,
                  to_offset: int | None, follow: bool, alive: Alive) -> None:
    caught_up = False
    while True:
        if not alive():
            await outbox.send(stopped_frame(name, "queue deleted"))
            return
        records, next_offset = read_page(shell, offset, to_offset, PAGE_MESSAGES, PAGE_BYTES,
                                         "auto")
        for record in records:
            if not await outbox.send(*_record_frame(name, record)):
                return  # the socket closed
        progressed, offset = next_offset > offset, next_offset
        done = to_offset is not None and offset >= to_offset
        # No progress below the end would only repeat itself: treat it as the end for now.
        at_end = done or offset >= shell.readable_end or not progressed
        if at_end and not caught_up:
            caught_up = True
            await outbox.send({"op": "caught_up", "subscription": name, "next_offset": offset})
        if done and follow:
            await outbox.send(stopped_frame(name, "to_offset reached"))
        if done or (at_end and not follow):
            return
        if at_end:
            await shell.appends.wait(FOLLOW_WAIT_S)


def _record_frame(name: str, record: dict[str, Any]) -> tuple[Frame, int]:
    record.pop("payload_bytes", None)
    frame: Frame = {"op": "record", "subscription": name}
    frame.update(record)
    return frame, SMALL_FRAME_BYTES + len(record["payload"])
