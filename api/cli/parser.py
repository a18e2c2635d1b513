"""The client subcommands of `logbroker`, added to the parser that `api.node` builds.

Each subcommand names its handler `"module:function"` (a function of the client
and the arguments, returning the exit code), imported by `CommandParser` only
once that subcommand is chosen; `api.cli.run.run_client_command` calls it.
This module imports only what the parser shows (flags and usage texts), never a
command's implementation, so `serve` does not load the client (httpx) nor the
perf tool.
"""

from __future__ import annotations

import argparse
from typing import Any

from api.cli import (
    cluster_commands,
    dev_cluster_arguments,
    perf_arguments,
    queue_commands,
    replay_command,
)
from api.cli.options import connection_parent
from api.cli.queue_arguments import add_queue_options, queue_options_epilog
from api.cli.tables import LIST_KINDS

Subparsers = Any  # argparse's _SubParsersAction, private in typeshed
PUBLISH_DESCRIPTION = """Publish messages with confirms.

    The messages come from the arguments, else from --file, else from stdin: one
    message per line (the line without its newline). They go in batches (REST
    publish-batch), each answered once every message is confirmed. Publishing a
    file shows a progress bar on stderr when stderr is a terminal.
    """


def _command(commands: Subparsers, name: str, handler: str, help_text: str,
             description: str | None = None) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help_text, description=description or help_text,
        parents=[connection_parent()])
    parser.set_defaults(handler=handler)
    return parser


def _arguments_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--argument", action="append", metavar="KEY=VALUE",
                        help="an x-argument; VALUE is read as JSON if it is JSON (repeatable)")


def _binding_ends(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="source exchange")
    parser.add_argument("destination", help="destination queue (or exchange)")
    parser.add_argument("--destination-type", choices=("queue", "exchange"), default="queue")
    parser.add_argument("--routing-key", "-k", default="", help="binding key (default: '')")
    _arguments_flag(parser)


