"""The outgoing side of one WebSocket: one bounded queue of frames, drained by one writer.

Theory of operation
-------------------
Frames come from several places: the queues' pumps (deliveries, through the
synchronous `DeliverySink.deliver`), the publish confirm chain, replay tasks
and the reader's replies. They all go through one `asyncio.Queue`, and one
writer task serialises and sends them, so frames leave in the order they were
queued and a slow client holds up nothing but its own socket.

Two kinds of producers, two kinds of back-pressure:

* asynchronous producers (confirms, replays, replies) `await wait_room()`
  before they `push`: they sleep while the outbox is over its high-water mark;
* deliveries cannot wait (the queue's pump calls in synchronously), so the
  session answers the queues' `credit()` question from here: no credit while
  over the high-water mark, and never more than the room below it. Once credit
  has run out, the writer calls `on_room` when it has drained the outbox to
  the low-water mark, and the session pumps its queues again.

The queue's hard limit is far above the high-water mark: a producer that
respects the rules never reaches it; `push` answers False if one did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from api.http.ws_frames import Frame, encode_frame

logger = logging.getLogger(__name__)

HIGH_WATER_FRAMES = 256
LOW_WATER_FRAMES = 64
HIGH_WATER_BYTES = 4 << 20
LOW_WATER_BYTES = 1 << 20
OUTBOX_LIMIT = 4096  # hard: high water + one overshoot per consumer, replay and reply
SMALL_FRAME_BYTES = 128  # the estimate for frames without a payload


class Outbox:
    def __init__(self, send_text: Callable[[str], Awaitable[None]],
                 on_room: Callable[[], None]) -> None:
        self._send_text = send_text
        self._on_room = on_room
        self._queue: asyncio.Queue[tuple[Frame, int] | None] = asyncio.Queue(OUTBOX_LIMIT)
        self._bytes = 0  # estimated bytes of the frames waiting
        self._room = asyncio.Event()
        self._room.set()
        self._starved = False  # credit ran out since on_room last ran
        self.closed = False

    def __len__(self) -> int:
        return self._queue.qsize()

    def credit(self) -> int:
        """How many deliveries may still be queued before the high-water mark."""
        room = 0 if self.closed or self._bytes >= HIGH_WATER_BYTES else \
            max(0, HIGH_WATER_FRAMES - self._queue.qsize())
        if room == 0:
            self._starved = True
        return room

    def push(self, frame: Frame, size: int = SMALL_FRAME_BYTES) -> bool:
        """Queue a frame now; False when closed or (against the rules) full."""
        if self.closed:
            return False
        try:
            self._queue.put_nowait((frame, size))
        except asyncio.QueueFull:
            logger.warning("WebSocket outbox overflow: closing the connection")
            self.close()
            return False
        self._bytes += size
        self._update_room()
        return True

    def has_room(self) -> bool:
        """Open and below the high-water mark."""
        return not self.closed and self._room.is_set()

    async def wait_room(self) -> bool:
        """Wait until below the high-water mark; False once the outbox is closed."""
        while not self.closed and not self._room.is_set():
            await self._room.wait()
        return not self.closed

    async def send(self, frame: Frame, size: int = SMALL_FRAME_BYTES) -> bool:
        return await self.wait_room() and self.push(frame, size)

    def close(self) -> None:
        """No more frames: wake every waiter and the writer."""
        if self.closed:
            return
        self.closed = True
        self._room.set()
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)  # a full queue wakes the writer anyway

    async def run(self) -> None:
        """The writer: send frames in order until closed or the socket fails."""
        try:
            while True:
                item = await self._queue.get()
                if item is None or self.closed:
                    return
                frame, size = item
                await self._send_text(encode_frame(frame))
                self._bytes -= size
                self._update_room()
                self._maybe_resume()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the client went away (or sent a close) mid-send
            logger.debug("WebSocket send failed: %r", error)
        finally:
            self.close()

    def _update_room(self) -> None:
        if self._queue.qsize() < HIGH_WATER_FRAMES and self._bytes < HIGH_WATER_BYTES:
            self._room.set()
        else:
            self._room.clear()
            # A pump that used up its credit stops with messages still ready.
            self._starved = True

    def _maybe_resume(self) -> None:
        low = self._queue.qsize() <= LOW_WATER_FRAMES and self._bytes <= LOW_WATER_BYTES
        if self._starved and low:
            # Queues stop pushing when credit runs out and do not retry on their own.
            self._starved = False
            self._on_room()
