"""Channel numbering, open / close handshakes, flow, method routing, sending."""

from __future__ import annotations

import pytest
from pamqp import commands

from api.amqp import (
    Acks,
    ChannelClosed,
    ChannelMethod,
    ChannelOpened,
    ConnectionClosed,
    ConnectionConfig,
    ConnectionFailed,
    ConnectionState,
)
from tests.unit.api.amqp.client import Client, marshal, parse


def open_client(**config: int) -> Client:
    return Client(ConnectionConfig(**config)).handshake(
        channel_max=config.get("channel_max", 2047)
    )


def test_channel_open_and_client_close() -> None:
    client = open_client()
    assert client.send(1, commands.Channel.Open()) == [ChannelOpened(1)]
    assert client.sent() == [(1, "Channel.OpenOk", {"channel_id": ""})]
    assert client.machine.open_channels == frozenset({1})

    events = client.send(1, commands.Channel.Close(200, "bye", 0, 0))
    assert events == [ChannelClosed(1, True, 200, "bye", 0, 0)]
    assert client.sent() == [(1, "Channel.CloseOk", {})]
    assert client.machine.open_channels == frozenset()
    # the number can be used again
    assert client.send(1, commands.Channel.Open()) == [ChannelOpened(1)]


def test_second_channel_open_is_504() -> None:
    client = open_client()
    client.open_channels([3])
    [failed] = client.send(3, commands.Channel.Open())
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_text == "CHANNEL_ERROR - second 'channel.open' seen"
    [(channel, close)] = client.methods()
    assert channel == 0 and isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.class_id, close.method_id) == (504, 20, 10)


def test_channel_open_on_channel_0_is_504() -> None:
    client = open_client()
    [failed] = client.send(0, commands.Channel.Open())
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 504


def test_channel_max_limits_open_channels_not_channel_numbers() -> None:
    # rabbit_reader:create_channel counts channels; any 16-bit number is fine (aiormq's
    # test_bad_channel opens 65535 under the default channel_max 2047). This test used
    # to assert 504 for a number above channel_max, which RabbitMQ never sends.
    client = open_client(channel_max=3)
    assert client.send(11, commands.Channel.Open()) == [ChannelOpened(11)]
    assert client.send(65535, commands.Channel.Open()) == [ChannelOpened(65535)]
    assert client.send(2, commands.Channel.Open()) == [ChannelOpened(2)]
    client.sent()
    client.send(2, commands.Channel.Close(200, "bye", 0, 0))
    assert client.send(3, commands.Channel.Open()) == [ChannelOpened(3)]  # a slot came free
    client.sent()
    [failed] = client.send(4, commands.Channel.Open())
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_text == (
        "NOT_ALLOWED - number of channels opened (3) has reached the negotiated channel_max (3)")
    [(channel, close)] = client.methods()
    assert channel == 0 and isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.class_id, close.method_id) == (530, 0, 0)


def test_any_frame_on_a_new_channel_past_channel_max_is_530() -> None:
    # RabbitMQ creates the channel (and counts) before it looks at the frame.
    client = open_client(channel_max=1)
    client.open_channels([1])
    [failed] = client.send(2, commands.Queue.Declare(queue="q"))
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 530


def test_method_on_a_channel_that_is_not_open_is_504() -> None:
    client = open_client()
    [failed] = client.send(5, commands.Queue.Declare(queue="q"))
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 504
    assert failed.reply_text.startswith("CHANNEL_ERROR - expected 'channel.open'")


def test_broker_methods_become_channel_method_events() -> None:
    client = open_client()
    client.open_channels([1])
    [event] = client.send(1, commands.Queue.Declare(queue="orders", durable=True))
    assert isinstance(event, ChannelMethod) and event.channel == 1
    assert isinstance(event.method, commands.Queue.Declare)
    assert (event.method.queue, event.method.durable) == ("orders", True)
    [ack] = client.send(1, commands.Basic.Ack(delivery_tag=7, multiple=True))
    assert ack == Acks(1, [(7, True)])


def test_acks_in_a_row_on_a_channel_become_one_event() -> None:
    client = open_client()
    client.open_channels([1, 2])
    events = client.feed(b"".join([
        marshal(1, commands.Basic.Ack(delivery_tag=1)),
        marshal(1, commands.Basic.Ack(delivery_tag=2)),
        marshal(1, commands.Basic.Ack(delivery_tag=4, multiple=True)),
        marshal(2, commands.Basic.Ack(delivery_tag=1)),  # another channel: a new run
        marshal(1, commands.Basic.Nack(delivery_tag=5)),  # not an ack: ends the run
        marshal(1, commands.Basic.Ack(delivery_tag=6)),
    ]))
    assert events[:3] == [Acks(1, [(1, False), (2, False), (4, True)]), Acks(2, [(1, False)]),
                          events[2]]
    assert isinstance(events[2], ChannelMethod)
    assert isinstance(events[2].method, commands.Basic.Nack)
    assert events[3:] == [Acks(1, [(6, False)])]


