"""The timer that samples the broker's objects into its `RateSampler` (rate_samples.py).

Every `SAMPLE_INTERVAL_S`: each queue led here (counters and lengths), the node's
publisher counts (node_figures.py), each exchange published to here (messages
in and routed out), each client connection's bytes in and out and each AMQP
channel's counters. One round
samples everything, so an object gone since the last round is forgotten by the
sampler. Started once per node by the composition root.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

from logbroker.broker import Broker
from logbroker.exchange_figures import exchange_key
from logbroker.node_figures import NODE_KEY, node_sample
from logbroker.queue_figures import queue_key, queue_sample
from logbroker.rate_samples import SAMPLE_INTERVAL_S, Counters

ROUND_PART = 500  # objects sampled per event loop turn


def connection_key(connection_id: str) -> str:
    return f"c\0{connection_id}"


def channel_key(connection_id: str, number: int) -> str:
    return f"ch\0{connection_id}\0{number}"


def sampled(broker: Broker) -> Iterator[tuple[str, Counters]]:
    """Every series of one sampling round."""
    yield NODE_KEY, node_sample(broker)
    stats = broker.publisher.stats
    stats.forget_exchanges(lambda vhost, name: broker.state.vhost(vhost) is not None and (
        not name or broker.state.exchange(vhost, name) is not None))
    for (vhost, name), (into, out) in list(stats.exchanges.items()):
        yield exchange_key(vhost, name), {"publish_in": into, "publish_out": out}
    for shell in broker.all_queues():
        yield queue_key(shell.settings.vhost, shell.name), queue_sample(shell)
    for info in broker.connections.all():
        yield connection_key(info.connection_id), {"recv_oct": info.recv_oct,
                                                   "send_oct": info.send_oct}
        for channel in info.channel_infos():
            yield channel_key(info.connection_id, channel.number), channel.counters.as_dict()


async def sample_rates(broker: Broker) -> None:
    """Sample every `SAMPLE_INTERVAL_S` until cancelled, `ROUND_PART` objects per loop
    turn: ten thousand queues must not hold the event loop for a whole round."""
    while True:
        now_ms, alive = broker.clock.wall_ms(), set()
        series = sampled(broker)
        while part := list(itertools.islice(series, ROUND_PART)):
            alive |= broker.rates.record(now_ms, part)
            await asyncio.sleep(0)
        broker.rates.forget_all_but(alive)
        await asyncio.sleep(SAMPLE_INTERVAL_S)
