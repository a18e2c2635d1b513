"""The six RabbitMQ tutorials, written as the tutorials write them with pika."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pika
from pika.adapters.blocking_connection import BlockingChannel

from tests.integration.amqp.helpers import consume_n, get_all, pump_until

Connect = Callable[[], pika.BlockingConnection]


def test_hello_world(connect: Connect) -> None:
    channel = connect().channel()
    channel.queue_declare(queue="hello")
    channel.basic_publish(exchange="", routing_key="hello", body=b"Hello World!")
    ((method, _properties, body),) = consume_n(channel, "hello", 1)
    assert body == b"Hello World!"
    assert (method.exchange, method.routing_key, method.redelivered) == ("", "hello", False)


def test_work_queues_fair_dispatch_with_prefetch_one(connect: Connect) -> None:
    producer = connect().channel()
    producer.queue_declare(queue="task_queue", durable=True)
    persistent = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
    for i in range(6):
        producer.basic_publish("", "task_queue", f"task {i}".encode(), persistent)

    workers: list[tuple[pika.BlockingConnection, BlockingChannel, list[tuple[int, bytes]]]] = []
    for ack_each in (False, True):  # worker 0 is stuck on its first task; worker 1 is quick
        connection = connect()
        channel = connection.channel()
        channel.basic_qos(prefetch_count=1)
        received: list[tuple[int, bytes]] = []

        def callback(ch: BlockingChannel, method: pika.spec.Basic.Deliver,
                     _props: pika.BasicProperties, body: bytes,
                     received: list[tuple[int, bytes]] = received, ack: bool = ack_each) -> None:
            received.append((method.delivery_tag, body))
            if ack:
                ch.basic_ack(delivery_tag=method.delivery_tag)

        channel.basic_consume(queue="task_queue", on_message_callback=callback)
        workers.append((connection, channel, received))

    slow, quick = workers[0][2], workers[1][2]
    pump_until([w[0] for w in workers], lambda: len(slow) + len(quick) == 6)
    assert len(slow) == 1  # prefetch 1: nothing more while its task is unacked
    assert sorted(body for _, body in slow + quick) == [f"task {i}".encode() for i in range(6)]
    workers[0][1].basic_ack(slow[0][0])
    assert producer.queue_declare("task_queue", passive=True).method.message_count == 0


def test_publish_subscribe_fanout(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare(exchange="logs", exchange_type="fanout")
    queues = []
    for _ in range(2):
        result = channel.queue_declare(queue="", exclusive=True)
        assert result.method.queue.startswith("amq.gen-")
        channel.queue_bind(exchange="logs", queue=result.method.queue)
        queues.append(result.method.queue)
    channel.basic_publish(exchange="logs", routing_key="", body=b"info: hello")
    for queue in queues:
        assert [body for _, _, body in consume_n(channel, queue, 1)] == [b"info: hello"]


def test_direct_routing(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare(exchange="direct_logs", exchange_type="direct")
    bindings = {"errors": ["error"], "all": ["info", "warning", "error"]}
    for queue, severities in bindings.items():
        channel.queue_declare(queue, exclusive=True)
        for severity in severities:
            channel.queue_bind(exchange="direct_logs", queue=queue, routing_key=severity)
    for severity in ("info", "warning", "error", "debug"):
        channel.basic_publish("direct_logs", severity, severity.encode())
    assert get_all(channel, "errors") == [b"error"]
    assert get_all(channel, "all") == [b"info", b"warning", b"error"]


def test_topics_with_the_tutorial_examples(connect: Connect) -> None:
    channel = connect().channel()
    channel.exchange_declare(exchange="topic_logs", exchange_type="topic")
    channel.queue_declare("Q1", exclusive=True)
    channel.queue_declare("Q2", exclusive=True)
    channel.queue_bind("Q1", "topic_logs", routing_key="*.orange.*")
    channel.queue_bind("Q2", "topic_logs", routing_key="*.*.rabbit")
    channel.queue_bind("Q2", "topic_logs", routing_key="lazy.#")
    keys = ["quick.orange.rabbit", "lazy.orange.elephant", "quick.orange.fox", "lazy.brown.fox",
            "lazy.pink.rabbit", "quick.brown.fox", "orange", "quick.orange.new.rabbit",
            "lazy.orange.new.rabbit"]
    for key in keys:
        channel.basic_publish("topic_logs", key, key.encode())
    assert get_all(channel, "Q1") == [b"quick.orange.rabbit", b"lazy.orange.elephant",
                                      b"quick.orange.fox"]
    assert get_all(channel, "Q2") == [b"quick.orange.rabbit", b"lazy.orange.elephant",
                                      b"lazy.brown.fox", b"lazy.pink.rabbit",
                                      b"lazy.orange.new.rabbit"]


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_rpc_with_reply_to_and_correlation_id(connect: Connect) -> None:
    server_connection = connect()
    server = server_connection.channel()
    server.queue_declare(queue="rpc_queue")

    def on_request(ch: BlockingChannel, method: pika.spec.Basic.Deliver,
                   props: pika.BasicProperties, body: bytes) -> None:
        response = fib(int(body))
        ch.basic_publish(exchange="", routing_key=props.reply_to,
                         properties=pika.BasicProperties(correlation_id=props.correlation_id),
                         body=str(response).encode())
        ch.basic_ack(delivery_tag=method.delivery_tag)

    server.basic_qos(prefetch_count=1)
    server.basic_consume(queue="rpc_queue", on_message_callback=on_request)

    client_connection = connect()
    client = client_connection.channel()
    callback_queue = client.queue_declare(queue="", exclusive=True).method.queue
    responses: dict[str, int] = {}

    def on_response(_ch: BlockingChannel, _method: pika.spec.Basic.Deliver,
                    props: pika.BasicProperties, body: bytes) -> None:
        responses[props.correlation_id] = int(body)

    client.basic_consume(queue=callback_queue, on_message_callback=on_response, auto_ack=True)
    requests = {str(uuid.uuid4()): n for n in (10, 20, 1)}
    for corr_id, n in requests.items():
        client.basic_publish(exchange="", routing_key="rpc_queue", body=str(n).encode(),
                             properties=pika.BasicProperties(reply_to=callback_queue,
                                                             correlation_id=corr_id))
    pump_until([server_connection, client_connection], lambda: len(responses) == len(requests))
    assert responses == {corr_id: fib(n) for corr_id, n in requests.items()}
