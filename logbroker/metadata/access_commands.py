"""Handlers for vhosts, users and permissions.

Each `plan_*` checks a command against the state and raises `MetadataError`
if it must be refused; otherwise it returns a plan, a function that makes the
change and returns the events. Nothing is mutated before the plan runs, so a
refused command leaves the state exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.metadata.commands import (
    AddVhost,
    ClearPermissions,
    DeleteUser,
    DeleteVhost,
    PutUser,
    SetPermissions,
)
from logbroker.metadata.defaults import predeclared_exchanges
from logbroker.metadata.errors import precondition_failed
from logbroker.metadata.events import (
    Event,
    ExchangeDeclared,
    PermissionsCleared,
    PermissionsSet,
    UserDeleted,
    UserPut,
    VhostAdded,
    VhostDeleted,
    VhostUpdated,
)
from logbroker.metadata.passwords import HASHING_ALGORITHMS
from logbroker.metadata.permissions import validate_regex
from logbroker.metadata.records import PermissionRecord, UserRecord, VhostRecord
from logbroker.metadata.state_data import StateData, VhostData

Plan = Callable[[], list[Event]]


def nothing() -> list[Event]:
    return []


def plan_add_vhost(data: StateData, command: AddVhost) -> Plan:
    if not command.name:
        raise precondition_failed("a vhost name must not be empty")
    record = VhostRecord(command.name, command.description, command.tags)
    existing = data.vhosts.get(command.name)
    if existing is not None:
        if existing.record == record:
            return nothing

        def update() -> list[Event]:
            existing.record = record
            return [VhostUpdated(command.name)]

        return update

    def add() -> list[Event]:
        vhost = VhostData(record)
        events: list[Event] = [VhostAdded(command.name)]
        for exchange in predeclared_exchanges(command.name):
            vhost.exchanges[exchange.name] = exchange
            events.append(ExchangeDeclared(exchange))
        data.vhosts[command.name] = vhost
        return events

    return add


def plan_delete_vhost(data: StateData, command: DeleteVhost) -> Plan:
    vhost = data.vhost(command.name)

    def delete() -> list[Event]:
        del data.vhosts[command.name]
        for key in [key for key in data.permissions if key[1] == command.name]:
            del data.permissions[key]
        return [VhostDeleted(command.name, tuple(vhost.queues), tuple(vhost.exchanges))]

    return delete


def plan_put_user(data: StateData, command: PutUser) -> Plan:
    if not command.name:
        raise precondition_failed("a user name must not be empty")
    if command.hashing_algorithm and command.hashing_algorithm not in HASHING_ALGORITHMS:
        raise precondition_failed(
            f"unknown password hashing algorithm '{command.hashing_algorithm}'"
        )
    record = UserRecord(
        command.name, command.password_hash, command.hashing_algorithm, command.tags
    )
    existing = data.users.get(command.name)
    if existing == record:
        return nothing

    def put() -> list[Event]:
        data.users[command.name] = record
        return [UserPut(command.name, created=existing is None)]

    return put


def plan_delete_user(data: StateData, command: DeleteUser) -> Plan:
    data.user(command.name)

    def delete() -> list[Event]:
        del data.users[command.name]
        keys = [key for key in data.permissions if key[0] == command.name]
        for key in keys:
            del data.permissions[key]
        return [UserDeleted(command.name, tuple(vhost for _, vhost in keys))]

    return delete


def plan_set_permissions(data: StateData, command: SetPermissions) -> Plan:
    data.user(command.user)
    data.vhost(command.vhost)
    for pattern in (command.configure, command.write, command.read):
        problem = validate_regex(pattern)
        if problem is not None:
            raise precondition_failed(f"invalid regular expression '{pattern}': {problem}")
    record = PermissionRecord(
        command.user, command.vhost, command.configure, command.write, command.read
    )
    key = (command.user, command.vhost)
    if data.permissions.get(key) == record:
        return nothing

    def put() -> list[Event]:
        data.permissions[key] = record
        return [PermissionsSet(command.user, command.vhost)]

    return put


def plan_clear_permissions(data: StateData, command: ClearPermissions) -> Plan:
    data.user(command.user)
    data.vhost(command.vhost)
    key = (command.user, command.vhost)
    if key not in data.permissions:
        return nothing

    def clear() -> list[Event]:
        del data.permissions[key]
        return [PermissionsCleared(command.user, command.vhost)]

    return clear
