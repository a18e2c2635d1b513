"""A standalone node's data dir founds the cluster its workers form (standalone_import)."""

from __future__ import annotations

from pathlib import Path

from logbroker.cluster.standalone_import import standalone_definitions
from logbroker.metadata import (
    AddVhost,
    Bind,
    DeclareExchange,
    DeclareQueue,
    MetadataState,
    SetPermissions,
    bootstrap_commands,
)
from logbroker.metadata.store import MetadataStore
from segments.filesystem import RealFileSystem
from tests.unit.logbroker.metadata.helpers import GUEST_HASH


def write_standalone(data_dir: Path) -> None:
    store = MetadataStore.open(RealFileSystem(), str(data_dir),
                               bootstrap=bootstrap_commands(GUEST_HASH))
    for command in (AddVhost("v2"), DeclareExchange("/", "logs", "fanout", durable=True),
                    DeclareQueue("/", "kept", durable=True, arguments={"x-max-length": 5}),
                    DeclareQueue("/", "transient"), Bind("/", "logs", "queue", "kept", "")):
        store.apply(command)
    store.close()


def test_the_definitions_come_over_with_durable_queues_led_here(tmp_path: Path) -> None:
    write_standalone(tmp_path)
    commands = standalone_definitions(RealFileSystem(), str(tmp_path), "node@box")
    queues = [c for c in commands if isinstance(c, DeclareQueue)]
    assert [(q.name, q.leader_node, q.members, dict(q.arguments)) for q in queues] == [
        ("kept", "node@box", ("node@box",), {"x-max-length": 5})]
    kinds = [type(c) for c in commands]
    assert kinds[-1] is SetPermissions  # logins are checked once permissions exist
    assert kinds.index(SetPermissions) > max(i for i, k in enumerate(kinds) if k is not
                                             SetPermissions)
    state = MetadataState()
    for command in commands:
        state.apply(command)
    assert {v.name for v in state.vhosts()} == {"/", "v2"}
    assert [b.destination.name for b in state.bindings("/")] == ["kept"]
    record = state.queue("/", "kept")
    assert record is not None and record.leader_node == "node@box"


def test_nothing_when_the_cluster_has_its_own_log_or_there_is_no_store(tmp_path: Path) -> None:
    fs = RealFileSystem()
    assert standalone_definitions(fs, str(tmp_path), "n") == []
    write_standalone(tmp_path)
    (tmp_path / "raft").mkdir()
    assert standalone_definitions(fs, str(tmp_path), "n") == []
