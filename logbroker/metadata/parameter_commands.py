"""Handlers for runtime parameters (see `parameters`): set, clear, and the vhost limits.

Setting a parameter to the value it has changes nothing and emits nothing; a
change emits `ParameterChanged`, which whoever acts on a component (the vhost
limits are read when they are needed; federation links start and stop) follows.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.metadata.commands import ClearParameter, SetParameter
from logbroker.metadata.errors import MetadataError, precondition_failed
from logbroker.metadata.events import Event, ParameterChanged
from logbroker.metadata.parameters import validate_parameter
from logbroker.metadata.reply_codes import NOT_FOUND
from logbroker.metadata.state_data import StateData

Plan = Callable[[], list[Event]]


def plan_set_parameter(data: StateData, command: SetParameter) -> Plan:
    vhost = data.vhost(command.vhost)
    try:
        value = command.value
    except ValueError:
        raise precondition_failed("a parameter's value must be a JSON document") from None
    validate_parameter(command.component, command.name, value)
    key = (command.component, command.name)
    if key in vhost.parameters and vhost.parameters[key] == value:
        return lambda: []

    def apply() -> list[Event]:
        vhost.parameters[key] = value
        return [ParameterChanged(command.vhost, command.component, command.name, False)]

    return apply


def plan_clear_parameter(data: StateData, command: ClearParameter) -> Plan:
    vhost = data.vhost(command.vhost)
    key = (command.component, command.name)
    if key not in vhost.parameters:
        raise MetadataError(NOT_FOUND, f"no parameter '{command.name}' of component "
                                       f"'{command.component}' in vhost '{command.vhost}'")

    def apply() -> list[Event]:
        del vhost.parameters[key]
        return [ParameterChanged(command.vhost, command.component, command.name, True)]

    return apply
