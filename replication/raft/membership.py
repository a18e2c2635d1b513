"""Who votes and who only listens: the membership of a Raft group.

Changes are single-server (Raft thesis, section 4.1): each change adds or
removes one voter, so any majority of the old voters overlaps any majority of
the new ones and no two leaders can be elected in one term across a change. A
change takes effect on a server as soon as the entry carrying it is in its log,
committed or not; it is undone if that entry is truncated. The leader allows at
most one uncommitted change at a time.

A config-change entry carries the *whole* new membership, not a delta, so a
node that sees only the latest one (or a snapshot) knows the full set.

Learners receive the log but neither vote nor count towards a quorum. The
broker's rule (`desired_roles`) makes the first five nodes voters and the rest
learners: five voters tolerate two failures, and more voters only slow commits.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

MAX_VOTERS = 5


class ConfigChangeError(ValueError):
    """The change makes no sense against the current membership."""


class ChangeKind(Enum):
    ADD_VOTER = "add-voter"  # also promotes a learner
    ADD_LEARNER = "add-learner"  # also demotes a voter
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class ConfigChange:
    kind: ChangeKind
    node_id: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.node_id}"


@dataclass(frozen=True, slots=True)
class Membership:
    voters: frozenset[str]
    learners: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.voters & self.learners:
            both = ", ".join(sorted(self.voters & self.learners))
            raise ConfigChangeError(f"nodes cannot be voter and learner at once: {both}")

    @classmethod
    def of(cls, voters: Iterable[str], learners: Iterable[str] = ()) -> Membership:
        return cls(frozenset(voters), frozenset(learners))

    @property
    def nodes(self) -> frozenset[str]:
        return self.voters | self.learners

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def is_voter(self, node_id: str) -> bool:
        return node_id in self.voters

    def apply(self, change: ConfigChange) -> Membership:
        """The membership after `change`; raises ConfigChangeError if it changes nothing."""
        node = change.node_id
        if change.kind is ChangeKind.ADD_VOTER:
            if node in self.voters:
                raise ConfigChangeError(f"{node} is already a voter")
            return Membership(self.voters | {node}, self.learners - {node})
        if change.kind is ChangeKind.ADD_LEARNER:
            if node in self.learners:
                raise ConfigChangeError(f"{node} is already a learner")
            if self.voters == {node}:
                raise ConfigChangeError(f"{node} is the last voter")
            return Membership(self.voters - {node}, self.learners | {node})
        if node not in self.nodes:
            raise ConfigChangeError(f"{node} is not a member")
        if self.voters == {node}:
            raise ConfigChangeError(f"{node} is the last voter")
        return Membership(self.voters - {node}, self.learners - {node})

    def encode(self) -> bytes:
        """Canonical bytes: equal memberships encode equally on every node."""
        document = {"voters": sorted(self.voters), "learners": sorted(self.learners)}
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Membership:
        document = json.loads(data)
        return cls.of(document["voters"], document["learners"])

    def __str__(self) -> str:
        learners = f" learners={sorted(self.learners)}" if self.learners else ""
        return f"voters={sorted(self.voters)}{learners}"


EMPTY_MEMBERSHIP = Membership(frozenset())


def desired_roles(
    nodes: Sequence[str], current: Membership | None = None, max_voters: int = MAX_VOTERS
) -> Membership:
    """Voters: up to `max_voters` of `nodes`, the rest learners.

    Current voters that are still listed keep their vote, so adding a sixth
    node never reshuffles the voters; free places go to the earliest listed.
    """
    listed = list(dict.fromkeys(nodes))
    keep = [node for node in listed if current is not None and node in current.voters]
    voters = keep[:max_voters]
    for node in listed:
        if len(voters) >= max_voters:
            break
        if node not in voters:
            voters.append(node)
    return Membership.of(voters, (node for node in listed if node not in voters))


def next_change(current: Membership, desired: Membership) -> ConfigChange | None:
    """One single-server step from `current` towards `desired`, or None when there.

    New nodes join as learners first (they catch up without weighing on the
    quorum; the caller promotes them once caught up). Departing voters leave
    before learners are promoted, so a dead voter stops counting as early as
    possible.
    """
    for node in sorted(desired.nodes - current.nodes):
        return ConfigChange(ChangeKind.ADD_LEARNER, node)
    for node in sorted(current.voters - desired.voters):
        kind = ChangeKind.ADD_LEARNER if node in desired.learners else ChangeKind.REMOVE
        return ConfigChange(kind, node)
    for node in sorted(desired.voters - current.voters):
        return ConfigChange(ChangeKind.ADD_VOTER, node)
    for node in sorted(current.learners - desired.nodes):
        return ConfigChange(ChangeKind.REMOVE, node)
    return None


class ConfigHistory:
    """The membership in force at each log index: a base plus the config entries after it.

    The base is the membership of the snapshot the log starts from. Truncating
    the log must truncate the history too, which undoes an uncommitted change.
    """

    def __init__(self, base_index: int, base: Membership) -> None:
        self._indexes: list[int] = [base_index]
        self._memberships: list[Membership] = [base]

    @property
    def latest(self) -> Membership:
        return self._memberships[-1]

    @property
    def latest_index(self) -> int:
        """Index of the entry that set the latest membership (or the base's index)."""
        return self._indexes[-1]

    def record(self, index: int, membership: Membership) -> None:
        if index <= self._indexes[-1]:
            raise ValueError(f"config entry {index} is not after {self._indexes[-1]}")
        self._indexes.append(index)
        self._memberships.append(membership)

    def at(self, index: int) -> Membership:
        """The membership in force once the log is applied up to `index`."""
        position = bisect.bisect_right(self._indexes, index) - 1
        return self._memberships[max(position, 0)]

    def truncate_from(self, index: int) -> None:
        """Forget changes at or after `index` (their entries were overwritten)."""
        keep = max(bisect.bisect_left(self._indexes, index), 1)
        del self._indexes[keep:]
        del self._memberships[keep:]

    def compact_to(self, index: int) -> None:
        """Make the membership at `index` the new base; older changes are no longer needed."""
        position = max(bisect.bisect_right(self._indexes, index) - 1, 0)
        base = self._memberships[position]
        del self._indexes[: position + 1]
        del self._memberships[: position + 1]
        self._indexes.insert(0, index)
        self._memberships.insert(0, base)

    def reset(self, index: int, membership: Membership) -> None:
        self._indexes = [index]
        self._memberships = [membership]
