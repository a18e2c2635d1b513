"""Handlers for consumer groups: their committed offsets per queue, and their deletion.

A consumer group (a Spark query, a batch job) records, per queue, the next
offset it will read, as Kafka's committed consumer-group offsets do. The
broker only keeps the numbers: reads are non-destructive replays, so a group
moves nothing in the queue.

- `CommitGroupOffsets`: the vhost must exist (404); the group name is 1 to
  255 bytes of UTF-8 (406); every queue named must exist (404 naming the
  first missing one); every offset is an int in [0, 2^63) (406, bool is not
  an int). The offsets merge into the group's: queues not named keep theirs.
  An offset lower than the stored one is taken as it is (a reset, as Kafka
  allows), so a commit never fails for going backwards. The first commit
  creates the group. Committing what is stored already changes nothing.
- `DeleteConsumerGroup`: absent is fine (idempotent, as queue.delete).

Bounds (406 PRECONDITION_FAILED, the reply-code table's "invalid value";
HTTP 400): at most `MAX_GROUPS_PER_VHOST` groups in a vhost and
`MAX_QUEUES_PER_GROUP` queues in one group, so one vhost's groups stay a few
MiB of metadata at most.

Cascades: deleting a queue drops its entry from every group of the vhost
(`drop_queue_from_groups`, called by `topology_commands.delete_queue`); the
group itself stays, possibly empty, until deleted. Deleting a vhost drops its
groups with it.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.metadata.commands import CommitGroupOffsets, DeleteConsumerGroup
from logbroker.metadata.errors import not_found, precondition_failed
from logbroker.metadata.events import ConsumerGroupDeleted, Event, GroupOffsetsCommitted
from logbroker.metadata.records import ConsumerGroupRecord
from logbroker.metadata.state_data import StateData, VhostData

Plan = Callable[[], list[Event]]
MAX_GROUP_NAME_BYTES = 255
MAX_GROUPS_PER_VHOST = 1_000
MAX_QUEUES_PER_GROUP = 10_000
MAX_OFFSET = 2**63 - 1


def _nothing() -> list[Event]:
    return []


def check_group_name(name: str) -> None:
    """406 unless `name` is 1 to 255 bytes of UTF-8 (a lone surrogate has no UTF-8 form)."""
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise precondition_failed("a consumer group name must be valid UTF-8") from None
    if not 1 <= size <= MAX_GROUP_NAME_BYTES:
        raise precondition_failed(
            f"a consumer group name must be 1 to {MAX_GROUP_NAME_BYTES} bytes, not {size}")


def check_offset(queue: str, offset: object) -> int:
    if type(offset) is not int or not 0 <= offset <= MAX_OFFSET:
        raise precondition_failed(
            f"the offset of queue '{queue}' must be an integer from 0 to {MAX_OFFSET}, "
            f"not {offset!r}")
    return offset


def plan_commit_group_offsets(data: StateData, command: CommitGroupOffsets) -> Plan:
    vhost = data.vhost(command.vhost)
    check_group_name(command.group)
    for queue, offset in command.offsets.items():
        if queue not in vhost.queues:
            raise not_found("queue", command.vhost, queue)
        check_offset(queue, offset)
    existing = vhost.groups.get(command.group)
    if existing is None and len(vhost.groups) >= MAX_GROUPS_PER_VHOST:
        raise precondition_failed(
            f"vhost '{command.vhost}' has {MAX_GROUPS_PER_VHOST} consumer groups, the limit")
    stored = existing.offsets if existing is not None else {}
    changed = tuple((queue, offset) for queue, offset in command.offsets.items()
                    if stored.get(queue) != offset)
    added = sum(1 for queue, _ in changed if queue not in stored)
    if len(stored) + added > MAX_QUEUES_PER_GROUP:
        raise precondition_failed(
            f"consumer group '{command.group}' would hold {len(stored) + added} queues; "
            f"the limit is {MAX_QUEUES_PER_GROUP}")
    if existing is not None and not changed:
        return _nothing
    record = ConsumerGroupRecord(command.vhost, command.group, {**stored, **dict(changed)})

    def commit() -> list[Event]:
        vhost.groups[command.group] = record
        return [GroupOffsetsCommitted(command.vhost, command.group, changed)]

    return commit


def plan_delete_consumer_group(data: StateData, command: DeleteConsumerGroup) -> Plan:
    vhost = data.vhost(command.vhost)
    if command.group not in vhost.groups:
        return _nothing

    def delete() -> list[Event]:
        del vhost.groups[command.group]
        return [ConsumerGroupDeleted(command.vhost, command.group)]

    return delete


def drop_queue_from_groups(vhost: VhostData, queue: str) -> None:
    """A deleted queue leaves every group of its vhost (part of the queue's deletion)."""
    for name, group in list(vhost.groups.items()):
        if queue in group.offsets:
            offsets = {q: o for q, o in group.offsets.items() if q != queue}
            vhost.groups[name] = ConsumerGroupRecord(group.vhost, name, offsets)
