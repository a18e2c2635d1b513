"""The frame codec helpers: encoding without validate() matches pamqp byte for byte."""

from __future__ import annotations

import struct
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pamqp import base, commands, frame

from api.amqp.frame_encoding import (
    _encode_arguments,
    build_method,
    deliver_arguments,
    encode_content,
    encode_delivery,
    encode_method,
)
from api.amqp.wire import ProtocolError, decode_method, method_name, parse_frame


def constructible() -> list[base.Frame]:
    methods = []
    for cls in commands.INDEX_MAPPING.values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            method = cls()
        try:
            frame.marshal(method, 1)
        except (TypeError, ValueError):
            continue  # needs arguments pamqp has no default for
        methods.append(method)
    return methods


@pytest.mark.parametrize("method", constructible(), ids=lambda m: m.name)
def test_encode_method_matches_pamqp(method: base.Frame) -> None:
    assert encode_method(1, method) == frame.marshal(method, 1)


def test_bits_round_trip() -> None:
    declare = commands.Queue.Declare(
        queue="q", passive=False, durable=True, exclusive=False, auto_delete=True, nowait=True
    )
    data = encode_method(3, declare)
    parsed = parse_frame(data, 0, 0)
    assert parsed is not None
    raw, end = parsed
    assert end == len(data) and raw.channel == 3
    decoded = decode_method(raw.payload)
    assert isinstance(decoded, commands.Queue.Declare)
    assert (decoded.durable, decoded.exclusive, decoded.auto_delete, decoded.nowait) == (
        True,
        False,
        True,
        True,
    )


def test_decoding_skips_pamqp_init_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Basic.RecoverAsync() warns when constructed
        decoded = decode_method(b"\x00\x3c\x00\x64\x01")
    assert isinstance(decoded, commands.Basic.RecoverAsync) and decoded.requeue is True


def test_unencodable_argument_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"cannot encode basic\.consume_ok"):
        encode_method(1, commands.Basic.ConsumeOk("x" * 300))


def test_method_names_are_spelled_like_rabbitmq() -> None:
    assert method_name(commands.Basic.CancelOk) == "basic.cancel_ok"
    assert method_name(commands.Connection.UpdateSecretOk()) == "connection.update_secret_ok"


def test_protocol_error_text_has_the_reply_name() -> None:
    err = ProtocolError(501, "boom")
    assert err.text == "FRAME_ERROR - boom" and not err.lost_sync


def _decodes_as_pamqp_does(cls: type[base.Frame], args: bytes) -> None:
    """`decode_method` on these arguments gives pamqp's fields, or a ProtocolError
    where pamqp's own decoder fails."""
    payload = struct.pack(">HH", *_split(cls.index)) + args
    reference = cls.__new__(cls)
    try:
        reference.unmarshal(args)
    except Exception:
        with pytest.raises(ProtocolError):
            decode_method(payload)
        return
    decoded = decode_method(payload)
    assert type(decoded) is cls
    assert [getattr(decoded, name) for name in cls.__slots__] == \
        [getattr(reference, name) for name in cls.__slots__]


def _split(index: int) -> tuple[int, int]:
    return index >> 16, index & 0xFFFF


@given(st.integers(0, 0xFFFF), st.text(max_size=40), st.text(max_size=80), st.integers(0, 255),
       st.binary(max_size=4))
def test_the_basic_publish_fast_path_decodes_as_pamqp_does(
    ticket: int, exchange: str, routing_key: str, bits: int, trailing: bytes,
) -> None:
    encoded_exchange, encoded_key = exchange.encode()[:255], routing_key.encode()[:255]
    # A string cut inside a UTF-8 sequence fails in both.
    _decodes_as_pamqp_does(commands.Basic.Publish, (
        struct.pack(">H", ticket) + bytes([len(encoded_exchange)]) + encoded_exchange
        + bytes([len(encoded_key)]) + encoded_key + bytes([bits]) + trailing))


