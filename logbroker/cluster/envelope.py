"""`Envelope`: what nodes exchange over the cluster link, and its binary form.

A cluster frame starts with one kind byte: a Raft message (`replication.raft
.wire`), a request or a response (an 8-byte request id, then an envelope), or
a one-way notice (an envelope), or several notices in one frame (a count,
then each envelope with its length). An envelope is an operation name, a
small JSON header and a list of binary blobs - message bodies and Raft entries
go as blobs, never through JSON, so forwarding a message costs one copy.

    envelope = op_len u8 | op | header_len u32 | header JSON | count u32 | (len u32 | blob)*
    notices  = count u32 | (len u32 | envelope)*

`concat_envelopes` merges notices of one op that differ only in some list
fields (deliveries, settled offsets) into one envelope: one JSON header for a
batch instead of one per message.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

RAFT = 1
REQUEST = 2
RESPONSE = 3
NOTICE = 4
NOTICES = 5

_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_REQUEST_ID = struct.Struct(">Q")


class EnvelopeDecodeError(ValueError):
    """Bytes that are not a cluster frame."""


@dataclass(slots=True)  # one per delivery or notice: not frozen, which would cost 3x to build
class Envelope:
    op: str
    header: dict[str, Any] = field(default_factory=dict)
    blobs: Sequence[bytes] = ()  # a list while its poster still appends (ClusterRpc.extend_last)


def encode_envelope(envelope: Envelope) -> bytes:
    return b"".join(_envelope_parts(envelope))


def _envelope_parts(envelope: Envelope, parts: list[bytes] | None = None) -> list[bytes]:
    """The envelope's pieces appended to `parts`: a frame joins them once, so the
    messages it carries are copied once, not once per layer."""
    parts = [] if parts is None else parts
    op = envelope.op.encode()
    header = _dump_header(envelope.header)
    parts += (_U8.pack(len(op)), op, _U32.pack(len(header)), header,
              _U32.pack(len(envelope.blobs)))
    for blob in envelope.blobs:
        parts.append(_U32.pack(len(blob)))
        parts.append(blob)
    return parts


def decode_envelope(data: bytes | memoryview, start: int = 0) -> Envelope:
    view = memoryview(data)
    try:
        (op_length,) = _U8.unpack_from(view, start)
        position = start + 1
        op = bytes(view[position:position + op_length]).decode()
        position += op_length
        (header_length,) = _U32.unpack_from(view, position)
        position += 4
        header = _load_header(bytes(view[position:position + header_length]))
        position += header_length
        (count,) = _U32.unpack_from(view, position)
        position += 4
        blobs = []
        for _ in range(count):
            (length,) = _U32.unpack_from(view, position)
            position += 4
            if position + length > len(view):
                raise EnvelopeDecodeError("a blob runs past the end of the frame")
            blobs.append(bytes(view[position:position + length]))
            position += length
    except (struct.error, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise EnvelopeDecodeError(f"malformed envelope: {error}") from error
    if not isinstance(header, dict):
        raise EnvelopeDecodeError("the envelope header is not an object")
    return Envelope(op, header, tuple(blobs))


def _dump_header(header: dict[str, Any]) -> bytes:
    # orjson: the standard encoder with `separators` builds an encoder per call, about
    # 10 µs more per envelope. A lone surrogate (from a REST name), which orjson refuses,
    # goes the standard way, whose escape only the standard decoder takes back
    # (`_load_header`). An integer beyond 64 bits would come back from orjson as a float:
    # no header carries one (offsets, epochs and counts fit), so it is refused here.
    try:
        return orjson.dumps(header, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as error:
        if "64-bit" in str(error):
            raise ValueError(f"an envelope header integer exceeds 64 bits: {error}") from None
        return json.dumps(header, separators=(",", ":")).encode()


def _load_header(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # what only the standard decoder takes (see above)
        return json.loads(data)


def request_frame(kind: int, request_id: int, envelope: Envelope) -> bytes:
    return b"".join(_envelope_parts(envelope, [_U8.pack(kind), _REQUEST_ID.pack(request_id)]))


def notice_frame(envelope: Envelope) -> bytes:
    return b"".join(_envelope_parts(envelope, [_U8.pack(NOTICE)]))


def notices_frame(envelopes: Sequence[Envelope]) -> bytes:
    parts = [_U8.pack(NOTICES), _U32.pack(len(envelopes))]
    for envelope in envelopes:
        length_at = len(parts)
        parts.append(b"")  # its length, known once its parts are
        _envelope_parts(envelope, parts)
        parts[length_at] = _U32.pack(sum(len(part) for part in parts[length_at + 1:]))
    return b"".join(parts)


def concat_envelopes(envelopes: Sequence[Envelope], list_fields: Sequence[str]) -> Envelope:
    """One envelope for several of the same op: the first one's header with each of
    `list_fields` concatenated over all of them, and every blob in order."""
    first = envelopes[0]
    if len(envelopes) == 1:
        return first
    header = dict(first.header)
    for name in list_fields:
        header[name] = [item for envelope in envelopes for item in envelope.header[name]]
    return Envelope(first.op, header, tuple(blob for envelope in envelopes
                                            for blob in envelope.blobs))


def raft_frame(message_bytes: bytes) -> bytes:
    return _U8.pack(RAFT) + message_bytes


def split_frame(payload: bytes) -> tuple[int, int, Envelope | bytes | tuple[Envelope, ...]]:
    """(kind, request id or 0, envelope - or the Raft message bytes for RAFT, or the
    envelopes of a NOTICES frame)."""
    if not payload:
        raise EnvelopeDecodeError("empty cluster frame")
    kind = payload[0]
    if kind == RAFT:
        return kind, 0, payload[1:]
    if kind == NOTICE:
        return kind, 0, decode_envelope(payload, 1)
    if kind == NOTICES:
        return kind, 0, _split_notices(memoryview(payload))
    if kind in (REQUEST, RESPONSE):
        if len(payload) < 9:
            raise EnvelopeDecodeError("truncated request frame")
        (request_id,) = _REQUEST_ID.unpack_from(payload, 1)
        return kind, request_id, decode_envelope(payload, 9)
    raise EnvelopeDecodeError(f"unknown cluster frame kind {kind}")


def _split_notices(view: memoryview) -> tuple[Envelope, ...]:
    try:
        (count,) = _U32.unpack_from(view, 1)
        position = 5
        envelopes = []
        for _ in range(count):
            (length,) = _U32.unpack_from(view, position)
            position += 4
            if position + length > len(view):
                raise EnvelopeDecodeError("a notice runs past the end of the frame")
            envelopes.append(decode_envelope(view[position:position + length]))
            position += length
    except struct.error as error:
        raise EnvelopeDecodeError(f"malformed notices frame: {error}") from error
    if position != len(view):
        raise EnvelopeDecodeError("trailing bytes after the last notice")
    return tuple(envelopes)
