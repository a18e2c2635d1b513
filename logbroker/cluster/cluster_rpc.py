"""`ClusterRpc`: requests, responses and notices between nodes over the cluster link.

Theory of operation. Every frame from a peer goes through `on_frame`. Raft
messages go to `on_raft`; a request is handed to the handler registered for
its op *synchronously*, in arrival order, so a handler that does its work
before its first await (a forwarded publish appending to a queue) keeps the
sender's order; the handler's awaitable then answers with a response carrying
the same request id. A notice is a request without an answer (acks, deliveries,
flow credit), also handled in arrival order.

Posted notices (`post`) wait for the end of the loop turn and then go to the
peer in one frame: a consumer acking message by message, or a queue pumping a
batch of deliveries, costs one frame per turn instead of one per message.
Consecutive posts with the same batch key also become one envelope (their
list fields concatenated, see `batches`), so one JSON header carries a whole
batch. Posting never reorders: before any other frame goes to a peer
(request, answer, plain notice, Raft message), what was posted to it goes
first.

A call waits for its response up to a timeout. When the link to a peer goes
down every call waiting on that peer fails at once with `PeerUnavailable`:
the transport never redelivers, so waiting longer could only hang. Refused
work travels back as an `error` envelope with the AMQP reply code and text and
is raised at the caller as the same `BrokerError`.

Limits: at most `max_pending_calls` outstanding calls and
`max_running_requests` requests being served; beyond that a call is refused
at once and a request answered with 541 (the sender's problem is visible,
nothing is queued without bound).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from logbroker.cluster.envelope import (
    NOTICE,
    NOTICES,
    RAFT,
    REQUEST,
    RESPONSE,
    Envelope,
    EnvelopeDecodeError,
    concat_envelopes,
    notice_frame,
    notices_frame,
    raft_frame,
    request_frame,
    split_frame,
)
from logbroker.errors import BrokerError

logger = logging.getLogger(__name__)
INTERNAL_ERROR = 541
BATCH_BYTES = 1 << 20  # blob bytes per batched envelope and per notices frame, about

RequestHandler = Callable[[str, Envelope], Awaitable[Envelope]]
NoticeHandler = Callable[[str, Envelope], None]


class PeerUnavailable(BrokerError):
    """The peer is not connected (or went away while we waited for it)."""

    def __init__(self, peer: str, detail: str = "not reachable") -> None:
        super().__init__(INTERNAL_ERROR, f"cluster node {peer} is {detail}")
        self.peer = peer


@dataclass(slots=True)
class _Posted:
    """Consecutive posted notices with one batch key (None: never merged)."""

    key: Hashable | None
    envelopes: list[Envelope]
    size: int = 0


@dataclass(frozen=True)
class RpcLimits:
    max_pending_calls: int = 100_000
    max_running_requests: int = 100_000


class ClusterRpc:
    def __init__(self, send: Callable[[str, bytes], bool], on_raft: Callable[[str, bytes], None],
                 limits: RpcLimits = RpcLimits()) -> None:
        self._send = send
        self._on_raft = on_raft
        self._limits = limits
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Envelope]]] = {}
        self._running: set[asyncio.Future[Envelope]] = set()
        self._handlers: dict[str, RequestHandler] = {}
        self._notices: dict[str, NoticeHandler] = {}
        self._list_fields: dict[str, tuple[str, ...]] = {}
        self._posted: dict[str, list[_Posted]] = {}
        self._flush_scheduled = False

    def handle(self, op: str, handler: RequestHandler) -> None:
        self._handlers[op] = handler

    def on_notice(self, op: str, handler: NoticeHandler) -> None:
        self._notices[op] = handler

    def batches(self, op: str, *list_fields: str) -> None:
        """Posted `op` notices with the same batch key merge: `list_fields` concatenate."""
        self._list_fields[op] = list_fields

    # ------------------------------------------------------------- outgoing

    def send_raft(self, peer: str, message_bytes: bytes) -> bool:
        self._flush_peer(peer)
        return self._send(peer, raft_frame(message_bytes))

    def notify(self, peer: str, envelope: Envelope) -> bool:
        self._flush_peer(peer)
        return self._send(peer, notice_frame(envelope))

    def post(self, peer: str, envelope: Envelope, batch: Hashable | None = None) -> None:
        """Send a notice at the end of this loop turn, with the others posted to `peer`.

        Posts in a row with the same `batch` key (the op must be registered with
        `batches`, and the key must tell apart every header field that is not one of
        its list fields) become one envelope. A notice that cannot be sent then (the link
        is down or full) is dropped, as `notify` would have dropped it.
        """
        posted = self._posted.setdefault(peer, [])
        size = sum(len(blob) for blob in envelope.blobs)
        last = posted[-1] if posted else None
        if (batch is not None and last is not None and last.key == batch
                and last.envelopes[0].op == envelope.op and last.size + size <= BATCH_BYTES):
            last.envelopes.append(envelope)
            last.size += size
        else:
            if batch is not None and envelope.op not in self._list_fields:
                raise ValueError(f"notices {envelope.op!r} are not registered as batches")
            posted.append(_Posted(batch, [envelope], size))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_posted)

    def extend_last(self, peer: str, envelope: Envelope, size: int) -> bool:
        """True if `envelope` is still the last notice posted to `peer` (posted alone,
        without a batch key) and `size` more bytes fit in its frame: they are counted,
        and the caller appends its items to the envelope's lists. A poster that sends a
        stream of items this way builds one envelope, not one per item to merge later."""
        posted = self._posted.get(peer)
        if not posted:
            return False
        last = posted[-1]
        if (len(last.envelopes) != 1 or last.envelopes[0] is not envelope
                or last.size + size > BATCH_BYTES):
            return False
        last.size += size
        return True

    def _flush_posted(self) -> None:
        self._flush_scheduled = False
        for peer in list(self._posted):
            self._flush_peer(peer)

    def _flush_peer(self, peer: str) -> None:
        posted = self._posted.pop(peer, None)
        if not posted:
            return
        frame: list[Envelope] = []
        size = 0
        for group in posted:
            envelope = concat_envelopes(group.envelopes, self._list_fields.get(
                group.envelopes[0].op, ()))
            if frame and size + group.size > BATCH_BYTES:
                self._send_notices(peer, frame)
                frame, size = [], 0
            frame.append(envelope)
            size += group.size
        self._send_notices(peer, frame)

    def _send_notices(self, peer: str, envelopes: list[Envelope]) -> None:
        frame = notice_frame(envelopes[0]) if len(envelopes) == 1 else notices_frame(envelopes)
        if not self._send(peer, frame):
            logger.debug("%d notices to %s dropped: link down or full", len(envelopes), peer)

    async def call(self, peer: str, envelope: Envelope, timeout_s: float) -> Envelope:
        """Send a request and wait for its answer; raises BrokerError for a refusal."""
        return await self.answer_of(peer, envelope, self.request(peer, envelope), timeout_s)

    def request(self, peer: str, envelope: Envelope) -> asyncio.Future[Envelope]:
        """Send a request now (so it keeps its place among this node's frames to `peer`);
        the future is the raw answer - pass it to `answer_of`."""
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        self._flush_peer(peer)
        if len(self._pending) >= self._limits.max_pending_calls:
            future.set_exception(BrokerError(INTERNAL_ERROR, "too many cluster requests"))
            return future
        request_id = next(self._ids)
        if not self._send(peer, request_frame(REQUEST, request_id, envelope)):
            future.set_exception(PeerUnavailable(peer))
            return future
        self._pending[request_id] = (peer, future)
        future.add_done_callback(lambda _: self._pending.pop(request_id, None))
        return future

    async def answer_of(self, peer: str, envelope: Envelope, future: asyncio.Future[Envelope],
                        timeout_s: float) -> Envelope:
        try:
            # A timeout scope, not wait_for: no extra future and callbacks per request
            # (the future is still cancelled when the time runs out).
            async with asyncio.timeout(timeout_s):
                answer = await future
        except TimeoutError:
            raise BrokerError(
                INTERNAL_ERROR, f"cluster node {peer} did not answer {envelope.op} "
                f"within {timeout_s:g} s") from None
        if answer.op == "error":
            raise BrokerError(int(answer.header["code"]), str(answer.header["text"]))
        return answer

    def peer_down(self, peer: str) -> None:
        self._posted.pop(peer, None)  # the link is gone: they could not arrive
        for request_id, (target, future) in list(self._pending.items()):
            if target == peer and not future.done():
                future.set_exception(PeerUnavailable(peer, "down"))
                self._pending.pop(request_id, None)

    # ------------------------------------------------------------- incoming

    def on_frame(self, peer: str, payload: bytes) -> None:
        try:
            kind, request_id, body = split_frame(payload)
        except EnvelopeDecodeError as error:
            logger.warning("dropped a malformed frame from %s: %s", peer, error)
            return
        if kind == RAFT:
            assert isinstance(body, bytes)
            self._on_raft(peer, body)
            return
        if kind == NOTICES:
            assert isinstance(body, tuple)
            asyncio.get_running_loop().call_soon(self._notice_batch, peer, body)
            return
        assert isinstance(body, Envelope)
        if kind == RESPONSE:
            entry = self._pending.pop(request_id, None)
            if entry is not None and not entry[1].done():
                entry[1].set_result(body)
        elif kind == NOTICE:
            # Requests start as tasks (their first step runs on the next loop turn),
            # so a notice waits its turn too: a channel-closed must not overtake the
            # consume sent before it.
            asyncio.get_running_loop().call_soon(self._notice, peer, body)
        elif kind == REQUEST:
            self._request(peer, request_id, body)

    def _notice_batch(self, peer: str, envelopes: tuple[Envelope, ...]) -> None:
        for envelope in envelopes:
            self._notice(peer, envelope)

    def _notice(self, peer: str, envelope: Envelope) -> None:
        handler = self._notices.get(envelope.op)
        if handler is None:
            logger.warning("unknown cluster notice %r from %s", envelope.op, peer)
            return
        try:
            handler(peer, envelope)
        except Exception:
            logger.exception("cluster notice %r from %s failed", envelope.op, peer)

    def _request(self, peer: str, request_id: int, envelope: Envelope) -> None:
        handler = self._handlers.get(envelope.op)
        if handler is None:
            self._answer(peer, request_id, _error(INTERNAL_ERROR, f"unknown op {envelope.op}"))
            return
        if len(self._running) >= self._limits.max_running_requests:
            self._answer(peer, request_id, _error(INTERNAL_ERROR, "node overloaded"))
            return
        try:
            work = handler(peer, envelope)  # the synchronous part runs now, in order
        except BrokerError as error:
            self._answer(peer, request_id, _error(error.reply_code, error.text))
            return
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(lambda done: self._finished(peer, request_id, done))

    def _finished(self, peer: str, request_id: int, task: asyncio.Future[Envelope]) -> None:
        self._running.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            self._answer(peer, request_id, task.result())
        elif isinstance(error, BrokerError):
            self._answer(peer, request_id, _error(error.reply_code, error.text))
        else:
            logger.error("cluster request from %s failed", peer, exc_info=error)
            self._answer(peer, request_id, _error(INTERNAL_ERROR, f"internal error: {error}"))

    def _answer(self, peer: str, request_id: int, envelope: Envelope) -> None:
        self._flush_peer(peer)
        if not self._send(peer, request_frame(RESPONSE, request_id, envelope)):
            logger.debug("answer to %s dropped: link down or full", peer)

    async def close(self) -> None:
        self._posted.clear()
        for _, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(BrokerError(INTERNAL_ERROR, "node shutting down"))
        self._pending.clear()
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


def _error(code: int, text: str) -> Envelope:
    return Envelope("error", {"code": code, "text": text})
