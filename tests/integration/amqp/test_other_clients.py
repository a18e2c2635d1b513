"""aio-pika and kombu (py-amqp) against the broker, as their own documentation uses them."""

from __future__ import annotations

import asyncio

import aio_pika
from kombu import Connection, Exchange, Queue
from kombu.message import Message as KombuMessage

TIMEOUT_S = 5.0


async def test_aio_pika_publish_and_consume_with_ack(amqp_broker: int) -> None:
    url = f"amqp://guest:guest@127.0.0.1:{amqp_broker}/"
    connection = await aio_pika.connect(url, timeout=TIMEOUT_S)
    async with connection:
        channel = await connection.channel()  # publisher confirms on, as aio-pika defaults
        await channel.set_qos(prefetch_count=3)
        queue = await channel.declare_queue("aio", durable=True)
        exchange = await channel.declare_exchange("aio-direct", aio_pika.ExchangeType.DIRECT)
        await queue.bind(exchange, routing_key="aio")
        for i in range(10):
            message = aio_pika.Message(f"m{i}".encode(), correlation_id=str(i),
                                       delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            await exchange.publish(message, routing_key="aio")

        async def receive() -> list[tuple[bytes, str | None, bool]]:
            got: list[tuple[bytes, str | None, bool]] = []
            async with queue.iterator() as messages:
                async for incoming in messages:
                    async with incoming.process():  # acks on leaving the block
                        got.append((incoming.body, incoming.correlation_id,
                                    incoming.redelivered or False))
                    if len(got) == 10:
                        break
            return got

        got = await asyncio.wait_for(receive(), TIMEOUT_S)
        assert got == [(f"m{i}".encode(), str(i), False) for i in range(10)]
        declared = await channel.declare_queue("aio", durable=True, passive=True)
        assert declared.declaration_result.message_count == 0


def test_kombu_producer_and_consumer(amqp_broker: int) -> None:
    media = Exchange("media", "direct", durable=True)
    video = Queue("video", exchange=media, routing_key="video")
    received: list[object] = []

    def on_message(body: object, message: KombuMessage) -> None:
        received.append(body)
        message.ack()

    url = f"amqp://guest:guest@127.0.0.1:{amqp_broker}//"
    with Connection(url, connect_timeout=TIMEOUT_S) as connection:
        producer = connection.Producer(serializer="json")
        for size in (1301013, 42):
            producer.publish({"name": "/tmp/lolcat1.avi", "size": size}, exchange=media,
                             routing_key="video", declare=[video], retry=False)
        with connection.Consumer(video, callbacks=[on_message]):
            for _ in range(2):
                connection.drain_events(timeout=TIMEOUT_S)
        assert received == [{"name": "/tmp/lolcat1.avi", "size": 1301013},
                            {"name": "/tmp/lolcat1.avi", "size": 42}]
        simple = connection.SimpleQueue("simple")
        simple.put({"hello": "world"})
        message = simple.get(block=True, timeout=TIMEOUT_S)
        assert message.payload == {"hello": "world"}
        message.ack()
        simple.close()
