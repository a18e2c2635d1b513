"""The asyncio ports of the controller and proposal drivers: outcomes in, callbacks out."""

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from logbroker.cluster.asyncio_ports import LoopTimers, TaskSet
from logbroker.cluster.cluster_rpc import PeerUnavailable
from logbroker.cluster.controller_ports import RpcStatusAsker, TaskProposer
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.metadata_proposals import Accepted, Failed, Outcome, Retry, TimedOut
from logbroker.cluster.replicated_metadata import outcome_of
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata import AddVhost, Command
from replication.queue.failover import ReplicaStatus
from replication.raft.errors import NotLeader
from replication.raft.proposals import ProposalTimeout
from segments.clock import ManualClock

pytestmark = pytest.mark.timeout(10)


class FakeRpc:
    def __init__(self, answer: Callable[[str, Envelope], Envelope]) -> None:
        self._answer = answer
        self.calls: list[tuple[str, str]] = []

    async def call(self, peer: str, envelope: Envelope, timeout_s: float) -> Envelope:
        self.calls.append((peer, envelope.op))
        return self._answer(peer, envelope)


def refuse(peer: str, envelope: Envelope) -> Envelope:
    raise PeerUnavailable(peer)


async def settled(tasks: TaskSet) -> None:
    for _ in range(5):
        await asyncio.sleep(0)
    await tasks.cancel_all()


async def test_a_status_asked_of_this_node_is_read_in_place_and_answered_at_once() -> None:
    rpc = FakeRpc(refuse)
    asker = RpcStatusAsker("a", rpc.call, lambda vhost, name: {
        "log_end": 9, "last_epoch": 2, "started_ms": 5}, TaskSet())
    answers: list[ReplicaStatus | None] = []
    asker.ask_status("a", "/", "q", 1000, answers.append)
    assert answers == [ReplicaStatus("a", 9, 2, 5)] and rpc.calls == []


async def test_a_status_asked_of_a_peer_goes_over_the_rpc() -> None:
    rpc = FakeRpc(lambda peer, envelope: Envelope("ok", {
        "log_end": 3, "last_epoch": 1, "started_ms": 7}))
    tasks = TaskSet()
    asker = RpcStatusAsker("a", rpc.call, lambda vhost, name: None, tasks)
    answers: list[ReplicaStatus | None] = []
    asker.ask_status("b", "/", "q", 1000, answers.append)
    asker.ask_status("c", "/", "q", 1000, answers.append)
    await settled(tasks)
    assert answers == [ReplicaStatus("b", 3, 1, 7), ReplicaStatus("c", 3, 1, 7)]
    assert rpc.calls == [("b", "r.status"), ("c", "r.status")]


async def test_an_unreachable_peer_answers_no_status() -> None:
    tasks = TaskSet()
    asker = RpcStatusAsker("a", FakeRpc(refuse).call, lambda v, n: None, tasks)
    answers: list[ReplicaStatus | None] = []
    asker.ask_status("b", "/", "q", 1000, answers.append)
    await settled(tasks)
    assert answers == [None]


async def test_a_proposal_task_reports_its_refusal_or_success() -> None:
    async def propose(command: Command) -> None:
        if command == AddVhost("bad"):
            raise BrokerError(NOT_FOUND, "no such thing")

    tasks = TaskSet()
    proposer = TaskProposer(propose, tasks)
    results: list[str | None] = []
    proposer.propose(AddVhost("good"), results.append)
    proposer.propose(AddVhost("bad"), results.append)
    await settled(tasks)
    assert results == [None, BrokerError(NOT_FOUND, "no such thing").reply_text]


async def test_loop_timers_count_on_the_injected_clock() -> None:
    clock = ManualClock(1000)
    timers = LoopTimers(clock)
    fired: list[str] = []
    timers.call_at(990, lambda: fired.append("past"))  # already due: at once
    timers.call_at(60_000, lambda: fired.append("far"))
    await asyncio.sleep(0.01)
    assert fired == ["past"]
    timers.cancel_all()


@pytest.mark.parametrize(("raised", "expected"), [
    (NotLeader("a", "b"), Retry()),
    (PeerUnavailable("b"), Retry()),
    (ProposalTimeout("slow"), TimedOut()),
])
async def test_what_a_proposal_attempt_raised_is_its_outcome(raised: Exception,
                                                              expected: Outcome) -> None:
    outcomes: list[Outcome] = []

    async def attempt() -> Outcome:
        raise raised
    await outcome_of(attempt(), outcomes.append)
    assert outcomes == [expected]


async def test_a_refused_proposal_keeps_its_error_and_a_success_its_index() -> None:
    outcomes: list[Outcome] = []
    refusal = BrokerError(NOT_FOUND, "no vhost 'v'")

    async def refused() -> Outcome:
        raise refusal

    async def accepted() -> Outcome:
        return Accepted(4)
    attempts: list[Awaitable[Outcome]] = [refused(), accepted()]
    for attempt in attempts:
        await outcome_of(attempt, outcomes.append)
    assert outcomes == [Failed(refusal), Accepted(4)]
