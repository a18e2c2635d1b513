"""What the client libraries' own test suites expect of RabbitMQ 3.10, through pika.

Each test here is a behaviour that aio-pika's, aiormq's or pika's suites found to differ
from RabbitMQ's; the expectations are RabbitMQ's (``rabbit_channel``, ``rabbit_reader``,
``rabbit_binding``).
"""

from __future__ import annotations

from collections.abc import Callable

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

Connect = Callable[[], pika.BlockingConnection]


def test_unbind_after_the_queue_or_exchange_is_gone_is_ok(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    channel.exchange_declare("gone-x", "direct")
    channel.exchange_declare("kept-x", "direct")
    channel.queue_declare("gone-q")
    channel.queue_bind("gone-q", "gone-x", "k")
    channel.exchange_bind(destination="kept-x", source="gone-x", routing_key="k")
    channel.queue_delete("gone-q")
    channel.queue_unbind("gone-q", "gone-x", "k")  # the destination is gone
    channel.exchange_delete("gone-x")
    channel.queue_declare("kept-q")
    channel.queue_unbind("kept-q", "gone-x", "k")  # the source is gone
    channel.queue_unbind("never-q", "never-x", "k")  # both
    channel.exchange_unbind(destination="kept-x", source="gone-x", routing_key="k")
    channel.exchange_unbind(destination="never-x", source="kept-x", routing_key="k")
    assert channel.is_open
    # The default exchange is still refused, missing ends or not.
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_unbind("never-q", "", "k")
    assert raised.value.reply_code == 403
    assert connection.is_open
