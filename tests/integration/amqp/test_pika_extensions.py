"""RabbitMQ's AMQP extensions through pika: headers, e2e bindings, AE, priorities, SAC, expiry."""

from __future__ import annotations

import time
from collections.abc import Callable

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.integration.amqp.helpers import get_all, pump_until

Connect = Callable[[], pika.BlockingConnection]


def test_headers_exchange_all_and_any(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare("hdrs", "headers")
    for queue, match in (("all", "all"), ("any", "any")):
        channel.queue_declare(queue, exclusive=True)
        channel.queue_bind(queue, "hdrs", arguments={"x-match": match, "format": "pdf",
                                                     "type": "report"})
    for body, headers in ((b"both", {"format": "pdf", "type": "report"}),
                          (b"one", {"format": "pdf", "type": "log"}),
                          (b"none", {"format": "zip"})):
        channel.basic_publish("hdrs", "", body, pika.BasicProperties(headers=headers))
    assert get_all(channel, "all") == [b"both"]
    assert get_all(channel, "any") == [b"both", b"one"]


def test_exchange_to_exchange_binding_and_alternate_exchange(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare("unrouted", "fanout")
    channel.exchange_declare("front", "direct", arguments={"alternate-exchange": "unrouted"})
    channel.exchange_declare("back", "topic")
    channel.exchange_bind(destination="back", source="front", routing_key="orders")
    channel.queue_declare("orders", exclusive=True)
    channel.queue_declare("leftovers", exclusive=True)
    channel.queue_bind("orders", "back", "#")
    channel.queue_bind("leftovers", "unrouted")
    channel.basic_publish("front", "orders", b"order")
    channel.basic_publish("front", "misc", b"misc")
    assert get_all(channel, "orders") == [b"order"]
    assert get_all(channel, "leftovers") == [b"misc"]
    channel.exchange_unbind(destination="back", source="front", routing_key="orders")
    channel.basic_publish("front", "orders", b"order 2")
    assert get_all(channel, "leftovers") == [b"order 2"]


def test_priority_queue_delivers_highest_priority_first(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("prio", arguments={"x-max-priority": 10})
    for body, priority in ((b"low", 1), (b"high", 9), (b"none", 0), (b"mid", 5)):
        channel.basic_publish("", "prio", body, pika.BasicProperties(priority=priority))
    assert get_all(channel, "prio") == [b"high", b"mid", b"low", b"none"]


def test_single_active_consumer_hands_over(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    channel.queue_declare("sac", arguments={"x-single-active-consumer": True})
    received: dict[str, list[bytes]] = {"first": [], "second": []}
    for name in received:
        channel.basic_consume("sac", lambda _c, _m, _p, body, name=name: received[name].append(
            body), auto_ack=True, consumer_tag=name)
    for i in range(3):
        channel.basic_publish("", "sac", f"m{i}".encode())
    pump_until([connection], lambda: len(received["first"]) == 3)
    channel.basic_cancel("first")
    channel.basic_publish("", "sac", b"after")
    pump_until([connection], lambda: received["second"] == [b"after"])


def test_auto_delete_queue_goes_with_its_last_consumer(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("fleeting", auto_delete=True)
    channel.basic_consume("fleeting", lambda *_: None, consumer_tag="only")
    channel.basic_cancel("only")
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_declare("fleeting", passive=True)
    assert raised.value.reply_code == 404


def test_queue_expires_when_unused(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    channel.queue_declare("expiring", arguments={"x-expires": 100})
    time.sleep(0.4)
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_declare("expiring", passive=True)
    assert raised.value.reply_code == 404


def test_unknown_exchange_type_and_reserved_names(connect: Connect) -> None:
    connection = connect()
    with pytest.raises(ChannelClosedByBroker) as raised:
        connection.channel().exchange_declare("amq.mine", "direct")
    assert raised.value.reply_code == 403
    with pytest.raises((ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker)):
        connection.channel().exchange_declare("weird", "x-no-such-type")
