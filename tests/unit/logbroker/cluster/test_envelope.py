"""The cluster frame and envelope codec: round trips, every frame kind, bad input."""

import contextlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.cluster.envelope import (
    NOTICE,
    NOTICES,
    RAFT,
    REQUEST,
    RESPONSE,
    Envelope,
    EnvelopeDecodeError,
    concat_envelopes,
    decode_envelope,
    encode_envelope,
    notice_frame,
    notices_frame,
    raft_frame,
    request_frame,
    split_frame,
)

SAMPLES = [
    Envelope("ok"),
    Envelope("q.publish", {"v": "/", "a": 17, "t": [["q1", "q2"], ["q3"]]},
             (b"first", b"", b"\x00\xff" * 10)),
    Envelope("é-op ✓", {"nested": {"list": [1, 2.5, None, True], "text": "ünï"}}, (b"",)),
    Envelope("", {}, (b"", b"")),
    Envelope("x" * 255, {"k": "v" * 1000}),
]


def _envelope_bytes(op: bytes, header: bytes, blobs: list[bytes], count: int | None = None
                    ) -> bytes:
    parts = [struct.pack(">B", len(op)), op, struct.pack(">I", len(header)), header,
             struct.pack(">I", len(blobs) if count is None else count)]
    for blob in blobs:
        parts += [struct.pack(">I", len(blob)), blob]
    return b"".join(parts)


@pytest.mark.parametrize("envelope", SAMPLES, ids=lambda e: e.op[:10] or "empty-op")
def test_envelope_round_trip(envelope: Envelope) -> None:
    assert decode_envelope(encode_envelope(envelope)) == envelope


def test_large_and_empty_blobs_round_trip_byte_for_byte() -> None:
    large = bytes(range(256)) * 8192  # 2 MiB
    envelope = Envelope("big", {"n": 3}, (b"", large, b"", b"tail"))
    decoded = decode_envelope(encode_envelope(envelope))
    assert decoded.blobs == (b"", large, b"", b"tail")
    assert all(type(blob) is bytes for blob in decoded.blobs)


def test_decode_from_an_offset_and_from_a_memoryview() -> None:
    envelope = Envelope("op", {"a": 1}, (b"blob",))
    data = b"\x99" * 7 + encode_envelope(envelope)
    assert decode_envelope(data, 7) == envelope
    assert decode_envelope(memoryview(data), 7) == envelope


def test_header_is_compact_json() -> None:
    data = encode_envelope(Envelope("o", {"a": [1, 2]}))
    (length,) = struct.unpack_from(">I", data, 2)
    assert data[6:6 + length] == b'{"a":[1,2]}'


INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize("big", [2**70, -(2**63) - 1])
def test_a_header_integer_beyond_64_bits_is_refused_not_turned_into_a_float(big: int) -> None:
    # orjson reads a negative one back as a float (a silent change): no header needs them.
    with pytest.raises(ValueError, match="64 bits"):
        encode_envelope(Envelope("op", {"n": big}))


@given(op=st.text(max_size=60).filter(lambda s: len(s.encode()) <= 255),
       header=st.dictionaries(st.text(max_size=8), st.one_of(
           st.none(), st.booleans(), INT64, st.text(max_size=20),
           st.lists(INT64, max_size=4)), max_size=5),
       blobs=st.lists(st.binary(max_size=300), max_size=6))
@settings(max_examples=200, deadline=None)
def test_envelope_round_trip_property(op: str, header: dict[str, object],
                                      blobs: list[bytes]) -> None:
    envelope = Envelope(op, header, tuple(blobs))
    assert decode_envelope(encode_envelope(envelope)) == envelope
    kind, request_id, body = split_frame(request_frame(REQUEST, 2**64 - 1, envelope))
    assert (kind, request_id, body) == (REQUEST, 2**64 - 1, envelope)


# ------------------------------------------------------------------ frames


@pytest.mark.parametrize("kind", [REQUEST, RESPONSE])
@pytest.mark.parametrize("request_id", [0, 1, 2**32 + 5, 2**64 - 1])
def test_split_request_and_response_frames(kind: int, request_id: int) -> None:
    envelope = Envelope("q.get", {"q": "work"}, (b"body",))
    frame = request_frame(kind, request_id, envelope)
    assert frame[0] == kind
    assert split_frame(frame) == (kind, request_id, envelope)