@given(st.binary(max_size=16))
def test_a_malformed_basic_publish_fails_as_pamqp_decides(args: bytes) -> None:
    _decodes_as_pamqp_does(commands.Basic.Publish, args)


@given(st.binary(max_size=12))
def test_basic_ack_decodes_as_pamqp_does(args: bytes) -> None:
    _decodes_as_pamqp_does(commands.Basic.Ack, args)


@given(st.text(max_size=300), st.integers(0, (1 << 63) - 1), st.booleans(),
       st.text(max_size=300), st.text(max_size=300))
def test_the_basic_deliver_fast_path_encodes_as_the_generic_one(
    consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str,
) -> None:
    # Twice: the second call takes the tag's and route's encoding from the cache.
    for tag, flag in ((delivery_tag, redelivered), (delivery_tag // 2, not redelivered)):
        method = commands.Basic.Deliver.__new__(commands.Basic.Deliver)
        method.consumer_tag, method.delivery_tag, method.redelivered = consumer_tag, tag, flag
        method.exchange, method.routing_key = exchange, routing_key
        fast = deliver_arguments(consumer_tag, tag, flag, exchange, routing_key)
        try:
            generic = _encode_arguments(method)
        except Exception:
            assert fast is None  # too long for a short string: the generic path raises
            continue
        assert fast == generic


@given(st.text(max_size=300), st.integers(0, (1 << 63) - 1), st.booleans(),
       st.binary(max_size=40), st.integers(0, 100), st.sampled_from([0, 9, 16, 4096]))
def test_a_delivery_from_its_fields_encodes_as_encode_content_does(
    consumer_tag: str, delivery_tag: int, redelivered: bool, properties_tail: bytes,
    body_bytes: int, frame_max: int,
) -> None:
    properties = b"\x00\x00"  # no property present
    body = bytes(range(body_bytes))
    method = commands.Basic.Deliver.__new__(commands.Basic.Deliver)
    method.consumer_tag, method.delivery_tag, method.redelivered = (
        consumer_tag, delivery_tag, redelivered)
    method.exchange, method.routing_key = "ex", properties_tail.hex()[:300]
    fast = encode_delivery(1, consumer_tag, delivery_tag, redelivered, method.exchange,
                           method.routing_key, properties, body, frame_max)
    if len(consumer_tag.encode()) > 255 or len(method.routing_key) > 255:
        assert fast is None
        return
    assert fast == encode_content(1, method, properties, body, frame_max)


def test_build_method_takes_names_pamqp_would_refuse() -> None:
    # pamqp's constructors refuse these names (validate); RabbitMQ accepts any UTF-8.
    with pytest.raises(ValueError):
        commands.Queue.DeclareOk("federation: fed.x -> node@host", 1, 2)
    for name in ("federation: fed.x -> node@host", "ünïcode", "q#*"):
        declare_ok = build_method(commands.Queue.DeclareOk, queue=name, message_count=1,
                                  consumer_count=2)
        decoded = decode_method(encode_method(1, declare_ok)[7:-1])
        assert isinstance(decoded, commands.Queue.DeclareOk)
        assert (decoded.queue, decoded.message_count, decoded.consumer_count) == (name, 1, 2)
        returned = build_method(commands.Basic.Return, reply_code=312, reply_text="NO_ROUTE",
                                exchange=name, routing_key=name)
        decoded = decode_method(encode_method(1, returned)[7:-1])
        assert isinstance(decoded, commands.Basic.Return) and decoded.exchange == name
    get_ok = build_method(commands.Basic.GetOk, delivery_tag=1, routing_key="k", message_count=0)
    assert (get_ok.redelivered, get_ok.exchange) == (False, "")  # the constructor's defaults
    with pytest.raises(TypeError, match="no argument 'queue'"):
        build_method(commands.Basic.GetOk, queue="q")
