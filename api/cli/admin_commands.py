"""Management subcommands: declare, delete, purge, list, policies, users, definitions, status.

Each handler takes the client and the parsed arguments and returns the exit
code; refusals raise `LogbrokerError`, which `api.cli.run` reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from api.cli.options import UsageError, json_object, key_values
from api.cli.queue_arguments import queue_arguments
from api.cli.tables import format_table, group_rows, render
from api.client import Client


def declare_queue(client: Client, args: argparse.Namespace) -> int:
    arguments = {**queue_arguments(args), **key_values(args.argument)}
    client.declare_queue(args.name, durable=not args.transient, auto_delete=args.auto_delete,
                         arguments=arguments)
    print(f"queue {args.name!r} declared")
    return 0


def declare_exchange(client: Client, args: argparse.Namespace) -> int:
    client.declare_exchange(args.name, args.type, durable=not args.transient,
                            auto_delete=args.auto_delete, internal=args.internal,
                            arguments=key_values(args.argument))
    print(f"exchange {args.name!r} declared")
    return 0


def declare_binding(client: Client, args: argparse.Namespace) -> int:
    client.bind(args.source, args.destination, args.routing_key,
                destination_type=args.destination_type, arguments=key_values(args.argument))
    print(f"binding {args.source!r} -> {args.destination_type} {args.destination!r} "
          f"({args.routing_key!r}) declared")
    return 0


def delete_queue(client: Client, args: argparse.Namespace) -> int:
    client.delete_queue(args.name, if_unused=args.if_unused, if_empty=args.if_empty)
    print(f"queue {args.name!r} deleted")
    return 0


def delete_exchange(client: Client, args: argparse.Namespace) -> int:
    client.delete_exchange(args.name, if_unused=args.if_unused)
    print(f"exchange {args.name!r} deleted")
    return 0


def delete_binding(client: Client, args: argparse.Namespace) -> int:
    client.unbind(args.source, args.destination, args.routing_key,
                  destination_type=args.destination_type, arguments=key_values(args.argument))
    print(f"binding {args.source!r} -> {args.destination_type} {args.destination!r} "
          f"({args.routing_key!r}) deleted")
    return 0


def purge(client: Client, args: argparse.Namespace) -> int:
    client.purge(args.queue)
    print(f"queue {args.queue!r} purged")
    return 0


def list_objects(client: Client, args: argparse.Namespace) -> int:
    if args.kind == "groups":
        groups = client.list_consumer_groups(all_vhosts=args.all_vhosts)
        # JSON keeps the API's shape (a group with its queues); the table a row per queue.
        rows = groups if args.format == "json" else group_rows(groups)
    else:
        rows = getattr(client, f"list_{args.kind}")(all_vhosts=args.all_vhosts)
    print(render(args.kind, rows, with_vhost=args.all_vhosts, output_format=args.format))
    return 0


def set_policy(client: Client, args: argparse.Namespace) -> int:
    definition = json_object(args.definition, "the policy definition")
    client.set_policy(args.name, args.pattern, definition, priority=args.priority,
                      apply_to=args.apply_to)
    print(f"policy {args.name!r} set")
    return 0


def clear_policy(client: Client, args: argparse.Namespace) -> int:
    client.clear_policy(args.name)
    print(f"policy {args.name!r} cleared")
    return 0


def set_parameter(client: Client, args: argparse.Namespace) -> int:
    value = json_object(args.value, "the parameter's value")
    client.set_parameter(args.component, args.name, value)
    print(f"parameter {args.component}/{args.name!r} set")
    return 0


def clear_parameter(client: Client, args: argparse.Namespace) -> int:
    client.clear_parameter(args.component, args.name)
    print(f"parameter {args.component}/{args.name!r} cleared")
    return 0


def set_vhost_limits(client: Client, args: argparse.Namespace) -> int:
    client.set_vhost_limits(json_object(args.limits, "the limits"))
    print(f"limits of vhost {client.vhost!r} set")
    return 0


def clear_vhost_limits(client: Client, args: argparse.Namespace) -> int:
    client.clear_vhost_limits()
    print(f"limits of vhost {client.vhost!r} cleared")
    return 0


def federation_status(client: Client, args: argparse.Namespace) -> int:
    links = client.federation_links(all_vhosts=True)
    print(render("federation", links, with_vhost=True, output_format=args.format))
    return 0


def shovel_status(client: Client, args: argparse.Namespace) -> int:
    print(render("shovels", client.shovels(all_vhosts=True), with_vhost=True,
                 output_format=args.format))
    return 0


def add_user(client: Client, args: argparse.Namespace) -> int:
    tags = [tag.strip() for tag in (args.tags or "").split(",") if tag.strip()]
    client.add_user(args.name, args.password, tags)
    print(f"user {args.name!r} added")
    return 0


def set_permissions(client: Client, args: argparse.Namespace) -> int:
    client.set_permissions(args.user, args.configure, args.write, args.read)
    print(f"permissions of {args.user!r} in vhost {client.vhost!r} set")
    return 0


def export_definitions(client: Client, args: argparse.Namespace) -> int:
    text = json.dumps(client.export_definitions(), indent=2, sort_keys=True) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
    else:
        Path(args.file).write_text(text, encoding="utf-8")
        print(f"definitions written to {args.file}", file=sys.stderr)
    return 0


def import_definitions(client: Client, args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    except OSError as error:
        raise UsageError(f"cannot read {args.file}: {error.strerror or error}") from error
    client.import_definitions(json_object(text, args.file))
    print(f"definitions imported from {args.file}")
    return 0


STATUS_COLUMNS = ("url", "status", "node", "version", "queues", "exchanges", "messages",
                  "ready", "unacked", "connections", "consumers", "error")


def _status_row(url: str, up: bool, overview: dict[str, Any], error: str) -> list[Any]:
    totals = overview.get("object_totals") or {}
    queued = overview.get("queue_totals") or {}
    return [url, "up" if up else "down", overview.get("node"), overview.get("product_version"),
            totals.get("queues"), totals.get("exchanges"), queued.get("messages"),
            queued.get("messages_ready"), queued.get("messages_unacknowledged"),
            totals.get("connections"), totals.get("consumers"), error]


def status(client: Client, args: argparse.Namespace) -> int:
    """Every configured node's overview; exit 3 when none answers."""
    nodes = client.status()
    if args.format == "json":
        print(json.dumps([{"url": n.url, "up": n.up, "overview": n.overview, "error": n.error}
                          for n in nodes], indent=2, sort_keys=True))
    else:
        rows = [_status_row(n.url, n.up, n.overview, n.error) for n in nodes]
        print(format_table(STATUS_COLUMNS, rows))
    if any(n.up for n in nodes):
        return 0
    refused = [n for n in nodes if n.error[:1].isdigit()]
    print(f"logbroker: no node is up ({'; '.join(f'{n.url}: {n.error}' for n in nodes)})",
          file=sys.stderr)
    return 1 if refused else 3
