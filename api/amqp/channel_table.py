"""The channels of one open connection: numbering, open/close handshakes,
direction rules, and routing of their frames to events.

Theory of operation
-------------------
A channel number is absent (never opened, or fully closed), open, or closing.
"Closing" means the server sent channel.close and waits for the client's
close-ok; per the spec, everything the client sends on a closing channel except
channel.close / close-ok is discarded (content frames included, which is how the
body of a refused message is skipped without being buffered). The number is
free again once the close handshake is over.

On an open channel, basic.publish starts content assembly (see
:mod:`api.amqp.content_assembler`); channel.open / close / flow are answered
here; the methods in :data:`BROKER_METHODS` become ``ChannelMethod`` events;
methods only a server may send are refused with 503 COMMAND_INVALID, as
RabbitMQ's "unimplemented method".

Errors follow RabbitMQ: a method before channel.open -> 504 "expected
'channel.open'", a second channel.open -> 504 "second 'channel.open' seen",
channel.flow active=false -> 540 "active=false", basic.publish immediate=true
-> 540 "immediate=true". ``channel_max`` limits how many channels are open at
once, not their numbers (``rabbit_reader:create_channel``): a frame on a new
channel when that many are open (closing ones count: their numbers are still
taken) -> 530 NOT_ALLOWED, checked before the frame itself, as RabbitMQ creates
the channel first.
Connection errors are raised as :class:`ProtocolError`; the only channel error
found here (406, message too large) closes the channel.
"""

from __future__ import annotations

from dataclasses import dataclass

from pamqp import base, commands

from api.amqp.content_assembler import ContentAssembler, MessageTooLarge
from api.amqp.events import Acks, ChannelClosed, ChannelMethod, ChannelOpened, Event, Publish
from api.amqp.frame_buffers import Inbox, Outbox
from api.amqp.reply_texts import reply_text, truncate_shortstr
from api.amqp.wire import (
    ACK_FRAME,
    ACK_FRAME_SIZE,
    ACK_PAYLOAD_SIZE,
    FRAME_END,
    FRAME_METHOD,
    ProtocolError,
    RawFrame,
    ack_arguments,
    decode_method,
    method_ids,
)
from api.amqp.wire import method_name as _name
from logbroker.metadata.reply_codes import ReplyCode

__all__ = [
    "BROKER_METHODS",
    "CONTENT_METHODS",
    "IGNORED_REPLIES",
    "MACHINE_ONLY_METHODS",
    "ChannelState",
    "ChannelTable",
    "frame_ids",
]

#: Client methods on an open channel that the broker layer answers (ChannelMethod).
BROKER_METHODS: frozenset[type[base.Frame]] = frozenset(
    {
        commands.Exchange.Declare,
        commands.Exchange.Delete,
        commands.Exchange.Bind,
        commands.Exchange.Unbind,
        commands.Queue.Declare,
        commands.Queue.Bind,
        commands.Queue.Purge,
        commands.Queue.Delete,
        commands.Queue.Unbind,
        commands.Basic.Qos,
        commands.Basic.Consume,
        commands.Basic.Cancel,
        commands.Basic.Get,
        commands.Basic.Ack,
        commands.Basic.Reject,
        commands.Basic.RecoverAsync,
        commands.Basic.Recover,
        commands.Basic.Nack,
        commands.Tx.Select,
        commands.Tx.Commit,
        commands.Tx.Rollback,
        commands.Confirm.Select,
    }
)

#: Client replies to server-initiated methods that need no action: dropped.
IGNORED_REPLIES: frozenset[type[base.Frame]] = frozenset(
    {commands.Channel.FlowOk, commands.Basic.CancelOk}
)

#: Server methods that carry content: sent with ``send_content`` only.
CONTENT_METHODS: frozenset[type[base.Frame]] = frozenset(
    {commands.Basic.Deliver, commands.Basic.GetOk, commands.Basic.Return}
)

