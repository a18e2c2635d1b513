"""`ForwardedConsumers`: the client's node buffer of forwarded consumers, pure."""

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.cluster.forwarded_consumers import (
    MAX_LOOKAHEAD,
    MIN_LOOKAHEAD_PREFETCH,
    Buffered,
    ForwardedConsumer,
    ForwardedConsumers,
    lookahead_for,
)
from logbroker.cluster.forwarded_message import encode_message
from logbroker.message import Message


@dataclass
class Channel:
    """A DeliverySink with a settable channel credit (None: no channel-wide limit)."""

    channel_key: str = "conn-1:1"
    room: int | None = None
    got: list[tuple[str, str | None, int, bool, bytes]] = field(default_factory=list)

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        self.got.append((queue, consumer_tag, offset, redelivered, message.body))
        if self.room is not None:
            self.room -= 1

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        raise AssertionError("not used here")

    def credit(self) -> int | None:
        return self.room


def item(offset: int, redelivered: bool = False) -> Buffered:
    return Buffered(offset, redelivered, encode_message(Message("", "q", b"m%d" % offset)))


def consumer(sink: Channel, tag: str = "t", prefetch: int = 0, no_ack: bool = False,
             queue: str = "q") -> ForwardedConsumer:
    return ForwardedConsumer("x", "/", queue, tag, sink, prefetch, no_ack, ready=True)


def hand_out(consumers: ForwardedConsumers, c: ForwardedConsumer) -> int:
    count, expired = consumers.hand_out(c, now_ms=0)
    assert expired == []
    return count


def test_lookahead_is_the_prefetch_again_within_bounds() -> None:
    assert lookahead_for(100, no_ack=False) == 100
    assert lookahead_for(MIN_LOOKAHEAD_PREFETCH, no_ack=False) == MIN_LOOKAHEAD_PREFETCH
    assert lookahead_for(MIN_LOOKAHEAD_PREFETCH - 1, no_ack=False) == 0
    assert lookahead_for(1, no_ack=False) == 0  # fair dispatch: nothing held back
    assert lookahead_for(0, no_ack=False) == 0  # unlimited: prefetch does not bind
    assert lookahead_for(5000, no_ack=False) == MAX_LOOKAHEAD
    assert lookahead_for(100, no_ack=True) == 0


def test_hand_out_keeps_the_client_to_its_prefetch_and_acks_make_room() -> None:
    consumers, sink = ForwardedConsumers(), Channel()
    c = consumer(sink, prefetch=3)
    consumers.add(c)
    c.buffer.extend(item(offset) for offset in range(5))
    assert hand_out(consumers, c) == 3
    assert [got[2] for got in sink.got] == [0, 1, 2]
    assert sink.got[0] == ("q", "t", 0, False, b"m0")
    assert (c.in_client, len(c.buffer), consumers.waiting) == (3, 2, {c})
    assert hand_out(consumers, c) == 0
    assert consumers.settled("x", "/", "q", [1, 7]) == {c}  # 7: a basic.get, not held
    assert consumers.settled("x", "/", "other", [0]) == set()
    assert hand_out(consumers, c) == 1
    assert [got[2] for got in sink.got] == [0, 1, 2, 3]
    assert consumers.settled("x", "/", "q", [0, 2, 3]) == {c}
    assert hand_out(consumers, c) == 1
    assert (c.in_client, len(c.buffer), consumers.waiting) == (1, 0, set())
    assert consumers.settled("x", "/", "q", [4]) == set()  # nothing buffered: no room needed
    assert c.in_client == 0


def test_hand_out_asks_the_channel_credit_before_every_delivery() -> None:
    consumers, sink = ForwardedConsumers(), Channel(room=2)
    c = consumer(sink)  # prefetch 0: only the channel limits
    consumers.add(c)
    c.buffer.extend(item(offset, redelivered=offset == 1) for offset in range(4))
    assert hand_out(consumers, c) == 2
    assert [(got[2], got[3]) for got in sink.got] == [(0, False), (1, True)]
    sink.room = None
    assert hand_out(consumers, c) == 2


def test_no_ack_consumers_pass_everything_through() -> None:
    consumers, sink = ForwardedConsumers(), Channel(room=0)
    c = consumer(sink, prefetch=1, no_ack=True)
    consumers.add(c)
    c.buffer.extend(item(offset) for offset in range(3))
    assert hand_out(consumers, c) == 3  # settled on the leader already: never held here
    assert c.in_client == 0 and consumers.settled("x", "/", "q", [0, 1, 2]) == set()


