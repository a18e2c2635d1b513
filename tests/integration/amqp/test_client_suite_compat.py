"""What the client libraries' own test suites expect of RabbitMQ 3.10, through pika.

Each test here is a behaviour that aio-pika's, aiormq's or pika's suites found to differ
from RabbitMQ's; the expectations are RabbitMQ's (``rabbit_channel``, ``rabbit_reader``,
``rabbit_binding``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import aiormq
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker

from tests.integration.amqp.helpers import consume_n, get_all

Connect = Callable[[], pika.BlockingConnection]
TIMEOUT_S = 5.0


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


async def test_a_channel_number_above_channel_max_is_fine(amqp_broker: int) -> None:
    # aiormq's test_bad_channel: 65535 under the default channel_max (2047).
    async with aiormq.connect(f"amqp://guest:guest@127.0.0.1:{amqp_broker}/") as connection:
        assert connection.connection_tune.channel_max == 2047
        channel = await asyncio.wait_for(connection.channel(65535), TIMEOUT_S)
        with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
            await asyncio.wait_for(
                channel.queue_bind(uuid.uuid4().hex, uuid.uuid4().hex), TIMEOUT_S)


def test_one_channel_more_than_channel_max_closes_the_connection(amqp_broker: int) -> None:
    # aiormq's test_no_free_channels, with a channel_max the client asks for.
    parameters = pika.ConnectionParameters("127.0.0.1", amqp_broker, channel_max=3,
                                           socket_timeout=5, connection_attempts=1)
    connection = pika.BlockingConnection(parameters)
    for number in (1, 2, 3):
        connection.channel(number)
    with pytest.raises(ConnectionClosedByBroker) as raised:
        connection.channel(4)
    assert raised.value.reply_code == 530
    assert raised.value.reply_text == (
        "NOT_ALLOWED - number of channels opened (3) has reached the negotiated channel_max (3)")


NAMES = ["federation: fed.x -> node@host", "ünïcode", "q#*", "é" * 127 + "x"]  # last: 255 bytes


@pytest.mark.parametrize("name", NAMES, ids=["federation", "unicode", "wildcards", "255-bytes"])
def test_any_utf8_name_works_for_queues_and_exchanges(connect: Connect, name: str) -> None:
    # RabbitMQ takes any UTF-8 up to 255 bytes; pamqp's name patterns are stricter, and
    # every method the broker sends that carries a name must not apply them.
    channel = connect().channel()
    channel.confirm_delivery()
    assert channel.queue_declare(name).method.queue == name
    assert channel.queue_declare(name, passive=True).method.queue == name
    channel.exchange_declare(name, "topic")
    channel.queue_bind(name, name, name)
    channel.basic_publish(name, name, b"routed", mandatory=True)
    method, _properties, body = channel.basic_get(name, auto_ack=True)
    assert method is not None and (method.exchange, method.routing_key, body) == (
        name, name, b"routed")
    returned: list[tuple[str, str]] = []
    channel.add_on_return_callback(
        lambda _channel, method, _properties, _body: returned.append(
            (method.exchange, method.routing_key)))
    with pytest.raises(pika.exceptions.UnroutableError):
        channel.basic_publish(name, "ä.nowhere", b"unroutable", mandatory=True)
    channel.connection.process_data_events(0.2)
    assert returned == [(name, "ä.nowhere")]
    channel.basic_publish(name, name, b"consumed")
    deliveries = consume_n(channel, name, 1)
    assert [(d[0].exchange, d[0].routing_key, d[2]) for d in deliveries] == [
        (name, name, b"consumed")]
    channel.queue_unbind(name, name, name)
    assert channel.queue_delete(name).method.message_count == 0
    channel.exchange_delete(name)
    assert channel.is_open


def test_a_queue_declared_again_right_after_it_went_away_is_a_new_empty_queue(
    connect: Connect,
) -> None:
    # The old instance's files are still being closed when the new one opens: the new
    # one must neither find their lock taken (541) nor see the old messages.
    channel = connect().channel()
    for round_ in range(20):
        channel.queue_declare("again")
        channel.basic_publish("", "again", f"old {round_}".encode())
        channel.queue_delete("again")
        assert channel.queue_declare("again").method.message_count == 0
        channel.basic_publish("", "again", b"new")
        assert get_all(channel, "again") == [b"new"]
        channel.queue_delete("again")
    for _ in range(10):
        owner = connect()
        owner.channel().queue_declare("mine", exclusive=True)
        owner.close()  # the exclusive queue goes with the connection, closing meanwhile
        successor = connect()
        successor.channel().queue_declare("mine", exclusive=True)
        successor.close()
