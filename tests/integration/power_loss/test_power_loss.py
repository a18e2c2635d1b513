"""Power loss: confirmed publishes survive a cut that drops every unsynced write.

kill -9 keeps the page cache, so it cannot show that a confirm waited for the
disk. Here the broker's data directory is on `lossy_fs`, a FUSE file system
that keeps writes in memory until they are fsynced and drops them at the "power
cut". Publishers with confirms (AMQP and HTTP) run until the cut; the broker is
frozen (SIGSTOP), the power is cut, the broker killed, and a new broker on the
backing directory (what the disk kept) must hold every confirmed message.

The control run shows the file system really loses data: with `--fsync never`
the same cut loses confirmed messages.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pika
import pytest

from tests.integration.conftest import BrokerProcess, start_broker, wait_for

LOAD_S = 3.0
QUEUE = "power"


def fuse_missing() -> str | None:
    """Why FUSE cannot be used here, or None. Installs libfuse when root and missing."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if shutil.which("fusermount") is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-qq", "fuse3", "libfuse2"],
                       capture_output=True, timeout=300)
    if shutil.which("fusermount") is None and shutil.which("fusermount3") is None:
        return "fusermount is not installed (Debian: apt-get install fuse3 libfuse2)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"mfusepy cannot load libfuse: {error}"
    return None


@dataclass
class LossyMount:
    backing: Path
    mount_point: Path
    process: subprocess.Popen[str]

    def cut(self) -> str:
        (self.mount_point / ".power-cut").write_text("now")
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def unmount(self) -> None:
        tool = shutil.which("fusermount") or shutil.which("fusermount3") or "fusermount"
        subprocess.run([tool, "-u", "-z", str(self.mount_point)], capture_output=True,
                       timeout=30)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def lossy(tmp_path: Path) -> Iterator[LossyMount]:
    missing = fuse_missing()
    if missing is not None:
        pytest.skip(f"power-loss test needs FUSE: {missing}")
    backing, mount_point = tmp_path / "disk", tmp_path / "mnt"
    backing.mkdir()
    mount_point.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.power_loss.lossy_fs", str(backing),
         str(mount_point)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    mount = LossyMount(backing, mount_point, process)
    try:
        wait_for(lambda: os.path.ismount(mount_point), "the FUSE mount", timeout_s=10)
        yield mount
    finally:
        mount.unmount()


@dataclass
class Confirmed:
    ids: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sent: list[str], confirmed: list[str]) -> None:
        with self.lock:
            self.sent.update(sent)
            self.ids.update(confirmed)


def amqp_publisher(broker: BrokerProcess, out: Confirmed, stop: threading.Event) -> None:
    try:
        connection = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.amqp_port, socket_timeout=5, blocked_connection_timeout=5))
        channel = connection.channel()
        channel.confirm_delivery()
        number = 0
        while not stop.is_set():
            message_id = f"amqp-{number}"
            number += 1
            out.add([message_id], [])
            channel.basic_publish("", QUEUE, message_id.encode() * 8,
                                  pika.BasicProperties(delivery_mode=2, message_id=message_id))
            out.add([], [message_id])  # basic_publish returned: confirmed
    except Exception:  # the cut ends the publisher in whatever way
        return


def http_publisher(broker: BrokerProcess, out: Confirmed, stop: threading.Event) -> None:
    number = 0
    with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=5.0) as http:
        while not stop.is_set():
            ids = [f"http-{number + i}" for i in range(20)]
            number += 20
            out.add(ids, [])
            messages = [{"routing_key": QUEUE, "payload": i * 8,
                         "properties": {"delivery_mode": 2, "message_id": i}} for i in ids]
            try:
                answer = http.post("/api/exchanges/%2F/amq.default/publish-batch",
                                   json={"messages": messages})
            except httpx.HTTPError:
                return
            if answer.status_code != 200:
                return
            out.add([], [i for i, r in zip(ids, answer.json()["results"], strict=True)
                         if r["confirmed"]])


def publish_until_cut(lossy: LossyMount, *broker_args: str) -> tuple[Confirmed, str, Path]:
    data_dir = lossy.mount_point / "data"
    broker = start_broker(data_dir, *broker_args)
    out, stop = Confirmed(), threading.Event()
    with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=10.0) as http:
        assert http.put(f"/api/queues/%2F/{QUEUE}", json={"durable": True}).status_code == 201
    workers = [threading.Thread(target=run, args=(broker, out, stop), daemon=True)
               for run in (amqp_publisher, http_publisher)]
    for worker in workers:
        worker.start()
    time.sleep(LOAD_S)
    broker.process.send_signal(signal.SIGSTOP)  # the machine stops at once...
    report = lossy.cut()  # ...and the disk keeps only what was synced
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(10)
    stop.set()
    for worker in workers:
        worker.join(10)
    return out, report, lossy.backing / "data"


def stored_ids(data_dir: Path) -> list[str]:
    broker = start_broker(data_dir)
    try:
        ids: list[str] = []
        with httpx.Client(base_url=broker.url, auth=("guest", "guest"), timeout=10.0) as http:
            offset = 0
            while True:
                page = http.get(f"/api/queues/%2F/{QUEUE}/messages",
                                params={"from_offset": offset, "max_messages": 10000}).json()
                ids.extend(m["properties"]["message_id"] for m in page["messages"])
                if page["next_offset"] >= page["end_offset"]:
                    return ids
                offset = page["next_offset"]
    finally:
        broker.stop()


def test_every_confirmed_publish_survives_a_power_cut(lossy: LossyMount) -> None:
    out, report, kept_dir = publish_until_cut(lossy)
    assert len(out.ids) > 50, f"too little load to mean anything: {len(out.ids)} ({report})"
    ids = stored_ids(kept_dir)
    lost = out.ids - set(ids)
    assert not lost, f"{len(lost)} confirmed messages lost ({report}): {sorted(lost)[:10]}"
    assert set(ids) <= out.sent, "a message nobody published"
    assert len(ids) == len(set(ids)), "a message stored twice"
    print(json.dumps({"confirmed": len(out.ids), "stored": len(ids), "cut": report}))


def test_control_without_fsync_the_cut_loses_confirmed_publishes(lossy: LossyMount) -> None:
    out, report, kept_dir = publish_until_cut(lossy, "--fsync", "never")
    assert report.startswith("dropped ") and not report.startswith("dropped 0 ")
    lost = out.ids - set(stored_ids(kept_dir))
    assert lost, f"the cut lost nothing although nothing was fsynced ({report})"
