"""`ConnectionRegistry`: connections stamped with the injected clock's wall time when added."""

from __future__ import annotations

from logbroker.connections import ConnectionInfo, ConnectionRegistry
from segments.clock import ManualClock


def test_a_connection_is_stamped_when_added_unless_it_says_when() -> None:
    clock = ManualClock(wall_ms=1_800_000_000_000)
    registry = ConnectionRegistry(clock=clock)
    fresh = ConnectionInfo("c1", "AMQP 0-9-1", "127.0.0.1", 1, "guest", "/")
    registry.add(fresh)
    assert fresh.connected_at_ms == 1_800_000_000_000
    clock.advance(5)
    known = ConnectionInfo("c2", "WebSocket", "127.0.0.1", 2, "guest", "/", connected_at_ms=7)
    registry.add(known)
    assert known.connected_at_ms == 7
    assert [info.connection_id for info in registry.all()] == ["c1", "c2"]
