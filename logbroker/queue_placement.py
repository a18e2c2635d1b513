"""Where a new queue lives: its leader node and its replica set. Pure: no I/O, no clock.

The declaring node calls `place_queue` with its view of the cluster (which
nodes exist and are up, how many queues each leads and replicates, from
`MetadataState`) and records the result in `DeclareQueue.leader_node` /
`members`. Randomness comes in as a seeded `random.Random`, so a placement
replays exactly. Bad settings raise `PlacementError`, which the caller
answers with 406 PRECONDITION_FAILED and the error's text.

The rules and where they come from (seeds in `/work/shared/seeds/`: 000 is
the Erlang Solutions post on queue master location plus rabbitmq.com/ha.html,
002 is rabbitmq.com/ha.html "Queue Leader Location" and "ha-mode"):

Strategy (`locator_strategy`)
    Seed 000: a strategy "may be configured" three ways, "Queue declare
    arguments", "Policy", "Configuration file"; seed 002: "using the
    x-queue-master-locator optional queue argument, setting the
    queue-master-locator policy key or by defining the queue_leader_locator
    key in the configuration file". Neither seed orders the first two;
    DESIGN.md 6 reads them as "the policy wins over the argument", which is
    what RabbitMQ's code does (`rabbit_queue_location:leader_locator/1`:
    `args_policy_lookup(<<"queue-leader-locator">>, fun (PolVal, _ArgVal) ->
    PolVal end, Q)`, then the same for `queue-master-locator`, then the config
    key) and what `logbroker.metadata.policies` already does. So, first found:
    policy `queue-leader-locator`, argument `x-queue-leader-locator`, policy
    `queue-master-locator`, argument `x-queue-master-locator`, config default.
    Strategies: `client-local` (seed 000: "selects the queue master node as the
    local node on which the queue is being declared"), `balanced` (seed 002:
    "Pick the node hosting the minimum number of leaders"; seed 000's
    `min-masters`: "the one with the least running master queues"; RabbitMQ's
    later alias `least-leaders` is accepted too), `random` (seed 000: "based on
    random selection").

Replicas (`replica_count_or_nodes`)
    Seed 002: "Mirroring parameters are configured using policies" with
    `ha-mode` / `ha-params`: `exactly` count ("Number of queue replicas (leader
    plus mirrors)"; "If there are fewer than count nodes in the cluster, the
    queue is mirrored to all nodes"), `all` ("mirrored across all nodes in the
    cluster"), `nodes` node names ("If any of those node names are not a part
    of the cluster, this does not constitute an error"). `x-queue-replicas` is
    this broker's argument for a count (DESIGN.md 6). When both are set the
    policy wins, as for the strategy (DESIGN.md 6; RabbitMQ's own replica
    count for streams, `initial-cluster-size`, is looked up with
    `policy_precedence` in `rabbit_stream_queue`). Nothing set: one replica,
    the leader ("By default, contents of a queue within a RabbitMQ cluster are
    located on a single node", seed 002).

Leader (`place_queue`)
    Only nodes that are up are candidates; the declaring node counts as up
    whatever the view says, since it is answering the declare. With `ha-mode:
    nodes` the candidates are the listed nodes that are up: seed 000, "the HA
    nodes policy would always take precedence over the queue master location
    strategy" (RabbitMQ first starts the leader where the strategy says and
    then migrates it to a listed node, seed 002 "nodes Policy and Migrating
    Leaders"; we place it where it would end up). If none of them is up, seed
    002: "the queue will be created on the node that the declaring client is
    connected to", with no other replica (RabbitMQ's `nodes` mode keeps only
    the leader when no listed node is available). Within the candidates:
    `client-local` takes the local node, or, when the local node is not a
    candidate (only under `nodes`), the lowest name, which is where RabbitMQ's
    `nodes` mode moves a leader (`hd(lists:sort(AvailablePolicyNodes))`);
    `balanced` the one leading the fewest queues, ties going to the local node
    if it is tied, else to the lowest name (deterministic, so every node
    computes the same answer); `random` `rng.choice` over the candidates in
    name order.

Members
    The leader first, then the other replicas on up nodes other than the
    leader, those holding the fewest replicas first, ties by name (RabbitMQ
    shuffles; the fewest-first order spreads the load and replays). The count
    is capped at the nodes available: `exactly N` / `x-queue-replicas: N` give
    min(N, up nodes) replicas; `all` one on every up node; `nodes` one on each
    listed node that is up. Nodes that are down get no replica now: seed 002,
    "a new mirror will be created on another node" and "When a new node is
    added to the cluster, the queue will be mirrored to that node" describe
    replicas being added as nodes come and go, which is the controller's work;
    `desired_member_count` tells it how many a queue should have.
    Host awareness (`spread_copies`, issue 28): the replicas other than the
    leader are picked one at a time, each time from the nodes on the hosts
    holding the fewest copies so far, then in the zones holding the fewest
    (RabbitMQ's and Kafka's rack awareness): a host that holds no copy comes
    first, and a host takes a second copy (on another of its workers: a node
    name is a worker, so no node ever holds two copies) only when every host
    that could take one holds one. Within those tiers the order above decides. When every node is
    on one host, or each on its own, the order is exactly the one above.
    Exclusive queues: seed 002, "exclusive queues are never mirrored (even if
    they match a policy stating that they should be)"; RabbitMQ also places
    them on the declaring node (`rabbit_classic_queue:declare/2`), since they
    die with the connection. A cluster of one node always gives that node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    import random  # the injected generator's type: the caller seeds it

__all__ = [
    "STRATEGIES",
    "AllReplicas",
    "NodeReplicas",
    "NodeView",
    "Placement",
    "PlacementError",
    "ReplicaCount",
    "ReplicaSpec",
    "desired_member_count",
    "locator_strategy",
    "normalize_strategy",
    "place_queue",
    "replica_count_or_nodes",
    "spread_copies",
]

CLIENT_LOCAL = "client-local"
BALANCED = "balanced"
RANDOM = "random"
STRATEGIES = (CLIENT_LOCAL, BALANCED, RANDOM)
_ALIASES = {"min-masters": BALANCED, "least-leaders": BALANCED}
# (policy key, argument key), in RabbitMQ's lookup order (module doc).
_LOCATOR_KEYS = (
    ("queue-leader-locator", "x-queue-leader-locator"),
    ("queue-master-locator", "x-queue-master-locator"),
)
REPLICAS_ARGUMENT = "x-queue-replicas"


class PlacementError(ValueError):
    """A setting that makes the queue unplaceable; answer 406 PRECONDITION_FAILED with str()."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """A cluster member as placement sees it. `host` is the machine it runs on (several
    workers of one `logbroker serve --workers N` share it; "" means its own machine,
    as a member recorded before hosts were), `zone` an optional rack or zone label."""

    name: str
    up: bool
    host: str = ""
    zone: str = ""

    @property
    def machine(self) -> str:
        return self.host or self.name


@dataclass(frozen=True, slots=True)
class Placement:
    """`members` holds every replica, the leader first."""

    leader: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReplicaCount:
    """`count` replicas, leader included (`ha-mode: exactly`, `x-queue-replicas`, or 1)."""

    count: int
    source: str = "default"


@dataclass(frozen=True, slots=True)
class AllReplicas:
    """A replica on every node (`ha-mode: all`)."""

    source: str = "policy 'ha-mode'"


@dataclass(frozen=True, slots=True)
class NodeReplicas:
    """A replica on each of these nodes that is in the cluster (`ha-mode: nodes`)."""

    nodes: tuple[str, ...]
    source: str = "policy 'ha-mode'"


ReplicaSpec = ReplicaCount | AllReplicas | NodeReplicas


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _choices() -> str:
    listed = ", ".join(f"'{name}'" for name in STRATEGIES)
    aliases = ", ".join(f"'{name}'" for name in _ALIASES)
    return f"one of {listed} ({aliases} mean '{BALANCED}')"


def normalize_strategy(value: Any, source: str = "strategy") -> str:
    """The strategy `value` names (aliases resolved), or PlacementError."""
    if not isinstance(value, str):
        raise PlacementError(
            f"invalid queue leader locator {value!r} in {source}: must be a string, {_choices()}"
        )
    name = _ALIASES.get(value, value)
    if name not in STRATEGIES:
        raise PlacementError(
            f"invalid queue leader locator '{value}' in {source}: expected {_choices()}"
        )
    return name


def locator_strategy(
    arguments: Mapping[str, Any], policy_definition: Mapping[str, Any], config_default: str
) -> str:
    """The queue's leader-locator strategy: policy, then argument, then config (module doc).

    Every locator present in the arguments or the policy must be valid, even
    one that another one overrides: the declare would be refused for it anyway.
    """
    chosen: str | None = None
    for policy_key, argument_key in _LOCATOR_KEYS:
        sources = (
            (policy_definition, policy_key, f"policy key '{policy_key}'"),
            (arguments, argument_key, f"argument '{argument_key}'"),
        )
        for table, key, source in sources:
            if key in table:
                name = normalize_strategy(table[key], source)
                chosen = name if chosen is None else chosen
    if chosen is not None:
        return chosen
    return normalize_strategy(config_default, "configuration 'queue_leader_locator'")


def replica_count_or_nodes(
    arguments: Mapping[str, Any], policy_definition: Mapping[str, Any]
) -> ReplicaSpec:
    """How many replicas, or on which nodes: policy `ha-mode`, else `x-queue-replicas`, else 1."""
    argument: ReplicaSpec | None = None
    if REPLICAS_ARGUMENT in arguments:
        value = arguments[REPLICAS_ARGUMENT]
        if not (_is_int(value) and value >= 1):
            raise PlacementError(
                f"invalid argument '{REPLICAS_ARGUMENT}': {value!r}; expected an integer >= 1 "
                "(the number of replicas, leader included)"
            )
        argument = ReplicaCount(value, f"argument '{REPLICAS_ARGUMENT}'")
    policy = _ha_policy(policy_definition)
    if policy is not None:
        return policy
    return argument if argument is not None else ReplicaCount(1)


def _ha_policy(definition: Mapping[str, Any]) -> ReplicaSpec | None:
    """`ha-mode` / `ha-params` as `rabbit_mirror_queue_misc:validate_policy/1` accepts them."""
    if "ha-mode" not in definition:
        if "ha-params" in definition:
            raise PlacementError("policy key 'ha-params' needs 'ha-mode'")
        return None
    mode, has_params = definition["ha-mode"], "ha-params" in definition
    params = definition.get("ha-params")
    if mode == "all":
        if has_params:
            raise PlacementError("policy 'ha-mode' \"all\" does not take 'ha-params'")
        return AllReplicas()
    if mode == "exactly":
        if not (_is_int(params) and params >= 1):
            shown = repr(params) if has_params else "none"
            raise PlacementError(
                f"policy 'ha-mode' \"exactly\" takes an integer 'ha-params' >= 1 (the number "
                f"of replicas, leader included), {shown} given"
            )
        return ReplicaCount(params, "policy 'ha-mode' \"exactly\"")
    if mode == "nodes":
        if not isinstance(params, list | tuple) or not params:
            shown = repr(params) if has_params else "none"
            raise PlacementError(
                f"policy 'ha-mode' \"nodes\" takes a non-empty list of node names as "
                f"'ha-params', {shown} given"
            )
        bad = [item for item in params if not isinstance(item, str) or not item]
        if bad:
            raise PlacementError(
                f"policy 'ha-mode' \"nodes\": 'ha-params' must hold node names, {bad!r} are not"
            )
        return NodeReplicas(tuple(dict.fromkeys(params)))
    raise PlacementError(
        f'invalid policy \'ha-mode\' {mode!r}: expected "all", "exactly" or "nodes"'
    )


def desired_member_count(spec: ReplicaSpec, cluster_nodes: Sequence[str]) -> int:
    """How many replicas `spec` asks for in a cluster of `cluster_nodes`, up or down.

    At least 1 (the leader). A placement has fewer while nodes are down; the
    controller can compare and add replicas when they return (seed 002).
    """
    known = dict.fromkeys(cluster_nodes)
    if isinstance(spec, AllReplicas):
        wanted = len(known)
    elif isinstance(spec, NodeReplicas):
        wanted = sum(1 for node in spec.nodes if node in known)
    else:
        wanted = min(spec.count, len(known))
    return max(wanted, 1)


def place_queue(
    *,
    strategy: str,
    local_node: str,
    nodes: Sequence[NodeView],
    leader_counts: Mapping[str, int],
    member_counts: Mapping[str, int],
    arguments: Mapping[str, Any],
    policy_definition: Mapping[str, Any],
    rng: random.Random,
    exclusive: bool = False,
) -> Placement:
    """The leader node and replica set of a new queue (rules in the module doc)."""
    strategy = normalize_strategy(strategy)
    if not local_node:
        raise PlacementError("the local node needs a name")
    spec = replica_count_or_nodes(arguments, policy_definition)
    up: dict[str, bool] = {}
    for node in nodes:
        up.setdefault(node.name, node.up)
    up[local_node] = True  # it is answering the declare
    live = sorted(name for name, is_up in up.items() if is_up)
    if exclusive or len(up) == 1:
        return Placement(local_node, (local_node,))
    if isinstance(spec, NodeReplicas):
        pool = sorted(name for name in dict.fromkeys(spec.nodes) if up.get(name, False))
        if not pool:
            return Placement(local_node, (local_node,))
        size = len(pool)
    else:
        pool = live
        size = len(live) if isinstance(spec, AllReplicas) else min(spec.count, len(live))
    leader = _leader(strategy, pool, local_node, leader_counts, rng)
    others = sorted(
        (name for name in pool if name != leader),
        key=lambda name: (member_counts.get(name, 0), name),
    )
    return Placement(leader, spread_copies((leader,), others, size, nodes))


def spread_copies(
    chosen: Sequence[str], candidates: Sequence[str], count: int, nodes: Sequence[NodeView]
) -> tuple[str, ...]:
    """`chosen` followed by candidates until there are `count` copies (fewer if the
    candidates run out): each pick is the first candidate, in the given order, on a
    host holding the fewest copies so far, then in a zone holding the fewest (module
    doc): a host without a copy first, and a second copy on a host only when every
    host that could take one holds one.

    A node missing from `nodes` counts as its own host with no zone. Names are
    never repeated: `chosen` keeps its order and candidates already in it are skipped.
    """
    views = {node.name: node for node in nodes}
    picked = list(dict.fromkeys(chosen))
    hosts = Counter(_machine(views, name) for name in picked)
    zones = Counter(_zone(views, name) for name in picked)
    pool = [name for name in dict.fromkeys(candidates) if name not in picked]
    while pool and len(picked) < count:
        def rank(index: int) -> tuple[int, int, int]:
            name = pool[index]
            zone = _zone(views, name)
            return (hosts[_machine(views, name)], zones[zone] if zone else 0, index)

        best = pool.pop(min(range(len(pool)), key=rank))
        picked.append(best)
        hosts[_machine(views, best)] += 1
        zones[_zone(views, best)] += 1
    return tuple(picked)


def _machine(views: Mapping[str, NodeView], name: str) -> str:
    view = views.get(name)
    return view.machine if view is not None else name


def _zone(views: Mapping[str, NodeView], name: str) -> str:
    view = views.get(name)
    return view.zone if view is not None else ""


def _leader(
    strategy: str,
    candidates: Sequence[str],
    local_node: str,
    leader_counts: Mapping[str, int],
    rng: random.Random,
) -> str:
    """`candidates` is non-empty and sorted by name."""
    if strategy == RANDOM:
        return rng.choice(candidates)
    if strategy == CLIENT_LOCAL:
        return local_node if local_node in candidates else candidates[0]
    fewest = min(leader_counts.get(name, 0) for name in candidates)
    tied = [name for name in candidates if leader_counts.get(name, 0) == fewest]
    return local_node if local_node in tied else tied[0]
