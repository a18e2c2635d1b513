"""Refusing JSON text that has no UTF-8 form (lone surrogates) before anything keeps it.

Why: JSON may escape any UTF-16 code unit, so `"\\ud800"` is valid JSON that
Python decodes to a string holding a lone surrogate, which no UTF-8 encoder
accepts. Kept in a queue's arguments, a binding's key, a policy or a user's
tags, it made every listing that showed the object answer 500, for good (the
JSON response could not be encoded). The WebSocket parser (orjson) refuses such
frames outright; REST bodies are parsed by FastAPI with the standard library,
so this app-wide dependency walks each JSON body once, after FastAPI parsed
it, and answers 400 naming the first field (or key) that holds one.

A body orjson can encode holds no such string (the usual case, checked at C speed);
otherwise an iterative walk, bounded by the body (which `BodyLimitMiddleware`
bounds), finds the field.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from starlette.requests import HTTPConnection

from api.http.http_errors import ApiError

_JSON_TYPES = ("application/json", "")  # FastAPI parses a body without a type as JSON too


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _printable(path: list[str]) -> str:
    """A dotted field name that can itself be sent back (its own surrogates escaped)."""
    return ".".join(path).encode("utf-8", "backslashreplace").decode() or "body"


def unencodable_field(value: Any) -> str | None:
    """The dotted path of the first string or key in `value` without a UTF-8 form."""
    try:
        # orjson refuses any string or key without a UTF-8 form, at C speed (18 µs
        # for a 100-message publish body, where the walk below takes 280 µs).
        orjson.dumps(value)
        return None
    except TypeError:
        pass  # such a string, or what orjson cannot encode (a huge int, deep nesting)
    stack: list[tuple[list[str], Any]] = [([], value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return _printable(path)
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                child_path = [*path, str(key)]
                if isinstance(key, str) and not _encodable(key):
                    return _printable(child_path)
                children.append((child_path, child))
            stack.extend(reversed(children))  # first field first
        elif isinstance(item, list):
            stack.extend(reversed([([*path, str(index)], child)
                                   for index, child in enumerate(item)]))
    return None


async def refuse_unencodable_text(connection: HTTPConnection) -> None:
    """App-wide dependency: a JSON body holding a lone surrogate is a 400."""
    if not isinstance(connection, Request) or connection.method in ("GET", "HEAD"):
        return
    content_type = connection.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in _JSON_TYPES and not content_type.endswith("+json"):
        return
    if not await connection.body():
        return
    try:
        value = await connection.json()  # parsed once: FastAPI's parse is cached
    except ValueError:
        return  # not JSON: FastAPI reports that itself
    field = unencodable_field(value)
    if field is not None:
        raise ApiError(400, f"{field}: must be valid Unicode text (no lone surrogates)", field)