def test_split_notice_frame() -> None:
    envelope = Envelope("q.settle", {"o": [1, 2, 3], "ack": True})
    frame = notice_frame(envelope)
    assert frame[0] == NOTICE
    assert split_frame(frame) == (NOTICE, 0, envelope)


@pytest.mark.parametrize("message", [b"", b"\x00", b"raft message bytes \xff" * 100])
def test_split_raft_frame_returns_the_message_bytes_untouched(message: bytes) -> None:
    frame = raft_frame(message)
    assert frame[0] == RAFT
    kind, request_id, body = split_frame(frame)
    assert (kind, request_id) == (RAFT, 0)
    assert isinstance(body, bytes) and body == message


def test_frame_kinds_are_distinct() -> None:
    assert len({RAFT, REQUEST, RESPONSE, NOTICE}) == 4
    assert len({RAFT, REQUEST, RESPONSE, NOTICE, NOTICES}) == 5


# --------------------------------------------------------------- bad input


def _all_frames() -> list[bytes]:
    envelope = Envelope("q.publish", {"v": "/", "t": [["q"]]}, (b"one", b"", b"three"))
    return [request_frame(REQUEST, 7, envelope), request_frame(RESPONSE, 8, envelope),
            notice_frame(envelope), notice_frame(Envelope("ok"))]


@pytest.mark.parametrize("frame", _all_frames(), ids=["request", "response", "notice", "tiny"])
def test_every_truncation_of_an_envelope_frame_is_a_decode_error(frame: bytes) -> None:
    for length in range(len(frame)):
        with pytest.raises(EnvelopeDecodeError):
            split_frame(frame[:length])


def test_every_truncation_of_an_envelope_is_a_decode_error() -> None:
    data = encode_envelope(Envelope("op", {"k": [1, 2]}, (b"abc", b"", b"defg")))
    for length in range(len(data)):
        with pytest.raises(EnvelopeDecodeError):
            decode_envelope(data[:length])


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x05", b"\xff" + notice_frame(Envelope("x"))])
def test_empty_frame_and_unknown_kinds_are_decode_errors(frame: bytes) -> None:
    with pytest.raises(EnvelopeDecodeError):
        split_frame(frame)


@pytest.mark.parametrize("data", [
    _envelope_bytes(b"\xff\xfe", b"{}", []),  # op is not UTF-8
    _envelope_bytes(b"op", b"{not json", []),
    _envelope_bytes(b"op", b"\xff\xfe\xfd", []),  # header is not UTF-8 / JSON
    _envelope_bytes(b"op", b"[1, 2]", []),  # header is not an object
    _envelope_bytes(b"op", b"null", []),
    _envelope_bytes(b"op", b'"text"', []),
    _envelope_bytes(b"op", b"{}", [b"abc"], count=2),  # claims more blobs than present
    _envelope_bytes(b"op", b"{}", [], count=2**32 - 1),
    _envelope_bytes(b"op", b"{}", [b"abc"])[:-1],  # the blob runs past the end
    # one blob whose length is far past the end of the frame
    b"\x02op" + struct.pack(">I", 2) + b"{}" + struct.pack(">I", 1)
    + struct.pack(">I", 2**32 - 1) + b"xy",
], ids=["op-utf8", "bad-json", "header-utf8", "header-list", "header-null", "header-str",
        "missing-blob", "huge-count", "short-blob", "huge-blob"])
def test_malformed_envelopes_are_decode_errors(data: bytes) -> None:
    with pytest.raises(EnvelopeDecodeError):
        decode_envelope(data)
    with pytest.raises(EnvelopeDecodeError):
        split_frame(bytes([NOTICE]) + data)


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(EnvelopeDecodeError, ValueError)


@given(st.binary(max_size=200))
@settings(max_examples=500, deadline=None)
def test_arbitrary_bytes_decode_or_raise_only_decode_errors(data: bytes) -> None:
    with contextlib.suppress(EnvelopeDecodeError):
        split_frame(data)
    with contextlib.suppress(EnvelopeDecodeError):
        decode_envelope(data)


@given(st.binary(min_size=1, max_size=40), st.integers(min_value=0, max_value=60))
@settings(max_examples=300, deadline=None)
def test_corrupted_frames_raise_only_decode_errors(noise: bytes, position: int) -> None:
    frame = bytearray(request_frame(REQUEST, 3, Envelope("op", {"k": "v"}, (b"abc", b"de"))))
    position = min(position, len(frame) - 1)
    frame[position:position + len(noise)] = noise
    with contextlib.suppress(EnvelopeDecodeError):
        split_frame(bytes(frame))


