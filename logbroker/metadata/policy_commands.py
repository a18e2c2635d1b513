"""Handlers for policies: put and delete, applied live to existing objects.

A policy change re-evaluates which policy applies to every queue and
exchange of the vhost; `PolicyChanged` lists those whose effective policy
(which policy, or its definition) changed, so the broker can re-read their
effective arguments. Objects declared later pick their policy up by query.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.metadata.commands import DeletePolicy, PutPolicy
from logbroker.metadata.errors import MetadataError, precondition_failed
from logbroker.metadata.events import Event, PolicyChanged
from logbroker.metadata.policies import Policy, matching_policy, validate_policy
from logbroker.metadata.reply_codes import NOT_FOUND
from logbroker.metadata.state_data import StateData, VhostData

Plan = Callable[[], list[Event]]


def _effective(vhost: VhostData) -> tuple[dict[str, Policy | None], dict[str, Policy | None]]:
    policies = tuple(vhost.policies.values())
    queues = {name: matching_policy(policies, "queue", name) for name in vhost.queues}
    exchanges = {name: matching_policy(policies, "exchange", name) for name in vhost.exchanges}
    return queues, exchanges


def _changed(before: dict[str, Policy | None], after: dict[str, Policy | None]) -> tuple[str, ...]:
    return tuple(name for name, policy in after.items() if before.get(name) != policy)


def _apply_change(vhost: VhostData, name: str, new: Policy | None) -> list[Event]:
    queues_before, exchanges_before = _effective(vhost)
    if new is None:
        del vhost.policies[name]
    else:
        vhost.policies[name] = new
    queues_after, exchanges_after = _effective(vhost)
    return [
        PolicyChanged(
            vhost.name,
            name,
            deleted=new is None,
            queues=_changed(queues_before, queues_after),
            exchanges=_changed(exchanges_before, exchanges_after),
        )
    ]


def plan_put_policy(data: StateData, command: PutPolicy) -> Plan:
    vhost = data.vhost(command.vhost)
    if not command.name:
        raise precondition_failed("a policy name must not be empty")
    validate_policy(command.pattern, command.apply_to, command.priority, command.definition)
    policy = Policy(
        command.vhost, command.name, command.pattern, command.apply_to, command.priority,
        command.definition,
    )  # fmt: skip
    if vhost.policies.get(command.name) == policy:
        return lambda: []
    return lambda: _apply_change(vhost, command.name, policy)


def plan_delete_policy(data: StateData, command: DeletePolicy) -> Plan:
    vhost = data.vhost(command.vhost)
    if command.name not in vhost.policies:
        raise MetadataError(
            NOT_FOUND, f"no policy '{command.name}' in vhost '{command.vhost}'"
        )
    return lambda: _apply_change(vhost, command.name, None)
