"""`LeaseDriver`: runs the `LeaseKeeper` core over narrow ports (no asyncio here).

The node feeds it the Raft messages it stepped (`heard`), new terms
(`term_changed`) and every reading of the lease (`holds`: at delivery, on the
beat, before a connection writes deliveries). It carries the keeper's
verdicts out: says a lapse once, starts the read-index proof a lapsed
follower needs (`LeasePorts.prove`, whose answer comes back to the keeper),
sets one timer at a time to read a lapsed lease again, and tells the node
when the lease is restored so that what waited for it goes on.

Invariants: at most one recheck timer is set; a proof's answer is handed to
the keeper exactly once (the port calls back once); before the node's Raft
exists there is nothing to renew from, and the lease is only read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from logbroker.cluster.lease_keeper import AskLeaseProof, LeaseKeeper, LeaseRaft, LeaseVerdict
from segments.clock import Clock

__all__ = ["LeaseDriver", "LeasePorts"]
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeasePorts:
    raft: Callable[[], LeaseRaft | None]  # None: the node's Raft is not open yet
    # Ask that leader its read index and wait until this node applied it; then call
    # back once with whether it did (False: no answer, a timeout, an error).
    prove: Callable[[str, Callable[[bool], None]], None]
    call_at: Callable[[int, Callable[[], None]], object]  # a timer on the clock
    restored: Callable[[], None]  # what waited for the lease may go on


class LeaseDriver:
    def __init__(self, keeper: LeaseKeeper, ports: LeasePorts, clock: Clock) -> None:
        self.keeper = keeper
        self._ports = ports
        self._clock = clock
        self._recheck_set = False

    def term_changed(self) -> None:
        self.keeper.term_changed()

    def heard(self, source: str, term: int) -> None:
        """A Raft message from `source` in `term` was stepped here."""
        raft = self._ports.raft()
        if raft is not None and self.keeper.heard(source, term, raft,
                                                  self._clock.monotonic_ms()):
            self._restored()

    def holds(self) -> bool:
        """Whether the queues led here may deliver now (the clock is read now)."""
        raft = self._ports.raft()
        now_ms = self._clock.monotonic_ms()
        if raft is None:
            return self.keeper.lease.valid(now_ms)
        verdict = self.keeper.check(raft, now_ms)
        self._carry_out(verdict, raft)
        return verdict.valid

    def _carry_out(self, verdict: LeaseVerdict, raft: LeaseRaft) -> None:
        if verdict.lapsed_now:
            logger.warning("cluster node %s: leader lease lapsed (nothing heard from the "
                           "%s for %d ms); replicated queues led here deliver nothing "
                           "until the metadata is confirmed current", self.keeper.node_name,
                           "voters" if raft.leading else "controller", verdict.silent_ms)
        if verdict.restored:
            self._restored()
        if verdict.ask is not None:
            ask = verdict.ask
            self._ports.prove(ask.leader, lambda applied: self._proved(ask, applied))
        if verdict.check_again_ms is not None and not self._recheck_set:
            self._recheck_set = True
            self._ports.call_at(verdict.check_again_ms, self._recheck)

    def _recheck(self) -> None:
        self._recheck_set = False
        self.holds()

    def _proved(self, ask: AskLeaseProof, applied: bool) -> None:
        raft = self._ports.raft()
        leader_now = raft.leader if raft is not None else None
        if self.keeper.proved(ask.request, leader_now, applied, self._clock.monotonic_ms()):
            self._restored()
        self.holds()  # the next question, or the timer to ask it

    def _restored(self) -> None:
        logger.info("cluster node %s: leader lease restored", self.keeper.node_name)
        self._ports.restored()
