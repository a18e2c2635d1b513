"""RabbitMQ's direct reply-to: RPC replies straight to the requesting channel, no queue.

Theory of operation
-------------------
RabbitMQ advertises the ``direct_reply_to`` capability and clients use it as
its documentation describes:

1. the requester consumes from the pseudo-queue ``amq.rabbitmq.reply-to`` in
   no-ack mode (an acking consumer is refused with 406, so is a second one on
   the same channel);
2. it publishes requests with ``reply_to = "amq.rabbitmq.reply-to"`` on that
   same channel; the server rewrites the property to a name that identifies
   the channel, ``amq.rabbitmq.reply-to.<token>`` (406 "fast reply consumer
   does not exist" without step 1);
3. the responder publishes the reply to the default exchange with that name as
   routing key; the server hands it straight to the requester's consumer. If
   the requester is gone the reply is unroutable (returned if mandatory).

Passive queue.declare of the pseudo-queue, or of a live reply name, succeeds
(clients use it to check a reply target exists).

:class:`DirectReplyRegistry` (one per listener, shared by its connections)
maps reply names to channels; :class:`ReplyEndpoint` is one channel's
consumer. Tokens are random, so a reply name cannot be guessed to intercept
another client's replies.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from pamqp import commands

from logbroker.errors import PRECONDITION_FAILED, BrokerError
from logbroker.message import Message, Properties

__all__ = ["PSEUDO_QUEUE", "DirectReplyRegistry", "ReplyEndpoint"]

PSEUDO_QUEUE = "amq.rabbitmq.reply-to"
_PREFIX = PSEUDO_QUEUE + "."

#: Delivers a reply to one channel's consumer: ``deliver(consumer_tag, message)``.
ReplyDeliverer = Callable[[str, Message], None]


class DirectReplyRegistry:
    """Reply names of the live reply consumers of one listener."""

    def __init__(self) -> None:
        self._targets: dict[str, tuple[str, ReplyDeliverer]] = {}

    def register(self, consumer_tag: str, deliver: ReplyDeliverer) -> str:
        name = _PREFIX + secrets.token_urlsafe(18)
        self._targets[name] = (consumer_tag, deliver)
        return name

    def unregister(self, name: str) -> None:
        self._targets.pop(name, None)

    def exists(self, queue: str) -> bool:
        """Whether a passive declare of ``queue`` (pseudo-queue or reply name) succeeds."""
        return queue == PSEUDO_QUEUE or queue in self._targets

    @staticmethod
    def is_reply(exchange: str, routing_key: str) -> bool:
        """Whether a publish addresses a reply name (default exchange only)."""
        return exchange == "" and routing_key.startswith(_PREFIX)

    def route(self, message: Message) -> bool:
        """Deliver a reply to its requester; False when the requester is gone."""
        target = self._targets.get(message.routing_key)
        if target is None:
            return False
        consumer_tag, deliver = target
        deliver(consumer_tag, message)
        return True


class ReplyEndpoint:
    """The direct reply-to consumer of one channel (at most one)."""

    def __init__(self, registry: DirectReplyRegistry, deliver: ReplyDeliverer) -> None:
        self._registry = registry
        self._deliver = deliver
        self.consumer_tag: str | None = None
        self._name: str | None = None

    def consume(self, method: commands.Basic.Consume, default_tag: str) -> str:
        """basic.consume on the pseudo-queue: the consumer tag."""
        if not method.no_ack:
            raise BrokerError(PRECONDITION_FAILED, "reply consumer cannot acknowledge")
        if self.consumer_tag is not None:
            raise BrokerError(PRECONDITION_FAILED, "reply consumer already set")
        self.consumer_tag = method.consumer_tag or default_tag
        self._name = self._registry.register(self.consumer_tag, self._deliver)
        return self.consumer_tag

    def cancel(self, consumer_tag: str) -> bool:
        """basic.cancel: True if it was this channel's reply consumer."""
        if consumer_tag != self.consumer_tag:
            return False
        self.close()
        return True

    def rewrite_reply_to(self, properties: Properties) -> None:
        """A request asking for a direct reply gets this channel's reply name."""
        if properties.reply_to != PSEUDO_QUEUE:
            return
        if self._name is None:
            raise BrokerError(PRECONDITION_FAILED, "fast reply consumer does not exist")
        properties.reply_to = self._name

    def close(self) -> None:
        if self._name is not None:
            self._registry.unregister(self._name)
        self.consumer_tag = self._name = None
