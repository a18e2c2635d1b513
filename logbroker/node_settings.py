"""The settings of `logbroker serve`: what a node runs with, and where each comes from.

`api.node` (the composition root) parses the command line and wires the layers
with them. Settings come from, in increasing precedence: embedded defaults, the TOML
config file (`--config` / LOGBROKER_CONFIG), environment variables
(LOGBROKER_DATA_DIR, LOGBROKER_AMQP_PORT, ...) and command-line flags.

    [node]
    name = "logbroker@localhost"
    data_dir = "./logbroker-data"
    event_loop = "auto"         # auto (uvloop when installed) | asyncio | uvloop
    workers = 4                 # processes of this node (default: the number of cores)
    host_id = "host1"           # the machine (default: its host name), for placement
    zone = "eu-1a"              # an optional rack or zone label, for placement
    reuse_port = false          # share the AMQP and HTTP ports (SO_REUSEPORT); set on workers
    [amqp]
    host = "0.0.0.0"
    port = 5672
    heartbeat_s = 60
    frame_max = 131072
    channel_max = 2047
    [http]
    port = 15672
    metrics_auth = false        # /metrics asks for a monitoring or administrator login
    [storage]
    fsync = "always"            # always | interval:N | never
    retention_ms = 86400000     # settled history kept for replay (per queue)
    retention_bytes = 1073741824
    [limits]
    max_message_bytes = 134217728
    max_connections = 0         # client connections per worker process (0: no limit)
    max_pending_handshakes = 1000  # AMQP connections not yet logged in, per listener
                                # (each worker of `--workers N` has its own)
    [flow]                      # holding publishers while a queue's consumers catch up
    high = 200                  # ready messages above which they are held (0: never)
    low = 100                   # a hold ends once the backlog is down to this
    hold_max_ms = 500           # ... or after this long
    [cluster]
    port = 25672                # the cluster link (clustering is on with peers or join)
    peers = "n1@host1:25672,n2@host2:25672,n3@host3:25672"   # founding members
    join = "n1@host1:25672"     # or: start empty and join through this member
    secret_file = "~/.logbroker.secret"   # like RabbitMQ's Erlang cookie
    queue_leader_locator = "client-local" # client-local | balanced | random
    tls = true                  # the link over TLS, mutually verified with [tls]'s files
    [tls]                       # AMQPS and HTTPS/WSS listeners (RabbitMQ's ssl_options)
    cert = "server.pem"         # certificate chain
    key = "server.key"
    ca = "ca.pem"               # CA bundle for peer certificates
    verify = "peer"             # none | peer
    fail_if_no_peer_cert = true # refuse clients without a certificate (needs verify peer)
    versions = "1.2,1.3"
    ciphers = ""                # OpenSSL cipher list for TLS 1.2 ("": OpenSSL's defaults)
    login_from = "common_name"  # EXTERNAL's user: common_name | subject_alternative_name
    login_san_type = "dns"      # dns | email | uri (with subject_alternative_name)
    amqps_port = 5671           # the defaults once a certificate is configured
    https_port = 15671
    The key's password comes from LOGBROKER_TLS_KEY_PASSWORD or [tls] key_password only.
    `--amqp-port 0` / `--http-port 0` turn the plain listeners off.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from logbroker.broker_config import BrokerConfig
from logbroker.event_loop import resolve_event_loop
from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.publisher_flow import FlowLimits
from logbroker.tls_options import TlsOptions, TlsOptionsError

if TYPE_CHECKING:
    from logbroker.cluster.cluster_settings import ClusterSettings

logger = logging.getLogger("logbroker")


def switch(value: object) -> bool:
    """A boolean setting: a bare flag, or true/false, yes/no, on/off, 1/0."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"{value!r} is not true or false")


switch.__name__ = "boolean"

