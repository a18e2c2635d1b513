"""`/api/cluster`'s hosts: the members grouped by machine, and `cluster status`'s table."""

from __future__ import annotations

from api.cli.cluster_commands import render_status
from logbroker.cluster.cluster_membership import hosts_document


def member(name: str, host_id: str = "", zone: str = "", up: bool = True) -> dict[str, object]:
    return {"name": name, "host": "127.0.0.1", "cluster_port": 1, "role": "voter",
            "status": "up" if up else "down", "host_id": host_id, "zone": zone}


NODES = [member("a", "hA", "z1"), member("a-w2", "hA", "z1", up=False), member("b", "hB"),
         member("old")]


def test_members_are_grouped_by_host_with_zone_and_up_count() -> None:
    assert hosts_document(NODES) == [
        {"host_id": "hA", "zone": "z1", "workers": ["a", "a-w2"], "up": 1},
        {"host_id": "hB", "zone": "", "workers": ["b"], "up": 1},
        {"host_id": "old", "zone": "", "workers": ["old"], "up": 1},  # its own machine
    ]


def test_the_status_text_lists_hosts_and_their_workers() -> None:
    text = render_status({"cluster_name": "c", "node": "a", "leader": "a", "nodes": NODES,
                          "hosts": hosts_document(NODES)}, now_ms=0)
    lines = text.splitlines()
    start = lines.index("hosts and their workers:")
    assert lines[start + 1].split() == ["host", "zone", "workers", "up"]
    assert lines[start + 2].split() == ["hA", "z1", "a,", "a-w2", "1/2"]
    assert lines[start + 3].split() == ["hB", "b", "1/1"]


def test_a_membership_request_carries_the_host_and_zone_and_reads_an_older_one() -> None:
    from logbroker.cluster.cluster_membership import _decode, _encode

    data = _encode("cluster.add_node", "a-w2", "127.0.0.1", 25673, ("hA", "z1"))
    assert _decode(data) == ("cluster.add_node", "a-w2", "127.0.0.1", 25673, ("hA", "z1"))
    older = b'["cluster.add_node", "n4", "10.0.0.4", 25672]'
    assert _decode(older) == ("cluster.add_node", "n4", "10.0.0.4", 25672, ("", ""))
