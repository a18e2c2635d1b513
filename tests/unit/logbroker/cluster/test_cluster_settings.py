"""Peer specs (`name@host:port`) and where a node says it can be reached."""

import pytest

from logbroker.cluster.cluster_settings import (
    DEFAULT_CLUSTER_PORT,
    ClusterSettings,
    PeerSpecError,
    parse_peer,
    parse_peers,
)
from replication.transport import PeerAddress


@pytest.mark.parametrize(("spec", "expected"), [
    ("n1@10.0.0.1:25672", PeerAddress("n1", "10.0.0.1", 25672)),
    ("rabbit@host-a:1", PeerAddress("rabbit", "host-a", 1)),
    ("  n2@example.com:65535  ", PeerAddress("n2", "example.com", 65535)),
    # The name may itself contain '@' (RabbitMQ's rabbit@host): the last '@' splits.
    ("rabbit@node1@10.0.0.7:25672", PeerAddress("rabbit@node1", "10.0.0.7", 25672)),
    ("a@b@c@d:5", PeerAddress("a@b@c", "d", 5)),
    # IPv6 addresses go in brackets; the brackets are not part of the host.
    ("n3@[::1]:25672", PeerAddress("n3", "::1", 25672)),
    ("rabbit@n4@[fe80::1:2]:4000", PeerAddress("rabbit@n4", "fe80::1:2", 4000)),
    ("n5@[2001:db8::8a2e:370:7334]:443", PeerAddress("n5", "2001:db8::8a2e:370:7334", 443)),
])
def test_parse_peer(spec: str, expected: PeerAddress) -> None:
    assert parse_peer(spec) == expected


@pytest.mark.parametrize("spec", [
    "", "   ", "host:25672", "@host:25672", "n1@host", "n1@:25672", "n1@host:",
    "n1host25672", "n1@host:port", "n1@host:0", "n1@host:65536", "n1@host:-1",
    "n1@host:99999999999999999999", "n1@host:1.5", "n1@[::1]",
])
def test_parse_peer_refuses(spec: str) -> None:
    with pytest.raises(PeerSpecError):
        parse_peer(spec)


def test_peer_spec_error_is_a_value_error() -> None:
    assert issubclass(PeerSpecError, ValueError)


def test_parse_peers() -> None:
    peers = parse_peers("a@h1:1, rabbit@b@[::1]:2 ,,c@h3:3,")
    assert peers == (PeerAddress("a", "h1", 1), PeerAddress("rabbit@b", "::1", 2),
                     PeerAddress("c", "h3", 3))


@pytest.mark.parametrize("specs", ["", " ", ",", " , ,"])
def test_parse_peers_of_nothing_is_empty(specs: str) -> None:
    assert parse_peers(specs) == ()


@pytest.mark.parametrize("specs", [
    "a@h1:1,a@h2:2",  # same name, other address
    "a@h1:1,b@h2:2,a@h1:1",  # listed twice, same address
    "rabbit@x@h1:1, rabbit@x@[::1]:2",
])
def test_parse_peers_refuses_duplicate_names(specs: str) -> None:
    with pytest.raises(PeerSpecError, match="twice"):
        parse_peers(specs)


def test_parse_peers_allows_one_address_for_two_names() -> None:
    assert len(parse_peers("a@h:1,b@h:1")) == 2


def test_parse_peers_propagates_a_bad_spec() -> None:
    with pytest.raises(PeerSpecError, match="port"):
        parse_peers("a@h:1,b@h:nope")


def test_a_too_long_name_is_a_peer_spec_error() -> None:
    with pytest.raises(PeerSpecError):
        parse_peer("n" * 300 + "@host:25672")


def test_empty_bracketed_host_is_refused() -> None:
    with pytest.raises(PeerSpecError):
        parse_peer("n1@[]:25672")


def test_unbracketed_ipv6_without_port_is_refused() -> None:
    with pytest.raises(PeerSpecError):
        parse_peer("n1@fe80::1")


# ---------------------------------------------------------------- settings


def test_defaults() -> None:
    settings = ClusterSettings("n1", b"secret")
    assert settings.cluster_port == DEFAULT_CLUSTER_PORT == 25672
    assert settings.bind_host == "0.0.0.0"
    assert settings.peers == () and not settings.join


def test_advertised_host_is_the_own_peer_entry_when_listed() -> None:
    peers = (PeerAddress("n1", "node1.example", 25672), PeerAddress("n2", "10.0.0.2", 25672))
    settings = ClusterSettings("n1", b"s", bind_host="10.9.9.9", peers=peers)
    assert settings.advertised_host == "node1.example"


def test_advertised_host_ipv6_peer_entry_has_no_brackets() -> None:
    settings = ClusterSettings("n1", b"s", peers=parse_peers("n1@[fd00::1]:25672"))
    assert settings.advertised_host == "fd00::1"


@pytest.mark.parametrize(("bind_host", "expected"), [
    ("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("", "127.0.0.1"),
    ("10.1.2.3", "10.1.2.3"), ("127.0.0.1", "127.0.0.1"), ("fd00::7", "fd00::7"),
    ("node.local", "node.local"),
])
def test_advertised_host_falls_back_to_the_bind_address(bind_host: str, expected: str) -> None:
    # Not listed among its peers (a joining node, or peers naming only the others).
    settings = ClusterSettings("n1", b"s", bind_host=bind_host,
                               peers=(PeerAddress("n2", "10.0.0.2", 25672),))
    assert settings.advertised_host == expected


def test_others_excludes_this_node_and_keeps_order() -> None:
    peers = parse_peers("c@h:3,n1@h:1,a@h:2")
    settings = ClusterSettings("n1", b"s", peers=peers)
    assert [peer.name for peer in settings.others()] == ["c", "a"]
    assert ClusterSettings("n1", b"s").others() == ()
