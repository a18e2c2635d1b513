import pytest

from logbroker.definitions_document import DefinitionsError, export_definitions, import_commands
from logbroker.metadata import (
    AddVhost,
    Bind,
    DeclareExchange,
    DeclareQueue,
    MetadataState,
    PutPolicy,
    PutUser,
    SetParameter,
    SetPermissions,
)


def populated() -> MetadataState:
    state = MetadataState.bootstrap("hash")
    for command in (
        AddVhost("dev", "for development", ("test",)),
        PutUser("ann", "annhash", tags=("management",)),
        SetPermissions("ann", "dev", "^ann-.*", ".*", ".*"),
        PutPolicy("dev", "ttl", "^ann-", "queues", 3, {"message-ttl": 60000}),
        DeclareExchange("dev", "events", "topic", True, False, False, {}),
        DeclareExchange("dev", "audit", "fanout", True, False, False, {}),
        DeclareQueue("dev", "ann-work", durable=True, arguments={"x-max-length": 10}),
        Bind("dev", "events", "queue", "ann-work", "job.*", {}),
        Bind("dev", "events", "exchange", "audit", "#", {}),
        SetParameter.of("dev", "federation-upstream", "up1",
                        {"uri": "amqp://upstream", "max-hops": 2}),
        SetParameter.of("dev", "federation-upstream-set", "ups", [{"upstream": "up1"}]),
        SetParameter.of("/", "vhost-limits", "limits", {"max-queues": 100}),
    ):
        state.apply(command)
    return state


def test_export_then_import_into_a_fresh_broker_gives_the_same_document() -> None:
    document = export_definitions(populated())
    fresh = MetadataState.bootstrap("hash")
    for command in import_commands(document):
        fresh.apply(command)
    assert export_definitions(fresh) == document
    assert {e["name"] for e in document["exchanges"]} == {"events", "audit"}  # no amq.*
    assert [(p["vhost"], p["component"], p["name"]) for p in document["parameters"]] == [
        ("/", "vhost-limits", "limits"), ("dev", "federation-upstream", "up1"),
        ("dev", "federation-upstream-set", "ups")]


def test_rabbitmq_style_entries_load() -> None:
    document = {
        "rabbit_version": "3.12.4", "global_parameters": [],
        "parameters": [{"value": {"src-uri": "amqp://"}, "vhost": "v", "component": "shovel",
                        "name": "a-plugin-we-do-not-have"},
                       {"value": {"uri": "amqp://up"}, "vhost": "v",
                        "component": "federation-upstream", "name": "up"}],
        "users": [{"name": "old", "password_hash": "x", "hashing_algorithm":
                   "rabbit_password_hashing_sha256", "tags": "administrator,management"},
                  {"name": "new", "password": "secret", "tags": ["monitoring"]}],
        "vhosts": [{"name": "v", "metadata": {"description": "d", "tags": []}}],
        "bindings": [{"source": "", "vhost": "v", "destination": "q",
                      "destination_type": "queue", "routing_key": "q", "arguments": {}}],
    }
    commands = import_commands(document)
    users = [c for c in commands if isinstance(c, PutUser)]
    assert [u.tags for u in users] == [("administrator", "management"), ("monitoring",)]
    assert not any(isinstance(c, Bind) for c in commands)  # default-exchange bindings
    assert [(c.component, c.name) for c in commands if isinstance(c, SetParameter)] == [
        ("federation-upstream", "up")]  # the shovel parameter is skipped


@pytest.mark.parametrize(("document", "where"), [
    ({"queues": {"name": "q"}}, "'queues' must be a list"),
    ({"queues": [{"vhost": "/"}]}, "queues[0]: missing field 'name'"),
    ({"parameters": [{"vhost": "/", "component": "vhost-limits", "name": "limits"}]},
     "parameters[0]: missing field 'value'"),
    ({"exchanges": [{"name": "e", "vhost": "/", "type": "direct", "durable": "yes"}]},
     "exchanges[0]: 'durable' must be true or false"),
    ({"bindings": [{"source": "e", "vhost": "/", "destination": "q",
                    "destination_type": "topic"}]}, "bindings[0]"),
])
def test_bad_documents_say_which_entry(document: dict[str, object], where: str) -> None:
    with pytest.raises(DefinitionsError) as raised:
        import_commands(document)
    assert where in str(raised.value)
