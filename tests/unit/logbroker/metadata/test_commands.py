from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.metadata.commands import (
    COMMAND_TYPES,
    AddClusterNode,
    AddVhost,
    Bind,
    ClearParameter,
    ClearPermissions,
    Command,
    CommandDecodeError,
    CommitProducerBatch,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeletePolicy,
    DeleteQueue,
    DeleteUser,
    DeleteVhost,
    ProducerBatchApplied,
    PutPolicy,
    PutUser,
    RemoveClusterNode,
    SetNodeLiveness,
    SetParameter,
    SetPermissions,
    SetQueuePlacement,
    Unbind,
    decode_command,
    encode_command,
)
from logbroker.metadata.table_codec import decode_value, encode_value
from tests.unit.logbroker.metadata.helpers import strict_equal

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.datetimes(timezones=st.none() | st.just(UTC))
)
keys = st.text(max_size=10) | st.sampled_from(["$t", "v", "x-match"])
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)
tables = st.dictionaries(keys, values, max_size=6)
names = st.text(max_size=12)
name_tuples = st.lists(names, max_size=3).map(tuple)
kinds = st.sampled_from(["queue", "exchange"])
ports = st.integers(0, 65535)

commands: st.SearchStrategy[Command] = st.one_of(
    st.builds(AddVhost, names, names, name_tuples),
    st.builds(DeleteVhost, names),
    st.builds(PutUser, names, names, names, name_tuples),
    st.builds(DeleteUser, names),
    st.builds(SetPermissions, names, names, names, names, names),
    st.builds(ClearPermissions, names, names),
    st.builds(DeclareExchange, names, names, names, st.booleans(), st.booleans(),
              st.booleans(), tables),
    st.builds(DeleteExchange, names, names, st.booleans()),
    st.builds(Bind, names, names, kinds, names, names, tables),
    st.builds(Unbind, names, names, kinds, names, names, tables),
    st.builds(DeclareQueue, names, names, st.booleans(), st.none() | names, st.booleans(),
              tables, st.booleans(), st.none() | names, name_tuples),
    st.builds(DeleteQueue, names, names, st.booleans(), st.booleans()),
    st.builds(PutPolicy, names, names, names, names, st.integers(-1000, 1000), tables),
    st.builds(DeletePolicy, names, names),
    st.builds(AddClusterNode, names, names, ports, ports, ports, st.integers(0, 2**63)),
    st.builds(RemoveClusterNode, names),
    st.builds(SetNodeLiveness, names, st.booleans(), st.integers(0, 2**63)),
    st.builds(SetQueuePlacement, names, names, names, name_tuples),
    st.builds(CommitProducerBatch, names, names, st.integers(0, 2**63), st.integers(0, 2**63)),
    st.builds(ProducerBatchApplied, names, names, st.integers(0, 2**63)),
    st.builds(SetParameter, names, names, names, names),
    st.builds(ClearParameter, names, names, names),
)  # fmt: skip


def commands_strictly_equal(left: Command, right: Command) -> bool:
    if type(left) is not type(right):
        return False
    return all(
        strict_equal(getattr(left, item.name), getattr(right, item.name))
        for item in dataclasses.fields(left)
    )


@given(commands)
def test_every_command_round_trips_exactly(command: Command) -> None:
    data = encode_command(command)
    decoded = decode_command(data)
    assert commands_strictly_equal(decoded, command)
    assert encode_command(decoded) == data


@given(values)
def test_field_values_round_trip_with_their_types(value: Any) -> None:
    assert strict_equal(decode_value(encode_value(value)), value)


def test_every_command_type_is_covered() -> None:
    assert set(COMMAND_TYPES) == {
        "AddVhost", "DeleteVhost", "PutUser", "DeleteUser", "SetPermissions",
        "ClearPermissions", "DeclareExchange", "DeleteExchange", "Bind", "Unbind",
        "DeclareQueue", "DeleteQueue", "PutPolicy", "DeletePolicy", "AddClusterNode",
        "RemoveClusterNode", "SetNodeLiveness", "SetQueuePlacement", "SetQueueInSync",
        "ElectQueueLeader", "CommitProducerBatch", "ProducerBatchApplied",
        "CommitGroupOffsets", "DeleteConsumerGroup", "SetParameter", "ClearParameter",
    }  # fmt: skip


