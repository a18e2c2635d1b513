"""RabbitMQ features through pika: confirms, settlement, dead-lettering, limits, tx, redelivery."""

from __future__ import annotations

import time
from collections.abc import Callable

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker, NackError, UnroutableError

from tests.integration.amqp.helpers import consume_n, get_all, pump_until, wait_for_count

Connect = Callable[[], pika.BlockingConnection]
PERSISTENT = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)


def test_publisher_confirms_and_mandatory_unroutable(connect: Connect) -> None:
    channel = connect().channel()
    channel.confirm_delivery()
    channel.queue_declare("confirmed", durable=True)
    for i in range(20):
        channel.basic_publish("", "confirmed", f"m{i}".encode(), PERSISTENT, mandatory=True)
    assert channel.queue_declare("confirmed", passive=True).method.message_count == 20
    channel.basic_publish("", "nowhere", b"lost")  # not mandatory: confirmed, dropped
    with pytest.raises(UnroutableError) as raised:
        channel.basic_publish("", "nowhere", b"returned", mandatory=True)
    (returned,) = raised.value.messages
    assert returned.method.reply_code == 312 and returned.method.reply_text == "NO_ROUTE"
    assert returned.body == b"returned"
    channel.basic_publish("", "confirmed", b"still open", mandatory=True)


