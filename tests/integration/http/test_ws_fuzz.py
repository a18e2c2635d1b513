"""Throw random and mutated WebSocket frames at a real broker's /ws: never a crash.

Frames are drawn from one seed: valid frames of every op with fields replaced by
values of the wrong type, size or sign; unknown ops; JSON that is not an object;
text that is not JSON; binary frames; deeply nested and oversized documents. Every
answer must be a JSON object with a known op, every `error` must carry a 4xx/5xx
code, and a socket the server closes must be closed with one of the codes the
protocol documents (never 1011, an internal error). Afterwards the broker is
alive, its log holds no traceback and no ERROR line, its memory did not grow
beyond a bound, and a well-behaved client still publishes and consumes.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.fuzz_budget import FULL, budget
from tests.integration.conftest import BrokerProcess, start_broker

pytestmark = [pytest.mark.slow, pytest.mark.fuzz, pytest.mark.timeout(budget(300, 3600))]

FRAMES = budget(400, 10_000)
FRAMES_PER_SOCKET = 200
SEED = 20_261_128
ANSWER_OPS = {"error", "confirm", "subscribed", "deliver", "cancelled", "record", "caught_up",
              "replay_stopped"}
DOCUMENTED_CLOSES = {1000, 1001, 1003, 1007, 1008, 1009, 1013, 4401, 4403}
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()
RSS_GROWTH_LIMIT_KIB = 64 * 1024

TEMPLATES: list[dict[str, Any]] = [
    {"op": "publish", "id": 1, "exchange": "", "routing_key": "ws-fuzz", "payload": "hi"},
    {"op": "publish", "messages": [{"id": "a", "exchange": "", "routing_key": "ws-fuzz",
                                    "payload": "aGk=", "payload_encoding": "base64",
                                    "properties": {"headers": {"k": 1}}}]},
    {"op": "subscribe", "queue": "ws-fuzz", "prefetch": 10, "consumer_tag": "t"},
    {"op": "ack", "delivery_tag": 1, "multiple": False},
    {"op": "nack", "delivery_tag": 1, "multiple": True, "requeue": True},
    {"op": "reject", "delivery_tag": 2, "requeue": False},
    {"op": "cancel", "consumer_tag": "t"},
    {"op": "replay", "queue": "ws-fuzz", "from_offset": 0, "to_offset": 5,
     "subscription": "s"},
    {"op": "stop_replay", "subscription": "s"},
]
ODD_VALUES: list[Any] = [None, True, -1, 0, 2**63, -(2**70), 1.5e308, "", "x" * 300,
                         "\u0000\ud7ff", [], [1, [2, [3]]], {}, {"op": "publish"}]


def mutated(rng: random.Random) -> str | bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randbytes(rng.randrange(1, 200))  # a binary frame
    if kind == 1:
        return rng.randbytes(rng.randrange(1, 80)).decode("latin-1")  # text, not JSON
    if kind == 2:
        return json.dumps(rng.choice(ODD_VALUES))  # JSON, not an object
    frame = json.loads(json.dumps(rng.choice(TEMPLATES)))
    if kind == 3:
        frame["op"] = rng.choice(["", "PUBLISH", "ack ", "deliver", "x" * 100, 7])
    elif kind == 4:
        frame.pop(rng.choice(sorted(frame)), None)
    elif kind == 5:
        nested: Any = 0
        for _ in range(rng.randrange(10, 400)):
            nested = [nested]
        frame[rng.choice([*sorted(frame), "extra"])] = nested
    else:
        for _ in range(rng.randrange(1, 3)):
            frame[rng.choice([*sorted(frame), "properties", "id"])] = rng.choice(ODD_VALUES)
    return json.dumps(frame)


def rss_kib(broker: BrokerProcess) -> int:
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("ws-fuzz") / "data")
    try:
        yield broker
    finally:
        broker.stop()


def check_answers(ws: ClientConnection, problems: list[str]) -> bool:
    """Read what the server sent; False once it closed the socket."""
    while True:
        try:
            text = ws.recv(timeout=0.05)
        except TimeoutError:
            return True
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
            if code not in DOCUMENTED_CLOSES:
                problems.append(f"closed with {code}: {closed}")
            return False
        answer = json.loads(text)
        if not isinstance(answer, dict) or answer.get("op") not in ANSWER_OPS:
            problems.append(f"unexpected answer {text[:200]!r}")
        elif answer["op"] == "error" and not 400 <= int(answer.get("code", 0)) <= 599:
            problems.append(f"error without a 4xx/5xx code: {text[:200]!r}")


def open_socket(broker: BrokerProcess) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{broker.http_port}/ws",
                   additional_headers={"Authorization": AUTH}, max_size=None)


def fuzz_one_socket(broker: BrokerProcess, rng: random.Random, frames: int,
                    problems: list[str]) -> int:
    """Send up to `frames` frames on a new socket, until the server closes it; how many."""
    sent = 0
    with open_socket(broker) as ws:
        while sent < frames:
            ws.send(mutated(rng))
            sent += 1
            if sent % 10 == 0 and not check_answers(ws, problems):
                return sent
        check_answers(ws, problems)
    return sent


def test_random_and_mutated_frames_never_break_the_broker(fuzz_broker: BrokerProcess) -> None:
    rng = random.Random(SEED)
    problems: list[str] = []
    with open_socket(fuzz_broker) as ws:  # warm up: the queue, the code paths
        ws.send(json.dumps({"op": "publish", "id": 0, "exchange": "", "routing_key": "ws-fuzz",
                            "payload": "warm-up"}))
        check_answers(ws, problems)
    rss_before = rss_kib(fuzz_broker)
    sockets, sent = 0, 0
    while sent < FRAMES:
        sent += fuzz_one_socket(fuzz_broker, rng, min(FRAMES_PER_SOCKET, FRAMES - sent),
                                problems)
        sockets += 1
    rss_after = rss_kib(fuzz_broker)
    print(f"ws fuzz: {sent} frames over {sockets} sockets (seed {SEED}, "
          f"{'full' if FULL else 'CI'} budget); broker RSS {rss_before} -> {rss_after} KiB")
    assert problems == [], problems[:20]
    assert rss_after - rss_before < RSS_GROWTH_LIMIT_KIB


def test_the_broker_is_well_after_the_fuzzing(fuzz_broker: BrokerProcess) -> None:
    assert fuzz_broker.process.poll() is None
    with open_socket(fuzz_broker) as ws:
        ws.send(json.dumps({"op": "publish", "id": "after", "exchange": "",
                            "routing_key": "ws-fuzz-after", "payload": "still here"}))
        assert json.loads(ws.recv(timeout=10))["op"] in ("confirm", "error")
    log = fuzz_broker.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]
