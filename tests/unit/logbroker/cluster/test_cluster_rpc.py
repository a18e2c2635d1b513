"""`ClusterRpc`: two instances wired back to back in one event loop.

Each side's `send` hands the frame to the other's `on_frame` with
`loop.call_soon`, as the transport delivers a frame in a later callback.
"""

import asyncio
import logging
import random
import time
from collections.abc import Awaitable

import pytest

from logbroker.cluster.cluster_rpc import INTERNAL_ERROR, ClusterRpc, PeerUnavailable, RpcLimits
from logbroker.cluster.envelope import REQUEST, RESPONSE, Envelope, request_frame
from logbroker.errors import NOT_FOUND, PRECONDITION_FAILED, BrokerError

pytestmark = pytest.mark.timeout(10)
UNLIMITED = RpcLimits()


class Pair:
    """Nodes "a" and "b" linked to each other; `up` False makes every send fail."""

    def __init__(self, limits_a: RpcLimits = UNLIMITED, limits_b: RpcLimits = UNLIMITED) -> None:
        self.loop = asyncio.get_running_loop()
        self.up = True
        self.sent: list[tuple[str, str, bytes]] = []
        self.raft: dict[str, list[tuple[str, bytes]]] = {"a": [], "b": []}
        self.a = ClusterRpc(lambda peer, payload: self._send("a", peer, payload),
                            lambda peer, data: self.raft["a"].append((peer, data)), limits_a)
        self.b = ClusterRpc(lambda peer, payload: self._send("b", peer, payload),
                            lambda peer, data: self.raft["b"].append((peer, data)), limits_b)

    def _send(self, sender: str, peer: str, payload: bytes) -> bool:
        self.sent.append((sender, peer, payload))
        target = {"a": self.a, "b": self.b}.get(peer)
        if not self.up or target is None:
            return False
        self.loop.call_soon(target.on_frame, sender, payload)
        return True

    async def close(self) -> None:
        await self.a.close()
        await self.b.close()


async def settle(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def echo(peer: str, envelope: Envelope) -> Envelope:
    return Envelope("ok", {**envelope.header, "from": peer}, envelope.blobs)


async def test_call_and_answer() -> None:
    pair = Pair()
    pair.b.handle("echo", echo)
    blobs = (b"", b"x" * 100_000, b"\x00")
    answer = await pair.a.call("b", Envelope("echo", {"n": 1, "s": "é"}, blobs), 1.0)
    assert answer == Envelope("ok", {"n": 1, "s": "é", "from": "a"}, blobs)
    # And the other way round over the same pair.
    pair.a.handle("echo", echo)
    assert (await pair.b.call("a", Envelope("echo"), 1.0)).header == {"from": "b"}
    await pair.close()


async def test_answers_are_matched_to_their_calls() -> None:
    pair = Pair()

    async def slow_echo(peer: str, envelope: Envelope) -> Envelope:
        await asyncio.sleep(random.Random(envelope.header["i"]).random() * 0.02)
        return Envelope("ok", {"i": envelope.header["i"]})

    pair.b.handle("slow", slow_echo)
    answers = await asyncio.gather(*(pair.a.call("b", Envelope("slow", {"i": i}), 2.0)
                                     for i in range(50)))
    assert [answer.header["i"] for answer in answers] == list(range(50))
    await pair.close()


@pytest.mark.parametrize("code", [NOT_FOUND, PRECONDITION_FAILED, INTERNAL_ERROR, 403])
async def test_a_refusal_is_raised_at_the_caller_with_the_same_code_and_text(code: int) -> None:
    pair = Pair()

    async def refuse(peer: str, envelope: Envelope) -> Envelope:
        await asyncio.sleep(0)
        raise BrokerError(code, f"no queue 'q' in vhost '/' ({code})")

    pair.b.handle("refuse", refuse)
    with pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("refuse"), 1.0)
    assert raised.type is BrokerError
    assert (raised.value.reply_code, raised.value.text) == (
        code, f"no queue 'q' in vhost '/' ({code})")
    await pair.close()


async def test_a_refusal_before_the_handler_returns_its_awaitable() -> None:
    pair = Pair()

    def refuse_at_once(peer: str, envelope: Envelope) -> Awaitable[Envelope]:
        raise BrokerError(PRECONDITION_FAILED, "refused synchronously")

    pair.b.handle("refuse", refuse_at_once)
    with pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("refuse"), 1.0)
    assert (raised.value.reply_code, raised.value.text) == (
        PRECONDITION_FAILED, "refused synchronously")
    await pair.close()


async def test_a_crashing_handler_is_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    pair = Pair()

    async def crash(peer: str, envelope: Envelope) -> Envelope:
        raise KeyError("boom")

    pair.b.handle("crash", crash)
    with caplog.at_level(logging.ERROR, "logbroker.cluster.cluster_rpc"), \
            pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("crash"), 1.0)
    assert raised.value.reply_code == INTERNAL_ERROR
    assert "boom" in raised.value.text
    await pair.close()


async def test_unknown_op_is_541() -> None:
    pair = Pair()
    with pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("no.such.op"), 1.0)
    assert raised.value.reply_code == INTERNAL_ERROR == 541
    assert "no.such.op" in raised.value.text
    await pair.close()


