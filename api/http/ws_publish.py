"""The publishes of one WebSocket: run concurrently, answered one frame at a time, in order.

Theory of operation
-------------------
Each message of a publish frame is checked first (`build_message`: the same
checks as REST and AMQP); one that fails is *refused* and will be nacked with
the reason, the others are published: a batch frame is a transport
convenience, each message stands alone as an AMQP basic.publish does. The
accepted messages of a frame are one `publish_many` task (one log append per
queue for the whole frame), created in frame order: asyncio starts tasks first
in, first out, so the messages enter each queue's log in the order the client
sent them, across frames too.

The answer of a frame (its `confirm`, or the `error` of a frame refused as a
whole because it was malformed) is an entry of an
:class:`~api.ordered_answers.OrderedAnswers`, as an AMQP channel's confirms
are: answers leave in the order of the frames however the fsyncs interleave.
An answer is pushed only while the outbox is below its high-water mark; past
it the answers wait, and go on when the outbox has drained (`resume`).

The chain feeds the socket's :class:`~api.connection_flow.ConnectionFlow`,
which its reader asks before reading another frame: the frames and messages
in flight (while `MAX_IN_FLIGHT_MESSAGES` messages or `MAX_IN_FLIGHT_FRAMES`
frames are unanswered the reader stops, and the client's sends back up into
TCP), and the holds of queues this socket published to that hold their
publishers back (:mod:`logbroker.queue.publisher_flow`), as an AMQP
connection in flow does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from api.connection_flow import ConnectionFlow
from api.http.http_publish import PublishOutcome, start_publish_many
from api.http.ws_frames import Frame, Ref
from api.http.ws_outbox import SMALL_FRAME_BYTES, Outbox
from api.ordered_answers import OrderedAnswers
from logbroker.broker import Broker
from logbroker.message import Message

logger = logging.getLogger(__name__)

MAX_IN_FLIGHT_MESSAGES = 10_000  # the reader pauses at this many unanswered messages...
MAX_IN_FLIGHT_FRAMES = 1_000  # ...or frames (one frame may add up to MAX_FRAME_MESSAGES)
#: What a WebSocket counts in flight, and where its reader pauses (`ConnectionFlow`).
PAUSE_AT = {"frames": MAX_IN_FLIGHT_FRAMES, "messages": MAX_IN_FLIGHT_MESSAGES}
_BYTES_PER_ID = 32

# Publishes still running when their socket closed go on (the client sent them), and
# the event loop only holds weak references to tasks.
_lingering: set[asyncio.Future[list[PublishOutcome]]] = set()


def confirm_frame(ids: Sequence[Ref], outcomes: Sequence[PublishOutcome | BaseException]
                  ) -> Frame:
    confirmed: list[Ref] = []
    nacks: list[dict[str, Ref]] = []
    unroutable: list[Ref] = []
    for message_id, outcome in zip(ids, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            nacks.append({"id": message_id, "reason": f"internal error: {outcome!r}"})
        elif not outcome.confirmed:
            nacks.append({"id": message_id, "reason": outcome.reason})
        else:
            confirmed.append(message_id)
            if not outcome.routed:
                unroutable.append(message_id)
    return {"op": "confirm", "ids": confirmed, "nacks": nacks, "unroutable": unroutable}


@dataclass(slots=True)
class _Answer:
    """One frame's answer: its confirm, once `work` is done, or its `error` frame."""

    ids: Sequence[Ref]
    messages: Sequence[Message | str]
    work: asyncio.Future[list[PublishOutcome]] | None  # None: `error` is the answer
    error: Frame | None = None

    def frame(self) -> Frame:
        if self.error is not None:
            return self.error
        assert self.work is not None
        work, count = self.work, len(self.messages)
        results: list[PublishOutcome | BaseException]
        if work.cancelled():
            results = [asyncio.CancelledError()] * count
        elif (error := work.exception()) is not None:  # the whole batch failed in the broker
            results = [error] * count
        else:
            published = iter(work.result())
            results = [next(published) if isinstance(m, Message)
                       else PublishOutcome(False, False, m) for m in self.messages]
        return confirm_frame(self.ids, results)

    @property
    def size(self) -> int:
        """The answer's estimated bytes in the outbox."""
        return SMALL_FRAME_BYTES if self.error is not None else _BYTES_PER_ID * len(self.ids)


class PublishChain:
    def __init__(self, broker: Broker, vhost: str, outbox: Outbox, flow: ConnectionFlow,
                 connection_id: str = "") -> None:
        self._broker = broker
        self._vhost = vhost
        self._connection_id = connection_id  # a queue it consumes from never holds it
        self._outbox = outbox
        self._flow = flow
        self._answers = OrderedAnswers(self._ready, self._answer)

    def submit(self, ids: Sequence[Ref], messages: Sequence[Message | str]) -> None:
        """Start publishing `messages` now (a str: a message refused, and why); the frame's
        confirm follows the earlier answers."""
        accepted = [m for m in messages if isinstance(m, Message)]
        # Routed and appended now, so a queue that holds this socket back is among the
        # flow's holds before the reader asks it for the next frame.
        work = asyncio.ensure_future(start_publish_many(
            self._broker, self._vhost, accepted, self._flow.holds, self._connection_id))
        _lingering.add(work)
        work.add_done_callback(self._work_done)
        self._enter(_Answer(ids, messages, work))

    def submit_error(self, frame: Frame) -> None:
        """A refused publish frame: its error keeps the frame's place among the answers."""
        self._enter(_Answer([], [], None, frame))
        self._answers.changed()

    def resume(self) -> None:
        """The outbox drained below its low-water mark: answers may go on."""
        self._answers.changed()

    def close(self) -> None:
        """The socket is gone: publishes go on (the client sent them), unanswered."""
        self._answers.close()

    def _enter(self, answer: _Answer) -> None:
        self._flow.add("frames", 1)
        self._flow.add("messages", len(answer.messages))
        self._answers.append(answer)

    def _work_done(self, work: asyncio.Future[list[PublishOutcome]]) -> None:
        _lingering.discard(work)
        self._answers.changed()

    def _ready(self, answer: _Answer) -> bool:
        return (answer.work is None or answer.work.done()) and self._outbox.has_room()

    def _answer(self, answer: _Answer) -> None:
        try:
            self._outbox.push(answer.frame(), answer.size)
        except Exception:
            logger.exception("WebSocket publish answer failed")
        finally:
            self._flow.remove("frames", 1)
            self._flow.remove("messages", len(answer.messages))
