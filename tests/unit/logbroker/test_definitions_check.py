"""A definitions document is checked whole against a copy of the state before anything of
it is applied: the first bad entry is named with the reason, the state is untouched."""

from __future__ import annotations

import pytest

from logbroker.definitions_check import checked_import
from logbroker.definitions_document import DefinitionsError
from logbroker.metadata import MetadataState

UPSTREAM = {"vhost": "/", "component": "federation-upstream", "name": "up",
            "value": {"uri": "amqp://127.0.0.1"}}


def test_a_whole_document_gives_its_commands_and_leaves_the_state_alone() -> None:
    state = MetadataState.bootstrap("hash")
    before = state.snapshot()
    commands = checked_import(state, {
        "vhosts": [{"name": "v"}], "parameters": [UPSTREAM],
        "policies": [{"vhost": "/", "name": "p", "pattern": "^f", "apply-to": "exchanges",
                      "definition": {"federation-upstream": "up"}}]})
    assert len(commands) == 3
    assert state.snapshot() == before


@pytest.mark.parametrize(("document", "named"), [
    ({"parameters": [{**UPSTREAM, "value": {"uri": "amqp://h", "prefetch-count": "x"}}]},
     "parameters[0] 'up': federation upstream key 'prefetch-count'"),
    ({"parameters": [{**UPSTREAM, "component": "federation-upstream-set",
                      "value": [{"upstream": "up", "max-hops": 0}]}]}, "'max-hops'"),
    ({"policies": [{"vhost": "/", "name": "p", "pattern": "^f", "apply-to": "queues",
                    "definition": {"federation-upstream": "ghost"}}]},
     "policies[0] 'p': 'federation-upstream' names federation-upstream 'ghost'"),
    ({"queues": [{"vhost": "nowhere", "name": "q"}]}, "queues[0] 'q'"),
])
def test_the_first_bad_entry_is_named(document: dict[str, object], named: str) -> None:
    with pytest.raises(DefinitionsError, match=named.replace("[", r"\[").replace("]", r"\]")):
        checked_import(MetadataState.bootstrap("hash"), document)