async def test_notices_are_handled_in_order() -> None:
    pair = Pair()
    got: list[tuple[str, int, tuple[bytes, ...]]] = []
    pair.b.on_notice("n", lambda peer, env: got.append((peer, env.header["i"], env.blobs)))
    for i in range(200):
        assert pair.a.notify("b", Envelope("n", {"i": i}, (bytes([i % 256]),)))
    await settle()
    assert got == [("a", i, (bytes([i % 256]),)) for i in range(200)]
    await pair.close()


async def test_unknown_or_failing_notices_do_not_stop_later_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pair = Pair()
    got: list[int] = []

    def handler(peer: str, envelope: Envelope) -> None:
        if envelope.header["i"] == 1:
            raise RuntimeError("bad notice")
        got.append(envelope.header["i"])

    pair.b.on_notice("n", handler)
    with caplog.at_level(logging.WARNING, "logbroker.cluster.cluster_rpc"):
        pair.a.notify("b", Envelope("n", {"i": 0}))
        pair.a.notify("b", Envelope("unknown.notice"))
        pair.a.notify("b", Envelope("n", {"i": 1}))
        pair.a.notify("b", Envelope("n", {"i": 2}))
        await settle()
    assert got == [0, 2]
    assert "unknown cluster notice 'unknown.notice'" in caplog.text
    assert "bad notice" in caplog.text
    await pair.close()


async def test_requests_synchronous_parts_run_in_arrival_order() -> None:
    pair = Pair()
    started: list[int] = []

    async def handler(peer: str, envelope: Envelope) -> Envelope:
        started.append(envelope.header["i"])  # before the first await: in arrival order
        await asyncio.sleep(random.Random(envelope.header["i"]).random() * 0.01)
        return Envelope("ok", {"i": envelope.header["i"]})

    pair.b.handle("work", handler)
    futures = [pair.a.request("b", Envelope("work", {"i": i})) for i in range(100)]
    answers = [await pair.a.answer_of("b", Envelope("work"), future, 2.0) for future in futures]
    assert started == list(range(100))
    assert [answer.header["i"] for answer in answers] == list(range(100))
    await pair.close()


async def test_raft_frames_go_to_on_raft() -> None:
    pair = Pair()
    assert pair.a.send_raft("b", b"append-entries")
    assert pair.a.send_raft("b", b"")
    assert pair.b.send_raft("a", b"vote")
    await settle()
    assert pair.raft["b"] == [("a", b"append-entries"), ("a", b"")]
    assert pair.raft["a"] == [("b", b"vote")]
    await pair.close()


async def test_peer_down_fails_pending_calls_at_once() -> None:
    pair = Pair()
    release = asyncio.Event()

    async def hang(peer: str, envelope: Envelope) -> Envelope:
        await release.wait()
        return Envelope("ok")

    pair.b.handle("hang", hang)
    calls = [asyncio.ensure_future(pair.a.call("b", Envelope("hang"), 30.0)) for _ in range(3)]
    await settle()
    assert not any(call.done() for call in calls)
    pair.a.peer_down("c")  # another peer: nothing happens
    await settle()
    assert not any(call.done() for call in calls)
    started = time.monotonic()
    pair.a.peer_down("b")
    for call in calls:
        with pytest.raises(PeerUnavailable) as raised:
            await call
        assert raised.value.peer == "b"
        assert raised.value.reply_code == INTERNAL_ERROR
        assert "down" in raised.value.text
    assert time.monotonic() - started < 1.0
    # A late answer for a call that already failed is ignored.
    release.set()
    await settle(20)
    # And the link works again for new calls.
    pair.b.handle("echo", echo)
    assert (await pair.a.call("b", Envelope("echo"), 1.0)).op == "ok"
    await pair.close()


async def test_peer_unavailable_is_a_broker_error() -> None:
    error = PeerUnavailable("n9")
    assert isinstance(error, BrokerError)
    assert (error.reply_code, error.peer) == (INTERNAL_ERROR, "n9")
    assert "n9" in error.text and "not reachable" in error.text


async def test_a_refused_send_is_peer_unavailable_at_once() -> None:
    pair = Pair(limits_a=RpcLimits(max_pending_calls=1))
    pair.b.handle("echo", echo)
    pair.up = False
    started = time.monotonic()
    with pytest.raises(PeerUnavailable) as raised:
        await pair.a.call("b", Envelope("echo"), 30.0)
    assert time.monotonic() - started < 1.0
    assert raised.value.peer == "b"
    assert not pair.a.notify("b", Envelope("n"))
    assert not pair.a.send_raft("b", b"m")
    # Nothing is left pending: with room for one call, the next one is accepted.
    pair.up = True
    assert (await pair.a.call("b", Envelope("echo"), 1.0)).op == "ok"
    await pair.close()