def _add_declare(commands: Subparsers) -> None:
    declare = commands.add_parser("declare", help="declare a queue, exchange or binding",
                                  description="Declare a queue, an exchange or a binding.",
                                  epilog=queue_options_epilog(),
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = declare.add_subparsers(dest="kind", required=True, metavar="KIND")
    queue = _command(kinds, "queue", "admin_commands:declare_queue", "declare a queue")
    queue.add_argument("name")
    add_queue_options(queue)
    exchange = _command(kinds, "exchange", "admin_commands:declare_exchange", "declare an exchange")
    exchange.add_argument("name")
    exchange.add_argument("--type", "-t", default="direct",
                          help="direct, fanout, topic, headers, ... (default: direct)")
    exchange.add_argument("--internal", action="store_true")
    for parser in (queue, exchange):
        parser.add_argument("--transient", action="store_true", help="not durable")
        parser.add_argument("--auto-delete", action="store_true")
        _arguments_flag(parser)
    _binding_ends(_command(kinds, "binding", "admin_commands:declare_binding",
                           "bind a queue (or exchange) to an exchange"))


def _add_delete(commands: Subparsers) -> None:
    delete = commands.add_parser("delete", help="delete a queue, exchange or binding",
                                 description="Delete a queue, an exchange or a binding.")
    kinds = delete.add_subparsers(dest="kind", required=True, metavar="KIND")
    queue = _command(kinds, "queue", "admin_commands:delete_queue", "delete a queue")
    queue.add_argument("name")
    queue.add_argument("--if-unused", action="store_true", help="only if it has no consumers")
    queue.add_argument("--if-empty", action="store_true", help="only if it has no messages")
    exchange = _command(kinds, "exchange", "admin_commands:delete_exchange", "delete an exchange")
    exchange.add_argument("name")
    exchange.add_argument("--if-unused", action="store_true", help="only if nothing is bound")
    _binding_ends(_command(kinds, "binding", "admin_commands:delete_binding", "delete a binding"))
    purge = _command(commands, "purge", "admin_commands:purge",
                     "remove every ready message of a queue")
    purge.add_argument("queue")


def _add_listing(commands: Subparsers) -> None:
    listing = _command(commands, "list", "admin_commands:list_objects", "list objects as a table")
    listing.add_argument("kind", choices=LIST_KINDS, metavar="{" + ",".join(LIST_KINDS) + "}")
    listing.add_argument("--all-vhosts", action="store_true", help="every vhost, not --vhost")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    status = _command(commands, "status", "admin_commands:status",
                      "the overview of every node given by --url (exit 3 if none is up)")
    status.add_argument("--format", choices=("table", "json"), default="table")


def _add_access(commands: Subparsers) -> None:
    policy = _command(commands, "set-policy", "admin_commands:set_policy",
                      "set a policy in --vhost")
    policy.add_argument("name")
    policy.add_argument("pattern", help="regular expression on queue / exchange names")
    policy.add_argument("definition", help='JSON object, e.g. \'{"max-length": 1000}\'')
    policy.add_argument("--priority", type=int, default=0)
    policy.add_argument("--apply-to", choices=("all", "queues", "exchanges"), default="all")
    clear = _command(commands, "clear-policy", "admin_commands:clear_policy", "remove a policy")
    clear.add_argument("name")
    parameter = _command(commands, "set-parameter", "admin_commands:set_parameter",
                         "set a runtime parameter in --vhost (RabbitMQ's set_parameter)")
    parameter.add_argument("component", help="e.g. federation-upstream, vhost-limits")
    parameter.add_argument("name")
    parameter.add_argument("value", help='JSON object, e.g. \'{"uri": "amqp://host"}\'')
    clear_parameter = _command(commands, "clear-parameter", "admin_commands:clear_parameter",
                               "remove a runtime parameter from --vhost")
    clear_parameter.add_argument("component")
    clear_parameter.add_argument("name")
    limits = _command(commands, "set-vhost-limits", "admin_commands:set_vhost_limits",
                      "set --vhost's limits, replacing the old ones")
    limits.add_argument("limits", help='JSON object, e.g. \'{"max-connections": 100, '
                                       '"max-queues": 1000}\' (negative: no limit)')
    _command(commands, "clear-vhost-limits", "admin_commands:clear_vhost_limits",
             "remove --vhost's limits")
    user = _command(commands, "add-user", "admin_commands:add_user", "add a user (or update one)")
    user.add_argument("name")
    user.add_argument("password")
    user.add_argument("--tags", default="",
                      help="comma-separated: administrator, monitoring, policymaker, management")
    permissions = _command(commands, "set-permissions", "admin_commands:set_permissions",
                           "set a user's permissions in --vhost")
    permissions.add_argument("user")
    for name in ("configure", "write", "read"):
        permissions.add_argument(f"--{name}", default=".*", metavar="REGEX",
                                 help=f"{name} permission (default: .*)")
    export = _command(commands, "export-definitions", "admin_commands:export_definitions",
                      "write the definitions (RabbitMQ's JSON format)")
    export.add_argument("file", nargs="?", default="-", help="output file (default: stdout)")
    load = _command(commands, "import-definitions", "admin_commands:import_definitions",
                    "import definitions (additive)")
    load.add_argument("file", help="definitions JSON file, - for stdin")


def _add_messaging(commands: Subparsers) -> None:
    publish = _command(commands, "publish", "message_commands:publish",
                       "publish messages with confirms", PUBLISH_DESCRIPTION)
    publish.add_argument("messages", nargs="*", metavar="MESSAGE",
                         help="message bodies (else --file, else stdin, one per line)")
    publish.add_argument("--exchange", "-e", default="", help="(default: the default exchange)")
    publish.add_argument("--routing-key", "-k", default="")
    publish.add_argument("--file", "-f", help="one message per line; - for stdin")
    publish.add_argument("--property", action="append", metavar="KEY=VALUE",
                         help="a message property, e.g. content_type=text/plain (repeatable)")
    publish.add_argument("--header", action="append", metavar="KEY=VALUE", help="(repeatable)")
    publish.add_argument("--content-type")
    publish.add_argument("--persistent", action="store_true", help="delivery_mode 2")
    publish.add_argument("--batch-size", type=_positive, default=1000)
    publish.add_argument("--mandatory", action="store_true",
                         help="fail (exit 1) if a message reaches no queue")
    get = _command(commands, "get", "message_commands:get",
                   "fetch messages (requeued unless --ack, as RabbitMQ's get)")
    get.add_argument("queue")
    get.add_argument("--count", "-n", type=_positive, default=1)
    get.add_argument("--ack", action="store_true", help="remove the messages from the queue")
    get.add_argument("--format", choices=("text", "json"), default="text")
    consume = _command(commands, "consume", "message_commands:consume",
                       "consume over a WebSocket, acking each message once printed")
    consume.add_argument("queue")
    consume.add_argument("--count", "-n", type=_positive, help="stop after N messages")
    consume.add_argument("--prefetch", type=_positive, default=100)
    consume.add_argument("--no-ack", action="store_true",
                         help="the broker forgets each message once sent (with --count, "
                              "messages sent past the count are lost)")
    consume.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                         help="stop when no message came for this long")
    consume.add_argument("--format", choices=("text", "json"), default="text")


