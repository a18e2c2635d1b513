"""The `logbroker` command against a real broker, run as a subprocess as an operator would.

One broker for the module; tests keep apart by queue names. Setup and checks
that are not about the CLI go through the REST API directly (a subprocess
costs about half a second). The broker address comes from LOGBROKER_URL
unless a test passes --url.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.node import build_parser, main
from tests.integration.conftest import BrokerProcess, free_port

LOGBROKER = [sys.executable, "-m", "logbroker"]
RUN_TIMEOUT_S = 60.0


def environment(broker: BrokerProcess | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LOGBROKER_URL"}
    if broker is not None:
        env["LOGBROKER_URL"] = broker.url
    return env


def run(broker: BrokerProcess | None, *args: str, stdin: bytes = b""
        ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*LOGBROKER, *args], input=stdin, capture_output=True,
                          env=environment(broker), timeout=RUN_TIMEOUT_S, check=False)


def ok(broker: BrokerProcess | None, *args: str, stdin: bytes = b"") -> str:
    result = run(broker, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def publish(http: httpx.Client, queue: str, *bodies: str) -> None:
    http.put(f"/api/queues/%2F/{queue}", json={}).raise_for_status()
    answer = http.post("/api/exchanges/%2F/amq.default/publish-batch", json={"messages": [
        {"routing_key": queue, "payload": body} for body in bodies]})
    assert all(r["confirmed"] for r in answer.json()["results"])


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_declare_and_list_queues_as_a_table(broker: BrokerProcess) -> None:
    ok(broker, "declare", "queue", "cli.table", "--argument", "x-max-length=100")
    lines = ok(broker, "list", "queues").splitlines()
    assert lines[0].split()[:4] == ["name", "messages", "ready", "unacked"]
    row = next(line.split() for line in lines if line.startswith("cli.table "))
    assert row[1:4] == ["0", "0", "0"]


def test_list_groups_shows_a_row_per_queue_with_lag(broker: BrokerProcess,
                                                     http: httpx.Client) -> None:
    publish(http, "cli.grouped", "a", "b", "c")
    http.put("/api/consumer-groups/%2F/cli-query",
             json={"offsets": {"cli.grouped": 1}}).raise_for_status()
    lines = ok(broker, "list", "groups").splitlines()
    assert lines[0].split() == ["group", "queue", "committed", "end", "lag"]
    assert ["cli-query", "cli.grouped", "1", "3", "2"] in [line.split() for line in lines]
    document = json.loads(ok(broker, "list", "groups", "--format", "json"))
    assert {"name": "cli-query", "vhost": "/", "lag": 2}.items() <= next(
        group for group in document if group["name"] == "cli-query").items()


def test_publish_from_arguments_stdin_and_a_file_all_confirmed(
        broker: BrokerProcess, tmp_path: Path) -> None:
    ok(broker, "declare", "queue", "cli.pub")
    assert ok(broker, "publish", "-k", "cli.pub", "one", "two") == \
        "published 2 messages: 2 confirmed\n"
    assert ok(broker, "publish", "--routing-key", "cli.pub",
              stdin=b"three\r\nfour\n") == "published 2 messages: 2 confirmed\n"
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"five\n\xffsix\nseven")
    assert ok(broker, "publish", "-k", "cli.pub", "--file", str(lines),
              "--property", "content_type=text/plain") == "published 3 messages: 3 confirmed\n"
    got = [json.loads(line) for line in
           ok(broker, "get", "cli.pub", "--count", "10", "--format", "json").splitlines()]
    assert [g["body"] for g in got] == ["one", "two", "three", "four", "five", "/3NpeA==",
                                        "seven"]
    assert got[5]["body_encoding"] == "base64"
    assert got[4]["properties"] == {"content_type": "text/plain"}
    again = ok(broker, "get", "cli.pub", "-n", "2", "--ack")  # get requeued; --ack takes
    assert again == "one\ntwo\n"
    assert ok(broker, "get", "cli.pub") == "three\n"


def test_consume_then_replay_reads_acked_messages_again(
        broker: BrokerProcess, http: httpx.Client, tmp_path: Path) -> None:
    publish(http, "cli.replay", "m0", "m1", "m2", "m3", "m4")
    assert ok(broker, "consume", "cli.replay", "--count", "4") == "m0\nm1\nm2\nm3\n"
    assert ok(broker, "consume", "cli.replay", "-n", "1", "--format", "json").count('"m4"') == 1
    assert http.get("/api/queues/%2F/cli.replay").json()["messages"] == 0
    records = [json.loads(line) for line in
               ok(broker, "replay", "cli.replay", "--from-offset", "0",
                  "--format", "json").splitlines()]
    assert [r["offset"] for r in records] == [0, 1, 2, 3, 4]
    assert [r["body"] for r in records] == ["m0", "m1", "m2", "m3", "m4"]
    assert set(records[0]) == {"offset", "timestamp", "exchange", "routing_key", "properties",
                               "body"}
    assert records[0]["routing_key"] == "cli.replay" and records[0]["timestamp"] > 0
    assert ok(broker, "replay", "cli.replay", "--from-offset", "1", "--to-offset", "3") == \
        "m1\nm2\n"
    out = tmp_path / "replay.txt"
    result = run(broker, "replay", "cli.replay", "--from-offset", "3", "--output", str(out))
    assert result.returncode == 0 and result.stdout == b""
    assert out.read_text() == "m3\nm4\n"


def test_replay_from_a_time(broker: BrokerProcess, http: httpx.Client) -> None:
    publish(http, "cli.time", "before")
    time.sleep(0.05)
    moment = datetime.datetime.now(datetime.UTC)
    time.sleep(0.05)
    publish(http, "cli.time", "after1", "after2")
    assert ok(broker, "replay", "cli.time", "--from-time", moment.isoformat()) == \
        "after1\nafter2\n"


def _follow(broker: BrokerProcess, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # SIGINT as a terminal sends it, even if this job ignores it
        [*LOGBROKER, "replay", *args, "--follow"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=environment(broker),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_replay_follow_streams_new_messages_until_interrupted(
        broker: BrokerProcess, http: httpx.Client) -> None:
    publish(http, "cli.follow", "old")
    follower = _follow(broker, "cli.follow", "--from-offset", "0")
    bounded = _follow(broker, "cli.follow", "--from-offset", "0", "--to-offset", "2")
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == b"old\n"
        publish(http, "cli.follow", "new")
        assert follower.stdout.readline() == b"new\n"
        assert bounded.communicate(timeout=RUN_TIMEOUT_S)[0] == b"old\nnew\n"
        assert bounded.returncode == 0
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=RUN_TIMEOUT_S)
        assert follower.returncode == 0, err.decode()
    finally:
        for process in (follower, bounded):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_set_and_clear_policy_show_in_list_policies(broker: BrokerProcess) -> None:
    ok(broker, "set-policy", "cli-limits", "^cli\\.", '{"max-length": 1000}',
       "--apply-to", "queues", "--priority", "3")
    row = next(line.split() for line in ok(broker, "list", "policies").splitlines()
               if line.startswith("cli-limits "))
    assert row == ["cli-limits", "^cli\\.", "queues", "3", '{"max-length":1000}']
    ok(broker, "clear-policy", "cli-limits")
    assert "cli-limits" not in ok(broker, "list", "policies")


def test_a_new_user_with_permissions_can_publish(broker: BrokerProcess) -> None:
    ok(broker, "add-user", "cli-alice", "s3cret", "--tags", "management")
    ok(broker, "set-permissions", "cli-alice", "--configure", "^cli\\.alice",
       "--write", ".*", "--read", ".*")
    alice = broker.url.replace("http://", "http://cli-alice:s3cret@")
    ok(None, "--url", alice, "declare", "queue", "cli.alice")
    assert ok(None, "publish", "--url", alice, "-k", "cli.alice", "hi") == \
        "published 1 message: 1 confirmed\n"
    refused = run(None, "declare", "queue", "cli.elsewhere", "--url", alice)
    assert refused.returncode == 1
    assert refused.stderr.decode().startswith("logbroker: access refused: ")


def test_export_then_import_definitions(broker: BrokerProcess, http: httpx.Client,
                                        tmp_path: Path) -> None:
    http.put("/api/queues/%2F/cli.defs", json={"arguments": {"x-max-length": 7}})
    exported = tmp_path / "definitions.json"
    ok(broker, "export-definitions", str(exported))
    assert any(q["name"] == "cli.defs" for q in json.loads(exported.read_text())["queues"])
    http.delete("/api/queues/%2F/cli.defs").raise_for_status()
    ok(broker, "import-definitions", str(exported))
    restored = http.get("/api/queues/%2F/cli.defs").json()
    assert restored["arguments"] == {"x-max-length": 7}


def test_status_shows_every_node(broker: BrokerProcess) -> None:
    dead = dead_url()
    rows = [line.split()[:2] for line in
            ok(None, "status", "--url", f"{dead},{broker.url}").splitlines()[1:]]
    assert rows == [[dead, "down"], [broker.url, "up"]]


def test_failover_to_the_second_url(broker: BrokerProcess) -> None:
    ok(broker, "declare", "queue", "cli.failover")
    listing = ok(None, "--url", f"{dead_url()},{broker.url}", "list", "queues")
    assert "cli.failover" in listing


def test_errors_have_clear_messages_and_exit_codes(broker: BrokerProcess) -> None:
    missing = run(broker, "get", "cli.no-such-queue")
    assert missing.returncode == 1
    assert missing.stderr.decode() == \
        "logbroker: not found: no queue 'cli.no-such-queue' in vhost '/'\n"
    unreachable = run(None, "list", "queues", "--url", dead_url())
    assert unreachable.returncode == 3
    assert unreachable.stderr.decode().startswith("logbroker: cannot connect to any node")
    usage = run(broker, "replay", "cli.table")
    assert usage.returncode == 2 and b"--from-offset" in usage.stderr


def _subcommands(parser: object, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for action in getattr(parser, "_actions", []):
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict):  # a subparsers action: name -> parser
            for name, child in choices.items():
                yield (*prefix, name)
                yield from _subcommands(child, (*prefix, name))


def test_help_on_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """Every subcommand in-process (a subprocess each would cost ~10 s on CI), and a few
    through the real executable."""
    commands = [(), *_subcommands(build_parser())]
    assert ("replay",) in commands and ("declare", "binding") in commands
    for command in commands:
        with pytest.raises(SystemExit) as exit_status:
            main([*command, "--help"])
        assert exit_status.value.code == 0, command
        assert capsys.readouterr().out.startswith(f"usage: logbroker {' '.join(command)}")
    processes = [subprocess.Popen([*LOGBROKER, *command, "--help"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
                 for command in ((), ("declare", "binding"), ("replay",))]
    for process in processes:
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
        assert process.returncode == 0, err.decode()
        assert out.startswith(b"usage: logbroker")


def test_get_on_an_empty_queue_says_so_on_stderr(broker: BrokerProcess) -> None:
    ok(broker, "declare", "queue", "cli.empty")
    result = run(broker, "get", "cli.empty")
    assert result.returncode == 0 and result.stdout == b""
    assert result.stderr.decode() == "logbroker: queue 'cli.empty' is empty\n"


def test_replay_past_the_end_says_where_the_end_is(broker: BrokerProcess,
                                                   http: httpx.Client) -> None:
    publish(http, "cli.short", "a", "b")
    result = run(broker, "replay", "cli.short", "--from-offset", "999999")
    assert result.returncode == 0 and result.stdout == b""
    assert result.stderr.decode() == "logbroker: offset 999999 is past the end (end_offset 2)\n"
    assert ok(broker, "replay", "cli.short", "--from-offset", "1") == "b\n"


def test_declare_lists_and_takes_the_queue_options(broker: BrokerProcess,
                                                   http: httpx.Client,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["declare"], ["declare", "queue"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        out = capsys.readouterr().out
        for option in ("--max-length", "--message-ttl", "--queue-type", "--dead-letter-exchange",
                       "--max-priority", "--overflow", "--single-active-consumer"):
            assert option in out, (command, option)
    ok(broker, "declare", "queue", "cli.options", "--max-length", "10", "--message-ttl",
       "60000", "--overflow", "reject-publish", "--single-active-consumer",
       "--argument", "x-max-priority=5")
    arguments = http.get("/api/queues/%2F/cli.options").json()["arguments"]
    assert arguments == {"x-max-length": 10, "x-message-ttl": 60000,
                         "x-overflow": "reject-publish", "x-single-active-consumer": True,
                         "x-max-priority": 5}


def test_publish_help_describes_publish(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["publish", "--help"])
    description = capsys.readouterr().out.split("\n\n")[1]
    assert description.startswith("Publish messages with confirms.")
