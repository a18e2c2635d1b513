import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replication.transport.frames import (
    FrameDecoder,
    FrameTooLargeError,
    encode_frame,
    frame_header,
)


def test_encode_is_a_big_endian_length_then_the_payload() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


def test_decode_returns_frames_in_order_including_empty_ones() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    decoder.feed(encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three"))
    assert decoder.frames() == [b"one", b"", b"three"]
    assert decoder.next_frame() is None
    assert decoder.buffered == 0


def test_partial_reads_wait_for_the_whole_frame() -> None:
    data = encode_frame(b"hello") + encode_frame(b"world!")
    decoder = FrameDecoder(max_frame_bytes=100)
    got = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        got.extend(decoder.frames())
        if i < 8:
            assert got == []  # neither header nor payload complete before byte 9
    assert got == [b"hello", b"world!"]


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    decoder = FrameDecoder(max_frame_bytes=300)
    got: list[bytes] = []
    for start, end in itertools.pairwise(points):
        decoder.feed(stream[start:end])
        got.extend(decoder.frames())
    assert got == payloads
    assert decoder.buffered == 0


def test_oversize_frame_refused_when_encoding() -> None:
    with pytest.raises(FrameTooLargeError, match="frame of 11 bytes exceeds the 10-byte limit"):
        encode_frame(b"x" * 11, max_frame_bytes=10)
    assert encode_frame(b"x" * 10, max_frame_bytes=10)[4:] == b"x" * 10
    with pytest.raises(ValueError):  # FrameTooLargeError is a ValueError
        frame_header(11, 10)


def test_oversize_frame_refused_as_soon_as_its_header_arrives() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.feed(encode_frame(b"ok") + frame_header(1 << 30, 1 << 31))  # no payload sent
    assert decoder.next_frame() == b"ok"
    with pytest.raises(FrameTooLargeError) as caught:
        decoder.next_frame()
    assert (caught.value.size, caught.value.limit) == (1 << 30, 10)


def test_the_limit_can_be_raised_between_frames() -> None:
    decoder = FrameDecoder(max_frame_bytes=4)
    decoder.feed(encode_frame(b"tiny") + encode_frame(b"much larger"))
    assert decoder.next_frame() == b"tiny"
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()
    decoder.max_frame_bytes = 100
    assert decoder.next_frame() == b"much larger"


def test_limit_must_fit_the_header() -> None:
    for bad in (0, -1, 1 << 32):
        with pytest.raises(ValueError, match="max_frame_bytes"):
            FrameDecoder(bad)
