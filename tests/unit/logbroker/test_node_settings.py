import argparse
from pathlib import Path

import pytest

from api.node import build_parser
from logbroker.node_settings import SettingsError, resolve_settings
from logbroker.queue.publisher_flow import FlowLimits


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_embedded_defaults() -> None:
    settings = resolve_settings(parse(), {})
    assert (settings.amqp_port, settings.http_port, settings.fsync) == (5672, 15672, "always")
    assert settings.broker_config().data_dir.endswith("logbroker-data")


def test_precedence_is_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('[amqp]\nport = 1111\n[node]\nname = "from-file"\n'
                      '[storage]\nfsync = "interval:50"\n')
    environment = {"LOGBROKER_CONFIG": str(config), "LOGBROKER_AMQP_PORT": "2222"}
    settings = resolve_settings(parse(), environment)
    assert (settings.amqp_port, settings.node_name, settings.fsync) == (
        2222, "from-file", "interval:50")
    settings = resolve_settings(parse("--amqp-port", "3333"), environment)
    assert settings.amqp_port == 3333
    assert settings.sources["amqp_port"] == "--amqp-port"


@pytest.mark.parametrize("environment", [
    {"LOGBROKER_AMQP_PORT": "not-a-number"},
    {"LOGBROKER_FSYNC": "sometimes"},
    {"LOGBROKER_CONFIG": "/nonexistent/broker.toml"},
    {"LOGBROKER_FLOW_HIGH": "-1"},
    {"LOGBROKER_FLOW_HIGH": "50", "LOGBROKER_FLOW_LOW": "50"},
    {"LOGBROKER_FLOW_HOLD_MAX_MS": "0"},
    {"LOGBROKER_EVENT_LOOP": "trio"},
])
def test_bad_settings_are_clear_errors(environment: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        resolve_settings(parse(), environment)


def test_publisher_flow_comes_from_the_flow_section_and_zero_turns_it_off(tmp_path: Path
                                                                         ) -> None:
    assert resolve_settings(parse(), {}).broker_config().publisher_flow == FlowLimits()
    config = tmp_path / "broker.toml"
    config.write_text("[flow]\nhigh = 1000\nlow = 400\nhold_max_ms = 250\n")
    limits = resolve_settings(parse("--config", str(config)), {}).broker_config().publisher_flow
    assert limits is not None
    assert (limits.high, limits.low, limits.hold_max_ms) == (1000, 400, 250)
    assert limits.stall_ms == FlowLimits().stall_ms  # the rest keep their defaults
    off = resolve_settings(parse("--flow-high", "0"), {})
    assert off.broker_config().publisher_flow is None


def test_the_event_loop_is_uvloop_when_installed_unless_asyncio_is_asked_for(
        tmp_path: Path) -> None:
    assert resolve_settings(parse(), {}).event_loop == "uvloop"  # a dependency here
    assert resolve_settings(parse("--event-loop", "asyncio"), {}).event_loop == "asyncio"
    config = tmp_path / "broker.toml"
    config.write_text('[node]\nevent_loop = "asyncio"\n')
    assert resolve_settings(parse("--config", str(config)), {}).event_loop == "asyncio"
