"""A/B of source trees on the publish paths: one `logbroker serve` per tree, trials interleaved.

`python bench/tree_ab.py --rounds 8 --tree base=/path/a --tree new=/path/b` starts
`python -m logbroker serve` from each tree (its working directory, so each runs its
own code), then runs `--workloads` (`ws`: http_ws_bench's ws_publish_confirm;
`amqp`: amqp_bench's publish_confirm) on every tree, round after round, rotating
which tree goes first. One JSON line per trial: msg/s and the broker's CPU time
(user + system, from /proc) per message, the steadier figure on a shared machine.
A change is above noise when it holds pair by pair across rounds, not only in
the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.amqp_bench import publish_confirm
from bench.free_ports import free_port
from bench.http_ws_bench import AUTH, START_TIMEOUT_S, _queue, ws_publish_confirm
from bench.http_ws_bench import parse_args as bench_args
from bench.served_node import ServedNode


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def served_from(tree: str) -> Iterator[tuple[ServedNode, int]]:
    workdir = tempfile.mkdtemp(prefix="tree-ab-")
    served = ServedNode(free_port(), free_port())
    process = subprocess.Popen(
        [sys.executable, "-m", "logbroker", "serve", "--data-dir",
         os.path.join(workdir, "data"), "--host", "127.0.0.1",
         "--amqp-port", str(served.amqp_port), "--http-port", str(served.http_port)],
        cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        # One process per tree (the environment, not `--workers`: older trees lack it).
        env={**os.environ, "LOGBROKER_WORKERS": "1"}, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{served.http_url}/api/overview", auth=AUTH).status_code == 200:
                    break
            time.sleep(0.2)
        yield served, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def trial(served: ServedNode, pid: int, workload: str, args: argparse.Namespace
          ) -> dict[str, Any]:
    queue = _queue(served, workload)
    os.sync()  # the previous trial's writeback must not land in this one
    before = cpu_s(pid)
    if workload == "ws":
        result = asyncio.run(ws_publish_confirm(served, queue, args))
    else:
        result = publish_confirm(served.amqp_url, queue, args)
    cpu = cpu_s(pid) - before
    return {"workload": workload, "msg_s": result["msg_s"],
            "broker_cpu_us_per_msg": round(cpu * 1e6 / result["messages"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="name=path")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--workloads", default="ws", help="comma-separated: ws, amqp")
    options = parser.parse_args()
    trees = dict(item.split("=", 1) for item in options.tree)
    args = bench_args([])  # http_ws_bench's defaults: 50,000 x 1 KiB, 100 per frame
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(served_from(tree)) for name, tree in trees.items()}
        names = list(trees)
        for round_ in range(options.rounds):
            turn = round_ % len(names)
            for name in names[turn:] + names[:turn]:
                for workload in options.workloads.split(","):
                    print(json.dumps({"round": round_, "tree": name,
                                      **trial(*servers[name], workload, args)}), flush=True)


if __name__ == "__main__":
    main()
