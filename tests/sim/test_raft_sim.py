"""The deterministic Raft simulation (cluster_sim.py) over a fixed set of seeds.

A failing seed names itself and the command that replays it.
"""

from collections.abc import Iterator

import pytest

import replication.raft.leader
import replication.raft.log_store
from tests.sim.checkers import InvariantViolation
from tests.sim.cluster_sim import Simulation, run_seed

SEEDS = range(500)


@pytest.mark.parametrize("seed", SEEDS)
def test_seed(seed: int) -> None:
    run_seed(seed)


def test_a_seed_replays_exactly() -> None:
    first, second = Simulation(17).run(), Simulation(17).run()
    assert first.trace == second.trace
    assert first.stats == second.stats and first.final == second.final
    assert first.stats["sent"] > 1000  # and it did something


def test_the_seeds_cover_every_kind_of_fault_and_event() -> None:
    totals: dict[str, int] = {}
    for seed in range(40):
        for key, value in Simulation(seed).run().stats.items():
            totals[key] = totals.get(key, 0) + value
    for kind in ("lost", "duplicated", "cut", "crashes", "partitions", "compactions",
                 "snapshots_installed", "config_changes", "transfers", "elections"):
        assert totals.get(kind, 0) > 0, kind


@pytest.fixture
def broken_vote_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Voters no longer compare logs: leaders may lack committed entries."""
    monkeypatch.setattr(replication.raft.log_store.RaftLog, "is_up_to_date",
                        lambda self, last_index, last_term: True)
    yield


@pytest.fixture
def broken_quorum(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The leader commits what any one voter holds."""
    monkeypatch.setattr(replication.raft.leader, "quorum_index",
                        lambda matches, voters: max(matches.get(v, 0) for v in voters))
    yield


@pytest.mark.parametrize("mutant", ["broken_vote_check", "broken_quorum"])
def test_the_checkers_catch_a_broken_core(mutant: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue(mutant)
    caught = 0
    for seed in range(12):
        try:
            run_seed(seed)
        except InvariantViolation as violation:
            assert f"python -m tests.sim --seed {seed}" in str(violation)
            caught += 1
    assert caught > 0