def test_a_long_run_of_acks_split_across_reads_is_read_whole_and_in_order() -> None:
    client = open_client()
    client.open_channels([1])
    data = b"".join(marshal(1, commands.Basic.Ack(delivery_tag=tag, multiple=tag % 50 == 0))
                    for tag in range(1, 201))
    cut = len(data) - 7  # the last ack torn by the read
    first = client.feed(data[:cut])
    assert first == [Acks(1, [(tag, tag % 50 == 0) for tag in range(1, 200)])]
    assert client.feed(data[cut:]) == [Acks(1, [(200, True)])]


def test_a_damaged_frame_inside_a_run_of_acks_is_still_a_frame_error() -> None:
    client = open_client()
    client.open_channels([1])
    broken = bytearray(marshal(1, commands.Basic.Ack(delivery_tag=2)))
    broken[-1] = 0x00  # not the frame-end octet
    events = client.feed(marshal(1, commands.Basic.Ack(delivery_tag=1)) + bytes(broken))
    assert events[0] == Acks(1, [(1, False)])
    failed = events[1]
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 501
    assert "instead of the frame-end marker" in failed.reply_text


def test_a_run_of_acks_is_not_extended_once_the_broker_took_it() -> None:
    client = open_client()
    client.open_channels([1])
    first = client.send(1, commands.Basic.Ack(delivery_tag=1))
    second = client.send(1, commands.Basic.Ack(delivery_tag=2))
    assert first == [Acks(1, [(1, False)])] and second == [Acks(1, [(2, False)])]


def test_an_ack_on_a_channel_that_is_not_open_is_504() -> None:
    client = open_client()
    [failed] = client.send(3, commands.Basic.Ack(delivery_tag=1))
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 504


def test_replies_to_server_methods_are_ignored() -> None:
    client = open_client()
    client.open_channels([1])
    assert client.send(1, commands.Basic.CancelOk("ctag")) == []
    assert client.send(1, commands.Channel.FlowOk(True)) == []
    assert client.machine.state is ConnectionState.OPEN


@pytest.mark.parametrize(
    "method",
    [
        commands.Basic.Deliver("ctag", 1, False, "", "rk"),
        commands.Queue.DeclareOk("q", 0, 0),
        commands.Basic.ConsumeOk("ctag"),
        commands.Channel.CloseOk(),
    ],
)
def test_server_only_methods_from_a_client_are_503(method: commands.base.Frame) -> None:
    client = open_client()
    client.open_channels([1])
    [failed] = client.send(1, method)
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 503


def test_connection_method_on_a_channel_is_503() -> None:
    client = open_client()
    client.open_channels([1])
    [failed] = client.send(1, commands.Connection.UpdateSecret("x", "y"))
    assert isinstance(failed, ConnectionFailed) and failed.reply_code == 503


def test_channel_flow() -> None:
    client = open_client()
    client.open_channels([1])
    assert client.send(1, commands.Channel.Flow(active=True)) == []
    assert client.sent() == [(1, "Channel.FlowOk", {"active": True})]
    [failed] = client.send(1, commands.Channel.Flow(active=False))
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_text == "NOT_IMPLEMENTED - active=false"


def test_publish_immediate_is_540_like_rabbitmq() -> None:
    client = open_client()
    client.open_channels([1])
    [failed] = client.send(1, commands.Basic.Publish(routing_key="rk", immediate=True))
    assert isinstance(failed, ConnectionFailed)
    assert failed.reply_text == "NOT_IMPLEMENTED - immediate=true"


def test_broker_close_channel_then_everything_but_close_ok_is_ignored() -> None:
    client = open_client()
    client.open_channels([1, 2])
    assert client.machine.close_channel(1, 404, "NOT_FOUND - no queue 'q' in vhost '/'", 50, 10)
    assert client.sent() == [
        (
            1,
            "Channel.Close",
            {
                "reply_code": 404,
                "reply_text": "NOT_FOUND - no queue 'q' in vhost '/'",
                "class_id": 50,
                "method_id": 10,
            },
        )
    ]
    assert client.machine.open_channels == frozenset({2})
    assert not client.machine.send_method(1, commands.Basic.QosOk())
    # discarded while closing: methods, a channel.open, a whole publish
    assert client.send(1, commands.Queue.Declare(queue="x"), commands.Channel.Open()) == []
    from tests.unit.api.amqp.client import publish_frames

    assert client.feed(publish_frames(1, b"abc")) == []
    assert client.output() == []
    # channel.close from the client while closing: close-ok, still closing
    assert client.send(1, commands.Channel.Close(200, "", 0, 0)) == []
    assert client.sent() == [(1, "Channel.CloseOk", {})]
    assert client.send(1, commands.Channel.CloseOk()) == []
    assert client.send(1, commands.Channel.Open()) == [ChannelOpened(1)]


