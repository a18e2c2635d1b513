import pytest

from api.http.http_errors import ApiError
from api.http.message_codec import (
    decode_payload,
    encode_payload,
    message_json,
    properties_from_json,
    properties_to_json,
)
from logbroker.message import Message


def test_properties_round_trip_in_rabbitmq_json_shape() -> None:
    data = {"content_type": "text/plain", "delivery_mode": 2, "priority": 5,
            "headers": {"a": 1, "b": "x", "nested": {"c": True}}, "type": "kind",
            "timestamp": 1_700_000_000, "expiration": "60000", "message_id": "m1"}
    assert properties_to_json(properties_from_json(data)) == data


@pytest.mark.parametrize(("data", "field"), [
    ({"delivery_mode": 3}, "properties.delivery_mode"),
    ({"priority": "high"}, "properties.priority"),
    ({"content_type": 5}, "properties.content_type"),
    ({"headers": []}, "properties.headers"),
    ({"headers": {"n": 2**70}}, "properties.headers.n"),
    ({"colour": "red"}, "properties.colour"),
])
def test_bad_properties_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(ApiError) as raised:
        properties_from_json(data)
    assert raised.value.status == 400 and raised.value.field == field


def test_payload_encodings() -> None:
    assert decode_payload("héllo", "string") == "héllo".encode()
    assert decode_payload("AAE=", "base64") == b"\x00\x01"
    with pytest.raises(ApiError):
        decode_payload("!!", "base64")
    with pytest.raises(ApiError):
        decode_payload("x", "hex")


@pytest.mark.parametrize("field, encoding_field", [
    ("payload", "payload_encoding"),
    ("messages.3.payload", "messages.3.payload_encoding"),
])
def test_an_unknown_encoding_names_the_message_it_belongs_to(field: str,
                                                             encoding_field: str) -> None:
    with pytest.raises(ApiError) as raised:
        decode_payload("x", "hex", field)
    assert (raised.value.status, raised.value.field) == (400, encoding_field)
    assert raised.value.reason.startswith(encoding_field)


def test_payload_encodings_round_trip() -> None:
    assert encode_payload(b"text") == ("text", "string")
    assert encode_payload(b"\xff\x00") == ("/wA=", "base64")
    assert encode_payload(b"text", "base64") == ("dGV4dA==", "base64")


def test_message_json_truncates_but_reports_the_full_size() -> None:
    view = message_json(Message("ex", "rk", b"abcdef"), truncate=2)
    assert view["payload"] == "ab" and view["payload_bytes"] == 6
    assert (view["exchange"], view["routing_key"]) == ("ex", "rk")
