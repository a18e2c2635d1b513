"""The proposing node's core: where a proposal goes, what is retried, when it gives up."""

from collections.abc import Callable

from logbroker.cluster.metadata_proposals import (
    Accepted,
    Done,
    Failed,
    Forward,
    MetadataProposals,
    ProposalEffect,
    ProposalView,
    ProposeHere,
    Retry,
    RetryAt,
    TimedOut,
    WaitApplied,
)
from logbroker.cluster.proposal_driver import OnOutcome, ProposalDriver
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata.reply_codes import INTERNAL_ERROR
from segments.clock import ManualClock

DATA = b"command"


def view(now: int, leader: str | None = "leader", leading: bool = False) -> ProposalView:
    return ProposalView(now, leader, leading)


def started(core: MetadataProposals, at: ProposalView) -> tuple[int, list[ProposalEffect]]:
    return core.propose(DATA, at)


def test_on_the_leader_it_proposes_here_and_is_done_when_applied() -> None:
    core = MetadataProposals(1000, 50)
    request, effects = started(core, view(0, "me", leading=True))
    assert effects == [RetryAt(1000), ProposeHere(request, DATA, 1000)]
    assert core.answered(request, Accepted(), view(5)) == [Done(request, None)]
    assert core.in_flight == 0


def test_elsewhere_it_forwards_then_waits_until_applied_here() -> None:
    core = MetadataProposals(1000, 50)
    request, effects = started(core, view(0))
    assert effects[1:] == [Forward(request, "leader", DATA, 1000)]
    assert core.answered(request, Accepted(17), view(40)) == [WaitApplied(request, 17, 960)]
    assert core.answered(request, Accepted(), view(45)) == [Done(request, None)]


def test_without_a_leader_it_tries_again_until_its_timeout() -> None:
    core = MetadataProposals(200, 50)
    _, effects = started(core, view(0, None))
    assert effects == [RetryAt(200), RetryAt(50)]
    assert core.tick(view(49, None)) == [RetryAt(50)]  # the next tick it needs
    assert core.tick(view(50, None)) == [RetryAt(100), RetryAt(100)]
    [done] = core.tick(view(200, None))
    assert isinstance(done, Done) and done.error is not None
    assert done.error.reply_code == INTERNAL_ERROR
    assert "no Raft leader" in done.error.text and "majority" in done.error.text


def test_a_leader_appearing_while_waiting_takes_the_proposal() -> None:
    core = MetadataProposals(1000, 50)
    request, _ = started(core, view(0, None))
    assert core.tick(view(50)) == [Forward(request, "leader", DATA, 950), RetryAt(1000)]


def test_not_the_leader_is_retried_and_a_refusal_is_not() -> None:
    core = MetadataProposals(1000, 50)
    request, _ = started(core, view(0))
    assert core.answered(request, Retry(), view(10)) == [RetryAt(60)]
    assert core.tick(view(60, "other")) == [Forward(request, "other", DATA, 940),
                                            RetryAt(1000)]
    refusal = BrokerError(NOT_FOUND, "no vhost 'v'")
    assert core.answered(request, Failed(refusal), view(70)) == [Done(request, refusal)]


def test_a_timeout_reports_the_leader_that_did_not_commit() -> None:
    core = MetadataProposals(1000, 50)
    request, _ = started(core, view(0))
    [done] = core.answered(request, TimedOut(), view(1000))
    assert isinstance(done, Done) and done.error is not None
    assert "the Raft leader leader did not commit it within 1 s" in done.error.text


def test_the_deadline_ends_a_proposal_in_flight_and_later_answers_are_ignored() -> None:
    core = MetadataProposals(1000, 50)
    request, _ = started(core, view(0))
    [done] = core.tick(view(1000))
    assert isinstance(done, Done) and done.error is not None
    assert core.answered(request, Accepted(3), view(1001)) == []


def test_a_duplicate_answer_to_an_attempt_given_up_on_is_ignored() -> None:
    core = MetadataProposals(1000, 50)
    request, _ = started(core, view(0))
    core.answered(request, Retry(), view(10))
    assert core.answered(request, Retry(), view(11)) == []


class Ports:
    """Fake ports: a proposal here is applied at once; timers are listed."""

    def __init__(self, leading: bool) -> None:
        self.is_leader = leading
        self.timers: list[tuple[int, Callable[[], None]]] = []
        self.here: list[bytes] = []

    def leader(self) -> str | None:
        return "me" if self.is_leader else None

    def leading(self) -> bool:
        return self.is_leader

    def propose_here(self, data: bytes, timeout_ms: int, on_outcome: OnOutcome) -> None:
        self.here.append(data)
        on_outcome(Accepted())  # at once: the driver takes it after the current call

    def forward(self, leader: str, data: bytes, timeout_ms: int,
                on_outcome: OnOutcome) -> None:
        raise AssertionError("no forwarding in these tests")

    def wait_applied(self, index: int, timeout_ms: int, on_outcome: OnOutcome) -> None:
        on_outcome(Accepted())

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        self.timers.append((monotonic_ms, action))


def test_the_driver_retries_on_its_timer_and_calls_back_once() -> None:
    clock, ports = ManualClock(0), Ports(leading=False)
    driver = ProposalDriver(MetadataProposals(1000, 50), ports, clock)
    results: list[BrokerError | None] = []
    driver.propose(DATA, results.append)
    assert [at for at, _ in ports.timers] == [1000, 50]
    ports.is_leader = True
    clock.advance(50)
    ports.timers[1][1]()
    assert ports.here == [DATA] and results == [None]
    clock.advance(950)
    ports.timers[0][1]()  # the deadline's timer finds nothing left
    assert results == [None]


def test_a_stopped_driver_refuses_what_was_in_flight_and_what_comes() -> None:
    clock, ports = ManualClock(0), Ports(leading=False)
    driver = ProposalDriver(MetadataProposals(1000, 50), ports, clock)
    results: list[BrokerError | None] = []
    driver.propose(DATA, results.append)
    stopping = BrokerError(INTERNAL_ERROR, "stopping")
    driver.stop(stopping)
    driver.propose(DATA, results.append)
    assert results == [stopping, stopping]


def test_the_driver_sets_one_timer_for_many_proposals() -> None:
    clock, ports = ManualClock(0), Ports(leading=False)
    driver = ProposalDriver(MetadataProposals(1000, 50), ports, clock)
    results: list[BrokerError | None] = []
    for _ in range(3):
        driver.propose(DATA, results.append)
        clock.advance(10)
    assert [at for at, _ in ports.timers] == [1000, 50]  # the deadline, then the retry
    ports.is_leader = True
    clock.advance(20)  # 50: the first one's retry is due, the others' at 60 and 70
    ports.timers[1][1]()
    assert results == [None] and [at for at, _ in ports.timers][2:] == [60]
    clock.advance(20)
    ports.timers[2][1]()
    assert results == [None, None, None]
