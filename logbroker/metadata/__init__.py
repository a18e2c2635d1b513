"""The broker's metadata: a log of commands applied by a pure state machine.

Vhosts, users, permissions, exchanges, bindings, queues and policies change
only through `Command`s. `MetadataState.apply` checks a command the way
RabbitMQ checks the AMQP method or management call behind it (raising
`MetadataError` with RabbitMQ's reply code and text) and returns the events
it caused; `MetadataStore` persists each applied command in a segments log
with periodic snapshots, so the metadata survives restarts and can later be
replicated with Raft as it is.
"""

from logbroker.metadata.commands import (
    AddVhost,
    Bind,
    ClearPermissions,
    Command,
    CommandDecodeError,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeletePolicy,
    DeleteQueue,
    DeleteUser,
    DeleteVhost,
    PutPolicy,
    PutUser,
    SetPermissions,
    Unbind,
    decode_command,
    encode_command,
)
from logbroker.metadata.defaults import PREDECLARED_EXCHANGES, bootstrap_commands
from logbroker.metadata.errors import MetadataError
from logbroker.metadata.events import (
    Applied,
    BindingAdded,
    BindingRemoved,
    Event,
    ExchangeDeclared,
    ExchangeDeleted,
    PermissionsCleared,
    PermissionsSet,
    PolicyChanged,
    QueueDeclared,
    QueueDeleted,
    UserDeleted,
    UserPut,
    VhostAdded,
    VhostDeleted,
    VhostUpdated,
)
from logbroker.metadata.passwords import hash_password, verify_password
from logbroker.metadata.permissions import (
    can_access_vhost,
    can_configure,
    can_read,
    can_write,
    check_access,
    check_vhost_access,
)
from logbroker.metadata.policies import (
    Policy,
    effective_alternate_exchange,
    effective_queue_arguments,
    matching_policy,
    validate_definition,
)
from logbroker.metadata.records import (
    ExchangeRecord,
    PermissionRecord,
    QueueRecord,
    UserRecord,
    VhostRecord,
)
from logbroker.metadata.routing_feed import apply_events, build_router
from logbroker.metadata.state import MetadataState
from logbroker.metadata.store import (
    MetadataCorruptError,
    MetadataStore,
    MetadataStoreConfig,
    MetadataStoreError,
    MetadataStoreFailedError,
)

__all__ = [
    "PREDECLARED_EXCHANGES",
    "AddVhost",
    "Applied",
    "Bind",
    "BindingAdded",
    "BindingRemoved",
    "ClearPermissions",
    "Command",
    "CommandDecodeError",
    "DeclareExchange",
    "DeclareQueue",
    "DeleteExchange",
    "DeletePolicy",
    "DeleteQueue",
    "DeleteUser",
    "DeleteVhost",
    "Event",
    "ExchangeDeclared",
    "ExchangeDeleted",
    "ExchangeRecord",
    "MetadataCorruptError",
    "MetadataError",
    "MetadataState",
    "MetadataStore",
    "MetadataStoreConfig",
    "MetadataStoreError",
    "MetadataStoreFailedError",
    "PermissionRecord",
    "PermissionsCleared",
    "PermissionsSet",
    "Policy",
    "PolicyChanged",
    "PutPolicy",
    "PutUser",
    "QueueDeclared",
    "QueueDeleted",
    "QueueRecord",
    "SetPermissions",
    "Unbind",
    "UserDeleted",
    "UserPut",
    "UserRecord",
    "VhostAdded",
    "VhostDeleted",
    "VhostRecord",
    "VhostUpdated",
    "apply_events",
    "bootstrap_commands",
    "build_router",
    "can_access_vhost",
    "can_configure",
    "can_read",
    "can_write",
    "check_access",
    "check_vhost_access",
    "decode_command",
    "effective_alternate_exchange",
    "effective_queue_arguments",
    "encode_command",
    "hash_password",
    "matching_policy",
    "validate_definition",
    "verify_password",
]