def test_close_channel_with_a_hard_code_closes_the_connection() -> None:
    client = open_client()
    client.open_channels([1])
    assert client.machine.close_channel(1, 541, "INTERNAL_ERROR - oops")
    [(channel, close)] = client.methods()
    assert channel == 0 and isinstance(close, commands.Connection.Close)
    assert client.machine.state is ConnectionState.CLOSING


def test_send_method_rules() -> None:
    client = open_client()
    client.open_channels([1])
    assert client.machine.send_method(1, commands.Queue.DeclareOk("q", 3, 1))
    assert client.sent() == [
        (1, "Queue.DeclareOk", {"queue": "q", "message_count": 3, "consumer_count": 1})
    ]
    assert not client.machine.send_method(2, commands.Queue.DeclareOk("q", 0, 0))
    with pytest.raises(ValueError, match="send_content"):
        client.machine.send_method(1, commands.Basic.Deliver("c", 1, False, "", "rk"))
    with pytest.raises(ValueError):
        client.machine.send_method(1, commands.Channel.Close(200, "", 0, 0))
    with pytest.raises(ValueError):
        client.machine.send_method(0, commands.Connection.Blocked("x"))


def test_send_content_splits_the_body_at_frame_max() -> None:
    client = Client().handshake(frame_max=4096)
    client.open_channels([1])
    body = bytes(range(256)) * 40  # 10240 bytes
    props = commands.Basic.Properties(content_type="text/plain", headers={"k": "v"})
    deliver = commands.Basic.Deliver("ctag", 1, False, "ex", "rk")
    deliver.exchange = "ex!"  # RabbitMQ allows any UTF-8 here; pamqp's validate() does not
    assert client.machine.send_content(1, deliver, props, body)
    raw = client.machine.data_to_send()
    frames = parse(raw)
    assert [type(f).__name__ for _, f in frames] == [
        "Deliver",
        "ContentHeader",
        "ContentBody",
        "ContentBody",
        "ContentBody",
    ]
    assert all(len(f) <= 4096 - 8 for _, f in frames[2:])
    assert b"".join(f.value for _, f in frames[2:]) == body
    content_header = frames[1][1]
    assert content_header.body_size == len(body)
    assert content_header.properties == props


def test_send_content_with_an_empty_body_has_no_body_frame() -> None:
    client = open_client()
    client.open_channels([1])
    get_ok = commands.Basic.GetOk(1, False, "", "rk", 0)
    assert client.machine.send_content(1, get_ok, commands.Basic.Properties(), b"")
    assert [type(f).__name__ for _, f in client.output()] == ["GetOk", "ContentHeader"]


def test_blocked_and_unblocked_follow_the_client_capability() -> None:
    client = open_client()
    assert client.machine.send_blocked("low on memory")
    assert not client.machine.send_blocked("again")
    assert client.machine.blocked
    assert client.machine.send_unblocked()
    assert not client.machine.send_unblocked()
    assert client.sent() == [
        (0, "Connection.Blocked", {"reason": "low on memory"}),
        (0, "Connection.Unblocked", {}),
    ]
    legacy = Client(capabilities={"authentication_failure_close": True}).handshake()
    assert not legacy.machine.send_blocked("low on memory")
    assert legacy.output() == []


def test_client_connection_close() -> None:
    client = open_client()
    client.open_channels([1])
    events = client.send(0, commands.Connection.Close(200, "Normal shutdown", 0, 0))
    assert events == [ConnectionClosed(True, 200, "Normal shutdown")]
    assert client.sent() == [(0, "Connection.CloseOk", {})]
    assert client.machine.closed
    assert not client.machine.send_method(1, commands.Basic.QosOk())
    assert client.send(1, commands.Queue.Declare(queue="late")) == []
    assert client.output() == []


def test_update_secret() -> None:
    client = open_client()
    events = client.send(0, commands.Connection.UpdateSecret("new-token", "token refresh"))
    assert [(e.new_secret, e.reason) for e in events] == [
        (b"new-token", "token refresh")
    ]
    assert client.sent() == [(0, "Connection.UpdateSecretOk", {})]
