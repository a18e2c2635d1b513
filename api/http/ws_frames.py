"""Client frames of the WebSocket protocol (`/ws`): parsing, validation, and the error frame.

Every client frame is a JSON object with a string `op`. Parsing here is pure:
each `parse_*` function turns a frame into a typed request or raises
:class:`FrameError` naming the offending field, which the session turns into
`{"op": "error", "code", "reason", "ref", "field"?}` while the socket stays
open. Message contents (payload, properties) are checked later by
`api.http.http_publish.build_message`, exactly as for REST publishes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard

import orjson

Frame = dict[str, Any]
Ref = str | int | None

MAX_FRAME_MESSAGES = 10_000  # as REST publish-batch: one frame stays a bounded amount of work
MAX_PREFETCH = 65_535  # AMQP's prefetch_count is a short
MAX_NAME_BYTES = 255  # AMQP shortstr: queue names, consumer tags
MAX_INT = 2**63 - 1
_REF_FIELDS = ("id", "delivery_tag", "consumer_tag", "subscription")


class FrameError(Exception):
    """A client frame the server cannot accept: becomes an `error` frame, not a closed socket."""

    def __init__(self, status: int, reason: str, field: str | None = None,
                 ref: Ref = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.field = field
        self.ref = ref


def error_frame(status: int, reason: str, ref: Ref, field: str | None = None) -> Frame:
    frame: Frame = {"op": "error", "code": status, "reason": reason, "ref": ref}
    if field is not None:
        frame["field"] = field
    return frame


def parse_frame(text: str) -> Frame:
    """A JSON object with a string `op`, or FrameError."""
    try:
        frame = orjson.loads(text)  # JSONDecodeError is a ValueError
    except (ValueError, RecursionError) as error:
        raise FrameError(400, f"frame is not valid JSON: {error}") from error
    if not isinstance(frame, dict):
        raise FrameError(400, "a frame must be a JSON object")
    if not isinstance(frame.get("op"), str):
        raise FrameError(400, "a frame needs a string 'op'", "op", frame_ref(frame))
    return frame


def encode_frame(frame: Frame) -> str:
    """The frame as compact JSON text. orjson is a fifth of the standard encoder's cost
    on a small frame; what it cannot encode (an integer beyond 64 bits) goes the slow way."""
    try:
        return orjson.dumps(frame, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(frame, separators=(",", ":"))


def frame_ref(frame: Mapping[str, Any]) -> Ref:
    """What an error frame refers to: the frame's id, else its delivery tag, consumer tag..."""
    for name in _REF_FIELDS:
        value = frame.get(name)
        if _is_ref(value):
            return value
    return None


def _is_ref(value: Any) -> TypeGuard[str | int]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# -- fields -----------------------------------------------------------------------------

def _string(frame: Mapping[str, Any], name: str, *, required: bool = False,
            prefix: str = "") -> str | None:
    value = frame.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise FrameError(400, f"{prefix}{name} must be a string", f"{prefix}{name}")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise FrameError(400, f"{prefix}{name} is longer than {MAX_NAME_BYTES} bytes",
                         f"{prefix}{name}")
    return value


def _integer(frame: Mapping[str, Any], name: str, default: int | None,
             high: int = MAX_INT) -> int | None:
    value = frame.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
        raise FrameError(400, f"{name} must be an integer in [0, {high}]", name)
    return value


def _boolean(frame: Mapping[str, Any], name: str, default: bool) -> bool:
    value = frame.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise FrameError(400, f"{name} must be true or false", name)
    return value


# -- requests ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Subscribe:
    queue: str
    prefetch: int
    consumer_tag: str
    no_ack: bool
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Settle:
    delivery_tag: int
    multiple: bool
    requeue: bool


@dataclass(frozen=True, slots=True)
class Replay:
    queue: str
    from_offset: int | None
    from_timestamp: int | None
    to_offset: int | None
    follow: bool
    subscription: str | None


class PublishFrame(NamedTuple):
    """A publish frame's messages: their client ids and fields, in frame order."""

    ids: list[str | int]
    fields: list[Mapping[str, Any]]
    top_level: bool  # the frame itself is the one message (it has no `messages` list)

    def field_prefix(self, index: int) -> str:
        """"messages.3" for the 4th message of a batch, "" at the top level."""
        return "" if self.top_level else f"messages.{index}"


def parse_subscribe(frame: Mapping[str, Any]) -> Subscribe:
    queue = _string(frame, "queue", required=True) or ""
    arguments = frame.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise FrameError(400, "arguments must be an object", "arguments")
    prefetch = _integer(frame, "prefetch", 100, MAX_PREFETCH)
    return Subscribe(queue, prefetch or 0, _string(frame, "consumer_tag") or "",
                     _boolean(frame, "no_ack", False), arguments)


def parse_settle(frame: Mapping[str, Any], allow_multiple: bool = True) -> Settle:
    tag = _integer(frame, "delivery_tag", None)
    if tag is None:
        raise FrameError(400, "delivery_tag is required", "delivery_tag")
    multiple = _boolean(frame, "multiple", False) if allow_multiple else False
    return Settle(tag, multiple, _boolean(frame, "requeue", True))


def parse_name(frame: Mapping[str, Any], name: str) -> str:
    """The one required name of a `cancel` (consumer_tag) or `stop_replay` (subscription)."""
    return _string(frame, name, required=True) or ""


def parse_replay(frame: Mapping[str, Any]) -> Replay:
    queue = _string(frame, "queue", required=True) or ""
    from_offset = _integer(frame, "from_offset", None)
    from_timestamp = _integer(frame, "from_timestamp", None)
    if from_offset is not None and from_timestamp is not None:
        raise FrameError(400, "give from_offset or from_timestamp, not both", "from_timestamp")
    return Replay(queue, from_offset, from_timestamp, _integer(frame, "to_offset", None),
                  _boolean(frame, "follow", False), _string(frame, "subscription"))


def parse_publish(frame: Mapping[str, Any]) -> PublishFrame:
    """The messages of a publish frame: a `messages` list, or one message at the top level.
    Each needs an object with an `id`; anything else refuses the frame as a whole."""
    if "messages" not in frame:
        return PublishFrame([_message_id(frame, None)], [frame], True)
    messages = frame["messages"]
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_FRAME_MESSAGES:
        raise FrameError(400, f"messages must be a list of 1 to {MAX_FRAME_MESSAGES} messages",
                         "messages", frame_ref(frame))
    ids: list[str | int] = []
    for index, item in enumerate(messages):
        if not isinstance(item, dict):
            raise FrameError(400, f"messages.{index} must be an object", f"messages.{index}")
        message_id = item.get("id")
        # `_is_ref` inline: the common case of a per-message loop (a JSON id is a str or
        # an int exactly; a bool is not an id).
        if type(message_id) is not int and type(message_id) is not str:
            message_id = _message_id(item, index)
        ids.append(message_id)
    return PublishFrame(ids, messages, False)


def _message_id(item: Mapping[str, Any], index: int | None) -> str | int:
    message_id = item.get("id")
    if not _is_ref(message_id):
        dotted = "" if index is None else f"messages.{index}."
        raise FrameError(400, f"{dotted}id is required: a string or an integer", f"{dotted}id")
    return message_id
