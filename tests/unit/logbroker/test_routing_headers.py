from __future__ import annotations

from typing import Any

import pytest

from logbroker.routing import compile_headers_pattern, headers_match, validate_x_match

MESSAGE = {"format": "pdf", "type": "report", "x-tenant": "acme", "size": 10}


@pytest.mark.parametrize(
    ("arguments", "headers", "expected"),
    [
        # all (explicit and default)
        ({"x-match": "all", "format": "pdf", "type": "report"}, MESSAGE, True),
        ({"format": "pdf", "type": "report"}, MESSAGE, True),
        ({"x-match": "all", "format": "pdf", "type": "log"}, MESSAGE, False),
        ({"x-match": "all", "format": "pdf", "missing": "x"}, MESSAGE, False),
        ({"x-match": "all"}, MESSAGE, True),
        ({"x-match": "all"}, None, True),
        ({}, {}, True),
        ({"x-match": "all", "format": "pdf"}, None, False),
        # any
        ({"x-match": "any", "format": "zip", "type": "report"}, MESSAGE, True),
        ({"x-match": "any", "format": "zip", "type": "log"}, MESSAGE, False),
        ({"x-match": "any"}, MESSAGE, False),
        ({"x-match": "any", "format": "pdf"}, None, False),
        # x- arguments are ignored by all/any ...
        ({"x-match": "all", "x-tenant": "other"}, MESSAGE, True),
        ({"x-match": "all", "x-tenant": "other", "format": "pdf"}, MESSAGE, True),
        ({"x-match": "any", "x-tenant": "acme"}, MESSAGE, False),
        # ... and considered by the -with-x variants
        ({"x-match": "all-with-x", "x-tenant": "other"}, MESSAGE, False),
        ({"x-match": "all-with-x", "x-tenant": "acme", "format": "pdf"}, MESSAGE, True),
        ({"x-match": "all-with-x", "x-tenant": "acme", "format": "zip"}, MESSAGE, False),
        ({"x-match": "any-with-x", "x-tenant": "acme", "format": "zip"}, MESSAGE, True),
        ({"x-match": "any-with-x", "x-tenant": "other", "format": "zip"}, MESSAGE, False),
        # x-match itself is never a condition, even for -with-x
        ({"x-match": "all-with-x"}, MESSAGE, True),
        ({"x-match": "any-with-x"}, MESSAGE, False),
        # void arguments match on presence only
        ({"x-match": "all", "format": None}, MESSAGE, True),
        ({"x-match": "all", "missing": None}, MESSAGE, False),
        ({"x-match": "any", "missing": None, "type": None}, MESSAGE, True),
        ({"x-match": "all", "format": None}, {"format": None}, True),
        ({"x-match": "all", "format": "pdf"}, {"format": None}, False),
        # an unrecognised or mistyped x-match falls back to all
        ({"x-match": "most", "format": "pdf", "type": "log"}, MESSAGE, False),
        ({"x-match": 1, "format": "pdf"}, MESSAGE, True),
        # message headers not named by the binding do not matter
        ({"x-match": "all", "size": 10}, MESSAGE, True),
    ],
)
def test_headers_match(
    arguments: dict[str, Any], headers: dict[str, Any] | None, expected: bool
) -> None:
    assert headers_match(arguments, headers) is expected


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        (10, 10, True),
        (10, 10.0, True),
        (10, 11, False),
        ("10", 10, False),
        (True, 1, False),
        (1, True, False),
        (True, True, True),
        ("pdf", b"pdf", True),
        (b"pdf", "pdf", True),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ],
)
def test_value_equality(expected: Any, actual: Any, equal: bool) -> None:
    assert headers_match({"k": expected}, {"k": actual}) is equal


def test_x_match_as_bytes_is_read_as_text() -> None:
    assert headers_match({"x-match": b"any", "a": 1, "b": 2}, {"a": 1}) is True


def test_compiled_pattern_is_reusable() -> None:
    pattern = compile_headers_pattern({"x-match": "any", "a": 1, "x-b": 2})
    assert pattern.require_all is False
    assert [name for name, _, _ in pattern.conditions] == ["a"]
    assert pattern.matches({"a": 1}) is True
    assert pattern.matches({"x-b": 2}) is False


@pytest.mark.parametrize("value", ["all", "any", "all-with-x", "any-with-x", b"any"])
def test_validate_accepts_known_modes(value: Any) -> None:
    validate_x_match({"x-match": value})


def test_validate_accepts_missing_x_match() -> None:
    validate_x_match({"a": 1})


@pytest.mark.parametrize("value", ["most", "ALL", "", 1, None])
def test_validate_refuses_bad_modes(value: Any) -> None:
    with pytest.raises(ValueError, match="x-match"):
        validate_x_match({"x-match": value})
