"""`logbroker publish -f FILE` shows a progress bar over the file when stderr is a terminal."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from api.cli import message_commands, options
from api.client import OutgoingMessage, PublishResult
from api.node import build_parser


class FakeClient:
    def __init__(self) -> None:
        self.published: list[bytes] = []

    def publish_batch(self, exchange: str, messages: list[OutgoingMessage],
                      batch_size: int) -> list[PublishResult]:
        self.published += [message.body for message in messages]
        return [PublishResult(True, True) for _ in messages]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def publish(tmp_path: Path, stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    path = tmp_path / "messages.txt"
    path.write_bytes(b"".join(b"message %d\n" % i for i in range(5000)))
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(options, "PROGRESS_DELAY_S", 0.0)
    client = FakeClient()
    args = build_parser().parse_args(["publish", "-k", "q", "-f", str(path),
                                      "--batch-size", "1000"])
    client_any: Any = client
    assert message_commands.publish(client_any, args) == 0
    assert len(client.published) == 5000
    return client


def test_a_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = Terminal()
    publish(tmp_path, stderr, monkeypatch)
    size = (tmp_path / "messages.txt").stat().st_size
    assert "100%" in stderr.getvalue() and f"{size / 1000:.1f}k" in stderr.getvalue()


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    publish(tmp_path, stderr, monkeypatch)
    assert stderr.getvalue() == ""
