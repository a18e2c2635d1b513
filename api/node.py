"""The `logbroker` command, and the composition root: `serve` wires every layer.

The only module that imports all of them (`api -> logbroker -> replication ->
segments`): it opens the broker (standalone, or as a cluster node), starts the
AMQP and HTTP listeners on it, and stops them in order on SIGTERM. The settings
are `logbroker.node_settings`'; the client subcommands (declare, list, publish,
consume, replay, ...) live in `api.cli` and talk to a running broker through
`api.client`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import ssl
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from api.cli.command_parser import CommandParser
from api.cli.options import add_connection_flags
from api.cli.parser import add_client_commands
from logbroker.cluster.cluster_settings import PeerSpecError
from logbroker.event_loop import run_on
from logbroker.node_settings import (
    SETTINGS,
    ServeSettings,
    SettingsError,
    cluster_settings,
    resolve_settings,
    switch,
)
from logbroker.tls_options import TlsOptions, TlsOptionsError
from logbroker.worker_layout import WorkerSpec, worker_specs
from segments.errors import DataDirLockedError

if TYPE_CHECKING:
    from logbroker.broker import Broker
    from logbroker.cluster.cluster_node import ClusterNode
    from logbroker.federation.federation_links import FederationLinks
    from logbroker.federation.federation_statuses import FederationStatuses

logger = logging.getLogger("logbroker")


async def serve(settings: ServeSettings) -> int:
    # Imported here: the client subcommands, which start faster without them, need none.
    from api.amqp.server import AmqpServerConfig, start_amqp_server, stop_amqp_server
    from logbroker.broker import Broker
    from logbroker.gc_tuning import freeze_startup_heap
    from logbroker.rate_sampling import sample_rates

    # First of all: a SIGTERM while the node starts (a supervisor stopping a worker it
    # just restarted) must stop it in order once started, not kill it half-way.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    cluster = None
    if settings.clustered:
        cluster = await _start_cluster_node(settings)
        broker = cluster.broker
    else:
        _check_standalone(settings.data_dir)
        broker = Broker.open(settings.broker_config())
    server_config = AmqpServerConfig(
        heartbeat_s=settings.heartbeat_s, frame_max=settings.frame_max,
        channel_max=settings.channel_max, max_message_bytes=settings.max_message_bytes,
        cluster_name=settings.node_name,
        certificate_login_from=settings.tls_login_from,
        certificate_login_san_type=settings.tls_login_san_type,
    )
    tls = settings.tls.server_context() if settings.tls is not None else None
    amqp_servers = []
    for port, ssl_context in ((settings.amqp_port, None), (settings.amqps_port, tls)):
        if port:  # 0 or unset: that listener is off
            amqp_servers.append(await start_amqp_server(
                broker, settings.host, port, server_config, ssl_context,
                max_pending_handshakes=settings.max_pending_handshakes,
                reuse_port=settings.reuse_port))
            logger.info("logbroker %s listening for %s on %s:%d (data in %s, %s loop)",
                        settings.node_name, "AMQPS" if ssl_context else "AMQP 0-9-1",
                        settings.host, port, os.path.abspath(settings.data_dir),
                        settings.event_loop)
    # The HTTP stack (FastAPI, pydantic, uvicorn, ~90 routes) takes longer to import than
    # a backlog of millions to open: imported in a thread, AMQP clients are answered meanwhile.
    await asyncio.to_thread(importlib.import_module, "api.http.server")
    from api.http.api_context import ApiContext, Listeners
    from api.http.routes.connections import serve_peer_views
    from api.http.server import start_http_server

    context = ApiContext(broker, Listeners(settings.amqp_port, settings.http_port,
                                           settings.host, amqps_port=settings.amqps_port,
                                           https_port=settings.https_port),
                         cluster=cluster.membership if cluster is not None else None,
                         replicas=cluster.handover if cluster is not None else None,
                         metrics_auth=settings.metrics_auth)
    if cluster is not None:  # its connections listed and closed from any member
        context.peers = serve_peer_views(context, cluster.rpc)
    http_servers = [await start_http_server(context, settings.host, port, ssl_context,
                                            settings.reuse_port)
                    for port, ssl_context in ((settings.http_port, None),
                                              (settings.https_port, tls)) if port]
    federation = _start_federation(broker, clustered=cluster is not None)
    context.federation = _federation_statuses(broker, federation, cluster)
    sampling = asyncio.ensure_future(sample_rates(broker))  # once per node, whatever listens
    freeze_startup_heap()  # everything so far lives as long as the process
    if settings.tls is not None and tls is not None:
        link = cluster.settings.link_tls if cluster is not None else None
        contexts = [tls, *(link or ())]
        loop.add_signal_handler(signal.SIGHUP, _reload_tls, settings.tls, contexts)
    await stop.wait()
    if cluster is not None:
        logger.info("shutting down: handing led queues to their followers")
        await cluster.handover.hand_over_all()
    await federation.stop_all()
    sampling.cancel()
    logger.info("shutting down: finishing in-flight confirms")
    for http in http_servers:
        await http.stop()
    for server in amqp_servers:
        await stop_amqp_server(server)
    if cluster is not None:
        await cluster.stop()
    else:
        await broker.close()
    logger.info("stopped")
    return 0


def _check_standalone(data_dir: str) -> None:
    """A data dir a cluster member wrote (its workers' too) keeps its definitions in the
    Raft log: opened standalone, the older standalone ones would be read, and the queues
    declared since deleted as orphans."""
    if os.path.isdir(os.path.join(data_dir, "raft")):
        raise SettingsError(
            f"{data_dir} belongs to a cluster member (it has a raft/ directory): start it "
            "with --workers > 1, or with its cluster settings (--cluster-port, --peers or "
            "--join), not as a single standalone process")


def _start_federation(broker: Broker, clustered: bool) -> FederationLinks:
    """The node's federation links, kept in step with every applied command."""
    from logbroker.federation.federation_links import FederationLinks
    from logbroker.federation.local_broker import LocalBroker

    def up_nodes() -> list[str]:
        return [node.name for node in broker.state.cluster_nodes() if node.up]

    links = FederationLinks(LocalBroker(broker), lambda: broker.state,
                            up_nodes if clustered else None)
    broker.applied_listeners.append(links.on_applied)
    links.refresh()
    return links


def _federation_statuses(broker: Broker, links: FederationLinks,
                         cluster: ClusterNode | None) -> FederationStatuses:
    """What /api/federation-links and /api/shovels list: every node's, in a cluster."""
    from logbroker.federation.federation_statuses import FederationStatuses

    def up_nodes() -> list[str]:
        return [node.name for node in broker.state.cluster_nodes() if node.up]

    return FederationStatuses(links, broker.config.node_name,
                              cluster.rpc if cluster is not None else None, up_nodes)


def _reload_tls(options: TlsOptions, contexts: list[ssl.SSLContext]) -> None:
    try:
        options.reload_into(contexts)
    except TlsOptionsError as error:
        logger.error("SIGHUP: TLS files not reloaded, the old ones stay in use: %s", error)
        return
    logger.info("SIGHUP: TLS certificate, key and CA reloaded from %s", options.cert_file)


async def _start_cluster_node(settings: ServeSettings) -> ClusterNode:
    from logbroker.cluster.cluster_node import ClusterNode

    node = ClusterNode(cluster_settings(settings), settings.broker_config())
    await node.start()
    return node


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="logbroker", description="Run a logbroker node (serve) or manage one.")
    add_connection_flags(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve_parser = commands.add_parser("serve", help="run a broker node")
    serve_parser.add_argument("--config", help="TOML config file (env LOGBROKER_CONFIG)")
    for name, variable, _, _, kind in SETTINGS:
        flag = f"--{name.replace('_', '-')}"
        if kind is switch:  # a bare flag, or an explicit true/false
            serve_parser.add_argument(flag, dest=name, type=kind, nargs="?", const=True,
                                      help=f"(env {variable})")
        else:
            serve_parser.add_argument(flag, dest=name, type=kind, help=f"(env {variable})")
    add_client_commands(commands)
    return parser


def _worker_specs(settings: ServeSettings) -> list[WorkerSpec]:
    """The workers of a node with `--workers` > 1; checks the cluster settings first (and
    creates the cluster secret once, not in N workers at once)."""
    cluster = cluster_settings(settings)
    try:
        return worker_specs(workers=settings.workers, node_name=settings.node_name,
                            data_dir=os.path.abspath(settings.data_dir),
                            cluster_port=settings.cluster_port, peers=settings.peers,
                            join=settings.join, advertised_host=cluster.advertised_host)
    except (ValueError, PeerSpecError) as error:
        raise SettingsError(f"--workers {settings.workers}: {error}") from error


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    arguments = build_parser().parse_args(argv)
    if arguments.command != "serve":
        from api.cli.run import run_client_command  # the client (httpx): not for serve

        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
        return run_client_command(arguments)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        settings = resolve_settings(arguments, dict(os.environ))
        if settings.workers > 1:
            from api.worker_supervisor import supervise
            return run_on("asyncio", supervise(argv, settings, _worker_specs(settings)))
        from api.worker_supervisor import stop_with_the_supervisor
        from logbroker.gc_tuning import hold_collections
        stop_with_the_supervisor()
        hold_collections()  # until serve freezes the startup heap
        return run_on(settings.event_loop, serve(settings))
    except SettingsError as error:
        print(f"logbroker: {error}", file=sys.stderr)
        return 2
    except DataDirLockedError as error:
        print(f"logbroker: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"logbroker: cannot start: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
