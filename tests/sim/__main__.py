"""Replay simulation seeds: `python -m tests.sim --seed N [--trace]` or `--seeds A-B`.

`--scenario raft` (the default) runs the Raft cluster simulation (cluster_sim.py);
`--scenario queues` the whole-cluster simulation of replicated queues
(queue_sim.py), whose seeds draw 1 or 2 queues unless `--queues N` says (it
implies `--scenario queues`).
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.sim.cluster_sim import Simulation
from tests.sim.queue_sim import QueueSimulation


def _seed_range(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--seed", type=int, help="replay one seed and print its summary")
    group.add_argument("--seeds", type=_seed_range, help="run a range A-B (inclusive)")
    parser.add_argument("--trace", action="store_true", help="print every traced event")
    parser.add_argument("--scenario", choices=("raft", "queues"), default=None,
                        help="which simulation (default: raft)")
    parser.add_argument("--queues", type=int, default=None,
                        help="queue simulation with this many queues (default: drawn)")
    parser.add_argument("--no-redelivered-check", action="store_true",
                        help="queue simulation: count a duplicate delivered without the "
                             "redelivered flag instead of failing on it")
    args = parser.parse_args(argv)
    scenario = args.scenario or ("queues" if args.queues is not None else "raft")
    seeds = range(args.seed, args.seed + 1) if args.seed is not None else args.seeds
    failures = 0
    started = time.perf_counter()
    for seed in seeds:
        simulation: Simulation | QueueSimulation
        if scenario == "queues":
            simulation = QueueSimulation(seed, queues=args.queues,
                                         check_redelivered=not args.no_redelivered_check)
        else:
            simulation = Simulation(seed)
        try:
            result = simulation.run()
        except AssertionError as failure:
            failures += 1
            print(f"seed {seed} FAILED: {failure}")
            flags = " --scenario queues" if scenario == "queues" else ""
            if args.queues is not None:
                flags += f" --queues {args.queues}"
            if args.no_redelivered_check:
                flags += " --no-redelivered-check"
            print(f"  replay: python -m tests.sim{flags} --seed {seed} --trace")
            if args.trace or args.seed is not None:
                print("\n".join(simulation.trace))
            continue
        if args.seed is not None or args.trace:
            if args.trace:
                print("\n".join(result.trace))
            print(result.summary())
    elapsed = time.perf_counter() - started
    print(f"{len(seeds)} seeds, {failures} failed, {elapsed:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
