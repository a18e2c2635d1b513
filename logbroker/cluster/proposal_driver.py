"""`ProposalDriver`: runs the `MetadataProposals` core over narrow ports (no asyncio here).

The asyncio node (`ReplicatedMetadata.propose`) and the simulation use this
same driver; only the ports differ. It hands the core each proposal and
each port's outcome with a fresh `ProposalView` (the clock, the Raft leader
known), carries the effects out in order, and calls the proposer's
callback on `Done`. Invariants: the core is entered one call at a time
(`SerialCalls`); after `stop`, no callback is called; one timer at a time is
set, for the earliest `RetryAt` (the core's `tick` asks for the next one), so
a proposal costs no timer of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from logbroker.cluster.metadata_proposals import (
    Done,
    Forward,
    MetadataProposals,
    Outcome,
    ProposalEffect,
    ProposalView,
    ProposeHere,
    RetryAt,
    WaitApplied,
)
from logbroker.cluster.serial_calls import SerialCalls
from logbroker.errors import BrokerError
from segments.clock import Clock

OnOutcome = Callable[[Outcome], None]
OnDone = Callable[[BrokerError | None], None]


class ProposalPorts(Protocol):
    def leader(self) -> str | None:
        """The Raft leader this node knows (itself, when it leads)."""

    def leading(self) -> bool: ...

    def propose_here(self, data: bytes, timeout_ms: int, on_outcome: OnOutcome) -> None: ...

    def forward(self, leader: str, data: bytes, timeout_ms: int,
                on_outcome: OnOutcome) -> None:
        """`metadata.propose` to the leader: `Accepted(index)` once applied there."""

    def wait_applied(self, index: int, timeout_ms: int, on_outcome: OnOutcome) -> None:
        """`Accepted()` once this node applied `index`."""

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> object: ...


class ProposalDriver:
    def __init__(self, core: MetadataProposals, ports: ProposalPorts, clock: Clock) -> None:
        self.core = core
        self._ports = ports
        self._clock = clock
        self._calls = SerialCalls()
        self._callers: dict[int, OnDone] = {}
        self._stopped_with: BrokerError | None = None
        self._timer_at: int | None = None  # when the one timer set fires

    def propose(self, data: bytes, on_done: OnDone) -> None:
        if self._calls.stopped:
            if self._stopped_with is not None:
                on_done(self._stopped_with)
            return

        def run() -> None:
            request, effects = self.core.propose(data, self._view())
            self._callers[request] = on_done
            self._carry_out(effects)
        self._calls.run(run)

    def tick(self) -> None:
        self._timer_at = None
        self._calls.run(lambda: self._carry_out(self.core.tick(self._view())))

    def stop(self, error: BrokerError | None = None) -> None:
        """Nothing reaches the core any more; with `error`, the proposals in flight end
        with it (without, their callers are forgotten: the node is gone)."""
        self._calls.stop()
        self._stopped_with = error
        callers, self._callers = self._callers, {}
        if error is not None:
            for caller in callers.values():
                caller(error)

    def _answer(self, request: int) -> OnOutcome:
        def on_outcome(outcome: Outcome) -> None:
            self._calls.run(lambda: self._carry_out(
                self.core.answered(request, outcome, self._view())))
        return on_outcome

    def _wake_at(self, at_ms: int) -> None:
        if self._timer_at is None or at_ms < self._timer_at:
            self._timer_at = at_ms
            self._ports.call_at(at_ms, self._fired(at_ms))

    def _fired(self, at_ms: int) -> Callable[[], None]:
        def fire() -> None:
            if self._timer_at == at_ms:  # else an earlier timer took its place
                self.tick()
        return fire

    def _view(self) -> ProposalView:
        ports = self._ports
        return ProposalView(self._clock.monotonic_ms(), ports.leader(), ports.leading())

    def _carry_out(self, effects: list[ProposalEffect]) -> None:
        ports = self._ports
        for effect in effects:
            if self._calls.stopped:
                return
            if isinstance(effect, ProposeHere):
                ports.propose_here(effect.data, effect.timeout_ms, self._answer(effect.request))
            elif isinstance(effect, Forward):
                ports.forward(effect.leader, effect.data, effect.timeout_ms,
                              self._answer(effect.request))
            elif isinstance(effect, WaitApplied):
                ports.wait_applied(effect.index, effect.timeout_ms, self._answer(effect.request))
            elif isinstance(effect, RetryAt):
                self._wake_at(effect.at_ms)
            elif isinstance(effect, Done):
                caller = self._callers.pop(effect.request, None)
                if caller is not None:
                    caller(effect.error)
