"""`RemotePublisher`: publishes routed to queues whose leaders run on other nodes.

A batch's messages for remote queues go to each leader node as one `q.publish`
request (the messages in batch order, each with the names of its target queues
there), so a publisher's messages keep their order on every node. A message is
confirmed only if every leader that got it confirmed it; one whose queue's
leader is unknown or unreachable, or whose request failed or timed out, is
nacked. The request carries the metadata index this node applied, so the
leader first catches up to it (`QueueHost`), and names, per replicated target
queue, the epoch this node's metadata has: a node that no longer leads that epoch
nacks those messages instead of appending them (`publish_epochs.py`).

A request waits for its answer only while its node leads the queues it
names: once the metadata names another leader for one of them
(`leader_moved`), the request fails at once and its messages are nacked. The
old leader may be paused or cut off with its link still up, and would
otherwise hold the publisher for the whole timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from logbroker.cluster.cluster_rpc import INTERNAL_ERROR
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_message import encode_message
from logbroker.cluster.forwarding_port import ForwardingPort
from logbroker.errors import BrokerError
from logbroker.message import Message

logger = logging.getLogger(__name__)

_Entries = list[tuple[int, Message, list[str]]]  # (index in the batch, message, names)


class RemotePublisher:
    def __init__(self, node: ForwardingPort) -> None:
        self._node = node
        # Requests waiting for an answer: (leader, vhost) -> the queue names of each.
        self._waiting: dict[tuple[str, str], dict[asyncio.Future[Envelope], set[str]]] = {}

    def publish(self, vhost: str, batch: Sequence[tuple[Message, Sequence[str]]]
                ) -> Awaitable[list[bool]]:
        per_node: dict[str, _Entries] = {}
        confirmed = [True] * len(batch)
        leaders: dict[str, str | None] = {}  # a batch mostly has one target
        epochs: dict[str, int] = {}  # of the replicated targets: the leader meant
        for index, (message, names) in enumerate(batch):
            for name in names:
                if name in leaders:
                    leader = leaders[name]
                else:
                    leader = leaders[name] = self._reachable_leader(vhost, name, epochs)
                if leader is None:
                    confirmed[index] = False  # its leader is unknown or unreachable
                    continue
                entries = per_node.setdefault(leader, [])
                if entries and entries[-1][0] == index:
                    entries[-1][2].append(name)
                else:
                    entries.append((index, message, [name]))
        requests = []
        for leader, entries in per_node.items():
            targets = {name for _, _, names in entries for name in names}
            header: dict[str, object] = {"v": vhost, "a": self._node.applied_index(),
                                         "t": [names for _, _, names in entries]}
            meant = {name: epochs[name] for name in targets if name in epochs}
            if meant:
                header["e"] = meant
            envelope = Envelope("q.publish", header,
                                tuple(encode_message(message) for _, message, _ in entries))
            future = self._node.rpc.request(leader, envelope)
            self._wait(leader, vhost, future, targets)
            requests.append((leader, envelope, entries, future))
        return self._publish_results(requests, confirmed)

    def _wait(self, leader: str, vhost: str, future: asyncio.Future[Envelope],
              names: set[str]) -> None:
        if future.done():
            return
        waiting = self._waiting.setdefault((leader, vhost), {})
        waiting[future] = names

        def done(_: object) -> None:
            waiting.pop(future, None)
            if not waiting and self._waiting.get((leader, vhost)) is waiting:
                del self._waiting[(leader, vhost)]
        future.add_done_callback(done)

    def leader_moved(self, old: str, vhost: str, name: str) -> None:
        """`old` no longer leads queue `name`: its pending requests naming it fail now."""
        for future, names in list(self._waiting.get((old, vhost), {}).items()):
            if name in names and not future.done():
                future.set_exception(BrokerError(
                    INTERNAL_ERROR, f"queue '{name}' in vhost '{vhost}' has a new leader: "
                    f"{old} no longer leads it"))

    def _reachable_leader(self, vhost: str, name: str, epochs: dict[str, int]) -> str | None:
        """The queue's leader if this node can reach it; the epoch it leads (the one
        this node's metadata has) goes into `epochs` when the queue is replicated."""
        record = self._node.state().queue(vhost, name)
        leader = record.leader_node if record is not None else None
        if leader is None or not self._node.is_connected(leader):
            return None
        if record is not None and record.replicated:
            epochs[name] = record.epoch
        return leader

    async def _publish_results(
        self, requests: list[tuple[str, Envelope, _Entries, asyncio.Future[Envelope]]],
        confirmed: list[bool],
    ) -> list[bool]:
        timeout_s = self._node.request_timeout_s * 6
        for leader, envelope, entries, future in requests:
            try:
                answer = await self._node.rpc.answer_of(leader, envelope, future, timeout_s)
                results = answer.header["c"]
            except BrokerError as error:
                logger.warning("publish forwarded to %s failed: %s", leader, error.text)
                results = [False] * len(entries)
            for (index, _, _), ok in zip(entries, results, strict=True):
                confirmed[index] = confirmed[index] and bool(ok)
        return confirmed
