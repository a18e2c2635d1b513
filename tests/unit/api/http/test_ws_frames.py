"""WebSocket frame text: parsed and encoded with orjson, with the standard library's answers."""

import json

import pytest

from api.http.ws_frames import FrameError, encode_frame, parse_frame


def test_a_frame_round_trips_as_compact_json() -> None:
    frame = {"op": "deliver", "delivery_tag": 7, "payload": "h\u00e9\u2603\U0001f600",
             "properties": {"headers": {"n": None, "f": 1.5, "t": True, "l": [1, "x"]}}}
    text = encode_frame(frame)
    assert json.loads(text) == frame
    assert text == json.dumps(frame, separators=(",", ":"), ensure_ascii=False)
    assert parse_frame(text) == frame


def test_what_orjson_cannot_encode_goes_through_the_standard_encoder() -> None:
    frame = {"op": "x", "big": 2**70, 3: "int key"}
    assert json.loads(encode_frame(frame)) == {"op": "x", "big": 2**70, "3": "int key"}
    lone_surrogate = {"op": "x", "payload": "a\ud800b"}  # not UTF-8: escaped by json
    assert json.loads(encode_frame(lone_surrogate)) == lone_surrogate


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not valid JSON"),
    ('{"op": NaN}', "not valid JSON"),
    ('{"op": "publish", "routing_key": "a\\ud800"}', "not valid JSON"),  # lone surrogate
    ("[1, 2]", "must be a JSON object"),
    ('{"op": 3}', "string 'op'"),
    ("[" * 5000 + "]" * 5000, "not valid JSON"),
])
def test_bad_frames_are_400_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(FrameError) as raised:
        parse_frame(text)
    assert raised.value.status == 400 and reason in raised.value.reason