def test_nack_and_reject_with_and_without_requeue(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("settle")
    for body in (b"a", b"b", b"c"):
        channel.basic_publish("", "settle", body)
    first = channel.basic_get("settle")
    second = channel.basic_get("settle")
    assert first[0] is not None and second[0] is not None
    assert first[2] == b"a" and not first[0].redelivered
    channel.basic_nack(second[0].delivery_tag, multiple=True, requeue=True)  # a and b back
    again = channel.basic_get("settle")
    assert again[0] is not None and again[2] == b"a" and again[0].redelivered
    channel.basic_reject(again[0].delivery_tag, requeue=False)  # a is dropped
    channel.basic_reject(channel.basic_get("settle")[0].delivery_tag, requeue=True)  # b back
    after_b = channel.basic_get("settle")
    assert after_b[2] == b"b" and after_b[0].redelivered
    channel.basic_nack(after_b[0].delivery_tag, requeue=False)
    assert get_all(channel, "settle") == [b"c"]


def test_dead_letter_exchange_with_x_death(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare("dlx", "fanout")
    channel.queue_declare("dead")
    channel.queue_bind("dead", "dlx")
    channel.queue_declare("work", arguments={"x-dead-letter-exchange": "dlx"})
    channel.basic_publish("", "work", b"poison", pika.BasicProperties(headers={"k": "v"}))
    method, _props, _body = channel.basic_get("work")
    channel.basic_reject(method.delivery_tag, requeue=False)
    ((_method, properties, body),) = consume_n(channel, "dead", 1)
    assert body == b"poison" and properties.headers["k"] == "v"
    (death,) = properties.headers["x-death"]
    assert death["reason"] == "rejected" and death["queue"] == "work"
    assert death["count"] == 1 and death["exchange"] == "" and death["routing-keys"] == ["work"]
    assert properties.headers["x-first-death-reason"] == "rejected"


def test_message_ttl_per_queue_and_per_message(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("expired")
    channel.queue_declare("ttl", arguments={
        "x-message-ttl": 100, "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "expired"})
    channel.queue_declare("short")
    channel.basic_publish("", "ttl", b"queue ttl")
    channel.basic_publish("", "short", b"own ttl", pika.BasicProperties(expiration="50"))
    channel.basic_publish("", "short", b"no ttl")
    time.sleep(0.3)
    assert get_all(channel, "ttl") == []
    assert get_all(channel, "short") == [b"no ttl"]
    ((_m, properties, body),) = consume_n(channel, "expired", 1)
    assert body == b"queue ttl" and properties.headers["x-death"][0]["reason"] == "expired"


def test_max_length_drop_head(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("bounded", arguments={"x-max-length": 2})
    for i in range(5):
        channel.basic_publish("", "bounded", f"m{i}".encode())
    assert wait_for_count(channel, "bounded", 2) == 2
    assert get_all(channel, "bounded") == [b"m3", b"m4"]


def test_max_length_reject_publish_nacks(connect: Connect) -> None:
    channel = connect().channel()
    channel.confirm_delivery()
    channel.queue_declare("full", arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    channel.basic_publish("", "full", b"m0")
    channel.basic_publish("", "full", b"m1")
    with pytest.raises(NackError):
        channel.basic_publish("", "full", b"m2")
    assert get_all(channel, "full") == [b"m0", b"m1"]
    channel.basic_publish("", "full", b"m3")  # room again


def test_reject_publish_holds_for_pipelined_publishes(connect: Connect) -> None:
    """Without confirms pika does not wait: many publishes arrive in one read."""
    channel = connect().channel()
    channel.queue_declare("tight", arguments={"x-max-length": 3, "x-overflow": "reject-publish"})
    for i in range(50):
        channel.basic_publish("", "tight", f"m{i}".encode())
    assert wait_for_count(channel, "tight", 3) == 3
    time.sleep(0.1)
    assert get_all(channel, "tight") == [b"m0", b"m1", b"m2"]


def test_transactions_commit_and_rollback(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("tx")
    channel.tx_select()
    channel.basic_publish("", "tx", b"rolled back")
    assert channel.queue_declare("tx", passive=True).method.message_count == 0
    channel.tx_rollback()
    channel.basic_publish("", "tx", b"committed")
    channel.tx_commit()
    assert channel.queue_declare("tx", passive=True).method.message_count == 1

    method, _props, body = channel.basic_get("tx")
    assert body == b"committed"
    channel.basic_ack(method.delivery_tag)
    channel.tx_rollback()  # the ack is undone: the message is still unacked
    channel.basic_ack(method.delivery_tag)
    channel.tx_commit()
    other = channel.connection.channel()
    other.basic_recover(requeue=True)
    assert channel.queue_declare("tx", passive=True).method.message_count == 0


def test_unacked_messages_of_a_closed_connection_are_redelivered(connect: Connect) -> None:
    first = connect()
    channel = first.channel()
    channel.queue_declare("handover")
    for i in range(3):
        channel.basic_publish("", "handover", f"m{i}".encode())
    taken = consume_n(channel, "handover", 3, ack=False)
    assert [body for _, _, body in taken] == [b"m0", b"m1", b"m2"]
    assert wait_for_count(connect().channel(), "handover", 0) == 0  # consume_n's cancel kept them
    first.close()  # three unacked deliveries go back to the queue

    second = connect().channel()
    again = consume_n(second, "handover", 3)
    assert [(body, method.redelivered) for method, _, body in again] == [
        (b"m0", True), (b"m1", True), (b"m2", True)]


def test_basic_get_ok_fields_and_get_empty(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare("ex", "direct")
    channel.queue_declare("got")
    channel.queue_bind("got", "ex", "rk")
    channel.basic_publish("ex", "rk", b"one", pika.BasicProperties(content_type="text/plain",
                                                                    headers={"n": 1}))
    channel.basic_publish("ex", "rk", b"two")
    method, properties, body = channel.basic_get("got")
    assert (method.delivery_tag, method.redelivered, method.exchange, method.routing_key,
            method.message_count) == (1, False, "ex", "rk", 1)
    assert (body, properties.content_type, properties.headers) == (b"one", "text/plain",
                                                                  {"n": 1})
    method2, _, _ = channel.basic_get("got", auto_ack=True)
    assert method2.delivery_tag == 2 and method2.message_count == 0
    assert channel.basic_get("got") == (None, None, None)
    channel.basic_ack(method.delivery_tag)


def test_global_prefetch_limits_the_channel(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    for queue in ("g1", "g2"):
        channel.queue_declare(queue)
        for i in range(3):
            channel.basic_publish("", queue, f"{queue}-{i}".encode())
    channel.basic_qos(prefetch_count=2, global_qos=True)
    received: list[int] = []
    for queue in ("g1", "g2"):
        channel.basic_consume(queue, lambda _c, m, _p, _b: received.append(m.delivery_tag))
    connection.process_data_events(time_limit=0.3)
    assert len(received) == 2  # two unacked across both queues
    channel.basic_ack(received[-1], multiple=True)
    pump_until([connection], lambda: len(received) == 4)
    connection.process_data_events(time_limit=0.2)
    assert len(received) == 4


def test_consumer_is_cancelled_when_its_queue_is_deleted(connect: Connect) -> None:
    connection = connect()
    channel = connection.channel()
    channel.queue_declare("doomed")
    cancelled: list[object] = []
    channel.add_on_cancel_callback(cancelled.append)
    channel.basic_consume("doomed", lambda *_: None)
    connect().channel().queue_delete("doomed")
    pump_until([connection], lambda: bool(cancelled))
    assert channel.is_open


def test_direct_reply_to_rpc(connect: Connect) -> None:
    server_connection = connect()
    server = server_connection.channel()
    server.queue_declare("rpc_direct")

    def on_request(ch: BlockingChannel, method: pika.spec.Basic.Deliver,
                   props: pika.BasicProperties, body: bytes) -> None:
        assert props.reply_to.startswith("amq.rabbitmq.reply-to.")
        assert ch.queue_declare(props.reply_to, passive=True)  # a live reply name exists
        ch.basic_publish("", props.reply_to, body.upper(),
                         pika.BasicProperties(correlation_id=props.correlation_id))
        ch.basic_ack(method.delivery_tag)

    server.basic_consume("rpc_direct", on_request)
    client_connection = connect()
    client = client_connection.channel()
    replies: list[tuple[str, bytes]] = []
    client.basic_consume("amq.rabbitmq.reply-to",
                         lambda _c, _m, props, body: replies.append((props.correlation_id, body)),
                         auto_ack=True)
    for n in range(3):
        client.basic_publish("", "rpc_direct", f"ping {n}".encode(), pika.BasicProperties(
            reply_to="amq.rabbitmq.reply-to", correlation_id=str(n)))
    pump_until([server_connection, client_connection], lambda: len(replies) == 3)
    assert replies == [(str(n), f"PING {n}".encode()) for n in range(3)]

    with pytest.raises(ChannelClosedByBroker) as raised:  # requests need the reply consumer
        other = client_connection.channel()
        other.basic_publish("", "rpc_direct", b"x", pika.BasicProperties(
            reply_to="amq.rabbitmq.reply-to"))
        other.queue_declare("rpc_direct", passive=True)
    assert raised.value.reply_code == 406
    assert "fast reply consumer does not exist" in raised.value.reply_text


def test_every_basic_property_survives_the_broker(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare("props")
    sent = pika.BasicProperties(
        content_type="application/json", content_encoding="utf-8",
        headers={"int": 7, "str": "s", "bool": True, "list": [1, "a"],
                 "table": {"nested": "yes"}, "none": None},
        delivery_mode=2, priority=5, correlation_id="corr-1", reply_to="replies",
        expiration="60000", message_id="m-1", timestamp=1_700_000_000, type="event",
        user_id="guest", app_id="the-app", cluster_id="c1",
    )
    channel.basic_publish("", "props", b"{}", sent)
    method, received, body = channel.basic_get("props", auto_ack=True)
    assert method is not None and body == b"{}"
    for name in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                 "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                 "type", "user_id", "app_id", "cluster_id"):
        assert getattr(received, name) == getattr(sent, name), name
