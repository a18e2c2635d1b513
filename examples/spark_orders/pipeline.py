"""Order events -> Spark -> revenue per customer per 10-second window, through logbroker.

    python3 -m examples.spark_orders.pipeline          # against the README's broker

1. `publish`: JSON order events (`{"order_id", "customer", "amount", "event_time"}`,
   event time in ms) go to the topic exchange `orders` with routing key
   `order.<region>`; the queue `orders.all` is bound to `order.#`.
2. `revenue_query`: a Spark streaming job reads `orders.all` through the logbroker
   source, parses the JSON, sums `amount` per customer in 10-second event-time
   windows with a 5-second watermark, and writes each closed window to the topic
   exchange `revenue` (routing key `revenue.<customer>`) through the exactly-once
   sink. The queue `revenue.all` is bound to `revenue.#`.
3. `print_revenue`: a consumer prints the windows as they arrive.

The events' times are chosen so that they fall into a few windows; a last event
far ahead in event time moves the watermark past them, so Spark emits them.

On a real Spark cluster the same job is `revenue_job.py` beside this file:

    spark-submit --master spark://HOST:7077 --py-files logbroker.zip \\
        examples/spark_orders/revenue_job.py --brokers http://guest:guest@n1:15672,http://guest:guest@n2:15672
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from api.client import Client

WINDOW_MS = 10_000
CUSTOMERS = ("ada", "grace", "linus", "guido", "barbara")
REGIONS = ("eu", "us", "apac")
DEFAULT_BROKERS = "http://guest:guest@127.0.0.1:15672"


def order_events(count: int, start_ms: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` orders spread over about four windows from `start_ms`, in event-time order."""
    rng = random.Random(seed)
    events = []
    for number in range(count):
        events.append({
            "order_id": number,
            "customer": rng.choice(CUSTOMERS),
            "region": rng.choice(REGIONS),
            "amount": round(rng.uniform(1, 500), 2),
            "event_time": start_ms + number * (4 * WINDOW_MS) // max(count, 1),
        })
    return events


def watermark_event(after_ms: int) -> dict[str, Any]:
    """An event far enough ahead to close every window before it (customer `_tick`)."""
    return {"order_id": -1, "customer": "_tick", "region": "eu", "amount": 0.0,
            "event_time": after_ms + 10 * WINDOW_MS}


def expected_revenue(events: Iterable[dict[str, Any]]) -> dict[tuple[int, str], float]:
    """The same aggregation in plain Python: (window start ms, customer) -> revenue."""
    totals: dict[tuple[int, str], float] = defaultdict(float)
    for event in events:
        if event["customer"] == "_tick":
            continue
        window = event["event_time"] - event["event_time"] % WINDOW_MS
        totals[(window, event["customer"])] += event["amount"]
    return {key: round(value, 2) for key, value in totals.items()}


def declare_topology(client: Client) -> None:
    client.declare_exchange("orders", "topic")
    client.declare_queue("orders.all")
    client.bind("orders", "orders.all", "order.#")
    client.declare_exchange("revenue", "topic")
    client.declare_queue("revenue.all")
    client.bind("revenue", "revenue.all", "revenue.#")


def publish(client: Client, events: Sequence[dict[str, Any]]) -> None:
    for event in events:
        results = client.publish_batch("orders", [json.dumps(event)],
                                       routing_key=f"order.{event['region']}")
        assert all(result.confirmed for result in results)


def revenue_rows(client: Client, from_offset: int = 0) -> list[dict[str, Any]]:
    """Every window the job wrote so far, read back from `revenue.all` (replay)."""
    return [json.loads(record.body) for record in
            client.replay("revenue.all", from_offset=from_offset)]


def print_revenue(client: Client, from_offset: int, windows: int, timeout_s: float
                  ) -> list[dict[str, Any]]:
    """The consumer: print each window as the job writes it, until `windows` came."""
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(rows) < windows and time.monotonic() < deadline:
        new = revenue_rows(client, from_offset + len(rows))
        for row in new:
            print(f"window {row['window_start_ms']} {row['customer']:>8} "
                  f"{row['revenue']:10.2f}", flush=True)
        rows.extend(new)
        if not new:
            time.sleep(0.5)
    return rows


def _next_offset(client: Client, queue: str) -> int:
    return int(next(q["next_offset"] for q in client.list_queues() if q["name"] == queue))


def same_totals(got: dict[tuple[int, str], float], expected: dict[tuple[int, str], float]
                ) -> bool:
    """The same windows and customers, each revenue within a cent (sums of floats in
    another order may round the other way)."""
    return got.keys() == expected.keys() and all(
        abs(got[key] - expected[key]) <= 0.011 for key in expected)


def as_totals(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, str], float]:
    return {(row["window_start_ms"], row["customer"]): round(row["revenue"], 2) for row in rows}


def run(brokers: str, count: int, timeout_s: float) -> int:
    from examples.spark_orders.revenue_job import revenue_query, spark_session

    client = Client(brokers.split(",")[0])
    declare_topology(client)
    orders_start, revenue_start = (_next_offset(client, name)
                                   for name in ("orders.all", "revenue.all"))
    start_ms = (int(time.time() * 1000) // WINDOW_MS) * WINDOW_MS
    events = order_events(count, start_ms)
    expected = expected_revenue(events)
    spark = spark_session()
    with tempfile.TemporaryDirectory() as checkpoint:
        # From where the queue ends now: "latest" would be resolved when the first batch
        # is planned, after some of the events below were published.
        starting = json.dumps({"orders.all": orders_start})
        query = revenue_query(spark, brokers, checkpoint, starting_offsets=starting)
        try:
            publish(client, events)
            publish(client, [watermark_event(events[-1]["event_time"])])
            rows = print_revenue(client, revenue_start, len(expected), timeout_s)
        finally:
            query.stop()
    got = as_totals(rows)
    if not same_totals(got, expected):
        print(f"mismatch: expected {len(expected)} windows, got {len(got)}", file=sys.stderr)
        return 1
    print(f"{len(got)} windows, equal to the same aggregation in plain Python")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default=DEFAULT_BROKERS,
                        help="comma-separated node URLs (default: %(default)s)")
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    return run(args.brokers, args.orders, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
