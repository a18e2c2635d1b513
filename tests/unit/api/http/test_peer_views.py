"""`PeerViews`: every other member up is asked once; one that fails is left out; an
answer is cut at MAX_ROWS; a close goes only to a member up, never to this node."""

from __future__ import annotations

from typing import Any, cast

from api.http.peer_views import TIMEOUT_S, PeerViews
from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.member_rows import MAX_ROWS
from logbroker.errors import BrokerError


class FakeRpc:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []

    async def call(self, peer: str, envelope: Envelope, timeout_s: float) -> Envelope:
        self.calls.append((peer, envelope.op, timeout_s))
        if peer == "n3":
            raise BrokerError(541, "cluster node n3 did not answer m.views within 2 s")
        if envelope.op == "m.close":
            return Envelope("ok", {"closed": envelope.header["name"] == "c1"})
        count = MAX_ROWS + 5 if peer == "n4" else 1
        return Envelope("ok", {"rows": [{"node": peer}] * count})


def peers(rpc: FakeRpc) -> PeerViews:
    return PeerViews(cast(ClusterRpc, rpc), "n1", lambda: ["n1", "n2", "n3", "n4"])


async def test_every_other_member_is_asked_once_and_a_silent_one_left_out() -> None:
    rpc = FakeRpc()
    views: list[dict[str, Any]] = await peers(rpc).gather({"kind": "connections"})
    assert sorted(rpc.calls) == [("n2", "m.views", TIMEOUT_S), ("n3", "m.views", TIMEOUT_S),
                                 ("n4", "m.views", TIMEOUT_S)]
    assert views.count({"node": "n2"}) == 1 and {"node": "n3"} not in views
    assert views.count({"node": "n4"}) == MAX_ROWS


async def test_a_close_goes_to_the_member_holding_it() -> None:
    rpc = FakeRpc()
    assert await peers(rpc).close("n2", "c1", "why") is True
    assert await peers(rpc).close("n2", "c2", "why") is False
    assert await peers(rpc).close("n1", "c1", "why") is False  # this node: closed locally
    assert await peers(rpc).close("n9", "c1", "why") is False  # not a member up
    assert [peer for peer, _, _ in rpc.calls] == ["n2", "n2"]