def test_nothing_is_handed_out_before_the_consumer_is_ready() -> None:
    consumers, sink = ForwardedConsumers(), Channel()
    c = ForwardedConsumer("x", "/", "q", "t", sink, prefetch=10)
    consumers.add(c)
    c.buffer.append(item(0))
    assert hand_out(consumers, c) == 0 and sink.got == []
    c.ready = True
    assert hand_out(consumers, c) == 1


def test_take_buffered_forgets_the_consumer_but_its_client_still_holds_messages() -> None:
    consumers, sink = ForwardedConsumers(), Channel()
    c = consumer(sink, prefetch=1)
    consumers.add(c)
    c.buffer.extend([item(0), item(1), item(2, redelivered=True)])
    hand_out(consumers, c)
    assert consumers.get(sink.channel_key, "t") is c
    assert consumers.find("x", "/", "q", "t") is c
    assert consumers.find("x", "/", "q", "other") is None
    assert consumers.take_buffered(c) == [item(1), item(2, redelivered=True)]
    assert consumers.get(sink.channel_key, "t") is None and len(consumers) == 0
    assert not c.ready and consumers.waiting == set()
    assert consumers.settled("x", "/", "q", [0]) == set()
    assert c.in_client == 0
    assert consumers.take_buffered(c) == []  # twice is harmless


def test_a_closed_channel_or_a_lost_node_holds_nothing_any_more() -> None:
    consumers = ForwardedConsumers()
    one, two = Channel("conn-1:1"), Channel("conn-1:2")
    a, b = consumer(one, "a", prefetch=5), consumer(two, "b", prefetch=5)
    for c, offsets in ((a, (0, 1)), (b, (2, 3))):
        consumers.add(c)
        c.buffer.extend(item(offset) for offset in offsets)
        hand_out(consumers, c)
    assert consumers.matching(channel_key="conn-1:1") == [a]
    assert consumers.matching(node="x") == [a, b] and consumers.matching(node="y") == []
    consumers.channel_gone("x", "conn-1:1")
    b.buffer.append(item(4))
    assert a.in_client == 2  # the consumer goes with its channel: only the map matters
    assert consumers.settled("x", "/", "q", [0, 1, 2]) == {b}
    consumers.node_gone("x")
    assert consumers.settled("x", "/", "q", [3]) == set()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["deliver", "ack", "credit", "hand_out"]),
                          st.integers(0, 7)), max_size=60),
       st.integers(0, 4))
def test_the_client_never_holds_more_than_its_prefetch(
    ops: list[tuple[str, int]], prefetch: int,
) -> None:
    consumers, sink = ForwardedConsumers(), Channel(room=3)
    c = consumer(sink, prefetch=prefetch)
    consumers.add(c)
    next_offset = 0
    client: list[int] = []  # offsets the client holds, unacked
    for op, arg in ops:
        if op == "deliver":
            c.buffer.append(item(next_offset))
            next_offset += 1
        elif op == "ack" and client:
            acked = client.pop(arg % len(client))
            consumers.settled("x", "/", "q", [acked])
        elif op == "credit":
            sink.room = arg
        count = len(sink.got)
        hand_out(consumers, c)
        client.extend(got[2] for got in sink.got[count:])
        if prefetch:
            assert len(client) <= prefetch
        assert c.in_client == len(client)
        # In order, each once: the buffer and what went out are the deliveries made.
        assert [got[2] for got in sink.got] + [b.offset for b in c.buffer] == list(
            range(next_offset))


def test_expired_buffered_messages_are_taken_out_instead_of_handed_out() -> None:
    consumers, sink = ForwardedConsumers(), Channel()
    c = consumer(sink, prefetch=2)
    consumers.add(c)
    old = [Buffered(o, False, item(o).blob, deadline_ms=10_000) for o in range(3)]
    c.buffer.extend([old[0], item(5), old[1], old[2]])
    assert consumers.hand_out(c, now_ms=10_000) == (2, [])  # not yet: strictly after
    assert [got[2] for got in sink.got] == [0, 5]
    consumers.settled("x", "/", "q", [0, 5])
    assert consumers.hand_out(c, now_ms=10_500) == (0, old[1:])
    assert c.in_client == 0 and not c.buffer and consumers.waiting == set()
    n = consumer(Channel(), "n", no_ack=True)  # no-ack: the leader settled it already
    consumers.add(n)
    n.buffer.append(old[0])
    assert consumers.hand_out(n, now_ms=99_000) == (1, [])


def test_buffered_items_compare_by_value() -> None:
    assert item(3) == item(3) and item(3) != item(3, redelivered=True)
    with pytest.raises(AttributeError):
        item(3).offset = 4  # type: ignore[misc]