# (flag, environment variable, config section, config key, type or parser)
SETTINGS: tuple[tuple[str, str, str, str, Callable[[Any], Any]], ...] = (
    ("data_dir", "LOGBROKER_DATA_DIR", "node", "data_dir", str),
    ("node_name", "LOGBROKER_NODE_NAME", "node", "name", str),
    ("event_loop", "LOGBROKER_EVENT_LOOP", "node", "event_loop", str),
    ("workers", "LOGBROKER_WORKERS", "node", "workers", int),
    ("host_id", "LOGBROKER_HOST_ID", "node", "host_id", str),
    ("zone", "LOGBROKER_ZONE", "node", "zone", str),
    ("reuse_port", "LOGBROKER_REUSE_PORT", "node", "reuse_port", switch),
    ("host", "LOGBROKER_HOST", "amqp", "host", str),
    ("amqp_port", "LOGBROKER_AMQP_PORT", "amqp", "port", int),
    ("http_port", "LOGBROKER_HTTP_PORT", "http", "port", int),
    ("fsync", "LOGBROKER_FSYNC", "storage", "fsync", str),
    ("heartbeat_s", "LOGBROKER_HEARTBEAT_S", "amqp", "heartbeat_s", int),
    ("frame_max", "LOGBROKER_FRAME_MAX", "amqp", "frame_max", int),
    ("channel_max", "LOGBROKER_CHANNEL_MAX", "amqp", "channel_max", int),
    ("max_message_bytes", "LOGBROKER_MAX_MESSAGE_BYTES", "limits", "max_message_bytes", int),
    ("max_connections", "LOGBROKER_MAX_CONNECTIONS", "limits", "max_connections", int),
    ("max_pending_handshakes", "LOGBROKER_MAX_PENDING_HANDSHAKES", "limits",
     "max_pending_handshakes", int),
    ("metrics_auth", "LOGBROKER_METRICS_AUTH", "http", "metrics_auth", switch),
    ("retention_ms", "LOGBROKER_RETENTION_MS", "storage", "retention_ms", int),
    ("retention_bytes", "LOGBROKER_RETENTION_BYTES", "storage", "retention_bytes", int),
    ("flow_high", "LOGBROKER_FLOW_HIGH", "flow", "high", int),
    ("flow_low", "LOGBROKER_FLOW_LOW", "flow", "low", int),
    ("flow_hold_max_ms", "LOGBROKER_FLOW_HOLD_MAX_MS", "flow", "hold_max_ms", int),
    ("cluster_port", "LOGBROKER_CLUSTER_PORT", "cluster", "port", int),
    ("peers", "LOGBROKER_PEERS", "cluster", "peers", str),
    ("join", "LOGBROKER_JOIN", "cluster", "join", str),
    ("cluster_secret_file", "LOGBROKER_CLUSTER_SECRET_FILE", "cluster", "secret_file", str),
    ("queue_leader_locator", "LOGBROKER_QUEUE_LEADER_LOCATOR", "cluster",
     "queue_leader_locator", str),
    ("cluster_tls", "LOGBROKER_CLUSTER_TLS", "cluster", "tls", switch),
    ("amqps_port", "LOGBROKER_AMQPS_PORT", "tls", "amqps_port", int),
    ("https_port", "LOGBROKER_HTTPS_PORT", "tls", "https_port", int),
    ("tls_cert", "LOGBROKER_TLS_CERT", "tls", "cert", str),
    ("tls_key", "LOGBROKER_TLS_KEY", "tls", "key", str),
    ("tls_ca", "LOGBROKER_TLS_CA", "tls", "ca", str),
    ("tls_verify", "LOGBROKER_TLS_VERIFY", "tls", "verify", str),
    ("tls_fail_if_no_peer_cert", "LOGBROKER_TLS_FAIL_IF_NO_PEER_CERT", "tls",
     "fail_if_no_peer_cert", switch),
    ("tls_versions", "LOGBROKER_TLS_VERSIONS", "tls", "versions", str),
    ("tls_ciphers", "LOGBROKER_TLS_CIPHERS", "tls", "ciphers", str),
    ("tls_login_from", "LOGBROKER_TLS_LOGIN_FROM", "tls", "login_from", str),
    ("tls_login_san_type", "LOGBROKER_TLS_LOGIN_SAN_TYPE", "tls", "login_san_type", str),
)
SECRET_VARIABLE = "LOGBROKER_CLUSTER_SECRET"
KEY_PASSWORD_VARIABLE = "LOGBROKER_TLS_KEY_PASSWORD"
DEFAULT_AMQPS_PORT = 5671
DEFAULT_HTTPS_PORT = 15671
MAX_WORKERS = 256
MAX_LABEL = 255  # a host id or zone (the metadata's limit)
_FLOW_DEFAULTS = FlowLimits()


