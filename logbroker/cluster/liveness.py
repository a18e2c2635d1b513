"""`LivenessTracker`: the controller's view of which nodes are alive (pure).

Theory of operation. Every node sends a heartbeat to the Raft leader (the
controller) every `heartbeat_ms`. The controller remembers when it last heard
from each node; a node it has not heard from for `session_timeout_ms` is down.
What the controller *decides* goes into the metadata log as
`SetNodeLiveness`, so every node (and a later controller) sees the same
up/down status and the time it changed; this tracker only computes which
commands to propose. Heartbeats also carry the node's addresses, so a node
the membership knows but the metadata does not (it just joined) is
registered with `AddClusterNode`.

A node whose link to the controller breaks and stays broken for
`link_grace_ms` is down too, without waiting for the session timeout: a
killed process closes its sockets at once, and failover should not wait
seconds for what the transport already knows. A link that comes back within
the grace period (a blip) changes nothing. A node that is paused keeps its
sockets open; only the session timeout finds it.

Invariants:
- a controller that just took over gives every node a fresh grace period
  (`took_over`): it cannot know when the old controller last heard from them;
- the controller never declares itself down;
- only Raft members are registered: a node removed from the membership stays
  removed even if it keeps sending heartbeats;
- a decision already proposed is not proposed again until `session_timeout_ms`
  passed (proposals in flight), so a slow commit does not flood the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from logbroker.metadata import Command
from logbroker.metadata.commands import AddClusterNode, SetNodeLiveness
from logbroker.metadata.records import ClusterNodeRecord


@dataclass(frozen=True)
class NodeAddress:
    """What a heartbeat says about its sender."""

    name: str
    host: str
    cluster_port: int
    amqp_port: int
    http_port: int
    host_id: str = ""  # the machine it runs on ("": its own), placement's unit
    zone: str = ""


class LivenessTracker:
    def __init__(self, self_name: str, session_timeout_ms: int,
                 link_grace_ms: int = 500) -> None:
        self._self = self_name
        self._timeout_ms = session_timeout_ms
        self._link_grace_ms = link_grace_ms
        self._last_heard: dict[str, int] = {}
        self._link_lost: dict[str, int] = {}
        self._addresses: dict[str, NodeAddress] = {}
        self._proposed: dict[tuple[str, object], int] = {}

    def took_over(self, members: Iterable[str], now_ms: int,
                  disconnected: Iterable[str] = ()) -> None:
        """Start as controller; nodes the transport has no link to get only what is left
        of the link grace since this node lost its link to them (the old controller may
        be the node that just died)."""
        self._last_heard = {name: now_ms for name in members}
        self._link_lost = {name: self._link_lost.get(name, now_ms) for name in disconnected
                           if name != self._self}
        self._addresses.clear()  # another controller may have recorded newer ones
        self._proposed.clear()

    def heard(self, address: NodeAddress, now_ms: int) -> None:
        self._last_heard[address.name] = now_ms
        self._addresses[address.name] = address
        self._link_lost.pop(address.name, None)

    def link_lost(self, name: str, now_ms: int) -> None:
        """The transport lost its link to `name` (kept from the first loss until restored)."""
        self._link_lost.setdefault(name, now_ms)

    def link_restored(self, name: str) -> None:
        self._link_lost.pop(name, None)

    def is_alive(self, name: str, now_ms: int) -> bool:
        if name == self._self:
            return True
        lost = self._link_lost.get(name)
        if lost is not None and now_ms - lost >= self._link_grace_ms:
            return False
        last = self._last_heard.get(name)
        return last is not None and now_ms - last < self._timeout_ms

    def decide(self, members: Iterable[str], recorded: Iterable[ClusterNodeRecord],
               now_ms: int, wall_ms: int | None = None) -> list[Command]:
        """The commands that bring the metadata in line with what the controller sees;
        they record `wall_ms` (default `now_ms`) as the time of the change."""
        stamp = now_ms if wall_ms is None else wall_ms
        known = {record.name: record for record in recorded}
        commands: list[Command] = []
        for name in sorted(set(members)):
            self._last_heard.setdefault(name, now_ms)  # joined since: a grace period too
            record = known.get(name)
            address = self._addresses.get(name)
            if address is not None and (record is None or _moved(record, address)):
                self._propose(commands, ("address", address), AddClusterNode(
                    name, address.host, address.cluster_port, address.amqp_port,
                    address.http_port, stamp, address.host_id, address.zone), now_ms)
                continue
            if record is None:
                continue
            alive = self.is_alive(name, now_ms)
            if alive != record.up:
                self._propose(commands, (name, alive), SetNodeLiveness(name, alive, stamp),
                              now_ms)
        return commands

    def _propose(self, commands: list[Command], key: tuple[str, object], command: Command,
                 now_ms: int) -> None:
        proposed_at = self._proposed.get(key)
        if proposed_at is not None and now_ms - proposed_at < self._timeout_ms:
            return
        self._proposed[key] = now_ms
        commands.append(command)


def _moved(record: ClusterNodeRecord, address: NodeAddress) -> bool:
    if (record.host, record.cluster_port, record.amqp_port, record.http_port) != (
            address.host, address.cluster_port, address.amqp_port, address.http_port):
        return True
    # An empty label keeps the recorded one (AddClusterNode), so it is no change.
    return any(said and said != kept for said, kept in (
        (address.host_id, record.host_id), (address.zone, record.zone)))
