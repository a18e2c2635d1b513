"""The definitions a standalone node left in its data dir, for the cluster it now founds.

`logbroker serve` with more than one worker runs the node as cluster members,
and worker 1 keeps the node's name and data dir (logbroker/worker_layout.py).
A standalone node kept its definitions in `DATA_DIR/metadata` (`MetadataStore`);
a cluster member keeps them in the Raft log, `DATA_DIR/raft`. So when a node
starts clustered with no Raft log yet and finds a standalone store, the
commands an empty cluster metadata starts with (the controller's bootstrap)
are the store's definitions instead of the default vhost and user: vhosts,
users, parameters, policies, exchanges, durable queues (each led by this
node, without replicas: it opens the queue's own directory, so the messages
are kept; a policy asking for replicas adds them afterwards), bindings,
and the permissions last (a login is checked once permissions exist, and by
then everything they grant is there). The store itself is read, not changed.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from logbroker.definitions_document import export_definitions, import_commands
from logbroker.metadata import Command, DeclareQueue, SetPermissions
from logbroker.metadata.store import MetadataStore
from segments.filesystem import FileSystem

logger = logging.getLogger(__name__)
STANDALONE_DIRECTORY = "metadata"
RAFT_DIRECTORY = "raft"


def standalone_definitions(fs: FileSystem, data_dir: str, node_name: str) -> list[Command]:
    """The bootstrap commands from `data_dir`'s standalone store, or [] when there is a
    Raft log already (the cluster has its own metadata) or no standalone store."""
    if fs.exists(os.path.join(data_dir, RAFT_DIRECTORY)) or not fs.exists(
            os.path.join(data_dir, STANDALONE_DIRECTORY)):
        return []
    store = MetadataStore.open(fs, data_dir)
    try:
        document = export_definitions(store.state)
    finally:
        store.close()
    commands = [_placed(command, node_name) for command in import_commands(document)
                if not isinstance(command, DeclareQueue) or command.durable]
    permissions = [c for c in commands if isinstance(c, SetPermissions)]
    ordered = [c for c in commands if not isinstance(c, SetPermissions)] + permissions
    logger.info("%s: the standalone definitions (%d commands, %d queues) become the "
                "cluster's", data_dir, len(ordered),
                sum(isinstance(c, DeclareQueue) for c in ordered))
    return ordered


def _placed(command: Command, node_name: str) -> Command:
    if isinstance(command, DeclareQueue):
        return dataclasses.replace(command, leader_node=node_name, members=(node_name,))
    return command