#: Methods the machine itself sends; the broker may not send them directly.
MACHINE_ONLY_METHODS: frozenset[type[base.Frame]] = frozenset(
    {
        commands.Channel.Open,
        commands.Channel.OpenOk,
        commands.Channel.Close,
        commands.Channel.CloseOk,
        commands.Channel.FlowOk,
    }
)

_BASIC, _PUBLISH = commands.Basic.frame_id, commands.Basic.Publish.frame_id
_ACK = commands.Basic.Ack.frame_id
_CLOSE_IDS = (commands.Channel.frame_id, commands.Channel.Close.frame_id)
_CLOSE_OK_IDS = (commands.Channel.frame_id, commands.Channel.CloseOk.frame_id)


def frame_ids(method: base.Frame) -> tuple[int, int]:
    """(class id, method id) of a pamqp method."""
    return (method.index >> 16) & 0xFFFF, method.index & 0xFFFF


@dataclass(slots=True)
class ChannelState:
    """One channel: open, or closing (waiting for the client's close-ok)."""

    number: int
    assembler: ContentAssembler
    closing: bool = False


class ChannelTable:
    """Channels by number (at most ``limit`` of them), writing replies to ``outbox``
    and appending events to ``events``."""

    def __init__(
        self, limit: int, max_message_bytes: int, outbox: Outbox, events: list[Event]
    ) -> None:
        self.limit = limit
        self._max_message_bytes = max_message_bytes
        self._outbox = outbox
        self._events = events
        self._channels: dict[int, ChannelState] = {}

    def is_open(self, number: int) -> bool:
        """Open and not closing: the broker may send on it."""
        state = self._channels.get(number)
        return state is not None and not state.closing

    def open_numbers(self) -> frozenset[int]:
        return frozenset(n for n, s in self._channels.items() if not s.closing)

    def clear(self) -> None:
        self._channels.clear()

    def close(self, number: int, code: int, text: str, class_id: int, method_id: int) -> bool:
        """Server-side channel.close (no event). False if not open."""
        state = self._channels.get(number)
        if state is None or state.closing:
            return False
        self._send_close(state, code, text, class_id, method_id)
        return True

    def handle_frame(self, frame: RawFrame) -> None:
        """A method / header / body frame on a non-zero channel of an open connection."""
        number, kind = frame.channel, frame.frame_type
        channel = self._channels.get(number)
        if channel is None and len(self._channels) >= self.limit:
            raise ProtocolError(
                ReplyCode.NOT_ALLOWED,
                f"number of channels opened ({len(self._channels)}) has reached the "
                f"negotiated channel_max ({self.limit})",
            )
        if channel is not None and channel.closing:
            self._on_closing_channel(channel, frame)
            return
        if channel is not None and not channel.assembler.idle:
            self._content(channel, frame)
            return
        if kind != FRAME_METHOD:
            raise ProtocolError(
                ReplyCode.UNEXPECTED_FRAME,
                f"expected method frame, got non method frame instead "
                f"(type {kind}, channel {number})",
            )
        if channel is not None and (ack := ack_arguments(frame.payload)) is not None:
            last = self._events[-1] if self._events else None
            if type(last) is Acks and last.channel == number:
                last.acks.append(ack)
            else:
                self._events.append(Acks(number, [ack]))
            return
        method = decode_method(frame.payload)
        if channel is None:
            if not isinstance(method, commands.Channel.Open):
                raise ProtocolError(
                    ReplyCode.CHANNEL_ERROR,
                    f"expected 'channel.open' on channel {number}, got {_name(method)}",
                    *frame_ids(method),
                )
            self._channels[number] = ChannelState(
                number, ContentAssembler(self._max_message_bytes)
            )
            open_ok = commands.Channel.OpenOk()
            open_ok.channel_id = ""  # RabbitMQ sends an empty longstr; pamqp defaults to "0"
            self._outbox.method(number, open_ok)
            self._events.append(ChannelOpened(number))
            return
        self._method(channel, method)

    def take_acks(self, inbox: Inbox) -> None:
        """Take the basic.ack frames that follow, in a row, the one `handle_frame` just
        made an `Acks` event of, reading them in place: one unpack each instead of a
        frame object, a check and a dispatch. Stops at anything else (a frame of
        another kind, an ack on another channel, a torn frame), which the frame-by-frame
        path then reads, errors included."""
        acks = self._events[-1] if self._events else None
        if type(acks) is not Acks:
            return
        number, run = acks.channel, acks.acks
        buffer, position = inbox.unread()
        start, end = position, len(buffer)
        unpack_from = ACK_FRAME.unpack_from
        while end - position >= ACK_FRAME_SIZE:
            kind, channel, size, class_id, method_id, tag, bits, frame_end = unpack_from(
                buffer, position)
            if (channel != number or kind != FRAME_METHOD or size != ACK_PAYLOAD_SIZE
                    or class_id != _BASIC or method_id != _ACK or frame_end != FRAME_END):
                break
            run.append((tag, bits & 1 != 0))
            position += ACK_FRAME_SIZE
        inbox.skip(position - start)

    def _content(self, channel: ChannelState, frame: RawFrame) -> None:
        try:
            message = channel.assembler.feed(frame.frame_type, frame.payload)
        except MessageTooLarge as err:
            code = ReplyCode.PRECONDITION_FAILED
            text = reply_text(code, str(err))
            self._send_close(channel, code, text, _BASIC, _PUBLISH)
            self._events.append(
                ChannelClosed(channel.number, False, code, text, _BASIC, _PUBLISH)
            )
            return
        if message is not None:
            self._events.append(
                Publish(channel.number, message.method, message.properties, message.body,
                        message.raw_properties)
            )

    def _method(self, channel: ChannelState, method: base.Frame) -> None:
        number, kind = channel.number, type(method)
        if isinstance(method, commands.Basic.Publish):
            if method.immediate:  # removed in RabbitMQ 3.0, refused as a connection error
                raise ProtocolError(ReplyCode.NOT_IMPLEMENTED, "immediate=true", _BASIC, _PUBLISH)
            channel.assembler.start(method)
        elif kind in BROKER_METHODS:
            self._events.append(ChannelMethod(number, method))
        elif isinstance(method, commands.Channel.Close):
            self._outbox.method(number, commands.Channel.CloseOk())
            del self._channels[number]
            self._events.append(
                ChannelClosed(
                    number,
                    True,
                    int(method.reply_code or 0),
                    str(method.reply_text or ""),
                    int(method.class_id or 0),
                    int(method.method_id or 0),
                )
            )
        elif isinstance(method, commands.Channel.Open):
            raise ProtocolError(
                ReplyCode.CHANNEL_ERROR, "second 'channel.open' seen", *frame_ids(method)
            )
        elif isinstance(method, commands.Channel.Flow):
            if not method.active:  # RabbitMQ refuses client-side flow control
                raise ProtocolError(ReplyCode.NOT_IMPLEMENTED, "active=false", *frame_ids(method))
            self._outbox.method(number, commands.Channel.FlowOk(active=True))
        elif kind not in IGNORED_REPLIES:
            raise ProtocolError(
                ReplyCode.COMMAND_INVALID,
                f"unimplemented method {_name(method)} (not a client method)",
                *frame_ids(method),
            )

    def _on_closing_channel(self, channel: ChannelState, frame: RawFrame) -> None:
        if frame.frame_type != FRAME_METHOD:
            return
        ids = method_ids(frame.payload)
        if ids == _CLOSE_OK_IDS:
            del self._channels[channel.number]
        elif ids == _CLOSE_IDS:
            self._outbox.method(channel.number, commands.Channel.CloseOk())

    def _send_close(
        self, channel: ChannelState, code: int, text: str, class_id: int, method_id: int
    ) -> None:
        close = commands.Channel.Close(code, truncate_shortstr(text), class_id, method_id)
        self._outbox.method(channel.number, close)
        channel.closing = True
        channel.assembler.reset()
