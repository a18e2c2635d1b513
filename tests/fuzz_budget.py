"""How much the fuzz tests try: a few hundred cases in CI, at least 10,000 on demand.

`LOGBROKER_FUZZ=full python3 -m pytest -m fuzz` runs the full budget (README,
"Development"); every fuzz test prints what it ran, and docs/fuzzing.md keeps the
last full results.
"""

from __future__ import annotations

import os

FULL = os.environ.get("LOGBROKER_FUZZ", "") == "full"


def budget(ci: int, full: int) -> int:
    """`full` cases under LOGBROKER_FUZZ=full, else `ci`."""
    return full if FULL else ci
