"""`ClusterRpc.post`: notices batched per loop turn, merged per batch key, never reordered.

Two `ClusterRpc`s back to back, as in test_cluster_rpc.py.
"""

import pytest

from logbroker.cluster import cluster_rpc
from logbroker.cluster.envelope import NOTICE, NOTICES, RAFT, REQUEST, RESPONSE, Envelope
from tests.unit.logbroker.cluster.test_cluster_rpc import Pair, settle

pytestmark = pytest.mark.timeout(10)


def _kinds(pair: Pair, sender: str) -> list[int]:
    return [payload[0] for who, _, payload in pair.sent if who == sender]


async def test_posted_notices_go_in_one_frame_at_the_end_of_the_turn() -> None:
    pair = Pair()
    got: list[tuple[str, object]] = []
    pair.b.on_notice("n", lambda peer, env: got.append((peer, env.header["i"])))
    for i in range(50):
        pair.a.post("b", Envelope("n", {"i": i}))
    assert pair.sent == []  # nothing before the turn ends
    await settle()
    assert _kinds(pair, "a") == [NOTICES]
    assert got == [("a", i) for i in range(50)]
    pair.a.post("b", Envelope("n", {"i": 50}))
    await settle()
    assert _kinds(pair, "a") == [NOTICES, NOTICE]  # one notice alone: a plain frame
    assert got[-1] == ("a", 50)
    await pair.close()


async def test_consecutive_posts_with_one_batch_key_merge_into_one_envelope() -> None:
    pair = Pair()
    got: list[Envelope] = []
    pair.b.on_notice("s", lambda peer, env: got.append(env))
    pair.b.on_notice("x", lambda peer, env: got.append(env))
    pair.a.batches("s", "o")
    for key, offsets in (("q1", [1, 2]), ("q1", [3]), ("q2", [4]), ("q1", [5])):
        pair.a.post("b", Envelope("s", {"q": key, "o": offsets}, (b"%d" % offsets[0],)),
                    ("s", key))
    pair.a.post("b", Envelope("x", {"i": 1}))
    pair.a.post("b", Envelope("s", {"q": "q1", "o": [6]}), ("s", "q1"))
    await settle()
    assert [(env.op, env.header, env.blobs) for env in got] == [
        ("s", {"q": "q1", "o": [1, 2, 3]}, (b"1", b"3")),
        ("s", {"q": "q2", "o": [4]}, (b"4",)),
        ("s", {"q": "q1", "o": [5]}, (b"5",)),  # not merged across another key: order kept
        ("x", {"i": 1}, ()),
        ("s", {"q": "q1", "o": [6]}, ()),
    ]
    with pytest.raises(ValueError, match="not registered"):
        pair.a.post("b", Envelope("x"), "key")
    await pair.close()


async def test_posted_notices_go_before_any_later_frame_to_that_peer() -> None:
    pair = Pair()
    order: list[str] = []

    async def consume(peer: str, envelope: Envelope) -> Envelope:
        order.append("q.consume")
        return Envelope("ok")

    pair.b.handle("q.consume", consume)
    pair.b.on_notice("q.cancel", lambda peer, envelope: order.append("q.cancel"))
    pair.b.on_notice("q.settle", lambda peer, envelope: order.append("q.settle"))
    pair.a.post("b", Envelope("q.settle"))
    pair.a.notify("b", Envelope("q.cancel"))
    pair.a.post("b", Envelope("q.settle"))
    future = pair.a.request("b", Envelope("q.consume"))
    pair.a.post("b", Envelope("q.settle"))
    assert pair.a.send_raft("b", b"m")
    await pair.a.answer_of("b", Envelope("q.consume"), future, 1.0)
    await settle()
    assert order == ["q.settle", "q.cancel", "q.settle", "q.consume", "q.settle"]
    assert _kinds(pair, "a") == [NOTICE, NOTICE, NOTICE, REQUEST, NOTICE, RAFT]
    await pair.close()


async def test_answers_follow_what_the_answering_side_posted_before() -> None:
    pair = Pair()
    seen: list[str] = []

    async def work(peer: str, envelope: Envelope) -> Envelope:
        pair.b.post(peer, Envelope("delivered"))
        return Envelope("ok")

    pair.b.handle("work", work)
    pair.a.on_notice("delivered", lambda peer, envelope: seen.append("notice"))
    await pair.a.call("b", Envelope("work"), 1.0)
    seen.append("answer")
    await settle()
    assert seen == ["notice", "answer"]
    assert _kinds(pair, "b") == [NOTICE, RESPONSE]  # the notice went first on the link
    await pair.close()


async def test_posted_notices_to_a_peer_that_went_down_are_dropped() -> None:
    pair = Pair()
    got: list[int] = []
    pair.b.on_notice("n", lambda peer, env: got.append(env.header["i"]))
    pair.a.post("b", Envelope("n", {"i": 1}))
    pair.a.peer_down("b")
    pair.a.post("c", Envelope("n", {"i": 2}))  # nobody there: dropped quietly
    await settle()
    assert got == [] and [peer for _, peer, _ in pair.sent] == ["c"]
    pair.up = False
    pair.a.post("b", Envelope("n", {"i": 3}))
    await settle()  # refused by the link: dropped, as notify would
    pair.up = True
    pair.a.post("b", Envelope("n", {"i": 4}))
    await settle()
    assert got == [4]
    await pair.close()


async def test_large_batches_are_split_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_rpc, "BATCH_BYTES", 100)
    pair = Pair()
    got: list[Envelope] = []
    pair.b.on_notice("d", lambda peer, env: got.append(env))
    pair.a.batches("d", "o")
    for i in range(10):
        pair.a.post("b", Envelope("d", {"o": [i]}, (bytes(40),)), "d")
    await settle()
    assert [env.header["o"] for env in got] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert all(len(payload) < 300 for _, _, payload in pair.sent)
    await pair.close()


async def test_extend_last_appends_to_the_last_posted_envelope_only_while_it_is_last() -> None:
    pair = Pair()
    got: list[Envelope] = []
    pair.b.on_notice("d", lambda peer, env: got.append(env))
    pair.b.on_notice("x", lambda peer, env: got.append(env))
    open_envelope = Envelope("d", {"o": [1]}, [b"a"])
    pair.a.post("b", open_envelope)
    assert pair.a.extend_last("b", open_envelope, 1)
    open_envelope.header["o"].append(2)
    assert isinstance(open_envelope.blobs, list)
    open_envelope.blobs.append(b"b")
    assert not pair.a.extend_last("c", open_envelope, 1)  # nothing posted to that peer
    assert not pair.a.extend_last("b", open_envelope, cluster_rpc.BATCH_BYTES)  # too big
    pair.a.post("b", Envelope("x", {"i": 1}))
    assert not pair.a.extend_last("b", open_envelope, 1)  # no longer last: order kept
    await settle()
    assert not pair.a.extend_last("b", open_envelope, 1)  # sent with the turn's frame
    assert [(env.op, env.header, tuple(env.blobs)) for env in got] == [
        ("d", {"o": [1, 2]}, (b"a", b"b")), ("x", {"i": 1}, ())]
    await pair.close()
