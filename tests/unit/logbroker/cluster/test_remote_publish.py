"""RemotePublisher: one request per leader node, in batch order, confirms combined."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from logbroker.cluster.cluster_rpc import INTERNAL_ERROR
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_message import decode_message
from logbroker.cluster.forwarding_port import ForwardingPort
from logbroker.cluster.remote_publish import RemotePublisher
from logbroker.errors import BrokerError
from logbroker.message import Message

LEADERS = {"qa": "a", "qa2": "a", "qb": "b", "qc": "c", "qx": None, "qr": "a", "qr2": "b"}
EPOCHS = {"qr": 7, "qr2": 3}  # the replicated queues: the epoch this node's metadata has


@dataclass
class FakeRpc:
    requests: list[tuple[str, Envelope, asyncio.Future[Envelope]]] = field(default_factory=list)

    def request(self, peer: str, envelope: Envelope) -> asyncio.Future[Envelope]:
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        self.requests.append((peer, envelope, future))
        return future

    async def answer_of(self, peer: str, envelope: Envelope, future: asyncio.Future[Envelope],
                        timeout_s: float) -> Envelope:
        return await future


def _node(rpc: FakeRpc, lookups: list[str]) -> Any:
    def queue(vhost: str, name: str) -> object:
        lookups.append(name)
        return SimpleNamespace(leader_node=LEADERS[name], replicated=name in EPOCHS,
                               epoch=EPOCHS.get(name, 0))

    state: Any = SimpleNamespace(queue=queue)
    return ForwardingPort("n1", rpc, lambda: state,
                          is_connected=lambda node: node != "c",  # c is cut off
                          applied_index=lambda: 42, request_timeout_s=1.0)


async def test_a_batch_goes_to_each_leader_once_in_order_and_confirms_combine() -> None:
    rpc, lookups = FakeRpc(), []
    publisher = RemotePublisher(_node(rpc, lookups))
    messages = [Message("", f"k{i}", f"m{i}".encode()) for i in range(5)]
    batch = [(messages[0], ["qa", "qb"]), (messages[1], ["qa"]), (messages[2], ["qc"]),
             (messages[3], ["qb", "qa2"]), (messages[4], ["qx"])]
    outcome = asyncio.ensure_future(publisher.publish("/", batch))
    assert sorted(set(lookups)) == ["qa", "qa2", "qb", "qc", "qx"]
    assert len(lookups) == 5  # each queue's leader looked up once per batch
    sent = {peer: envelope for peer, envelope, _ in rpc.requests}
    assert set(sent) == {"a", "b"}  # c is unreachable, qx has no leader
    assert sent["a"].header == {"v": "/", "a": 42, "t": [["qa"], ["qa"], ["qa2"]]}
    assert [decode_message(blob).body for blob in sent["a"].blobs] == [b"m0", b"m1", b"m3"]
    assert sent["b"].header["t"] == [["qb"], ["qb"]]
    assert [decode_message(blob).body for blob in sent["b"].blobs] == [b"m0", b"m3"]
    for peer, _, future in rpc.requests:
        future.set_result(Envelope("ok", {"c": [True, True, False] if peer == "a"
                                          else [True, True]}))
    # m0 confirmed by a and b; m2 and m4 have no reachable leader; a refused m3.
    assert await outcome == [True, True, False, False, False]


async def test_a_failed_request_nacks_only_what_it_carried() -> None:
    rpc = FakeRpc()
    publisher = RemotePublisher(_node(rpc, []))
    batch = [(Message("", "k", b"1"), ["qa"]), (Message("", "k", b"2"), ["qb"])]
    outcome = asyncio.ensure_future(publisher.publish("/", batch))
    for peer, _, future in rpc.requests:
        if peer == "a":
            future.set_exception(BrokerError(INTERNAL_ERROR, "link broke"))
        else:
            future.set_result(Envelope("ok", {"c": [True]}))
    assert await outcome == [False, True]


async def test_a_request_to_a_deposed_leader_is_nacked_as_soon_as_the_queue_moves() -> None:
    rpc = FakeRpc()
    publisher = RemotePublisher(_node(rpc, []))
    batch = [(Message("", "k", b"1"), ["qa"]), (Message("", "k", b"2"), ["qb"])]
    outcome = asyncio.ensure_future(publisher.publish("/", batch))
    publisher.leader_moved("a", "/", "qa2")  # another queue of a: nothing to do with it
    publisher.leader_moved("b", "/", "qa")  # not b's queue
    assert not any(future.done() for _, _, future in rpc.requests)
    # a is paused with its link up: it would never answer; the metadata moved qa away.
    publisher.leader_moved("a", "/", "qa")
    for peer, _, future in rpc.requests:
        if peer == "b":
            future.set_result(Envelope("ok", {"c": [True]}))
    assert await asyncio.wait_for(outcome, 1.0) == [False, True]
    assert not publisher._waiting  # nothing left behind


async def test_a_request_names_the_epoch_meant_for_each_replicated_queue() -> None:
    rpc = FakeRpc()
    publisher = RemotePublisher(_node(rpc, []))
    batch = [(Message("", "k", b"1"), ["qr", "qa"]), (Message("", "k", b"2"), ["qr2"])]
    outcome = asyncio.ensure_future(publisher.publish("/", batch))
    sent = {peer: envelope for peer, envelope, _ in rpc.requests}
    # A leader that no longer leads that epoch nacks them (publish_epochs.py).
    assert sent["a"].header["e"] == {"qr": 7}
    assert sent["b"].header["e"] == {"qr2": 3}
    for peer, _, future in rpc.requests:
        future.set_result(Envelope("ok", {"c": [peer == "a"]}))
    assert await outcome == [True, False]
