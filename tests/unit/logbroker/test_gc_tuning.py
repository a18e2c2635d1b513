"""freeze_startup_heap: what is alive at the call leaves the collected generations."""

from __future__ import annotations

import gc
import weakref

from logbroker.gc_tuning import freeze_startup_heap, hold_collections


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only a collection frees it


def test_objects_alive_at_the_freeze_are_skipped_and_later_ones_collected() -> None:
    before = _Node()
    frozen = weakref.ref(before)
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 0
        after = _Node()
        collected = weakref.ref(after)
        del before, after
        gc.collect()
        assert collected() is None  # a cycle made after the freeze is still freed
        assert frozen() is not None  # the documented price: frozen cycles stay
    finally:
        gc.unfreeze()
        gc.collect()
    assert frozen() is None


def test_collections_held_during_a_start_resume_at_the_freeze() -> None:
    try:
        hold_collections()
        assert not gc.isenabled()
        freeze_startup_heap()
        assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
        gc.collect()
