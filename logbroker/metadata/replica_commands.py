"""Handlers for a replicated queue's leader epoch and in-sync set.

A replicated queue (more than one member) has one leader per epoch. The
epoch fences: every replication message and forwarded operation carries
it, and a node that leads an older epoch is stale (DESIGN.md section 6).

- `SetQueueInSync`: the leader of `epoch` changes the in-sync set. Refused
  (406) when the epoch is not the queue's current one, so a fenced leader
  cannot change anything; the set must start with the leader and name only
  members, once each. The same set again changes nothing.
- `ElectQueueLeader`: ends `epoch` and starts `epoch + 1` with `leader_node`
  (a member) and the given in-sync set (leader first), less members that left
  the in-sync set meanwhile. When the queue has moved past `epoch` already (a
  concurrent election won), or the chosen node has left the in-sync set since
  the decision (its leader shrank it), it changes nothing: deciding twice must
  not elect twice, nor from a stale view. Only `out_of_sync` (RabbitMQ's
  `ha-promote-on-failure: always`) elects a node outside the set.

Both answer 404 for a queue that does not exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from logbroker.metadata.commands import ElectQueueLeader, SetQueueInSync
from logbroker.metadata.errors import not_found, precondition_failed
from logbroker.metadata.events import Event, QueueInSyncChanged, QueuePlacementChanged
from logbroker.metadata.records import QueueRecord
from logbroker.metadata.state_data import StateData

Plan = Callable[[], list[Event]]


def _nothing() -> list[Event]:
    return []


def _queue(data: StateData, vhost: str, name: str) -> QueueRecord:
    queue = data.vhost(vhost).queues.get(name)
    if queue is None:
        raise not_found("queue", vhost, name)
    return queue


def check_in_sync(queue: QueueRecord, leader: str, in_sync: tuple[str, ...]) -> None:
    if not in_sync or in_sync[0] != leader:
        raise precondition_failed(
            f"in-sync replicas {list(in_sync)} must start with the leader node '{leader}'")
    if len(set(in_sync)) != len(in_sync):
        raise precondition_failed(f"in-sync replicas {list(in_sync)} name a node twice")
    strangers = [node for node in in_sync if node not in queue.members]
    if strangers:
        raise precondition_failed(
            f"in-sync replicas {strangers} are not members of queue '{queue.name}' "
            f"({list(queue.members)})")


def plan_set_queue_in_sync(data: StateData, command: SetQueueInSync) -> Plan:
    queue = _queue(data, command.vhost, command.name)
    if command.epoch != queue.epoch or queue.leader_node is None:
        raise precondition_failed(
            f"queue '{queue.name}' in vhost '{queue.vhost}' is at epoch {queue.epoch}, "
            f"not {command.epoch}: its leader changed")
    check_in_sync(queue, queue.leader_node, command.in_sync)
    if command.in_sync == queue.in_sync:
        return _nothing
    changed = dataclasses.replace(queue, in_sync=command.in_sync)

    def change() -> list[Event]:
        data.vhost(command.vhost).queues[command.name] = changed
        return [QueueInSyncChanged(changed)]

    return change


def plan_elect_queue_leader(data: StateData, command: ElectQueueLeader) -> Plan:
    queue = _queue(data, command.vhost, command.name)
    if command.epoch != queue.epoch:
        return _nothing
    if command.leader_node not in queue.members:
        raise precondition_failed(
            f"node '{command.leader_node}' is not a member of queue '{queue.name}' "
            f"({list(queue.members)})")
    if not command.out_of_sync and command.leader_node not in queue.in_sync:
        return _nothing  # decided from an older in-sync set: the controller decides again
    check_in_sync(queue, command.leader_node, command.in_sync)
    in_sync = (command.leader_node, *(n for n in command.in_sync[1:] if n in queue.in_sync))
    members = (command.leader_node,
               *(node for node in queue.members if node != command.leader_node))
    elected = dataclasses.replace(queue, leader_node=command.leader_node, members=members,
                                  epoch=queue.epoch + 1, in_sync=in_sync)

    def elect() -> list[Event]:
        data.vhost(command.vhost).queues[command.name] = elected
        return [QueuePlacementChanged(elected, queue.leader_node, queue.members)]

    return elect
