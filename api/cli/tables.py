"""Listings as plain aligned text columns (numbers right-aligned), or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]
Column = tuple[str, Callable[[Row], Any]]


def field(name: str) -> Callable[[Row], Any]:
    return lambda row: row.get(name)


def named(name: str) -> Callable[[Row], Any]:
    """An object name; the default exchange shows as (default)."""
    return lambda row: row.get(name) or "(default)"


COLUMNS: dict[str, list[Column]] = {
    "queues": [("name", field("name")), ("messages", field("messages")),
               ("ready", field("messages_ready")), ("unacked", field("messages_unacknowledged")),
               ("consumers", field("consumers")), ("first_offset", field("first_offset")),
               ("next_offset", field("next_offset")), ("durable", field("durable")),
               ("policy", field("policy"))],
    "exchanges": [("name", named("name")), ("type", field("type")),
                  ("durable", field("durable")), ("auto_delete", field("auto_delete")),
                  ("internal", field("internal")), ("policy", field("policy"))],
    "bindings": [("source", named("source")), ("destination", field("destination")),
                 ("destination_type", field("destination_type")),
                 ("routing_key", field("routing_key")), ("arguments", field("arguments"))],
    "connections": [("name", field("name")), ("user", field("user")),
                    ("vhost", field("vhost")), ("protocol", field("protocol")),
                    ("peer", lambda r: f"{r.get('peer_host', '')}:{r.get('peer_port', '')}"),
                    ("channels", field("channels"))],
    "consumers": [("consumer_tag", field("consumer_tag")),
                  ("queue", lambda r: (r.get("queue") or {}).get("name")),
                  ("ack_required", field("ack_required")),
                  ("prefetch_count", field("prefetch_count")),
                  ("channel", lambda r: (r.get("channel_details") or {}).get("name"))],
    "policies": [("name", field("name")), ("pattern", field("pattern")),
                 ("apply_to", field("apply-to")), ("priority", field("priority")),
                 ("definition", field("definition"))],
    "parameters": [("component", field("component")), ("name", field("name")),
                   ("value", field("value"))],
    "shovels": [("name", field("name")), ("node", field("node")), ("state", field("state")),
                ("src_uri", field("src_uri")), ("src_queue", field("src_queue")),
                ("dest_queue", field("dest_queue")), ("dest_exchange", field("dest_exchange")),
                ("messages", field("messages")), ("reason", field("reason"))],
    "federation": [("type", field("type")),
                   ("name", lambda row: row.get("exchange") or row.get("queue")),
                   ("upstream", field("upstream")), ("node", field("node")),
                   ("status", field("status")), ("uri", field("uri")),
                   ("messages", field("messages")), ("error", field("error"))],
    # One row per (group, queue): `group_rows` flattens GET /api/consumer-groups.
    "groups": [("group", field("group")), ("queue", field("queue")),
               ("committed", field("committed_offset")), ("end", field("end_offset")),
               ("lag", field("lag"))],
}
LIST_KINDS = tuple(COLUMNS)


def group_rows(groups: Sequence[Row]) -> list[dict[str, Any]]:
    """Consumer groups as table rows, one per queue (a group with none: one empty row)."""
    rows: list[dict[str, Any]] = []
    for group in groups:
        base = {"vhost": group.get("vhost"), "group": group.get("name")}
        queues = group.get("queues") or [{}]
        rows.extend({**base, **queue} for queue in queues)
    return rows


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns two spaces apart; a column of integers is right-aligned."""
    numeric = [bool(rows) and all(isinstance(row[i], int) and not isinstance(row[i], bool)
                                  for row in rows) for i in range(len(headers))]
    texts = [[cell(value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(t[i]) for t in texts]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w)
                 for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers))] + [line(t) for t in texts])


def render(kind: str, rows: Sequence[Row], with_vhost: bool = False,
           output_format: str = "table") -> str:
    if output_format == "json":
        return json.dumps(list(rows), indent=2, sort_keys=True)
    columns = list(COLUMNS[kind])
    if with_vhost and kind not in ("connections",):
        vhost_of = (lambda r: (r.get("queue") or {}).get("vhost")) if kind == "consumers" \
            else field("vhost")
        columns.insert(0, ("vhost", vhost_of))
    return format_table([h for h, _ in columns], [[get(r) for _, get in columns] for r in rows])