@dataclass
class ServeSettings:
    data_dir: str = "./logbroker-data"
    node_name: str = "logbroker@localhost"
    event_loop: str = "auto"
    workers: int = 0  # 0: the number of cores (resolve_settings)
    host_id: str = ""  # "": the host name (resolve_settings)
    zone: str = ""
    reuse_port: bool = False
    host: str = "0.0.0.0"
    amqp_port: int = 5672
    http_port: int = 15672
    fsync: str = "always"
    heartbeat_s: int = 60
    frame_max: int = 131072
    channel_max: int = 2047
    max_message_bytes: int = 128 * 1024 * 1024
    max_connections: int = 0
    metrics_auth: bool = False
    max_pending_handshakes: int = 1000
    retention_ms: int = 24 * 3600 * 1000
    retention_bytes: int = 1 << 30
    flow_high: int = _FLOW_DEFAULTS.high
    flow_low: int = _FLOW_DEFAULTS.low
    flow_hold_max_ms: int = _FLOW_DEFAULTS.hold_max_ms
    cluster_port: int | None = None
    peers: str = ""
    join: str = ""
    cluster_secret_file: str = "~/.logbroker.secret"
    queue_leader_locator: str = "client-local"
    cluster_secret: str = ""  # from LOGBROKER_CLUSTER_SECRET only: never a flag (ps shows flags)
    amqps_port: int | None = None  # DEFAULT_AMQPS_PORT once a certificate is configured
    https_port: int | None = None
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    tls_verify: str = "none"
    tls_fail_if_no_peer_cert: bool = False
    tls_versions: str = "1.2,1.3"
    tls_ciphers: str = ""
    tls_login_from: str = "common_name"
    tls_login_san_type: str = "dns"
    tls_key_password: str = ""  # environment or config file only, as the cluster secret
    cluster_tls: bool = False  # the cluster link over TLS (needs tls_cert, tls_key, tls_ca)
    tls: TlsOptions | None = None  # built from the tls_* settings by resolve_settings
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def clustered(self) -> bool:
        return bool(self.peers or self.join or self.cluster_port is not None)

    def broker_config(self) -> BrokerConfig:
        return BrokerConfig(
            data_dir=os.path.abspath(self.data_dir),
            node_name=self.node_name,
            fsync_policy=FsyncPolicy.parse(self.fsync),
            max_message_bytes=self.max_message_bytes,
            max_connections=self.max_connections,
            retention_ms=self.retention_ms,
            retention_bytes=self.retention_bytes,
            publisher_flow=None if self.flow_high == 0 else FlowLimits(
                high=self.flow_high, low=self.flow_low, hold_max_ms=self.flow_hold_max_ms),
        )


class SettingsError(ValueError):
    pass


def _check_flow(settings: ServeSettings) -> None:
    if settings.flow_high < 0:
        raise SettingsError(f"flow high {settings.flow_high} must be >= 0 (0: never hold)")
    if settings.flow_high and not 0 <= settings.flow_low < settings.flow_high:
        raise SettingsError(f"flow low {settings.flow_low} must be at least 0 and below "
                            f"flow high {settings.flow_high}")
    if settings.flow_hold_max_ms <= 0:
        raise SettingsError(f"flow hold_max_ms {settings.flow_hold_max_ms} must be > 0")


def _resolve_workers(settings: ServeSettings) -> None:
    """The worker count (default: the cores) and the host identity (default: the host name)."""
    if "workers" not in settings.sources:
        settings.workers = os.cpu_count() or 1
    if not 1 <= settings.workers <= MAX_WORKERS:
        raise SettingsError(f"{settings.sources.get('workers', 'workers')}: "
                            f"{settings.workers} is not in 1..{MAX_WORKERS}")
    if not settings.host_id:
        settings.host_id = socket.gethostname()
    for name in ("host_id", "zone"):
        if len(getattr(settings, name)) > MAX_LABEL:
            raise SettingsError(f"{settings.sources[name]}: longer than {MAX_LABEL} characters")


