"""Policies: which one applies to a queue or exchange, and what it changes.

Matching follows `rabbit_policy:matches/3`: the policy's vhost, its apply-to
(`queues`, `exchanges`, `all`; `classic_queues`, `quorum_queues` and `streams`
count as `queues` here, since every queue of this broker is the same kind of
replicated log) and `re:run(Name, Pattern)`, which is an unanchored search, so
`re.search`. Of the matching policies the highest priority wins. RabbitMQ
sorts the candidates with a stable sort on priority only, so its tie-break is
the order it lists policies in (by name in its Khepri store); we break ties by
name, in code-point order, so every node picks the same policy.

Combining a policy with the object's own arguments follows RabbitMQ's code,
not a looser reading of its docs (sources: `rabbit_amqqueue_process:
process_args_policy/1`, `rabbit_quorum_queue`, `rabbit_queue_location:
leader_locator/1`, `rabbit_exchange:route1` via `rabbit_policy:get_arg/3`):

- `message-ttl`, `expires`, `max-length`, `max-length-bytes`, `delivery-limit`
  (and `max-in-memory-*`): both set -> the smaller one (`res_min`);
- `dead-letter-exchange`, `dead-letter-routing-key`, `overflow`, `queue-mode`,
  `queue-version`, `dead-letter-strategy`, `max-age`: the argument wins
  (`res_arg`); each key is resolved on its own;
- `queue-leader-locator`, falling back to `queue-master-locator`: the policy
  wins (`fun (PolVal, _ArgVal) -> PolVal end`), as DESIGN.md 6 and the seeds say;
- `max-priority`: argument only (RabbitMQ does not take it from policies);
- `alternate-exchange` (exchanges): the argument wins (`get_arg/3`);
- keys with no argument counterpart (`ha-*`, `federation-*`,
  `consumer-timeout`) come from the policy.

The result uses one naming, the `x-` argument form, so queue code reads one
place: `x-message-ttl`, `x-dead-letter-exchange`, `x-queue-leader-locator`,
`x-ha-mode`, ...
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from logbroker.metadata.field_values import is_integer
from logbroker.metadata.policy_definitions import (
    APPLY_TO,
    FEDERATION_KEYS,
    HA_KEYS,
    validate_definition,
    validate_policy,
)
from logbroker.metadata.records import freeze_table
from logbroker.metadata.table_codec import decode_table, encode_table
from logbroker.routing.types import freeze

__all__ = [
    "APPLY_TO",
    "Policy",
    "effective_alternate_exchange",
    "effective_queue_arguments",
    "matching_policy",
    "validate_definition",
    "validate_policy",
]

ObjectKind = Literal["queue", "exchange"]

MIN_KEYS = (
    "message-ttl",
    "expires",
    "max-length",
    "max-length-bytes",
    "delivery-limit",
    "max-in-memory-length",
    "max-in-memory-bytes",
    "retention-bytes",
)
ARGUMENT_WINS_KEYS = (
    "dead-letter-exchange",
    "dead-letter-routing-key",
    "overflow",
    "queue-mode",
    "queue-version",
    "dead-letter-strategy",
    "max-age",
)
POLICY_ONLY_QUEUE_KEYS = (*HA_KEYS, *FEDERATION_KEYS, "consumer-timeout")
_QUEUE_APPLY_TO = frozenset({"all", "queues", "classic_queues", "quorum_queues", "streams"})
_LOCATOR_ALIASES = {"min-masters": "balanced", "least-leaders": "balanced"}


@dataclass(frozen=True, slots=True)
class Policy:
    vhost: str
    name: str
    pattern: str
    apply_to: str = "all"
    priority: int = 0
    definition: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "definition", freeze_table(self.definition))

    def __hash__(self) -> int:
        return hash((self.vhost, self.name, self.pattern, self.priority, freeze(self.definition)))

    def applies_to(self, kind: ObjectKind) -> bool:
        if kind == "queue":
            return self.apply_to in _QUEUE_APPLY_TO
        return self.apply_to in ("all", "exchanges")

    def matches(self, kind: ObjectKind, name: str) -> bool:
        if not self.applies_to(kind):
            return False
        compiled = _compile(self.pattern)
        return compiled is not None and compiled.search(name) is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pattern": self.pattern,
            "apply-to": self.apply_to,
            "priority": self.priority,
            "definition": encode_table(self.definition),
        }

    @classmethod
    def from_json(cls, vhost: str, data: Mapping[str, Any]) -> Policy:
        return cls(
            vhost,
            data["name"],
            data["pattern"],
            data["apply-to"],
            data["priority"],
            decode_table(data["definition"]),
        )


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def matching_policy(policies: Iterable[Policy], kind: ObjectKind, name: str) -> Policy | None:
    """The policy that applies to the `kind` named `name`: highest priority, then lowest name."""
    best: Policy | None = None
    for policy in policies:
        if not policy.matches(kind, name):
            continue
        if best is None or (-policy.priority, policy.name) < (-best.priority, best.name):
            best = policy
    return best


def effective_queue_arguments(
    queue_arguments: Mapping[str, Any], policy: Policy | None
) -> dict[str, Any]:
    """The queue's arguments with `policy` folded in by RabbitMQ's rules (module doc)."""
    result = dict(queue_arguments)
    definition: Mapping[str, Any] = policy.definition if policy is not None else {}
    for key in MIN_KEYS:
        argument, from_policy = queue_arguments.get(f"x-{key}"), definition.get(key)
        if argument is None or from_policy is None:
            chosen = argument if from_policy is None else from_policy
        elif is_integer(argument) and is_integer(from_policy):
            chosen = min(argument, from_policy)
        else:
            chosen = argument
        _put(result, f"x-{key}", chosen)
    for key in ARGUMENT_WINS_KEYS:
        argument = queue_arguments.get(f"x-{key}")
        _put(result, f"x-{key}", definition.get(key) if argument is None else argument)
    for key in POLICY_ONLY_QUEUE_KEYS:
        if key in definition:
            result[f"x-{key}"] = definition[key]
    result.pop("x-queue-master-locator", None)
    _put(result, "x-queue-leader-locator", _leader_locator(queue_arguments, definition))
    return result


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _leader_locator(arguments: Mapping[str, Any], definition: Mapping[str, Any]) -> Any:
    for key in ("queue-leader-locator", "queue-master-locator"):
        value = definition.get(key, arguments.get(f"x-{key}"))
        if value is not None:
            return _LOCATOR_ALIASES.get(value, value) if isinstance(value, str) else value
    return None


def effective_alternate_exchange(
    exchange_arguments: Mapping[str, Any], policy: Policy | None
) -> str | None:
    """The exchange's alternate exchange: its `alternate-exchange` argument, else the policy's."""
    value = exchange_arguments.get("alternate-exchange")
    if value is None and policy is not None:
        value = policy.definition.get("alternate-exchange")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None
