"""Whether a queue holds its publishers back while its consumers catch up.

Theory of operation
-------------------
RabbitMQ's credit flow slows a publisher to what the queue process gets
through, so when the broker (or the machine) is saturated a queue with
consumers keeps a short backlog and latency stays low. logbroker has no queue
process that can fall behind: publishing and delivering share one event loop,
and on a saturated machine an unthrottled publisher takes the CPU its queue's
consumers need, so their backlog (and every message's latency) grows without
bound while the consumers could have kept up.

So a queue with consumers and more than ``high`` ready messages (every
consumer out of prefetch credit) *holds* the connections publishing to it:
they are not read again until the backlog is down to ``low``. A hold also ends
when no message was delivered for ``stall_ms`` (the consumers are not taking
any: holding achieves nothing) or after ``hold_max_ms``.

Holding helps only if the consumers are slowed by the broker, not by their own
work: a consumer application that handles 2,000 messages a second takes 2,000
whether the publisher runs or waits, and RabbitMQ does not slow a publisher
because a consumer is slow (its queue absorbs the burst). Nothing the broker
sees tells the two apart except the outcome, so it is measured. A queue is in
one of three modes:

* ``trial``: holds (of at most ``trial_hold_max_ms``) alternate with open
  phases of at least as long, both with a backlog, so the consumers always had
  messages to take. Once each side has ``trial_ms``, the consumers' delivery
  rate while publishers were held is compared with their rate while they ran:
* ``flow`` if holding raised it by ``gain`` or more (the broker was the
  bottleneck), or by ``close_gain`` or more while the publishers, running,
  published at most ``close_ratio`` times as fast as the consumers took
  messages while held: hold whenever the backlog passes ``high``, publishers running
  at least ``open_min_ms`` between holds, for ``flow_ms``; then a new trial;
* ``cooldown`` otherwise (the consumers set their own pace): no holds for
  ``cooldown_ms``, then a new trial; after each trial in a row that finds
  holding useless the cooldown doubles, up to ``cooldown_max_ms`` (a trial
  that finds it useful starts it over). Throttling a slow consumer's
  publisher costs it pauses of at most ``trial_hold_max_ms``, adding up to
  about ``trial_ms`` per cooldown: a few per cent at first, well under one
  per cent once the cooldown is long.

The second way in exists because the margin shrinks as the broker gets faster:
on a saturated broker the consumers take less while publishers run, but on an
efficient event loop (uvloop) only 1.26-2.7x less, so a bar of 1.4 alone
misjudged about one trial in twenty and the queue's backlog, and its latency,
grew for a whole cooldown. Those publishers ran at most 1.9x as fast as the
held consumers take messages: holding costs them little. A consumer application
that sets its own pace (the case the bar guards) is far behind its publishers:
one sleeping 0.5 ms per message gains 0.94-1.29x from a hold (it shares the
CPU too) while its publisher runs 13-18x as fast; for it only a clear gain may
justify a hold that would cut the publisher to a fraction. The published count
is not observed directly: it is the backlog's growth plus the deliveries
during the open phases (requeues and expiries blur it; a shrinking backlog
counts as nothing published).

A trial whose consumers run dry (no ready messages) starts over: its figures
no longer describe a backlog.

Invariants: a hold always ends (``hold_max_ms``; the shell checks at least
every ``stall_ms`` while holding); a queue without consumers never holds; the
core is pure (time and the delivery count are inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["FlowLimits", "FlowMode", "PublisherFlow"]


class FlowMode(Enum):
    TRIAL = "trial"
    FLOW = "flow"
    COOLDOWN = "cooldown"


@dataclass(frozen=True, slots=True)
class FlowLimits:
    high: int = 200  # ready messages (with consumers) above which publishers are held
    low: int = 100  # a hold ends once the backlog is down to this
    stall_ms: int = 20  # ... or when nothing was delivered for this long
    hold_max_ms: int = 500  # ... or after this long in flow mode
    trial_hold_max_ms: int = 100  # ... or after this long in a trial
    open_min_ms: int = 10  # publishers run at least this long between holds
    open_max_ms: int = 250  # an open phase without publishes this long is measured anew
    trial_ms: int = 100  # a trial measures at least this long held and as long open
    gain: float = 1.4  # holding must raise the delivery rate this much to go on ...
    close_gain: float = 1.15  # ... or this much, when publishers were at most ...
    close_ratio: float = 3.0  # ... this many times as fast as the held delivery rate
    flow_ms: int = 2_000  # a verdict for holding stands this long
    cooldown_ms: int = 3_000  # no holds for this long after holding did not help ...
    cooldown_max_ms: int = 30_000  # ... doubling, up to this, while it keeps not helping


class PublisherFlow:
    """The decisions for one queue; `FlowGate` keeps the held publishers' future."""

    def __init__(self, limits: FlowLimits | None = None) -> None:
        self.limits = limits or FlowLimits()
        self.mode = FlowMode.TRIAL
        self._mode_until_ms = 0  # when flow or cooldown ends
        self._cooldown_ms = self.limits.cooldown_ms  # the next cooldown's length
        self.holding = False
        self._phase_start_ms = 0  # of the current hold
        self._phase_delivered = 0  # the delivery count when the phase began
        self._open_since_ms: int | None = None  # None: no open phase being measured
        self._open_ready = 0  # the backlog when the open phase began
        self._last_delivered = 0
        self._last_progress_ms = 0
        # The trial's totals.
        self._hold_ms = 0
        self._hold_delivered = 0
        self._open_ms = 0
        self._open_delivered = 0
        self._open_published = 0
        self.holds = 0  # holds begun, for statistics
        self.cooldowns = 0  # trials in which holding did not help

    def should_hold(self, ready: int, consumers: int, delivered: int, now_ms: int) -> bool:
        """A publish reached the queue: must its publisher wait? Begins a hold if so."""
        if self.holding:
            return True
        limits = self.limits
        if consumers == 0 or ready <= limits.high:
            if ready == 0:  # the consumers ran dry: the figures so far say nothing
                self._open_since_ms = None
                if self.mode is FlowMode.TRIAL:
                    self._start_trial()
            return False
        if self.mode is not FlowMode.TRIAL and now_ms >= self._mode_until_ms:
            self._start_trial()
        if self.mode is FlowMode.COOLDOWN:
            return False
        if self._open_since_ms is None:
            # A backlog just formed: measure the consumers with publishers running first.
            self._begin_open(ready, delivered, now_ms)
            return False
        open_ms = now_ms - self._open_since_ms
        if open_ms > limits.open_max_ms:
            # Publishers were idle this long: the consumers may have run dry meanwhile,
            # so measure them afresh.
            self._begin_open(ready, delivered, now_ms)
            return False
        if open_ms < limits.open_min_ms:
            return False
        if self.mode is FlowMode.TRIAL and self._open_ms + open_ms < self._hold_ms:
            return False  # a trial keeps the open side as long as the held side
        self._open_ms += open_ms
        self._open_delivered += delivered - self._phase_delivered
        self._open_published += max(0, ready - self._open_ready + delivered
                                    - self._phase_delivered)
        self._open_since_ms = None
        self.holding = True
        self.holds += 1
        self._phase_start_ms = now_ms
        self._phase_delivered = delivered
        self._last_delivered = delivered
        self._last_progress_ms = now_ms
        return True

    def should_release(self, ready: int, consumers: int, delivered: int, now_ms: int) -> bool:
        """While holding (after deliveries, and on a timer): may the publishers go on?
        Ends the hold if so."""
        if not self.holding:
            return True
        if delivered != self._last_delivered:
            self._last_delivered = delivered
            self._last_progress_ms = now_ms
        limits = self.limits
        if not (consumers == 0 or ready <= limits.low
                or now_ms - self._last_progress_ms >= limits.stall_ms
                or now_ms - self._phase_start_ms >= self._hold_max_ms()):
            return False
        self.holding = False
        self._hold_ms += now_ms - self._phase_start_ms
        self._hold_delivered += delivered - self._phase_delivered
        self._begin_open(ready, delivered, now_ms)
        if self.mode is FlowMode.TRIAL:
            self._judge(now_ms)
        return True

    def next_check_ms(self, now_ms: int) -> int | None:
        """While holding, when `should_release` must be asked again even if nothing
        happens (the stall and the maximum are measured from the clock)."""
        if not self.holding:
            return None
        return min(self._last_progress_ms + self.limits.stall_ms,
                   self._phase_start_ms + self._hold_max_ms())

    def _hold_max_ms(self) -> int:
        limits = self.limits
        return limits.hold_max_ms if self.mode is FlowMode.FLOW else limits.trial_hold_max_ms

    def _begin_open(self, ready: int, delivered: int, now_ms: int) -> None:
        self._open_since_ms = now_ms
        self._open_ready = ready
        self._phase_delivered = delivered

    def _start_trial(self) -> None:
        self.mode = FlowMode.TRIAL
        self._hold_ms = self._hold_delivered = self._open_ms = self._open_delivered = 0
        self._open_published = 0

    def _judge(self, now_ms: int) -> None:
        """Once a trial measured both sides: hold on only if it made consumers faster."""
        limits = self.limits
        if self._hold_ms < limits.trial_ms or self._open_ms < limits.trial_ms:
            return
        if self._holding_helps():
            self.mode = FlowMode.FLOW
            self._mode_until_ms = now_ms + limits.flow_ms
            self._cooldown_ms = limits.cooldown_ms
        else:
            self.mode = FlowMode.COOLDOWN
            self._mode_until_ms = now_ms + self._cooldown_ms
            self._cooldown_ms = min(2 * self._cooldown_ms, limits.cooldown_max_ms)
            self._open_since_ms = None
            self.cooldowns += 1

    def _holding_helps(self) -> bool:
        limits = self.limits
        hold_rate = self._hold_delivered / self._hold_ms
        if hold_rate <= 0:
            return False
        open_rate = self._open_delivered / self._open_ms
        if hold_rate >= limits.gain * open_rate:
            return True
        publish_rate = self._open_published / self._open_ms
        return (hold_rate >= limits.close_gain * open_rate
                and publish_rate <= limits.close_ratio * hold_rate)
