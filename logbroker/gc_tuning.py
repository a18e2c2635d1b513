"""`hold_collections`, `freeze_startup_heap`: keep the garbage collector's full passes short.

CPython's full (generation 2) collection walks every tracked object. A broker
process holds about 90,000 of them once it has imported its libraries
(FastAPI, pydantic, uvicorn, pamqp) and opened its queues, nearly all of which
live as long as the process; on the 2-core machine the benchmarks run on, one
full pass over them took 55-65 ms. A full pass runs whenever the objects
promoted since the last one reach a quarter of the long-lived ones, so under
load it came every 20,000 messages or so: a 60 ms stall of the event loop,
which every message in flight waits out (a p99 latency spike, and about 10% of
the queue leader's CPU in a consume run).

`gc.freeze()` moves every object alive at that moment to a permanent
generation that collections skip: after it, a full pass walks only what was
created since (under 2,000 objects at idle, well under a millisecond). The
price is that a startup object which later becomes garbage in a reference
cycle is never freed; startup objects are modules, classes and the broker's
own long-lived structures, so that is a few objects at most.

For the same reason, collections are held (`hold_collections`) from the start
of `serve` to the freeze: the passes that would run meanwhile walk the startup
objects again and again (tens of ms of a start) and find almost nothing to
free; the one `gc.collect()` of the freeze frees what there is.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap", "hold_collections"]


def hold_collections() -> None:
    """No collections until `freeze_startup_heap` (call it first thing in a start)."""
    gc.disable()


def freeze_startup_heap() -> None:
    """Collect what startup left behind, exempt the rest from collections, and collect
    again from now on."""
    gc.collect()
    gc.freeze()
    gc.enable()
