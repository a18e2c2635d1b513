"""/metrics: Prometheus text format, read from the broker's state at scrape time.

A custom collector builds every metric family when Prometheus scrapes: the
queues' counts and counters, the node's connections and channels, and the
process-wide fsync latency histogram. Nothing updates metrics in the
background. Each app gets its own `CollectorRegistry` (never the global one),
so several apps can live in one process. No authentication, as RabbitMQ's
prometheus plugin.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from api.http.api_context import ApiContext
from api.http.auth import metrics_reader
from logbroker.queue.fsync_stats import FSYNC_STATS, FsyncStats

router = APIRouter(tags=["metrics"])
KNOWN_PROTOCOLS = ("AMQP 0-9-1", "WebSocket")  # always exposed, at 0 when none is open
QUEUE_LABELS = ("vhost", "queue")


class BrokerCollector:
    """Yields the broker's metric families; called by the registry on every scrape."""

    def __init__(self, context: ApiContext, fsync_stats: FsyncStats = FSYNC_STATS) -> None:
        self._context = context
        self._fsync_stats = fsync_stats

    def collect(self) -> Iterator[Metric]:
        yield from self._queue_metrics()
        yield from self._replication_metrics()
        yield from self._node_metrics()
        yield self._fsync_histogram()

    def _queue_metrics(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily("logbroker_queue_messages_ready",
                                  "Messages ready for delivery", labels=QUEUE_LABELS)
        unacked = GaugeMetricFamily("logbroker_queue_messages_unacked",
                                    "Messages delivered and not yet acknowledged",
                                    labels=QUEUE_LABELS)
        consumers = GaugeMetricFamily("logbroker_queue_consumers", "Consumers",
                                      labels=QUEUE_LABELS)
        log_bytes = GaugeMetricFamily("logbroker_queue_log_bytes",
                                      "Bytes in the queue's log segments", labels=QUEUE_LABELS)
        totals = {name: CounterMetricFamily(f"logbroker_queue_{name}", text, labels=QUEUE_LABELS)
                  for name, text in (("published", "Messages published to the queue"),
                                     ("delivered", "Deliveries, redeliveries included"),
                                     ("acked", "Messages acknowledged"),
                                     ("redelivered", "Redeliveries"))}
        broker = self._context.broker
        for vhost in broker.state.vhosts():
            for shell in broker.queues_of(vhost.name):
                labels = [vhost.name, shell.name]
                core = shell.core
                ready.add_metric(labels, core.message_count)
                unacked.add_metric(labels, core.unacked_count)
                consumers.add_metric(labels, core.consumer_count)
                log_bytes.add_metric(labels, shell.log.size_bytes)
                for name, family in totals.items():
                    family.add_metric(labels, getattr(shell.counters, name))
        yield from (ready, unacked, consumers, log_bytes, *totals.values())

    def _replication_metrics(self) -> Iterator[Metric]:
        in_sync = GaugeMetricFamily("logbroker_queue_in_sync_replicas",
                                    "In-sync replicas of a replicated queue led here, "
                                    "the leader included", labels=QUEUE_LABELS)
        high_watermark = GaugeMetricFamily(
            "logbroker_queue_high_watermark", "Offset below which every in-sync replica "
            "holds the queue's messages (led here)", labels=QUEUE_LABELS)
        lag = GaugeMetricFamily("logbroker_queue_replica_lag_messages",
                                "Messages a follower has not persisted yet",
                                labels=(*QUEUE_LABELS, "replica"))
        for shell in self._context.broker.all_queues():
            gate = shell.replication
            if gate is None:
                continue
            labels = [shell.settings.vhost, shell.name]
            in_sync.add_metric(labels, len(gate.leader.in_sync))
            high_watermark.add_metric(labels, gate.high_watermark)
            for member in gate.leader.members:
                behind = gate.leader.lag(member)
                if behind is not None:
                    lag.add_metric([*labels, member], behind)
        yield from (in_sync, high_watermark, lag)
        replicas = self._context.replicas
        counts = replicas.replication_counters() if replicas is not None else {}
        for name, text in (("elections", "Queue leaders elected by this node as controller"),
                           ("out_of_sync_promotions", "Out-of-sync replicas promoted "
                            "(ha-promote-on-failure: always)"),
                           ("handovers", "Queue leaderships handed over by this node")):
            yield CounterMetricFamily(f"logbroker_queue_{name}", text,
                                      value=counts.get(name, 0))

    def _node_metrics(self) -> Iterator[Metric]:
        connections = self._context.broker.connections.all()
        by_protocol = Counter({protocol: 0 for protocol in KNOWN_PROTOCOLS})
        by_protocol.update(info.protocol for info in connections)
        open_connections = GaugeMetricFamily("logbroker_connections",
                                             "Open client connections", labels=("protocol",))
        for protocol, count in sorted(by_protocol.items()):
            open_connections.add_metric([protocol], count)
        yield open_connections
        yield GaugeMetricFamily(
            "logbroker_channels", "Open channels (AMQP channels; a WebSocket counts as one)",
            value=sum(info.channels for info in connections))

    def _fsync_histogram(self) -> Metric:
        snapshot = self._fsync_stats.snapshot()
        return HistogramMetricFamily(
            "logbroker_fsync_seconds", "Duration of the log's fsyncs",
            buckets=[(_le(bound), count) for bound, count in snapshot.buckets],
            sum_value=snapshot.sum_s)


def _le(bound: float) -> str:
    """A bucket's `le` label as Prometheus writes it (`+Inf` for the last one)."""
    return "+Inf" if math.isinf(bound) else repr(bound)


def metrics_registry(context: ApiContext) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(context))
    return registry


def app_registry(app: FastAPI) -> CollectorRegistry:
    """The app's own registry, made on its first scrape (one per app, never the global one)."""
    registry: CollectorRegistry | None = getattr(app.state, "metrics_registry", None)
    if registry is None:
        registry = metrics_registry(app.state.context)
        app.state.metrics_registry = registry
    return registry


@router.get("/metrics", response_class=Response, dependencies=[Depends(metrics_reader)],
            responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format"}})
async def metrics(request: Request) -> Response:
    return Response(generate_latest(app_registry(request.app)), media_type=CONTENT_TYPE_LATEST)
