"""The TLS settings of `logbroker serve`: flags, environment and config file, checked at start."""

import ssl
from pathlib import Path

import pytest
import trustme

from api.node import build_parser
from logbroker.node_settings import (
    ServeSettings,
    SettingsError,
    cluster_settings,
    resolve_settings,
)
from logbroker.tls_options import TlsOptions, TlsOptionsError, peer_user_name


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    paths = {"ca": directory / "ca.pem", "cert": directory / "cert.pem",
             "key": directory / "key.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    leaf.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    leaf.private_key_pem.write_to_path(str(paths["key"]))
    return {name: str(path) for name, path in paths.items()}


def resolve(*argv: str, environment: dict[str, str] | None = None) -> ServeSettings:
    return resolve_settings(build_parser().parse_args(["serve", *argv]), environment or {})


def test_no_certificate_no_tls_listeners() -> None:
    settings = resolve()
    assert (settings.tls, settings.amqps_port, settings.https_port) == (None, None, None)


def test_a_certificate_turns_on_amqps_and_https_on_rabbitmqs_ports(
        files: dict[str, str]) -> None:
    settings = resolve("--tls-cert", files["cert"], "--tls-key", files["key"])
    assert (settings.amqps_port, settings.https_port) == (5671, 15671)
    assert settings.tls is not None and not settings.tls.verifies_peers
    context = settings.tls.server_context()
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_NONE


def test_verify_peer_and_fail_if_no_peer_cert_from_the_config_file(
        files: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(f'[tls]\ncert = "{files["cert"]}"\nkey = "{files["key"]}"\n'
                      f'ca = "{files["ca"]}"\nverify = "peer"\nfail_if_no_peer_cert = true\n'
                      f'amqps_port = 6671\nversions = "1.3"\n')
    settings = resolve("--config", str(config), "--amqp-port", "0")
    assert (settings.amqp_port, settings.amqps_port, settings.https_port) == (0, 6671, 15671)
    assert settings.tls is not None
    context = settings.tls.server_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_the_bare_flag_and_the_environment(files: dict[str, str]) -> None:
    environment = {"LOGBROKER_TLS_CERT": files["cert"], "LOGBROKER_TLS_KEY": files["key"],
                   "LOGBROKER_TLS_CA": files["ca"], "LOGBROKER_TLS_VERIFY": "peer"}
    settings = resolve("--tls-fail-if-no-peer-cert", environment=environment)
    assert settings.tls is not None and settings.tls.fail_if_no_peer_cert
    settings = resolve("--tls-fail-if-no-peer-cert", "false", environment=environment)
    assert settings.tls is not None and not settings.tls.fail_if_no_peer_cert


@pytest.mark.parametrize(("argv", "message"), [
    (("--tls-key", "{key}"), "needs a certificate"),
    (("--amqps-port", "5671"), "needs a certificate"),
    (("--tls-cert", "{cert}"), "private key"),
    (("--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-verify", "peer"), "CA file"),
    (("--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-verify", "sometimes"), "verify"),
    (("--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-versions", "1.0"), "versions"),
    (("--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-fail-if-no-peer-cert"),
     "needs verify peer"),
    (("--tls-cert", "{ca}", "--tls-key", "{key}"), "certificate"),  # key does not match
    (("--tls-cert", "/nonexistent.pem", "--tls-key", "{key}"), "nonexistent"),
    (("--amqp-port", "0"), "clients could not connect"),
    (("--cluster-tls",), "--cluster-tls needs"),
    (("--tls-cert", "{cert}", "--tls-key", "{key}", "--cluster-tls"), "--cluster-tls needs"),
])
def test_bad_tls_settings_are_refused_at_start(
        files: dict[str, str], argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        resolve(*(arg.format(**files) for arg in argv))


def test_a_wrong_key_password_is_named(files: dict[str, str]) -> None:
    with pytest.raises(TlsOptionsError, match="certificate"):
        TlsOptions(files["cert"], files["ca"], key_password="x").server_context()


def test_peer_user_name_is_the_subjects_common_name() -> None:
    certificate = {"subject": ((("countryName", "GB"),), (("commonName", "alice"),))}
    assert peer_user_name(certificate) == "alice"
    assert peer_user_name({"subject": ((("organizationName", "x"),),)}) is None
    assert peer_user_name(None) is None


def test_the_cluster_link_contexts_verify_both_ways(files: dict[str, str]) -> None:
    settings = resolve("--tls-cert", files["cert"], "--tls-key", files["key"], "--tls-ca",
                       files["ca"], "--cluster-tls", "--peers", "n1@127.0.0.1:25672",
                       environment={"LOGBROKER_CLUSTER_SECRET": "test-secret"})
    assert settings.cluster_tls
    accepting, dialing = cluster_settings(settings).link_tls or (None, None)
    assert accepting is not None and accepting.verify_mode == ssl.CERT_REQUIRED
    assert dialing is not None and dialing.verify_mode == ssl.CERT_REQUIRED
    assert not dialing.check_hostname


def test_peer_user_name_from_a_subject_alternative_name() -> None:
    certificate = {"subject": ((("commonName", "cn-user"),),),
                   "subjectAltName": (("DNS", "host.example"), ("email", "app@example.com"))}
    assert peer_user_name(certificate, "subject_alternative_name", "email") == "app@example.com"
    assert peer_user_name(certificate, "subject_alternative_name", "dns") == "host.example"
    assert peer_user_name(certificate, "subject_alternative_name", "uri") is None
    assert peer_user_name(certificate) == "cn-user"


def test_login_from_is_checked_at_start(files: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="login_from"):
        resolve("--tls-cert", files["cert"], "--tls-key", files["key"],
                "--tls-login-from", "serial_number")
