"""Checking a whole definitions document before any of it is applied.

An import applies many commands; one refused halfway would leave the others
applied. So the document is first applied, command by command, to a copy of the
metadata state (the state is a pure function of its commands, so the copy refuses
exactly what the real one would): the first refusal names its entry and the
state's reason, which names the bad key, and nothing is applied. A policy of the
document that names a federation upstream or upstream set that neither the state
nor the document defines is refused too: RabbitMQ's HTTP API accepts such a policy
(its link then reports the error), but a document is expected to be whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbroker.definitions_document import DefinitionsError, import_entries
from logbroker.errors import BrokerError
from logbroker.metadata import Command, MetadataState, PutPolicy
from logbroker.metadata.federation_parameters import IMPLICIT_SET
from logbroker.metadata.parameters import FEDERATION_UPSTREAM, FEDERATION_UPSTREAM_SET

__all__ = ["checked_import"]

# policy key -> the parameter component it names
_NAMED = {"federation-upstream": FEDERATION_UPSTREAM,
          "federation-upstream-set": FEDERATION_UPSTREAM_SET}


def checked_import(state: MetadataState, document: Mapping[str, Any]) -> list[Command]:
    """The document's commands, once every one of them applies to a copy of `state`;
    DefinitionsError naming the first entry that would be refused, and why."""
    trial = MetadataState.from_snapshot(state.snapshot())
    commands = []
    for label, command in import_entries(document):
        try:
            trial.apply(command)
        except BrokerError as error:
            raise DefinitionsError(f"{label}: {error.text}") from error
        commands.append(command)
    for label, command in import_entries(document):
        if isinstance(command, PutPolicy):
            _check_federation_names(trial, label, command)
    return commands


def _check_federation_names(state: MetadataState, label: str, policy: PutPolicy) -> None:
    for key, component in _NAMED.items():
        name = policy.definition.get(key)
        if not isinstance(name, str) or (key == "federation-upstream-set"
                                         and name == IMPLICIT_SET):
            continue
        if state.parameter(policy.vhost, component, name) is None:
            raise DefinitionsError(f"{label}: '{key}' names {component} '{name}', which "
                                   f"is not defined in vhost '{policy.vhost}'")
