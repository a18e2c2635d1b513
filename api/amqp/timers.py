"""The clock and the timers of one connection, run the way RabbitMQ runs them.

* Handshake timeout: the connection must be open ``handshake_timeout_ms``
  after it began, or it is abandoned.
* Heartbeats (once tune-ok set an interval): one goes out after half an
  interval without output; the client is gone after two intervals without any
  input (not checked while closing).
* Close wait: our connection.close waits 3 s for close-ok before tune-ok, then
  the heartbeat interval, never more than 30 s.

Time only enters as ``now_ms`` from the owner and never runs backwards here.
"""

from __future__ import annotations

from api.amqp.connection_state import HANDSHAKE_STATES, ConnectionState
from api.amqp.frame_buffers import Outbox
from api.amqp.wire import HEARTBEAT_FRAME

__all__ = ["CLOSING_TIMEOUT_S", "HANDSHAKE_TIMEOUT_S", "Timers"]

HANDSHAKE_TIMEOUT_S = 3  # RabbitMQ's close wait before tune-ok (?NORMAL_TIMEOUT)
CLOSING_TIMEOUT_S = 30  # RabbitMQ's upper bound on waiting for close-ok


class Timers:
    """Deadlines of one connection; writes heartbeats to its Outbox when due."""

    def __init__(self, now_ms: int, handshake_timeout_ms: int, out: Outbox) -> None:
        self.now = now_ms
        self._out = out
        self._handshake_timeout_ms = handshake_timeout_ms
        self._handshake_deadline = now_ms + handshake_timeout_ms
        self._close_wait_s = HANDSHAKE_TIMEOUT_S
        self._close_deadline = 0
        self._heartbeat_s = 0
        self._last_recv = now_ms
        self._receive_monitor_paused = False

    def advance(self, now_ms: int) -> None:
        """Move the clock to ``now_ms`` (never back); output is stamped with it."""
        self.now = max(self.now, now_ms)
        self._out.now_ms = self.now

    def received(self) -> None:
        """Input arrived now."""
        self._last_recv = self.now

    def pause_receive_monitor(self, paused: bool) -> None:
        """While the owner does not read (a blocked publisher), silence is not death.

        RabbitMQ pauses its heartbeat monitor for blocked connections; resuming
        starts the two-interval window afresh.
        """
        self._receive_monitor_paused = paused
        if not paused:
            self._last_recv = self.now

    def tuned(self, heartbeat_s: int) -> None:
        """tune-ok: heartbeats every ``heartbeat_s`` (0: none), counted from now."""
        self._heartbeat_s = heartbeat_s
        wait_s = heartbeat_s if 0 < heartbeat_s < CLOSING_TIMEOUT_S else CLOSING_TIMEOUT_S
        self._close_wait_s = wait_s
        self._last_recv = self.now

    def start_close_wait(self) -> None:
        """Our connection.close went out now: start waiting for close-ok."""
        self._close_deadline = self.now + self._close_wait_s * 1000

    def close_wait_over(self) -> bool:
        return self.now >= self._close_deadline

    def next_deadline(self, state: ConnectionState) -> int | None:
        """When the owner must check again in ``state``, or None if no timer runs."""
        if state is ConnectionState.CLOSED:
            return None
        deadlines: list[int] = []
        if state is ConnectionState.CLOSING:
            deadlines.append(self._close_deadline)
        elif state in HANDSHAKE_STATES:
            deadlines.append(self._handshake_deadline)
        heartbeat_ms = self._heartbeat_s * 1000
        if heartbeat_ms:
            deadlines.append(self._out.last_write_ms + heartbeat_ms // 2)
            if state is not ConnectionState.CLOSING and not self._receive_monitor_paused:
                deadlines.append(self._last_recv + 2 * heartbeat_ms)
        return min(deadlines) if deadlines else None

    def check(self, state: ConnectionState) -> str | None:
        """Send a heartbeat if one is due; return why the client counts as gone, if it does.

        The close wait is the owner's to check first (:meth:`close_wait_over`).
        """
        now = self.now
        if state in HANDSHAKE_STATES and now >= self._handshake_deadline:
            return (
                f"handshake timeout: connection not open after "
                f"{self._handshake_timeout_ms} ms (state {state.value})"
            )
        heartbeat_ms = self._heartbeat_s * 1000
        if not heartbeat_ms:
            return None
        if (state is not ConnectionState.CLOSING and not self._receive_monitor_paused
                and now - self._last_recv >= 2 * heartbeat_ms):
            return f"missed heartbeats from client, timeout: {self._heartbeat_s}s"
        if now - self._out.last_write_ms >= heartbeat_ms // 2:
            self._out.write(HEARTBEAT_FRAME)
        return None
