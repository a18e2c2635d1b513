"""Which federation links this node should run, from the applied metadata: pure.

Theory of operation. An exchange is federated when its effective policy names
`federation-upstream` (one upstream) or `federation-upstream-set` (a set, or
`all`: every upstream of the vhost). Each (vhost, exchange, upstream) is one link,
with the upstream's settings overridden by the set member's. The plan is a
function of the metadata alone, so every node computes the same one; in a
cluster each link is run by one node, the up node that ranks first for the
link's key (rendezvous hashing over the up nodes: a link moves only when its
node goes down or comes back). A standalone node runs every link.

Invariants: a link's key names an exchange that exists and an upstream that is
defined; an upstream or set a policy names but nobody defined gives no link
(and a `missing` entry, so status can say why); defaults are RabbitMQ's, except
the reconnect delay (1 s, as the design asks, not 5).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logbroker.metadata import MetadataState
from logbroker.metadata.federation_parameters import IMPLICIT_SET
from logbroker.metadata.parameters import FEDERATION_UPSTREAM, FEDERATION_UPSTREAM_SET

__all__ = ["LinkKey", "LinkPlan", "Upstream", "plan_exchange_links", "runner_of"]


@dataclass(frozen=True)
class Upstream:
    """One upstream's effective settings for one link (RabbitMQ's keys and defaults)."""

    name: str
    uris: tuple[str, ...]
    prefetch_count: int = 1000
    reconnect_delay_s: float = 1.0
    ack_mode: str = "on-confirm"
    trust_user_id: bool = False
    exchange: str | None = None  # the upstream exchange (default: the same name)
    max_hops: int = 1
    expires_ms: int | None = None
    message_ttl_ms: int | None = None

    @classmethod
    def of(cls, name: str, definition: Mapping[str, Any]) -> Upstream:
        uri = definition["uri"]
        uris = tuple(uri) if isinstance(uri, list) else (uri,)
        return cls(
            name, uris,
            prefetch_count=definition.get("prefetch-count", 1000),
            reconnect_delay_s=float(definition.get("reconnect-delay", 1.0)),
            ack_mode=definition.get("ack-mode", "on-confirm"),
            trust_user_id=definition.get("trust-user-id", False),
            exchange=definition.get("exchange"),
            max_hops=definition.get("max-hops", 1),
            expires_ms=definition.get("expires"),
            message_ttl_ms=definition.get("message-ttl"),
        )


@dataclass(frozen=True, order=True)
class LinkKey:
    vhost: str
    exchange: str
    upstream: str


@dataclass
class LinkPlan:
    links: dict[LinkKey, Upstream] = field(default_factory=dict)
    # (vhost, exchange) -> what its policy names that is not defined (for status)
    missing: dict[tuple[str, str], str] = field(default_factory=dict)


def _members(state: MetadataState, vhost: str, policy: Mapping[str, Any]
             ) -> tuple[list[tuple[str, Mapping[str, Any]]], str | None]:
    """(upstream name, overrides) the policy names, and what it names that is missing."""
    if "federation-upstream" in policy:
        return [(str(policy["federation-upstream"]), {})], None
    set_name = str(policy["federation-upstream-set"])
    if set_name == IMPLICIT_SET:
        return [(name, {}) for _, name, _ in state.parameters(vhost, FEDERATION_UPSTREAM)], None
    members = state.parameter(vhost, FEDERATION_UPSTREAM_SET, set_name)
    if not isinstance(members, list):
        return [], f"upstream set '{set_name}' is not defined"
    return [(str(m["upstream"]), {k: v for k, v in m.items() if k != "upstream"})
            for m in members], None


def plan_exchange_links(state: MetadataState) -> LinkPlan:
    plan = LinkPlan()
    for vhost in (v.name for v in state.vhosts()):
        for exchange in state.exchanges(vhost):
            policy = state.effective_policy(vhost, "exchange", exchange.name)
            if policy is None or not (policy.definition.keys() & {
                    "federation-upstream", "federation-upstream-set"}):
                continue
            members, missing = _members(state, vhost, policy.definition)
            for name, overrides in members:
                definition = state.parameter(vhost, FEDERATION_UPSTREAM, name)
                if not isinstance(definition, Mapping):
                    missing = f"upstream '{name}' is not defined"
                    continue
                plan.links[LinkKey(vhost, exchange.name, name)] = Upstream.of(
                    name, {**definition, **overrides})
            if missing is not None:
                plan.missing[(vhost, exchange.name)] = missing
    return plan


def runner_of(key: tuple[str, ...], up_nodes: Iterable[str]) -> str | None:
    """The up node that runs the link or shovel named by `key` (rendezvous hashing);
    None when no node is up."""
    def rank(node: str) -> bytes:
        return hashlib.sha256("\0".join((node, *key)).encode()).digest()

    return max(up_nodes, key=rank, default=None)
