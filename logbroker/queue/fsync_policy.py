"""A queue's fsync policy: when an append counts as durable (see `group_commit`).

- `always`: once written and fsynced (a publish confirm means "on disk");
- `interval:N`: once written to the OS, with an fsync within N ms;
- `never`: once written to the OS, which flushes when it likes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FsyncMode(enum.Enum):
    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


@dataclass(frozen=True)
class FsyncPolicy:
    mode: FsyncMode = FsyncMode.ALWAYS
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        """`always`, `never`, or `interval:N` (N milliseconds, N > 0)."""
        name, _, argument = text.strip().partition(":")
        if name == "always" and not argument:
            return cls(FsyncMode.ALWAYS)
        if name == "never" and not argument:
            return cls(FsyncMode.NEVER)
        if name == "interval" and argument.strip().isdigit() and int(argument) > 0:
            return cls(FsyncMode.INTERVAL, int(argument))
        raise ValueError(
            f"fsync policy {text!r} is not one of 'always', 'never', 'interval:N' (N ms > 0)"
        )

    def __str__(self) -> str:
        if self.mode is FsyncMode.INTERVAL:
            return f"interval:{self.interval_ms}"
        return str(self.mode.value)
