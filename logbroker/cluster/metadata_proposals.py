"""`MetadataProposals`: the proposing node's side of a metadata change (a pure core).

Theory of operation. A command (already checked against this node's state,
and encoded) must take effect cluster-wide. (Membership changes, which only
the leader makes too, go the same way: `subject` names what is changing.) On the Raft leader it is
proposed there (`ProposeHere`); on any other node it is forwarded to the
leader (`Forward`, `metadata.propose`), which answers with the index it was
applied at once it took effect, and this node then waits until it applied
that index itself (`WaitApplied`), so a client that declared through a
follower can use the queue there at once (read-your-writes). Without a known
leader it tries again every `retry_ms`. Whatever happens, the caller hears
back (`Done`) by `timeout_ms`: a minority partition cannot change
definitions, and never hangs.

Invariants:
- a proposal is tried again only when it certainly did not take effect (no
  leader, "not the leader", a link that refused it: `Retry`); any other
  failure ends it, and an outcome that is unknown is reported as such;
- at most one attempt of a proposal is in flight at a time;
- `Done` comes exactly once per proposal, at the latest at its deadline;
  answers that come after it are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from logbroker.errors import BrokerError
from logbroker.metadata.reply_codes import INTERNAL_ERROR

TIMEOUT_MS = 5000
RETRY_MS = 50


@dataclass(frozen=True, slots=True)
class ProposalView:
    now_ms: int
    leader: str | None  # the Raft leader this node knows (itself included)
    leading: bool


# ------------------------------------------------------- outcomes (events)

@dataclass(frozen=True, slots=True)
class Accepted:
    """Took effect: here (`index` None), or at the leader, applied there at `index`."""

    index: int | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Certainly not applied (not the leader, or the link refused it): try again."""


@dataclass(frozen=True, slots=True)
class Failed:
    error: BrokerError


@dataclass(frozen=True, slots=True)
class TimedOut:
    """Not applied in time (it may still be)."""


Outcome = Accepted | Retry | Failed | TimedOut


# ----------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class ProposeHere:
    request: int
    data: bytes
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Forward:
    request: int
    leader: str
    data: bytes
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class WaitApplied:
    request: int
    index: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class RetryAt:
    """Call `tick` at (or just after) `at_ms`."""

    at_ms: int


@dataclass(frozen=True, slots=True)
class Done:
    request: int
    error: BrokerError | None


ProposalEffect = ProposeHere | Forward | WaitApplied | RetryAt | Done


@dataclass
class _Proposal:
    data: bytes
    deadline_ms: int
    phase: Literal["idle", "asking", "applying"] = "idle"
    next_try_ms: int = 0


class MetadataProposals:
    def __init__(self, timeout_ms: int = TIMEOUT_MS, retry_ms: int = RETRY_MS,
                 subject: str = "definitions") -> None:
        self._timeout_ms = timeout_ms
        self._retry_ms = retry_ms
        self._subject = subject  # what cannot change without a leader, for the refusal
        self._proposals: dict[int, _Proposal] = {}
        self._last_request = 0

    @property
    def in_flight(self) -> int:
        return len(self._proposals)

    def propose(self, data: bytes, view: ProposalView) -> tuple[int, list[ProposalEffect]]:
        self._last_request += 1
        request = self._last_request
        proposal = _Proposal(data, view.now_ms + self._timeout_ms)
        self._proposals[request] = proposal
        return request, [RetryAt(proposal.deadline_ms), *self._try(request, view)]

    def answered(self, request: int, outcome: Outcome, view: ProposalView
                 ) -> list[ProposalEffect]:
        proposal = self._proposals.get(request)
        if proposal is None or proposal.phase == "idle":
            return []  # over already, or a late answer to an attempt given up on
        if isinstance(outcome, Accepted):
            if outcome.index is None or proposal.phase == "applying":
                return self._finish(request, None)
            proposal.phase = "applying"
            return [WaitApplied(request, outcome.index, self._remaining(proposal, view))]
        if isinstance(outcome, Retry):
            return self._later(request, proposal, view)
        if isinstance(outcome, Failed):
            return self._finish(request, outcome.error)
        return self._finish(request, self._no_quorum(view))

    def tick(self, view: ProposalView) -> list[ProposalEffect]:
        """Try again what waited, refuse what ran out of time; ask for the next tick."""
        effects: list[ProposalEffect] = []
        for request, proposal in list(self._proposals.items()):
            if view.now_ms >= proposal.deadline_ms:
                effects += self._finish(request, self._no_quorum(view))
            elif proposal.phase == "idle" and view.now_ms >= proposal.next_try_ms:
                effects += self._try(request, view)
        if self._proposals:
            effects.append(RetryAt(min(p.next_try_ms if p.phase == "idle" else p.deadline_ms
                                       for p in self._proposals.values())))
        return effects

    def _try(self, request: int, view: ProposalView) -> list[ProposalEffect]:
        proposal = self._proposals[request]
        if view.now_ms >= proposal.deadline_ms:
            return self._finish(request, self._no_quorum(view))
        remaining = self._remaining(proposal, view)
        if view.leading:
            proposal.phase = "asking"
            return [ProposeHere(request, proposal.data, remaining)]
        if view.leader is not None:
            proposal.phase = "asking"
            return [Forward(request, view.leader, proposal.data, remaining)]
        return self._later(request, proposal, view)

    def _later(self, request: int, proposal: _Proposal, view: ProposalView
               ) -> list[ProposalEffect]:
        proposal.phase = "idle"
        proposal.next_try_ms = view.now_ms + self._retry_ms
        return [RetryAt(proposal.next_try_ms)]

    def _finish(self, request: int, error: BrokerError | None) -> list[ProposalEffect]:
        del self._proposals[request]
        return [Done(request, error)]

    def _remaining(self, proposal: _Proposal, view: ProposalView) -> int:
        return max(1, proposal.deadline_ms - view.now_ms)

    def _no_quorum(self, view: ProposalView) -> BrokerError:
        leader = view.leader
        where = f"the Raft leader {leader} did not commit it" if leader else "no Raft leader"
        return BrokerError(INTERNAL_ERROR, (
            f"{self._subject} cannot change now: {where} within {self._timeout_ms / 1000:g} s "
            "(a majority of the cluster's nodes must be reachable)"))
