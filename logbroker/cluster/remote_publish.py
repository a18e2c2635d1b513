"""`RemotePublisher`: publishes routed to queues whose leaders run on other nodes.

A batch's messages for remote queues go to each leader node as one `q.publish`
request (the messages in batch order, each with the names of its target queues
there), so a publisher's messages keep their order on every node. A message is
confirmed only if every leader that got it confirmed it; one whose queue's
leader is unknown or unreachable, or whose request failed or timed out, is
nacked. The request carries the metadata index this node applied, so the
leader first catches up to it (`QueueHost`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_message import encode_message
from logbroker.errors import BrokerError
from logbroker.message import Message

if TYPE_CHECKING:
    from logbroker.cluster.cluster_node import ClusterNode

logger = logging.getLogger(__name__)

_Entries = list[tuple[int, Message, list[str]]]  # (index in the batch, message, names)


class RemotePublisher:
    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    def publish(self, vhost: str, batch: Sequence[tuple[Message, Sequence[str]]]
                ) -> Awaitable[list[bool]]:
        per_node: dict[str, _Entries] = {}
        confirmed = [True] * len(batch)
        leaders: dict[str, str | None] = {}  # a batch mostly has one target
        for index, (message, names) in enumerate(batch):
            for name in names:
                if name in leaders:
                    leader = leaders[name]
                else:
                    leader = leaders[name] = self._reachable_leader(vhost, name)
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
            envelope = Envelope("q.publish", {
                "v": vhost, "a": self._node.driver.applied_index,
                "t": [names for _, _, names in entries]},
                tuple(encode_message(message) for _, message, _ in entries))
            requests.append((leader, envelope, entries, self._node.rpc.request(leader, envelope)))
        return self._publish_results(requests, confirmed)

    def _reachable_leader(self, vhost: str, name: str) -> str | None:
        record = self._node.metadata.state.queue(vhost, name)
        leader = record.leader_node if record is not None else None
        return leader if leader is not None and self._node.transport.is_connected(leader) else None

    async def _publish_results(
        self, requests: list[tuple[str, Envelope, _Entries, asyncio.Future[Envelope]]],
        confirmed: list[bool],
    ) -> list[bool]:
        timeout_s = self._node.settings.proposal_timeout_s * 6
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
