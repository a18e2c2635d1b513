"""`logbroker perf`: PerfTest's option names, the checks on them, the lines it prints, the
sample files and the plots."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from api.cli.options import UsageError
from api.cli.perf_arguments import DEFAULT_URI
from api.cli.perf_command import (
    sample_line,
    settings_from,
    summary_lines,
    ws_base_url,
)
from api.node import build_parser
from api.perf import plot_writer
from api.perf.perf_settings import DEFAULT_TIME_S
from api.perf.run_stats import RunStats
from api.perf.run_summary import Summary, summarize
from api.perf.sample_files import write_samples
from api.perf.sampler import Sample

SAMPLES = [Sample(1.0, 100.0, 90.0, 0.0, 0.0, 95.0, 0.5, 1.5, 2.5, 3.0),
           Sample(2.0, 110.0, 110.0, 1.0, 0.0, 0.0, None, None, None, None)]


def parse(*argv: str) -> object:
    return build_parser().parse_args(["perf", *argv])


def test_perftest_short_options_are_read() -> None:
    args = parse("-h", "amqp://u:p@127.0.0.1:5673/", "-x", "2", "-y", "3", "-r", "100",
                 "-R", "50", "-s", "64", "-f", "persistent", "-f", "mandatory", "-c", "10",
                 "-q", "20", "-A", "5", "-u", "q1", "-e", "ex", "-t", "topic", "-k", "a.b",
                 "-z", "5", "-C", "1000", "-D", "900", "-ad", "false", "-p")
    settings = settings_from(args)  # type: ignore[arg-type]
    assert args.uri == "amqp://u:p@127.0.0.1:5673/"  # type: ignore[attr-defined]
    assert (settings.producers, settings.consumers, settings.rate, settings.consumer_rate) == (
        2, 3, 100.0, 50.0)
    assert (settings.size, settings.persistent, settings.mandatory, settings.confirm) == (
        64, True, True, 10)
    assert (settings.qos, settings.multi_ack_every, settings.time_s) == (20, 5, 5.0)
    assert (settings.pmessages, settings.cmessages, settings.auto_delete) == (1000, 900, False)
    assert settings.predeclared
    plan = settings.topology
    assert (plan.exchange, plan.exchange_type, plan.queues, plan.routing_keys) == (
        "ex", "topic", ("q1",), ("a.b",))


def test_defaults_follow_perftest_with_a_bounded_run() -> None:
    settings = settings_from(parse())  # type: ignore[arg-type]
    args = parse()
    assert args.uri == DEFAULT_URI  # type: ignore[attr-defined]
    assert (settings.producers, settings.consumers, settings.confirm) == (1, 1, None)
    assert settings.time_s == DEFAULT_TIME_S
    assert settings.topology.exchange == "direct"
    assert settings.topology.queues[0].startswith("perf-test-")
    assert settings.auto_delete and not settings.persistent


def test_a_message_limit_without_time_is_not_cut_at_the_default_time() -> None:
    settings = settings_from(parse("-C", "10"))  # type: ignore[arg-type]
    assert settings.time_s > DEFAULT_TIME_S


def test_a_queue_pattern_gives_a_queue_and_key_each() -> None:
    settings = settings_from(parse("--queue-pattern", "perf-%d", "--queue-pattern-from", "2",
                                   "--queue-pattern-to", "4"))  # type: ignore[arg-type]
    assert settings.topology.queues == ("perf-2", "perf-3", "perf-4")
    assert settings.topology.routing_keys == settings.topology.queues


@pytest.mark.parametrize(("argv", "message"), [
    (["-s", "3"], "--size"),
    (["-A", "600"], "--multi-ack-every"),
    (["--queue-pattern", "p-%d"], "--queue-pattern-to"),
    (["--output", "run.txt"], "--output"),
    (["--plot", "run.svg"], "--plot"),
    (["-x", "0", "-y", "0"], "nothing to run"),
])
def test_bad_options_are_usage_errors_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        settings_from(parse(*argv))  # type: ignore[arg-type]


@pytest.mark.parametrize("argv", [["-x", "-1"], ["-r", "0"], ["-c", "0"], ["-ad", "maybe"],
                                  ["-f", "immediate"]])
def test_bad_values_are_refused_by_the_parser(argv: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_a_missing_plotting_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"plotly.*logbroker\[perf\]"):
        settings_from(parse("--plot", "run.html"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("url", "base"), [
    ("http://guest:guest@127.0.0.1:15672", "http://guest:guest@127.0.0.1:15672"),
    ("ws://guest:guest@127.0.0.1:15672/ws", "http://guest:guest@127.0.0.1:15672"),
    ("wss://127.0.0.1:15671/ws/", "https://127.0.0.1:15671"),
])
def test_ws_urls_become_the_api_base(url: str, base: str) -> None:
    assert ws_base_url(url) == base


def test_a_ws_url_of_another_scheme_is_refused() -> None:
    with pytest.raises(UsageError, match="--ws"):
        ws_base_url("amqp://127.0.0.1:5672")


def summary() -> Summary:
    stats = RunStats()
    stats.counts.sent = stats.counts.confirmed = stats.counts.received = 210
    stats.received(1500, now_ms=0)
    return summarize(stats, 0, 2000, 2100, "time limit")


def test_the_live_line_and_the_summary_name_every_figure() -> None:
    line = sample_line(SAMPLES[0])
    for part in ("sent 100 msg/s", "confirmed 90 msg/s", "nacked 0 msg/s",
                 "returned 0 msg/s", "received 95 msg/s",
                 "latency p50/p95/p99/max 0.50/1.50/2.50/3.00 ms"):
        assert part in line
    assert "latency p50/p95/p99/max -/-/-/- ms" in sample_line(SAMPLES[1])
    text = "\n".join(summary_lines(summary()))
    assert "totals: sent 210, confirmed 210, nacked 0, returned 0, received 211" in text
    assert "stopped by time limit" in text and "latency ms: p50" in text


def test_samples_are_written_as_json_or_csv(tmp_path: Path) -> None:
    write_samples(str(tmp_path / "run.json"), SAMPLES, summary())
    document = json.loads((tmp_path / "run.json").read_text())
    assert document["samples"][0]["sent"] == 100.0
    assert document["samples"][1]["latency_p50_ms"] is None
    assert document["summary"]["sent"] == 210
    write_samples(str(tmp_path / "run.csv"), SAMPLES, summary())
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    assert [row["received"] for row in rows] == ["95.0", "0.0"]
    assert rows[1]["latency_max_ms"] == ""


def test_the_html_plot_is_offline_with_every_series(tmp_path: Path) -> None:
    path = tmp_path / "run.html"
    plot_writer.write_plot(str(path), SAMPLES)
    html = path.read_text()
    for name in ("sent msg\\u002fs", "received msg\\u002fs", "latency p99 ms",
                 "latency max ms"):
        assert f'"name":"{name}"' in html
    assert '<script src="http' not in html  # plotly.js is inlined


def test_the_png_plot_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "run.png"
    plot_writer.write_plot(str(path), SAMPLES)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_autoack_and_auto_delete_short_flags_do_not_collide() -> None:
    args = parse("-a", "-ad", "false")
    assert (args.autoack, args.auto_delete) == (True, False)  # type: ignore[attr-defined]
