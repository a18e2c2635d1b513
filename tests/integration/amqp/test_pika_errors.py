"""Errors as pika sees them: reply codes and texts like RabbitMQ's, and a server that survives."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

import pika
import pytest
from pika.exceptions import (
    ChannelClosedByBroker,
    ProbableAccessDeniedError,
    ProbableAuthenticationError,
)

Connect = Callable[[], pika.BlockingConnection]


def test_passive_declare_of_a_missing_queue_is_404(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_declare("missing", passive=True)
    assert raised.value.reply_code == 404
    assert raised.value.reply_text == "NOT_FOUND - no queue 'missing' in vhost '/'"
    assert connection.is_open and connection.channel().is_open


def test_redeclare_with_other_durability_is_406(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("durable-q", durable=True)
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_declare("durable-q", durable=False)
    assert raised.value.reply_code == 406
    assert raised.value.reply_text.startswith("PRECONDITION_FAILED - inequivalent arg 'durable'")


def test_exclusive_queue_of_another_connection_is_405(connect: Connect) -> None:
    owner = connect().channel()
    owner.queue_declare("mine", exclusive=True)
    other = connect().channel()
    with pytest.raises(ChannelClosedByBroker) as raised:
        other.basic_consume("mine", lambda *_: None)
    assert raised.value.reply_code == 405
    assert raised.value.reply_text.startswith("RESOURCE_LOCKED - cannot obtain exclusive access")


def test_exclusive_queue_goes_with_its_connection(connect: Connect) -> None:
    owner = connect()
    owner.channel().queue_declare("ephemeral", exclusive=True)
    owner.close()
    with pytest.raises(ChannelClosedByBroker) as raised:
        connect().channel().queue_declare("ephemeral", passive=True)
    assert raised.value.reply_code == 404


def test_unknown_delivery_tag_is_406(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    channel.basic_ack(99)
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.queue_declare("after-bad-ack")  # the close arrives while waiting for this
    assert raised.value.reply_code == 406
    assert raised.value.reply_text == "PRECONDITION_FAILED - unknown delivery tag 99"


def test_publish_to_a_missing_exchange_closes_the_channel(connect: Connect) -> None:
    channel = connect().channel()
    channel.confirm_delivery()
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.basic_publish("no-such-exchange", "rk", b"x")
    assert raised.value.reply_code == 404
    assert raised.value.reply_text == "NOT_FOUND - no exchange 'no-such-exchange' in vhost '/'"


def test_confirm_and_tx_are_exclusive(connect: Connect) -> None:
    channel = connect().channel()
    channel.confirm_delivery()
    with pytest.raises(ChannelClosedByBroker) as raised:
        channel.tx_select()
    assert raised.value.reply_code == 406
    assert "cannot switch from confirm to tx mode" in raised.value.reply_text


def test_bad_password_and_missing_vhost(amqp_broker: int) -> None:
    wrong = pika.PlainCredentials("guest", "wrong")
    with pytest.raises(ProbableAuthenticationError):
        pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", amqp_broker, credentials=wrong, connection_attempts=1))
    with pytest.raises(ProbableAccessDeniedError) as raised:
        pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", amqp_broker, virtual_host="nope", connection_attempts=1))
    assert "(530) 'NOT_ALLOWED - vhost nope not found'" in str(raised.value)


def test_malformed_frames_never_take_the_server_down(connect: Connect, amqp_broker: int) -> None:
    garbage = [
        b"GET / HTTP/1.1\r\n\r\n",
        b"AMQP\x00\x00\x09\x01" + b"\xff" * 64,  # a valid header, then nonsense
        b"AMQP\x00\x00\x09\x01" + struct.pack(">BHI", 1, 0, 3) + b"abc\x00",  # bad frame end
    ]
    for data in garbage:
        with socket.create_connection(("127.0.0.1", amqp_broker), timeout=5) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(4096):  # the server answers (or not) and closes
                pass
    channel = connect().channel()
    channel.queue_declare("still-serving")
    channel.basic_publish("", "still-serving", b"ok")