def test_bool_stays_bool_and_int_stays_int() -> None:
    command = DeclareQueue("/", "q", arguments={"a": True, "b": 1, "c": 1.0, "d": [False, 0]})
    decoded = decode_command(encode_command(command))
    assert isinstance(decoded, DeclareQueue)
    assert decoded.arguments["a"] is True
    assert type(decoded.arguments["b"]) is int
    assert type(decoded.arguments["c"]) is float
    assert [type(item) for item in decoded.arguments["d"]] == [bool, int]


def test_non_json_values_survive_exactly() -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, 123456)
    table = {
        "bytes": b"\x00\xff",
        "decimal": Decimal("1.50"),
        "when": when,
        "nested": {"$t": "not a tag", "inner": [b"x", Decimal("-0"), float("inf")]},
    }
    decoded = decode_command(encode_command(Bind("/", "x", "queue", "q", "k", table)))
    assert isinstance(decoded, Bind)
    assert strict_equal(decoded.arguments, table)


def test_declare_queue_entries_written_before_placement_still_decode() -> None:
    data = b'{"type":"DeclareQueue","fields":{"vhost":"/","name":"q","durable":true}}'
    decoded = decode_command(data)
    assert decoded == DeclareQueue("/", "q", durable=True)
    assert isinstance(decoded, DeclareQueue)
    assert decoded.leader_node is None
    assert decoded.members == ()


def test_placement_fields_round_trip() -> None:
    command = DeclareQueue("/", "q", leader_node="n2", members=["n2", "n1"])  # type: ignore[arg-type]
    assert command.members == ("n2", "n1")
    assert decode_command(encode_command(command)) == command
    move = SetQueuePlacement("/", "q", "n1", ("n1", "n3"))
    assert decode_command(encode_command(move)) == move


def test_tables_keep_their_key_order() -> None:
    command = DeclareQueue("/", "q", arguments={"z": 1, "a": 2, "m": {"y": 1, "b": 2}})
    decoded = decode_command(encode_command(command))
    assert isinstance(decoded, DeclareQueue)
    assert list(decoded.arguments) == ["z", "a", "m"]
    assert list(decoded.arguments["m"]) == ["y", "b"]


def test_commands_are_immutable() -> None:
    arguments = {"x-max-length": 1}
    command = DeclareQueue("/", "q", arguments=arguments)
    arguments["x-max-length"] = 2
    assert command.arguments["x-max-length"] == 1
    with pytest.raises(TypeError):
        command.arguments["x"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        command.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"type": "Nope", "fields": {}}',
        b'{"type": "DeleteVhost", "name": "v"}',
        b'{"type": "DeleteVhost", "fields": {}}',
        b'{"type": "DeleteVhost", "fields": {"name": 5}}',
        b'{"type": "DeleteExchange", "fields": {"vhost": "/", "name": "x", "if_unused": 1}}',
        b'{"type": "PutPolicy", "fields": {"vhost": "/", "name": "p", "pattern": ".", '
        b'"priority": true}}',
        b'{"type": "Bind", "fields": {"vhost": "/", "source": "x", "destination_kind": "topic", '
        b'"destination": "q"}}',
        b'{"type": "DeclareQueue", "fields": {"vhost": "/", "name": "q", "arguments": '
        b'{"$t": "bytes", "v": "!!"}}}',
        b'{"type": "DeclareQueue", "fields": {"vhost": "/", "name": "q", "arguments": [1]}}',
        b'{"type": "PutUser", "fields": {"name": "u", "password_hash": "h", "tags": [1]}}',
        b'{"type": "DeclareQueue", "fields": {"vhost": "/", "name": "q", "leader_node": 1}}',
        b'{"type": "DeclareQueue", "fields": {"vhost": "/", "name": "q", "members": "n1"}}',
        b'{"type": "SetNodeLiveness", "fields": {"name": "n", "up": 1, "since_ms": 0}}',
        b'{"type": "SetNodeLiveness", "fields": {"name": "n", "up": true, "since_ms": true}}',
        b'{"type": "AddClusterNode", "fields": {"name": "n", "host": "h", "cluster_port": 1}}',
        b'{"type": "SetQueuePlacement", "fields": {"vhost": "/", "name": "q", '
        b'"leader_node": "n1"}}',
        b"\xff\xfe",
    ],
)
def test_malformed_records_are_refused(data: bytes) -> None:
    with pytest.raises(CommandDecodeError):
        decode_command(data)
