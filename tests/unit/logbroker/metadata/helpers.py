"""Shared test helpers: strict value comparison and a bootstrapped state."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from logbroker.metadata import MetadataState
from logbroker.metadata.passwords import hash_password

GUEST_HASH = hash_password("guest", b"\x01\x02\x03\x04")


def new_state() -> MetadataState:
    return MetadataState.bootstrap(GUEST_HASH)


def strict_equal(left: Any, right: Any) -> bool:
    """Equal including types: True is not 1, 1 is not 1.0, Decimal('1.0') is not Decimal('1')."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return list(left) == list(right) and all(strict_equal(left[k], right[k]) for k in left)
    if type(left) is not type(right):
        return False
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(strict_equal, left, right))
    if isinstance(left, float):
        return (math.isnan(left) and math.isnan(right)) or repr(left) == repr(right)
    if isinstance(left, Decimal):
        return str(left) == str(right)
    if isinstance(left, datetime):
        return left == right and left.isoformat() == right.isoformat()
    return bool(left == right)
