"""Raft for the cluster's metadata: a pure core (`RaftNode`) and its storage.

Import from here; the submodules are the implementation's parts.
"""

from replication.raft.config import RaftConfig
from replication.raft.errors import InvariantError, NotLeader, ProposalRefused, RaftError
from replication.raft.membership import (
    EMPTY_MEMBERSHIP,
    ChangeKind,
    ConfigChange,
    ConfigChangeError,
    Membership,
    desired_roles,
    next_change,
)
from replication.raft.messages import Entry, EntryKind, Message, Snapshot, describe
from replication.raft.node import RaftNode
from replication.raft.ready import HardState, PersistedState, Ready, Role, SoftState
from replication.raft.storage import RaftStorage

__all__ = [
    "EMPTY_MEMBERSHIP",
    "ChangeKind",
    "ConfigChange",
    "ConfigChangeError",
    "Entry",
    "EntryKind",
    "HardState",
    "InvariantError",
    "Membership",
    "Message",
    "NotLeader",
    "PersistedState",
    "ProposalRefused",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "RaftStorage",
    "Ready",
    "Role",
    "Snapshot",
    "SoftState",
    "describe",
    "desired_roles",
    "next_change",
]
