"""Publisher flow control across nodes (see logbroker/queue/publisher_flow.py).

A queue that holds its publishers back must also hold those whose publishes
reach it through another node: a client on node A publishing to a queue led
by node B is read by A, not B. So:

- on B, `HoldAnnouncer`: when a forwarded publish batch leaves one of B's
  queues holding its publishers, B tells the sending node (`q.flow`, held), and
  again when that hold ends (released), once per hold and node;
- on A, `RemoteHolds`: one future per held (node, vhost, queue); a publish A
  forwards to such a queue adds it to the publisher's holds, as a local queue's
  hold does, so the connection is not read until B lets go. A connection that
  consumes from the queue is not held (its own acks would stop).

Every hold ends: B bounds its holds and says when they end, A releases all of
a node's holds when its link drops, and A's readers time out their wait.
A publisher is held from when the notice arrives, a round trip after the batch
that began the hold: credit flow across nodes is as late as one link's latency.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable

from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_consumers import ForwardedConsumers
from logbroker.queue.flow_gate import of_connection
from logbroker.queue.queue_shell import QueueShell

__all__ = ["FLOW_OP", "HoldAnnouncer", "RemoteHolds"]

FLOW_OP = "q.flow"

Notify = Callable[[str, Envelope], object]  # (peer, notice)


class HoldAnnouncer:
    """B's side: tell the nodes that publish to a held queue."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify
        self._told: dict[tuple[str, str, str], asyncio.Future[None]] = {}

    def after_publish(self, peer: str, vhost: str, shells: Iterable[QueueShell]) -> None:
        """`peer` just published to `shells`: tell it of each hold it has not heard of."""
        for shell in shells:
            hold = shell.flow_gate.hold()
            key = (peer, vhost, shell.name)
            if hold is None or self._told.get(key) is hold:
                continue
            self._told[key] = hold
            self._notify(peer, Envelope(FLOW_OP, {"v": vhost, "q": shell.name, "held": True}))
            hold.add_done_callback(functools.partial(self._released, key))

    def _released(self, key: tuple[str, str, str], hold: asyncio.Future[None]) -> None:
        if self._told.get(key) is not hold:
            return
        del self._told[key]
        peer, vhost, name = key
        self._notify(peer, Envelope(FLOW_OP, {"v": vhost, "q": name, "held": False}))

    def peer_down(self, peer: str) -> None:
        for key in [key for key in self._told if key[0] == peer]:
            del self._told[key]


class RemoteHolds:
    """A's side: the queues led elsewhere that hold their publishers now.

    `leader_of(vhost, name)`: the node leading a queue; `consumers`: this node's
    forwarded consumers, by which a publishing connection that consumes from a
    held queue is told apart."""

    def __init__(self, leader_of: Callable[[str, str], str | None],
                 consumers: ForwardedConsumers) -> None:
        self._leader_of = leader_of
        self._consumers = consumers
        self._held: dict[tuple[str, str, str], asyncio.Future[None]] = {}

    def on_notice(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        key = (peer, str(header["v"]), str(header["q"]))
        if header.get("held"):
            if key not in self._held:
                self._held[key] = asyncio.get_running_loop().create_future()
        else:
            self._release(key)

    def holds(self, vhost: str, names: Iterable[str], publisher_id: str
              ) -> list[asyncio.Future[None]]:
        """The holds of the queues `names`, except those that connection
        `publisher_id` consumes from."""
        if not self._held:
            return []
        found = []
        for name in names:
            node = self._leader_of(vhost, name)
            hold = self._held.get((node, vhost, name)) if node is not None else None
            if hold is not None and not self._consumes(publisher_id, vhost, name):
                found.append(hold)
        return found

    def _consumes(self, connection_id: str, vhost: str, name: str) -> bool:
        return bool(connection_id) and any(
            c.vhost == vhost and c.queue == name and of_connection(c.channel_key, connection_id)
            for c in self._consumers.matching())

    def peer_down(self, peer: str) -> None:
        for key in [key for key in self._held if key[0] == peer]:
            self._release(key)

    def leader_moved(self, old: str, vhost: str, name: str) -> None:
        """The queue is led elsewhere now: `old`'s hold on it says nothing any more."""
        self._release((old, vhost, name))

    def _release(self, key: tuple[str, str, str]) -> None:
        hold = self._held.pop(key, None)
        if hold is not None and not hold.done():
            hold.set_result(None)