def _resolve_tls(settings: ServeSettings) -> None:
    """Build the TLS options (and the TLS ports' defaults) once a certificate is set."""
    if not settings.tls_cert:
        stray = [name for name in ("tls_key", "tls_ca", "amqps_port", "https_port")
                 if name in settings.sources]
        if stray:
            raise SettingsError(f"{settings.sources[stray[0]]} needs a certificate "
                                f"(--tls-cert and --tls-key)")
    else:
        if not settings.tls_key:
            raise SettingsError("--tls-cert needs its private key (--tls-key)")
        try:
            settings.tls = TlsOptions(
                cert_file=settings.tls_cert, key_file=settings.tls_key, ca_file=settings.tls_ca,
                verify=settings.tls_verify,
                fail_if_no_peer_cert=settings.tls_fail_if_no_peer_cert,
                key_password=settings.tls_key_password,
                versions=tuple(v.strip() for v in settings.tls_versions.split(",") if v.strip()),
                ciphers=settings.tls_ciphers, login_from=settings.tls_login_from,
                login_san_type=settings.tls_login_san_type)
            settings.tls.server_context()  # bad files are refused now, not at a handshake
        except TlsOptionsError as error:
            raise SettingsError(str(error)) from error
        if settings.amqps_port is None:
            settings.amqps_port = DEFAULT_AMQPS_PORT
        if settings.https_port is None:
            settings.https_port = DEFAULT_HTTPS_PORT
    if settings.cluster_tls and (settings.tls is None or not settings.tls_ca):
        raise SettingsError("--cluster-tls needs the node's certificate, key and the CA "
                            "that signs every node's certificate (--tls-cert, --tls-key, "
                            "--tls-ca)")
    if not (settings.amqp_port or settings.amqps_port):
        raise SettingsError("--amqp-port 0 turns plain AMQP off, and no TLS listener "
                            "(--tls-cert, --amqps-port) is configured: clients could not "
                            "connect")


def resolve_settings(
    arguments: argparse.Namespace, environment: dict[str, str]
) -> ServeSettings:
    """Defaults < config file < environment < flags."""
    settings = ServeSettings()
    config_path = arguments.config or environment.get("LOGBROKER_CONFIG")
    document: dict[str, Any] = {}
    if config_path:
        try:
            with open(config_path, "rb") as config_file:
                document = tomllib.load(config_file)
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise SettingsError(f"cannot read config file {config_path}: {error}") from error
    for name, variable, section, key, kind in SETTINGS:
        value: Any = None
        source = ""
        if key in document.get(section, {}):
            value, source = document[section][key], f"{config_path} [{section}] {key}"
        if variable in environment:
            value, source = environment[variable], variable
        if getattr(arguments, name, None) is not None:
            value, source = getattr(arguments, name), f"--{name.replace('_', '-')}"
        if value is None:
            continue
        try:
            setattr(settings, name, kind(value))
        except (TypeError, ValueError) as error:
            raise SettingsError(f"{source}: {value!r} is not a valid "
                                f"{getattr(kind, '__name__', 'value')}") from error
        settings.sources[name] = source
    try:
        FsyncPolicy.parse(settings.fsync)
    except ValueError as error:
        raise SettingsError(str(error)) from error
    _check_flow(settings)
    _resolve_workers(settings)
    settings.tls_key_password = environment.get(
        KEY_PASSWORD_VARIABLE, str(document.get("tls", {}).get("key_password", "")))
    _resolve_tls(settings)
    try:
        settings.event_loop = resolve_event_loop(settings.event_loop)
    except ValueError as error:
        raise SettingsError(str(error)) from error
    settings.cluster_secret = environment.get(SECRET_VARIABLE, "")
    return settings


def cluster_settings(settings: ServeSettings) -> ClusterSettings:
    """The cluster part of the serve settings; raises SettingsError for bad values."""
    from logbroker.cluster.cluster_settings import (
        DEFAULT_CLUSTER_PORT,
        ClusterSettings,
        PeerSpecError,
        parse_peers,
    )
    from replication.transport import ClusterSecretError, load_or_create_secret

    try:
        peers = parse_peers(settings.peers)
        seeds = parse_peers(settings.join) if settings.join else ()
    except PeerSpecError as error:
        raise SettingsError(str(error)) from error
    if settings.join and any(peer.name != settings.node_name for peer in peers):
        raise SettingsError("--join and --peers exclude each other: a joining node learns "
                            "the members from the cluster")
    if settings.cluster_secret:
        secret = settings.cluster_secret.encode()
    else:
        try:
            secret = load_or_create_secret(os.path.expanduser(settings.cluster_secret_file))
        except (ClusterSecretError, OSError) as error:
            raise SettingsError(f"cluster secret: {error}") from error
    link_tls = None
    if settings.cluster_tls and settings.tls is not None:
        try:
            link_tls = settings.tls.link_contexts()
        except TlsOptionsError as error:
            raise SettingsError(str(error)) from error
    return ClusterSettings(
        node_name=settings.node_name, secret=secret, bind_host=settings.host, link_tls=link_tls,
        cluster_port=settings.cluster_port or DEFAULT_CLUSTER_PORT,
        peers=peers + seeds, join=bool(settings.join), amqp_port=settings.amqp_port,
        http_port=settings.http_port, default_locator=settings.queue_leader_locator,
        host_id=settings.host_id, zone=settings.zone,
    )
