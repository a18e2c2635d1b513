"""Headers exchange matching (`x-match`), as RabbitMQ's rabbit_exchange_type_headers.

Theory of operation. A headers binding's arguments are conditions on the
message's `headers` table; `x-match` says how to combine them:

- `all` (also when absent or of an unrecognised value, RabbitMQ's legacy
  fallback): every condition must hold. No conditions at all means every
  message matches.
- `any`: at least one condition must hold. No conditions means no match.
- `all-with-x` / `any-with-x`: the same, but arguments whose names start with
  "x-" are conditions too. Plain `all`/`any` skip them, so a binding such as
  {x-match: all, x-tenant: a} matches everything.

`x-match` itself is never a condition. A condition holds when the header is
present and equal to the argument's value, or, when the argument has no value
(AMQP void, `None` here), when the header is merely present. Equality follows
Erlang's `==` on decoded field values: numbers compare by value (1 == 1.0),
booleans are not numbers, and a long string equals the same bytes whether it
arrived as `str` or `bytes`.

A binding is compiled once into a `HeadersPattern` so routing does not
re-parse arguments for every message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

X_MATCH: Final = "x-match"
X_MATCH_MODES: Final = frozenset({"all", "any", "all-with-x", "any-with-x"})


def _as_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return None


def validate_x_match(arguments: Mapping[str, Any]) -> None:
    """Raise ValueError when `x-match` is present but not a known mode, like RabbitMQ's bind."""
    if X_MATCH not in arguments:
        return
    raw = arguments[X_MATCH]
    mode = _as_text(raw)
    if mode is None:
        raise ValueError(
            f"invalid x-match field type {type(raw).__name__} (value {raw!r}); expected longstr"
        )
    if mode not in X_MATCH_MODES:
        raise ValueError(
            f"invalid x-match field value {mode!r}; expected all, any, all-with-x, or any-with-x"
        )


def _mode_of(arguments: Mapping[str, Any]) -> str:
    mode = _as_text(arguments.get(X_MATCH))
    return mode if mode in X_MATCH_MODES else "all"


def values_equal(expected: Any, actual: Any) -> bool:
    """Field-value equality with Erlang's `==` semantics (see module docstring)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    expected_text = _as_text(expected)
    actual_text = _as_text(actual)
    if expected_text is not None and actual_text is not None:
        return expected_text == actual_text
    try:
        return bool(expected == actual)
    except Exception:
        # A decoded value of a foreign type may raise on comparison; it cannot match.
        return False


@dataclass(frozen=True, slots=True)
class HeadersPattern:
    """A compiled headers binding: the mode and its conditions."""

    require_all: bool
    # (header name, presence only, expected value)
    conditions: tuple[tuple[str, bool, Any], ...]

    def matches(self, headers: Mapping[str, Any] | None) -> bool:
        table: Mapping[str, Any] = headers or {}
        for name, presence_only, expected in self.conditions:
            holds = name in table and (presence_only or values_equal(expected, table[name]))
            if holds != self.require_all:
                # A failure decides `all`, a success decides `any`.
                return holds
        return self.require_all


def compile_headers_pattern(arguments: Mapping[str, Any]) -> HeadersPattern:
    mode = _mode_of(arguments)
    with_x = mode.endswith("-with-x")
    conditions = tuple(
        (name, value is None, value)
        for name, value in arguments.items()
        if name != X_MATCH and (with_x or not name.startswith("x-"))
    )
    return HeadersPattern(require_all=mode.startswith("all"), conditions=conditions)


def headers_match(
    binding_arguments: Mapping[str, Any], message_headers: Mapping[str, Any] | None
) -> bool:
    """Whether a headers binding with these arguments matches a message with these headers."""
    return compile_headers_pattern(binding_arguments).matches(message_headers)
