import argparse
from pathlib import Path

import pytest

from logbroker.cli import SettingsError, build_parser, resolve_settings


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
])
def test_bad_settings_are_clear_errors(environment: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        resolve_settings(parse(), environment)
