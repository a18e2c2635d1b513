"""Loop prevention by cluster name (`x-received-from`) and the cluster's one name."""

from __future__ import annotations

from logbroker.cluster_name import cluster_name
from logbroker.federation.received_from import RECEIVED_FROM, forwards, received_from, with_hop
from logbroker.metadata import MetadataState
from logbroker.metadata.commands import AddClusterNode, RemoveClusterNode


def hop(cluster: str) -> dict[str, object]:
    return {"uri": "amqp://h", "exchange": "x", "cluster-name": cluster, "redelivered": False}


def test_a_message_never_seen_here_goes_on_within_max_hops() -> None:
    assert forwards([], 1, "east")
    assert forwards([hop("west")], 2, "east")
    assert not forwards([hop("west")], 1, "east")  # max-hops 1: one link crossed is enough


def test_a_message_that_was_in_this_cluster_is_not_forwarded_again() -> None:
    # It left "east" (its cluster name is recorded by the link that took it from there)
    # and comes back through another broker: dropped, whatever max-hops allows.
    assert not forwards([hop("east"), hop("west")], 10, "east")
    assert forwards([hop("east"), hop("west")], 10, "north")


def test_entries_append_and_odd_headers_count_as_none() -> None:
    headers = with_hop({"a": 1}, hop("west"))
    headers = with_hop(headers, hop("east"))
    assert headers["a"] == 1
    assert [entry["cluster-name"] for entry in headers[RECEIVED_FROM]] == ["west", "east"]
    assert received_from({RECEIVED_FROM: "not a list"}) == []
    assert forwards([None, "junk"], 5, "east")


def test_every_node_of_a_cluster_goes_by_one_name_a_standalone_by_its_own() -> None:
    state = MetadataState.bootstrap("hash")
    assert cluster_name(state, "solo@host") == "solo@host"
    for name in ("n2", "n3", "n1"):
        state.apply(AddClusterNode(name, "127.0.0.1", 25672, 5672, 15672, 1))
    assert {cluster_name(state, node) for node in ("n1", "n2", "n3")} == {"n1"}
    state.apply(RemoveClusterNode("n1"))
    assert cluster_name(state, "n3") == "n2"