async def test_no_answer_within_the_timeout_is_541() -> None:
    pair = Pair(limits_a=RpcLimits(max_pending_calls=1))
    release = asyncio.Event()

    async def hang(peer: str, envelope: Envelope) -> Envelope:
        await release.wait()
        return Envelope("ok", {"late": True})

    pair.b.handle("hang", hang)
    started = time.monotonic()
    with pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("hang"), 0.05)
    assert 0.04 <= time.monotonic() - started < 2.0
    assert raised.type is BrokerError  # not PeerUnavailable: the peer is connected
    assert raised.value.reply_code == INTERNAL_ERROR
    assert "did not answer hang within 0.05 s" in raised.value.text
    release.set()
    await settle(20)  # the late answer finds no call waiting: ignored
    # The timed-out call no longer counts against max_pending_calls.
    pair.b.handle("echo", echo)
    assert (await pair.a.call("b", Envelope("echo"), 1.0)).op == "ok"
    await pair.close()


async def test_too_many_pending_calls_are_refused_at_once() -> None:
    pair = Pair(limits_a=RpcLimits(max_pending_calls=2))
    release = asyncio.Event()

    async def hang(peer: str, envelope: Envelope) -> Envelope:
        await release.wait()
        return Envelope("ok")

    pair.b.handle("hang", hang)
    first = asyncio.ensure_future(pair.a.call("b", Envelope("hang"), 5.0))
    second = asyncio.ensure_future(pair.a.call("b", Envelope("hang"), 5.0))
    await settle()
    with pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("hang"), 5.0)
    assert raised.value.reply_code == INTERNAL_ERROR and "too many" in raised.value.text
    release.set()
    assert (await first).op == (await second).op == "ok"
    await pair.close()


async def test_too_many_running_requests_are_answered_541() -> None:
    pair = Pair(limits_b=RpcLimits(max_running_requests=1))
    release = asyncio.Event()

    async def hang(peer: str, envelope: Envelope) -> Envelope:
        await release.wait()
        return Envelope("ok")

    pair.b.handle("hang", hang)
    first = asyncio.ensure_future(pair.a.call("b", Envelope("hang"), 5.0))
    await settle()
    with pytest.raises(BrokerError) as raised:
        await pair.a.call("b", Envelope("hang"), 5.0)
    assert raised.value.reply_code == INTERNAL_ERROR and "overloaded" in raised.value.text
    release.set()
    assert (await first).op == "ok"
    await pair.close()


async def test_close_fails_pending_calls_and_cancels_running_requests() -> None:
    pair = Pair()
    handler_cancelled = asyncio.Event()

    async def hang(peer: str, envelope: Envelope) -> Envelope:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            handler_cancelled.set()
            raise
        return Envelope("ok")

    pair.b.handle("hang", hang)
    call = asyncio.ensure_future(pair.a.call("b", Envelope("hang"), 30.0))
    await settle()
    await pair.b.close()  # the serving side: its running handler is cancelled, no answer
    assert handler_cancelled.is_set()
    await settle()
    assert not call.done()
    await pair.a.close()  # the calling side: the call fails at once
    with pytest.raises(BrokerError) as raised:
        await call
    assert raised.value.reply_code == INTERNAL_ERROR
    assert "shutting down" in raised.value.text
    await pair.a.close()  # closing twice is harmless


async def test_malformed_frames_and_stray_responses_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pair = Pair()
    pair.b.handle("echo", echo)
    with caplog.at_level(logging.WARNING, "logbroker.cluster.cluster_rpc"):
        pair.b.on_frame("a", b"")
        pair.b.on_frame("a", b"\xff")
        pair.b.on_frame("a", bytes([REQUEST]) + b"\x00\x01")
        pair.b.on_frame("a", request_frame(REQUEST, 1, Envelope("echo"))[:-2])
        pair.a.on_frame("b", request_frame(RESPONSE, 424242, Envelope("ok")))  # nobody asked
    assert caplog.text.count("dropped a malformed frame from a") == 4
    assert (await pair.a.call("b", Envelope("echo"), 1.0)).op == "ok"
    await pair.close()


async def test_request_is_sent_before_it_is_awaited() -> None:
    pair = Pair()
    pair.b.handle("echo", echo)
    future = pair.a.request("b", Envelope("echo", {"k": 1}))
    assert [sender for sender, _, _ in pair.sent] == ["a"]  # on the wire already
    answer = await pair.a.answer_of("b", Envelope("echo"), future, 1.0)
    assert answer.header == {"k": 1, "from": "a"}
    await pair.close()


async def test_a_notice_sent_after_a_request_is_handled_after_the_requests_synchronous_part(
) -> None:
    pair = Pair()
    order: list[str] = []

    async def consume(peer: str, envelope: Envelope) -> Envelope:
        order.append("q.consume")  # e.g. QueueHost._consume registering a consumer
        return Envelope("ok")

    pair.b.handle("q.consume", consume)
    pair.b.on_notice("q.channel_closed", lambda peer, envelope: order.append("q.channel_closed"))
    # A channel on a closes while its basic.consume is being forwarded.
    future = pair.a.request("b", Envelope("q.consume"))
    pair.a.notify("b", Envelope("q.channel_closed"))
    await pair.a.answer_of("b", Envelope("q.consume"), future, 1.0)
    await settle()
    assert order == ["q.consume", "q.channel_closed"]
    await pair.close()
