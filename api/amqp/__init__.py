"""AMQP 0-9-1 server side: the pure connection machine and its helpers.

The asyncio shell (socket, timers) and the broker layer sit on top of
:class:`AmqpConnection`; nothing in this package does I/O or reads a clock.
"""

from api.amqp.connection_machine import AmqpConnection, Authenticator, ConnectionState
from api.amqp.events import (
    Acks,
    ChannelClosed,
    ChannelMethod,
    ChannelOpened,
    ConnectionClosed,
    ConnectionFailed,
    Event,
    OpenRequested,
    Publish,
    SecretUpdated,
)
from api.amqp.negotiation import Tuning
from api.amqp.reply_texts import reply_text
from api.amqp.server_properties import ConnectionConfig
from logbroker.metadata.reply_codes import ReplyCode, is_channel_error, is_connection_error

__all__ = [
    "Acks",
    "AmqpConnection",
    "Authenticator",
    "ChannelClosed",
    "ChannelMethod",
    "ChannelOpened",
    "ConnectionClosed",
    "ConnectionConfig",
    "ConnectionFailed",
    "ConnectionState",
    "Event",
    "OpenRequested",
    "Publish",
    "ReplyCode",
    "SecretUpdated",
    "Tuning",
    "is_channel_error",
    "is_connection_error",
    "reply_text",
]
