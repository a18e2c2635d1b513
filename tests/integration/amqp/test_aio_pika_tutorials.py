"""The six RabbitMQ tutorials, written with aio-pika (asyncio) as its documentation writes them.

Every wait on the broker is bounded by ``asyncio.wait_for``; channels are opened with aio-pika's
default publisher confirms, so an awaited ``publish`` means the broker has routed the message.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import aio_pika
import pytest
import pytest_asyncio
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    AbstractQueue,
)

TIMEOUT_S = 5.0
END = b"--end--"  # a marker sent straight to a queue after the messages under test

Connect = Callable[[], Awaitable[AbstractConnection]]

pytestmark = pytest.mark.timeout(20)


@pytest_asyncio.fixture
async def connect(amqp_broker: int) -> AsyncIterator[Connect]:
    """Opens aio-pika connections to the broker; closes them (bounded) after the test."""
    opened: list[AbstractConnection] = []
    url = f"amqp://guest:guest@127.0.0.1:{amqp_broker}/"

    async def open_connection() -> AbstractConnection:
        connection = await aio_pika.connect(url, timeout=TIMEOUT_S)
        opened.append(connection)
        return connection

    yield open_connection
    for connection in reversed(opened):
        if not connection.is_closed:
            await asyncio.wait_for(connection.close(), TIMEOUT_S)


async def open_channel(connect: Connect) -> AbstractChannel:
    connection = await connect()
    return await asyncio.wait_for(connection.channel(), TIMEOUT_S)


async def collect_until_end(queue: AbstractQueue) -> list[bytes]:
    """Consume ``queue`` (acking) until the ``END`` marker: the bodies before it, in order."""
    bodies: list[bytes] = []
    async with queue.iterator() as messages:
        async for message in messages:
            async with message.process():
                if message.body == END:
                    return bodies
                bodies.append(message.body)
    raise AssertionError("the queue iterator stopped before the end marker")


async def send_end(channel: AbstractChannel, queue: AbstractQueue) -> None:
    """Publish ``END`` to ``queue`` through the default exchange, behind what is already there."""
    await channel.default_exchange.publish(aio_pika.Message(END), routing_key=queue.name)


# 1. "Hello World!"


async def test_hello_world(connect: Connect) -> None:
    sender = await open_channel(connect)
    await sender.declare_queue("hello")
    await sender.default_exchange.publish(aio_pika.Message(b"Hello World!"), routing_key="hello")

    receiver = await open_channel(connect)
    queue = await receiver.declare_queue("hello")

    async def receive_one() -> AbstractIncomingMessage:
        async with queue.iterator() as messages:
            async for message in messages:
                async with message.process():
                    return message
        raise AssertionError("the queue iterator stopped before a message arrived")

    message = await asyncio.wait_for(receive_one(), TIMEOUT_S)
    assert message.body == b"Hello World!"
    assert (message.exchange, message.routing_key, message.redelivered) == ("", "hello", False)
    declared = await receiver.declare_queue("hello", passive=True)
    assert declared.declaration_result.message_count == 0


# 2. Work queues


async def test_work_queues_fair_dispatch_with_prefetch_one(connect: Connect) -> None:
    tasks = [f"task {i}".encode() for i in range(8)]
    slow: list[AbstractIncomingMessage] = []  # worker 0 is stuck on its first task
    quick: list[AbstractIncomingMessage] = []  # worker 1 finishes each task at once
    quick_in_flight = 0
    quick_max_in_flight = 0
    all_delivered = asyncio.Event()

    def check_all_delivered() -> None:
        if len(slow) + len(quick) >= len(tasks):
            all_delivered.set()

    async def slow_worker(message: AbstractIncomingMessage) -> None:
        slow.append(message)  # no ack yet
        check_all_delivered()

    async def quick_worker(message: AbstractIncomingMessage) -> None:
        nonlocal quick_in_flight, quick_max_in_flight
        quick_in_flight += 1
        quick_max_in_flight = max(quick_max_in_flight, quick_in_flight)
        await asyncio.sleep(0.005)  # the "work"
        quick.append(message)
        quick_in_flight -= 1
        await message.ack()
        check_all_delivered()

    worker_channels: list[AbstractChannel] = []
    for worker in (slow_worker, quick_worker):
        channel = await open_channel(connect)
        await channel.set_qos(prefetch_count=1)
        queue = await channel.declare_queue("task_queue", durable=True)
        await queue.consume(worker)  # manual acknowledgement
        worker_channels.append(channel)

    producer = await open_channel(connect)
    task_queue = await producer.declare_queue("task_queue", durable=True)
    for body in tasks:
        message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await producer.default_exchange.publish(message, routing_key=task_queue.name)

    await asyncio.wait_for(all_delivered.wait(), TIMEOUT_S)
    assert len(slow) == 1, "prefetch 1: nothing more for a worker while its task is unacked"
    assert len(quick) == len(tasks) - 1
    assert quick_max_in_flight == 1
    delivered = slow + quick
    assert sorted(m.body for m in delivered) == sorted(tasks)  # each task exactly once
    assert all(m.delivery_mode == aio_pika.DeliveryMode.PERSISTENT for m in delivered)
    assert not any(m.redelivered for m in delivered)

    await slow[0].ack()
    await asyncio.sleep(0.1)  # room for a wrong extra delivery to show up
    assert len(slow) + len(quick) == len(tasks)
    for channel in worker_channels:
        await channel.close()
    declared = await producer.declare_queue("task_queue", durable=True, passive=True)
    assert declared.declaration_result.message_count == 0
    assert declared.declaration_result.consumer_count == 0


async def test_work_queues_task_of_a_dead_worker_is_redelivered(connect: Connect) -> None:
    producer = await open_channel(connect)
    await producer.declare_queue("task_queue", durable=True)
    persistent = aio_pika.DeliveryMode.PERSISTENT
    await producer.default_exchange.publish(
        aio_pika.Message(b"long task", delivery_mode=persistent), routing_key="task_queue"
    )

    dying_connection = await connect()
    dying = await dying_connection.channel()
    await dying.set_qos(prefetch_count=1)
    held: asyncio.Future[AbstractIncomingMessage] = asyncio.get_running_loop().create_future()

    async def hold(message: AbstractIncomingMessage) -> None:
        if not held.done():
            held.set_result(message)

    await (await dying.declare_queue("task_queue", durable=True)).consume(hold)
    assert (await asyncio.wait_for(held, TIMEOUT_S)).body == b"long task"
    await asyncio.wait_for(dying_connection.close(), TIMEOUT_S)  # dies without acking

    survivor = await open_channel(connect)
    await survivor.set_qos(prefetch_count=1)
    queue = await survivor.declare_queue("task_queue", durable=True)

    async def receive_one() -> AbstractIncomingMessage:
        async with queue.iterator() as messages:
            async for message in messages:
                async with message.process():
                    return message
        raise AssertionError("the queue iterator stopped before a message arrived")

    message = await asyncio.wait_for(receive_one(), TIMEOUT_S)
    assert (message.body, message.redelivered) == (b"long task", True)
    declared = await survivor.declare_queue("task_queue", durable=True, passive=True)
    assert declared.declaration_result.message_count == 0


# 3. Publish/Subscribe


async def test_publish_subscribe_fanout(connect: Connect) -> None:
    subscribers: list[tuple[AbstractChannel, AbstractQueue]] = []
    for _ in range(2):
        channel = await open_channel(connect)
        logs = await channel.declare_exchange("logs", aio_pika.ExchangeType.FANOUT)
        queue = await channel.declare_queue(exclusive=True)  # a server-named queue
        assert queue.name.startswith("amq.gen-")
        await queue.bind(logs)
        subscribers.append((channel, queue))
    assert subscribers[0][1].name != subscribers[1][1].name

    publisher = await open_channel(connect)
    logs = await publisher.declare_exchange("logs", aio_pika.ExchangeType.FANOUT)
    lines = [b"info: hello", b"warning: disk", b"error: boom"]
    for line in lines:
        await logs.publish(aio_pika.Message(line), routing_key="")  # ignored by fanout

    for channel, queue in subscribers:
        await send_end(channel, queue)
    received = await asyncio.wait_for(
        asyncio.gather(*(collect_until_end(queue) for _, queue in subscribers)), TIMEOUT_S
    )
    assert received == [lines, lines]


# 4. Routing


async def test_direct_routing(connect: Connect) -> None:
    bindings = {"errors": ["error"], "everything": ["info", "warning", "error"]}
    subscribers: dict[str, tuple[AbstractChannel, AbstractQueue]] = {}
    for name, severities in bindings.items():
        channel = await open_channel(connect)
        direct_logs = await channel.declare_exchange("direct_logs", aio_pika.ExchangeType.DIRECT)
        queue = await channel.declare_queue(exclusive=True)
        for severity in severities:
            await queue.bind(direct_logs, routing_key=severity)
        subscribers[name] = (channel, queue)

    publisher = await open_channel(connect)
    direct_logs = await publisher.declare_exchange("direct_logs", aio_pika.ExchangeType.DIRECT)
    sent = [("info", b"i1"), ("error", b"e1"), ("warning", b"w1"), ("debug", b"d1"),
            ("error", b"e2"), ("info", b"i2")]
    for severity, body in sent:
        await direct_logs.publish(aio_pika.Message(body), routing_key=severity)

    for channel, queue in subscribers.values():
        await send_end(channel, queue)
    errors, everything = await asyncio.wait_for(
        asyncio.gather(*(collect_until_end(queue) for _, queue in subscribers.values())),
        TIMEOUT_S,
    )
    assert errors == [b"e1", b"e2"]
    assert everything == [b"i1", b"e1", b"w1", b"e2", b"i2"]  # "debug" has no binding: dropped


# 5. Topics


async def test_topics_with_the_tutorial_examples(connect: Connect) -> None:
    subscriber = await open_channel(connect)
    topic_logs = await subscriber.declare_exchange("topic_logs", aio_pika.ExchangeType.TOPIC)
    q1 = await subscriber.declare_queue(exclusive=True)
    q2 = await subscriber.declare_queue(exclusive=True)
    await q1.bind(topic_logs, routing_key="*.orange.*")
    await q2.bind(topic_logs, routing_key="*.*.rabbit")
    await q2.bind(topic_logs, routing_key="lazy.#")

    publisher = await open_channel(connect)
    topic_logs = await publisher.declare_exchange("topic_logs", aio_pika.ExchangeType.TOPIC)
    keys = [
        "quick.orange.rabbit",  # both queues
        "lazy.orange.elephant",  # both queues
        "quick.orange.fox",  # Q1 only
        "lazy.brown.fox",  # Q2 only
        "lazy.pink.rabbit",  # Q2, once, though it matches both of Q2's bindings
        "quick.brown.fox",  # no binding: discarded
        "orange",  # one word: lost
        "quick.orange.male.rabbit",  # four words: lost
        "lazy.orange.male.rabbit",  # four words, but matches "lazy.#": Q2
    ]
    for key in keys:
        await topic_logs.publish(aio_pika.Message(key.encode()), routing_key=key)

    await send_end(subscriber, q1)
    await send_end(subscriber, q2)
    got_q1, got_q2 = await asyncio.wait_for(
        asyncio.gather(collect_until_end(q1), collect_until_end(q2)), TIMEOUT_S
    )
    assert got_q1 == [b"quick.orange.rabbit", b"lazy.orange.elephant", b"quick.orange.fox"]
    assert got_q2 == [b"quick.orange.rabbit", b"lazy.orange.elephant", b"lazy.brown.fox",
                      b"lazy.pink.rabbit", b"lazy.orange.male.rabbit"]


# 6. RPC


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class FibonacciRpcClient:
    """The tutorial's client: one exclusive callback queue, replies matched by correlation_id."""

    def __init__(self, channel: AbstractChannel) -> None:
        self.channel = channel
        self.futures: dict[str, asyncio.Future[int]] = {}
        self.callback_queue: AbstractQueue | None = None
        self.unknown_replies = 0

    async def start(self) -> FibonacciRpcClient:
        self.callback_queue = await self.channel.declare_queue(exclusive=True)
        await self.callback_queue.consume(self.on_response, no_ack=True)
        return self

    async def on_response(self, message: AbstractIncomingMessage) -> None:
        future = self.futures.pop(message.correlation_id or "", None)
        if future is None:
            self.unknown_replies += 1  # not ours (or a duplicate): safely discarded
            return
        future.set_result(int(message.body))

    async def call(self, n: int) -> int:
        assert self.callback_queue is not None
        correlation_id = str(uuid.uuid4())
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.futures[correlation_id] = future
        request = aio_pika.Message(str(n).encode(), content_type="text/plain",
                                   correlation_id=correlation_id,
                                   reply_to=self.callback_queue.name)
        await self.channel.default_exchange.publish(request, routing_key="rpc_queue")
        return await future


