"""The next step that brings a queue's replicas in line with its policy (pure).

RabbitMQ's `ha-mode` policies may change while a queue lives, and nodes join
the cluster. Seed 002 ("nodes Policy and Migrating Leaders") describes what
follows a `nodes` change: the new replicas are added, the leader moves once
they are in sync, and the replicas no longer wanted are dropped. One step at
a time, each one a committed metadata change, so a controller that fails
over in the middle carries on from wherever the record stands:

1. `add`: the wanted members that are up and missing join (they copy the
   queue through the fetch stream);
2. `transfer`: if the leader is not wanted, it hands over to a wanted member
   that is in sync and up (none yet: wait);
3. `drop`: once every wanted member that is up is in sync, the unwanted ones
   leave.

While 2 or 3 waits for wanted members to catch up, the step is `sync`: the
leader is asked to copy them the whole queue (under `ha-sync-mode: manual` a
new member would otherwise take new messages only, and the move would never
end).

Wanted members: `ha-mode: nodes` names them (those known to the cluster;
none known: keep what there is, as RabbitMQ does); `all` is every known
node; a count (`exactly`, `x-queue-replicas`) keeps the current members
and adds the up nodes holding the fewest replicas, or drops out-of-sync
and down ones first, until the count is met. Hosts (issue 28): among the up
nodes, the count is filled by `queue_placement.spread_copies`, so a member
on a host that already holds a copy gives way to an up node (member or not)
on a host or zone without one: it is added, synced, and the duplicate is
dropped. A down member that the count keeps stays (it is not replaced
while down); a member removed from the cluster (`cluster remove-node`:
down for good) is replaced by the same spread, a copy on a host or zone
without one first, and dropped once the new one is in sync. With every
node on one host, or each on its own, the choice is the one without hosts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from logbroker.queue_placement import (
    AllReplicas,
    NodeReplicas,
    NodeView,
    ReplicaSpec,
    desired_member_count,
    spread_copies,
)


@dataclass(frozen=True, slots=True)
class ReplicaStep:
    kind: Literal["add", "transfer", "drop", "sync"]
    members: tuple[str, ...]  # the new replica set, leader first (add, drop)
    target: str | None = None  # the new leader (transfer)


def wanted_members(spec: ReplicaSpec, leader: str, members: Sequence[str],
                   in_sync: Sequence[str], nodes: Sequence[NodeView],
                   member_counts: Mapping[str, int],
                   removed: Collection[str] = ()) -> tuple[str, ...]:
    """`removed`: nodes removed from the cluster (known neither to the metadata nor to
    Raft; a node missing from `nodes` alone may be a founding member not recorded yet)."""
    known = [node.name for node in nodes]
    up = {node.name for node in nodes if node.up}
    if isinstance(spec, NodeReplicas):
        listed = tuple(node for node in spec.nodes if node in known)
        return listed or tuple(members)
    if isinstance(spec, AllReplicas):
        return tuple(sorted(known))
    count = desired_member_count(spec, known)
    gone = (set(removed) & set(members)) - set(known) - {leader}
    # Keep the leader, then in-sync members, then the others, the removed last; drop
    # from the end.
    def rank(member: str) -> tuple[int, int, int, str]:
        return (member != leader, member in gone, member not in in_sync or member not in up,
                member)
    ranked = sorted(dict.fromkeys(members), key=rank)
    spare = sorted((n for n in up if n not in ranked), key=lambda n: (member_counts.get(n, 0), n))
    order = ranked + spare
    # The down members the count keeps stay where they are; the up ones are spread, and
    # a removed one's place goes to an up node chosen the same way.
    pinned = [n for n in order[:count] if n == leader or (n not in up and n not in gone)]
    picked = set(spread_copies(pinned, [n for n in order if n in up], count, nodes))
    return tuple(n for n in order if n in picked)


def next_step(spec: ReplicaSpec, leader: str, members: Sequence[str], in_sync: Sequence[str],
              nodes: Sequence[NodeView], member_counts: Mapping[str, int],
              removed: Collection[str] = ()) -> ReplicaStep | None:
    wanted = wanted_members(spec, leader, members, in_sync, nodes, member_counts, removed)
    up = {node.name for node in nodes if node.up}
    missing = [n for n in wanted if n not in members and n in up]
    if missing:
        return ReplicaStep("add", (*members, *missing))
    lagging = [n for n in wanted if n in up and n in members and n not in in_sync]
    if leader not in wanted:
        targets = [n for n in wanted if n in in_sync and n in up]
        if targets:
            return ReplicaStep("transfer", tuple(members), targets[0])
        return ReplicaStep("sync", tuple(members)) if lagging else None
    extra = [m for m in members if m not in wanted]
    if extra:
        if not lagging:
            return ReplicaStep("drop", tuple(m for m in members if m in wanted))
        return ReplicaStep("sync", tuple(members))
    return None
