"""`logbroker queue sync | cancel-sync | transfer-leader | rebalance-leaders`: replicated
queues' synchronisation and leadership (RabbitMQ's `rabbitmqctl sync_queue`,
`cancel_sync_queue`, `rabbitmq-queues rebalance`):

    logbroker queue sync orders                   # members not in sync copy all of it
    logbroker queue cancel-sync orders            # ... or stop doing so
    logbroker queue transfer-leader orders --node n2   # n2 leads it from now on
    logbroker queue transfer-leader orders        # its best in-sync follower does
    logbroker queue rebalance-leaders             # spread leaders evenly over the nodes
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from api.cli.tables import format_table

if TYPE_CHECKING:  # the parser imports this module for its usage text: no httpx
    from api.client import Client


def sync(client: Client, args: argparse.Namespace) -> int:
    client.sync_queue(args.queue, vhost=args.vhost)
    print(f"queue {args.queue!r}: members not in sync are copying it")
    return 0


def cancel_sync(client: Client, args: argparse.Namespace) -> int:
    client.cancel_sync_queue(args.queue, vhost=args.vhost)
    print(f"queue {args.queue!r}: synchronisation cancelled")
    return 0


def transfer_leader(client: Client, args: argparse.Namespace) -> int:
    leader = client.transfer_queue_leader(args.queue, args.node, vhost=args.vhost)
    print(f"queue {args.queue!r} is now led by {leader}")
    return 0


def rebalance_leaders(client: Client, _args: argparse.Namespace) -> int:
    moves = client.rebalance_queue_leaders()
    if not moves:
        print("queue leaders are balanced already")
        return 0
    print(format_table(["vhost", "queue", "from", "to"],
                       [[m["vhost"], m["name"], m["from"], m["to"]] for m in moves]))
    return 0