async def test_rpc_with_reply_to_and_correlation_id(connect: Connect) -> None:
    server = await open_channel(connect)
    await server.set_qos(prefetch_count=1)
    rpc_queue = await server.declare_queue("rpc_queue")
    requests_seen: list[tuple[str | None, str | None]] = []

    async def on_request(message: AbstractIncomingMessage) -> None:
        async with message.process():
            requests_seen.append((message.reply_to, message.correlation_id))
            assert message.reply_to is not None
            response = aio_pika.Message(str(fib(int(message.body))).encode(),
                                        correlation_id=message.correlation_id)
            await server.default_exchange.publish(response, routing_key=message.reply_to)

    await rpc_queue.consume(on_request)

    client = await FibonacciRpcClient(await open_channel(connect)).start()
    assert client.callback_queue is not None
    assert client.callback_queue.name.startswith("amq.gen-")
    numbers = [10, 20, 1, 0, 15, 7]
    results = await asyncio.wait_for(
        asyncio.gather(*(client.call(n) for n in numbers)), TIMEOUT_S
    )
    assert results == [fib(n) for n in numbers]
    assert len(requests_seen) == len(numbers)
    assert {reply_to for reply_to, _ in requests_seen} == {client.callback_queue.name}
    assert len({correlation_id for _, correlation_id in requests_seen}) == len(numbers)
    assert client.futures == {}
    assert client.unknown_replies == 0