def _add_replay(commands: Subparsers) -> None:
    replay = _command(commands, "replay", "replay_command:replay",
                      "read a queue's log from an offset or a time (non-destructive)",
                      replay_command.__doc__)
    replay.add_argument("queue")
    start = replay.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-offset", type=int, metavar="N")
    start.add_argument("--from-time", metavar="T",
                       help="ISO 8601 time, epoch seconds or ms, or an age: --from-time=-15m")
    replay.add_argument("--to-offset", type=int, metavar="M", help="stop before offset M")
    replay.add_argument("--follow", action="store_true",
                        help="keep streaming new messages until Ctrl-C")
    replay.add_argument("--format", choices=("text", "json"), default="text")
    replay.add_argument("--output", "-o", metavar="FILE", help="write to FILE, not stdout")
    replay.add_argument("--page-size", type=_positive, default=1000, help=argparse.SUPPRESS)
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_cluster(commands: Subparsers) -> None:
    group = commands.add_parser(
        "cluster", help="the cluster's members: status, join, leave, forget-node",
        description=cluster_commands.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = group.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")
    status = _command(verbs, "status", "cluster_commands:status",
                      "every member: role, up/down and since when, the leader")
    status.add_argument("--json", action="store_true", help="the raw GET /api/cluster document")
    join = _command(verbs, "join", "cluster_commands:join",
                    "add a node (started with --join) to the cluster of the node at --url")
    join.add_argument("member", metavar="NAME@HOST:PORT",
                      help="the new node's name and cluster address (port default: 25672)")
    _command(verbs, "leave", "cluster_commands:leave",
             "the node at --url (exactly one) leaves the cluster")
    forget = _command(verbs, "forget-node", "cluster_commands:forget_node",
                      "remove a node from the cluster (e.g. one that is gone for good)")
    forget.add_argument("name", help="the node's name, as `cluster status` lists it")


def _add_federation(commands: Subparsers) -> None:
    group = commands.add_parser("federation", help="federation links: status")
    verbs = group.add_subparsers(dest="federation_command", required=True, metavar="COMMAND")
    status = _command(verbs, "status", "admin_commands:federation_status",
                      "every node's links (asked of the node at --url): upstream, node, "
                      "status, messages, errors")
    status.add_argument("--format", choices=("table", "json"), default="table")
    group = commands.add_parser("shovel", help="dynamic shovels: status")
    verbs = group.add_subparsers(dest="shovel_command", required=True, metavar="COMMAND")
    status = _command(verbs, "status", "admin_commands:shovel_status",
                      "every node's shovels (asked of the node at --url): state, node, "
                      "messages moved, errors")
    status.add_argument("--format", choices=("table", "json"), default="table")


def _add_queue(commands: Subparsers) -> None:
    group = commands.add_parser(
        "queue", help="replicated queues: sync, cancel-sync, transfer-leader, "
        "rebalance-leaders", description=queue_commands.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = group.add_subparsers(dest="queue_command", required=True, metavar="COMMAND")
    for name, handler, help_text in (
            ("sync", "queue_commands:sync", "members not in sync copy the whole queue"),
            ("cancel-sync", "queue_commands:cancel_sync", "stop the copies `sync` started"),
            ("transfer-leader", "queue_commands:transfer_leader",
             "move the queue's leader to another in-sync member")):
        verb = _command(verbs, name, handler, help_text)
        verb.add_argument("queue", help="the queue's name")
        if name == "transfer-leader":
            verb.add_argument("--node", default=None,
                              help="the new leader (default: the best in-sync follower)")
    _command(verbs, "rebalance-leaders", "queue_commands:rebalance_leaders",
             "spread replicated queues' leaders evenly over the nodes that are up")


def _add_dev_cluster(commands: Subparsers) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "dev-cluster", help="run a local N-node cluster on 127.0.0.1 until Ctrl-C",
        description=dev_cluster_arguments.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    dev_cluster_arguments.add_arguments(parser)
    parser.set_defaults(handler="dev_cluster:dev_cluster")


def _add_perf(commands: Subparsers) -> None:
    # add_help=False: `-h` is PerfTest's --uri; help is --help / -?.
    parser: argparse.ArgumentParser = commands.add_parser(
        "perf", help="a load test like RabbitMQ's PerfTest (rates, latency, plots)",
        description=perf_arguments.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[connection_parent()], add_help=False)
    perf_arguments.add_arguments(parser)
    parser.set_defaults(handler="perf_command:perf")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_client_commands(commands: Subparsers) -> None:
    """Add every client subcommand to `logbroker`'s subparsers."""
    for add in (_add_declare, _add_delete, _add_listing, _add_messaging, _add_replay,
                _add_access, _add_cluster, _add_federation, _add_queue, _add_dev_cluster,
                _add_perf):
        add(commands)
