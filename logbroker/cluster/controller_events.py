"""What the controller core hears (events) and what it asks for (effects).

The controller (controller.py) is a pure core: the driver
(controller_driver.py) feeds it these events with a `ClusterView` of the
moment, and carries out the effects it returns, in order, through its ports.
Every request the core makes carries a `request` number of its own; the
answer event names it back, so the core never waits on anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.cluster.liveness import NodeAddress
from logbroker.metadata import Command, MetadataState
from replication.queue.failover import ReplicaStatus


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the core reads of the world when it decides (read-only)."""

    now_ms: int  # monotonic: timers, heartbeats, deadlines
    wall_ms: int  # timestamps written into the metadata (`since_ms`)
    leading: bool  # this node is the Raft leader, hence the controller
    leader: str | None  # the Raft leader this node knows
    members: frozenset[str]  # the Raft membership
    state: MetadataState  # this node's applied metadata
    applied_index: int  # how much of the Raft log `state` holds


class RequestIds:
    """Request numbers unique within one controller (its sub-cores share them)."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last += 1
        return self._last


# ------------------------------------------------------------------ events

@dataclass(frozen=True, slots=True)
class Heard:
    """A node's heartbeat reached this node (as controller)."""

    address: NodeAddress


@dataclass(frozen=True, slots=True)
class LinkLost:
    peer: str


@dataclass(frozen=True, slots=True)
class LinkRestored:
    peer: str


@dataclass(frozen=True, slots=True)
class TookOver:
    """This node became the Raft leader; `disconnected` are the members it has no link to."""

    disconnected: frozenset[str]


@dataclass(frozen=True, slots=True)
class StatusAnswered:
    """A member's answer to `AskStatus` (None: it has no copy, or refused)."""

    request: int
    status: ReplicaStatus | None


@dataclass(frozen=True, slots=True)
class ProposalDone:
    """A `Propose` ended: applied (`error` None) or not (the reason)."""

    request: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class HandoverDone:
    """A `HandOver` ended (`error` None: done)."""

    request: int
    error: str | None = None


ControllerEvent = (Heard | LinkLost | LinkRestored | TookOver | StatusAnswered | ProposalDone
                   | HandoverDone)


# ----------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class Propose:
    """Make `command` take effect cluster-wide; answer with `ProposalDone(request)`."""

    request: int
    command: Command


@dataclass(frozen=True, slots=True)
class AskStatus:
    """Ask `member` for its copy of the queue (`r.status`), within `timeout_ms`; answer
    with `StatusAnswered(request)` (or never: the election's deadline covers it)."""

    request: int
    member: str
    vhost: str
    queue: str
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class HandOver:
    """Ask the queue's leader to `sync` its members, or to `transfer` its leadership to
    `target`; answer with `HandoverDone(request)`."""

    request: int
    kind: str  # "sync" | "transfer"
    vhost: str
    queue: str
    target: str | None = None


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    """Tell the controller (`leader`) that this node is alive, and at which addresses."""

    leader: str
    address: NodeAddress


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Call the core's `tick` at (or just after) `at_ms` on the monotonic clock."""

    at_ms: int


@dataclass(frozen=True, slots=True)
class Notice:
    """Something an operator should read (a `logging` level and the text)."""

    level: int
    text: str


ControllerEffect = Propose | AskStatus | HandOver | SendHeartbeat | SetTimer | Notice
