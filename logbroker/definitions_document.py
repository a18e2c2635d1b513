"""Definitions export and import in RabbitMQ's JSON format (rabbitmqctl export_definitions).

The document holds users, vhosts, permissions, runtime parameters (federation
upstreams and sets, vhost limits), policies, queues, exchanges and bindings.
Export leaves out what a broker makes by itself (the `amq.*` exchanges, the
default exchange's implicit bindings) and exclusive queues,
which belong to a connection; lists are sorted so two exports of the same
definitions are equal. Import is additive, as RabbitMQ's is: it declares what
the document names, in dependency order (vhosts, users, permissions,
parameters, policies, exchanges, queues, bindings), and changes nothing else. A
document exported by RabbitMQ loads here: unknown top-level keys (topic
permissions, global parameters) and parameters of components this broker does
not have (a plugin's) are accepted and ignored, and user tags may be a list or
RabbitMQ's older comma-separated string.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from logbroker.metadata import (
    AddVhost,
    Bind,
    Command,
    DeclareExchange,
    DeclareQueue,
    MetadataState,
    PutPolicy,
    PutUser,
    SetParameter,
    SetPermissions,
    hash_password,
)
from logbroker.metadata.parameters import is_known_component
from logbroker.metadata.passwords import SHA256

PRODUCT_VERSION = "0.1.0"


class DefinitionsError(ValueError):
    """The document is not a valid definitions document; says which entry and why."""


def export_definitions(state: MetadataState) -> dict[str, Any]:
    vhosts = [v.name for v in state.vhosts()]
    document: dict[str, Any] = {
        "rabbit_version": "3.13.0", "rabbitmq_version": "3.13.0",
        "product_name": "logbroker", "product_version": PRODUCT_VERSION,
        "users": sorted(({"name": u.name, "password_hash": u.password_hash,
                          "hashing_algorithm": u.hashing_algorithm, "tags": list(u.tags),
                          "limits": {}} for u in state.users()), key=lambda u: u["name"]),
        "vhosts": sorted(({"name": v.name, "description": v.description, "tags": list(v.tags),
                           "metadata": {"description": v.description, "tags": list(v.tags)}}
                          for v in state.vhosts()), key=lambda v: v["name"]),
        "permissions": sorted((p.to_json() for p in state.all_permissions()),
                              key=lambda p: (p["user"], p["vhost"])),
        "topic_permissions": [], "parameters": [], "global_parameters": [],
        "policies": [], "queues": [], "exchanges": [], "bindings": [],
    }
    for vhost in vhosts:
        document["parameters"] += [
            {"value": value, "vhost": vhost, "component": component, "name": name}
            for component, name, value in state.parameters(vhost)]
        document["policies"] += [
            {"vhost": vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
             "priority": p.priority, "definition": dict(p.definition)}
            for p in state.policies(vhost)]
        document["queues"] += [
            {"name": q.name, "vhost": vhost, "durable": q.durable, "auto_delete": q.auto_delete,
             "arguments": dict(q.arguments)}
            for q in state.queues(vhost) if q.exclusive_owner is None]
        document["exchanges"] += [
            {"name": e.name, "vhost": vhost, "type": e.type, "durable": e.durable,
             "auto_delete": e.auto_delete, "internal": e.internal,
             "arguments": dict(e.arguments)}
            for e in state.exchanges(vhost) if e.name and not e.name.startswith("amq.")]
        document["bindings"] += [
            {"source": b.source, "vhost": vhost, "destination": b.destination.name,
             "destination_type": b.destination.kind, "routing_key": b.routing_key,
             "arguments": dict(b.arguments)}
            for b in state.bindings(vhost)]
    for key, fields in (("parameters", ("vhost", "component", "name")),
                        ("policies", ("vhost", "name")), ("queues", ("vhost", "name")),
                        ("exchanges", ("vhost", "name")),
                        ("bindings", ("vhost", "source", "destination_type", "destination",
                                      "routing_key"))):
        document[key].sort(key=lambda item, f=fields: tuple(str(item[n]) for n in f))
    return document


def import_commands(document: Mapping[str, Any]) -> list[Command]:
    """The commands that declare everything `document` names, in dependency order."""
    return [command for _, command in import_entries(document)]


def import_entries(document: Mapping[str, Any]) -> list[tuple[str, Command]]:
    """`import_commands`, each with the entry it comes from (`policies[2] 'name'`)."""
    if not isinstance(document, Mapping):
        raise DefinitionsError("a definitions document is a JSON object")
    commands: list[tuple[str, Command]] = []
    for kind, build in (("vhosts", _vhost), ("users", _user), ("permissions", _permissions),
                        ("parameters", _parameter), ("policies", _policy),
                        ("exchanges", _exchange), ("queues", _queue), ("bindings", _binding)):
        entries = document.get(kind, [])
        if not isinstance(entries, list):
            raise DefinitionsError(f"'{kind}' must be a list")
        for index, entry in enumerate(entries):
            try:
                if not isinstance(entry, Mapping):
                    raise TypeError("an entry is a JSON object")
                command = build(entry)
            except (KeyError, TypeError, ValueError) as error:
                raise DefinitionsError(f"{kind}[{index}]: {_why(error)}") from error
            if command is not None:
                commands.append((_label(kind, index, entry), command))
    return commands


def _label(kind: str, index: int, entry: Mapping[str, Any]) -> str:
    name = entry.get("name")
    return f"{kind}[{index}]" + (f" '{name}'" if isinstance(name, str) else "")


def _why(error: Exception) -> str:
    return f"missing field {error}" if isinstance(error, KeyError) else str(error)


def _text(entry: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = entry.get(key, default) if default is not None else entry[key]
    if not isinstance(value, str):
        raise TypeError(f"'{key}' must be a string")
    return value


def _flag(entry: Mapping[str, Any], key: str, default: bool) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise TypeError(f"'{key}' must be true or false")
    return value


def _table(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = entry.get(key) or {}
    if not isinstance(value, Mapping):
        raise TypeError(f"'{key}' must be an object")
    return dict(value)


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise TypeError("'tags' must be a list of strings or a comma-separated string")
    return tuple(sorted({t.strip() for t in items if t.strip()}))


def _vhost(entry: Mapping[str, Any]) -> Command:
    metadata = _table(entry, "metadata")
    description = entry.get("description", metadata.get("description", "")) or ""
    return AddVhost(_text(entry, "name"), str(description),
                    _tags(entry.get("tags", metadata.get("tags"))))


def _user(entry: Mapping[str, Any]) -> Command:
    if "password_hash" in entry:
        password_hash = _text(entry, "password_hash")
        algorithm = _text(entry, "hashing_algorithm", SHA256)
    else:
        password_hash, algorithm = hash_password(_text(entry, "password"), os.urandom(4)), SHA256
    return PutUser(_text(entry, "name"), password_hash, algorithm, _tags(entry.get("tags")))


def _permissions(entry: Mapping[str, Any]) -> Command:
    return SetPermissions(_text(entry, "user"), _text(entry, "vhost"),
                          _text(entry, "configure"), _text(entry, "write"), _text(entry, "read"))


def _parameter(entry: Mapping[str, Any]) -> Command | None:
    component = _text(entry, "component")
    if not is_known_component(component):
        return None  # a plugin this broker does not have (RabbitMQ's exports carry them)
    if "value" not in entry:
        raise KeyError("value")
    return SetParameter.of(_text(entry, "vhost"), component, _text(entry, "name"),
                           entry["value"])


def _policy(entry: Mapping[str, Any]) -> Command:
    priority = entry.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError("'priority' must be an integer")
    return PutPolicy(_text(entry, "vhost"), _text(entry, "name"), _text(entry, "pattern"),
                     _text(entry, "apply-to", "all"), priority, _table(entry, "definition"))


def _exchange(entry: Mapping[str, Any]) -> Command | None:
    name = _text(entry, "name")
    if not name or name.startswith("amq."):
        return None  # made by the broker itself
    return DeclareExchange(_text(entry, "vhost"), name, _text(entry, "type"),
                           _flag(entry, "durable", True), _flag(entry, "auto_delete", False),
                           _flag(entry, "internal", False), _table(entry, "arguments"))


def _queue(entry: Mapping[str, Any]) -> Command:
    return DeclareQueue(_text(entry, "vhost"), _text(entry, "name"),
                        durable=_flag(entry, "durable", True),
                        auto_delete=_flag(entry, "auto_delete", False),
                        arguments=_table(entry, "arguments"))


def _binding(entry: Mapping[str, Any]) -> Command | None:
    source = _text(entry, "source")
    if not source:
        return None  # the default exchange's bindings are implicit
    kind: Literal["queue", "exchange"]
    match _text(entry, "destination_type"):
        case "queue":
            kind = "queue"
        case "exchange":
            kind = "exchange"
        case _:
            raise ValueError("'destination_type' must be 'queue' or 'exchange'")
    return Bind(_text(entry, "vhost"), source, kind, _text(entry, "destination"),
                _text(entry, "routing_key", ""), _table(entry, "arguments"))