def test_deeply_nested_header_is_a_decode_error() -> None:
    header = b"[" * 100_000
    with pytest.raises(EnvelopeDecodeError):
        decode_envelope(_envelope_bytes(b"op", header, []))


def test_json_header_values_survive() -> None:
    header = {"unicode": "ß✓", "int": 2**62, "float": 0.5, "list": [[], {}], "none": None}
    decoded = decode_envelope(encode_envelope(Envelope("o", header)))
    assert decoded.header == json.loads(json.dumps(header))


# ------------------------------------------------------------ notice batches


def test_notices_frame_round_trip() -> None:
    envelopes = [Envelope("q.deliver", {"o": [1, 2]}, (b"a", b"")), Envelope("q.credit"),
                 SAMPLES[2]]
    frame = notices_frame(envelopes)
    assert frame[0] == NOTICES
    assert split_frame(frame) == (NOTICES, 0, tuple(envelopes))
    assert split_frame(notices_frame([])) == (NOTICES, 0, ())


def test_every_truncation_of_a_notices_frame_is_a_decode_error() -> None:
    frame = notices_frame([Envelope("a", {"k": 1}, (b"xy",)), Envelope("b")])
    for length in range(len(frame)):
        with pytest.raises(EnvelopeDecodeError):
            split_frame(frame[:length])
    with pytest.raises(EnvelopeDecodeError):
        split_frame(frame + b"\x00")  # trailing bytes


def test_a_notices_frame_with_a_malformed_envelope_is_a_decode_error() -> None:
    bad = _envelope_bytes(b"op", b"[1]", [])
    frame = bytes([NOTICES]) + struct.pack(">I", 1) + struct.pack(">I", len(bad)) + bad
    with pytest.raises(EnvelopeDecodeError):
        split_frame(frame)


def test_concat_envelopes_joins_list_fields_and_blobs_in_order() -> None:
    parts = [Envelope("q.deliver", {"ck": "c", "o": [i], "tag": [f"t{i}"]}, (bytes([i]),))
             for i in range(3)]
    joined = concat_envelopes(parts, ("o", "tag"))
    assert joined == Envelope("q.deliver", {"ck": "c", "o": [0, 1, 2], "tag": ["t0", "t1", "t2"]},
                              (b"\x00", b"\x01", b"\x02"))
    assert parts[0].header["o"] == [0]  # the parts are left as they were
    assert concat_envelopes(parts[:1], ("o",)) is parts[0]


@pytest.mark.parametrize("header", [
    {"q": "a\ud800b"},  # a lone surrogate (a REST name may hold one): no UTF-8 form
    {"n": {1: "int key"}},
])
def test_headers_orjson_refuses_go_through_the_standard_codec(header: dict) -> None:
    decoded = decode_envelope(encode_envelope(Envelope("op", header)))
    assert decoded.header == json.loads(json.dumps(header))


def test_a_header_from_the_standard_encoder_still_decodes() -> None:
    """What a node encoding with `json.dumps` (ensure_ascii) sent stays readable."""
    header = {"q": "ünï \ud800", "o": [1, 2]}
    raw = json.dumps(header).encode()
    op = b"op"
    data = bytes([len(op)]) + op + struct.pack(">I", len(raw)) + raw + struct.pack(">I", 0)
    assert decode_envelope(data).header == header


def test_frames_joined_once_are_the_layers_byte_for_byte() -> None:
    """The wire format is the layered one (kind, id, envelope; count, length, envelope),
    built with one join so each carried message is copied once."""
    for envelope in SAMPLES:
        encoded = encode_envelope(envelope)
        assert request_frame(REQUEST, 9, envelope) == \
            bytes([REQUEST]) + (9).to_bytes(8, "big") + encoded
        assert notice_frame(envelope) == bytes([NOTICE]) + encoded
    layered = bytes([NOTICES]) + len(SAMPLES).to_bytes(4, "big") + b"".join(
        len(encode_envelope(e)).to_bytes(4, "big") + encode_envelope(e) for e in SAMPLES)
    assert notices_frame(SAMPLES) == layered
