"""What RabbitMQ creates by itself: the `amq.*` exchanges of every vhost, the default user.

`rabbit_vhost:add/2` declares, in every new vhost, durable exchanges
`amq.direct`, `amq.topic`, `amq.match` and `amq.headers` (headers; the 0-9-1
PDF and XML disagree on the name, so both), `amq.fanout`, and the internal
topic exchange `amq.rabbitmq.trace` (firehose). The default exchange `""` is
implicit here: the routing core handles it and it cannot be declared,
deleted or bound.

On first boot RabbitMQ creates the vhost `/` and the user `guest` (tag
`administrator`, permissions `.*` `.*` `.*` on `/`); `bootstrap_commands`
returns those as commands so they go through the log like any other change.
"""

from __future__ import annotations

from typing import Final

from logbroker.metadata.commands import AddVhost, Command, PutUser, SetPermissions
from logbroker.metadata.passwords import SHA256
from logbroker.metadata.records import ExchangeRecord

DEFAULT_VHOST: Final = "/"
DEFAULT_USER: Final = "guest"

# (name, type, internal), in RabbitMQ's order.
PREDECLARED_EXCHANGES: Final = (
    ("amq.direct", "direct", False),
    ("amq.topic", "topic", False),
    ("amq.match", "headers", False),
    ("amq.headers", "headers", False),
    ("amq.fanout", "fanout", False),
    ("amq.rabbitmq.trace", "topic", True),
)


def predeclared_exchanges(vhost: str) -> list[ExchangeRecord]:
    return [
        ExchangeRecord(vhost, name, kind, durable=True, auto_delete=False, internal=internal)
        for name, kind, internal in PREDECLARED_EXCHANGES
    ]


def bootstrap_commands(
    default_password_hash: str,
    default_user: str = DEFAULT_USER,
    hashing_algorithm: str = SHA256,
    default_vhost: str = DEFAULT_VHOST,
) -> list[Command]:
    """The commands a brand-new broker applies first (hash the password with `passwords`)."""
    return [
        AddVhost(default_vhost, "Default virtual host"),
        PutUser(default_user, default_password_hash, hashing_algorithm, ("administrator",)),
        SetPermissions(default_user, default_vhost, ".*", ".*", ".*"),
    ]
