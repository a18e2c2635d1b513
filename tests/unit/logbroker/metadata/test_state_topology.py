"""Bindings, deletion cascades, auto-delete exchanges, vhosts, users and permissions."""

from __future__ import annotations

from typing import Any

import pytest

from logbroker.metadata import (
    AddVhost,
    Applied,
    Bind,
    BindingAdded,
    BindingRemoved,
    ClearPermissions,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeleteQueue,
    DeleteUser,
    DeleteVhost,
    ExchangeDeleted,
    MetadataError,
    MetadataState,
    PermissionsCleared,
    PutUser,
    QueueDeleted,
    SetPermissions,
    Unbind,
    UserDeleted,
    VhostAdded,
    VhostDeleted,
)
from logbroker.routing import Binding, Destination
from tests.unit.logbroker.metadata.helpers import GUEST_HASH, new_state

Q = Destination.queue
X = Destination.exchange


@pytest.fixture
def state() -> MetadataState:
    return new_state()


def refused(state: MetadataState, command: Any) -> MetadataError:
    before = state.snapshot()
    with pytest.raises(MetadataError) as caught:
        state.apply(command)
    assert state.snapshot() == before
    return caught.value


def test_bootstrap_is_rabbitmq_first_boot(state: MetadataState) -> None:
    assert [vhost.name for vhost in state.vhosts()] == ["/"]
    guest = state.user("guest")
    assert guest is not None and guest.tags == ("administrator",)
    assert guest.password_hash == GUEST_HASH
    assert guest.hashing_algorithm == "rabbit_password_hashing_sha256"
    permissions = state.permissions("guest", "/")
    assert permissions is not None
    assert (permissions.configure, permissions.write, permissions.read) == (".*", ".*", ".*")


def test_every_vhost_gets_the_predeclared_exchanges(state: MetadataState) -> None:
    applied = state.apply(AddVhost("v2"))
    assert applied.events[0] == VhostAdded("v2")
    exchanges = {x.name: x for x in state.exchanges("v2")}
    assert set(exchanges) == {
        "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match",
        "amq.rabbitmq.trace",
    }  # fmt: skip
    assert exchanges["amq.match"].type == "headers"
    assert exchanges["amq.headers"].type == "headers"
    trace = exchanges["amq.rabbitmq.trace"]
    assert (trace.type, trace.internal, trace.durable) == ("topic", True, True)
    assert all(x.durable and not x.auto_delete for x in exchanges.values())
    assert sum(not x.internal for x in exchanges.values()) == 5


def test_add_vhost_is_idempotent(state: MetadataState) -> None:
    state.apply(AddVhost("v2", "first"))
    assert state.apply(AddVhost("v2", "first")) == Applied()
    assert state.apply(AddVhost("v2", "second")).changed
    assert state.vhost("v2") is not None and state.vhost("v2").description == "second"  # type: ignore[union-attr]


def test_bind_and_unbind(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "x", "direct"))
    state.apply(DeclareQueue("/", "q"))
    binding = Binding("x", Q("q"), "k")
    assert state.apply(Bind("/", "x", "queue", "q", "k")).events == (BindingAdded("/", binding),)
    assert state.apply(Bind("/", "x", "queue", "q", "k")) == Applied()
    state.apply(Bind("/", "x", "queue", "q", "k", {"a": 1}))
    assert len(state.bindings("/")) == 2
    assert state.apply(Unbind("/", "x", "queue", "q", "k")).events == (
        BindingRemoved("/", binding),
    )
    assert state.apply(Unbind("/", "x", "queue", "q", "k")) == Applied()
    assert state.bindings("/") == (Binding("x", Q("q"), "k", {"a": 1}),)


def test_bind_errors(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "x", "direct"))
    state.apply(DeclareQueue("/", "q"))
    assert refused(state, Bind("/", "nx", "queue", "nq", "k")).reply_text == (
        "NOT_FOUND - no exchange 'nx' in vhost '/'"
    )
    assert refused(state, Bind("/", "x", "queue", "nq", "k")).reply_text == (
        "NOT_FOUND - no queue 'nq' in vhost '/'"
    )
    assert refused(state, Bind("/", "x", "exchange", "ny", "k")).reply_text == (
        "NOT_FOUND - no exchange 'ny' in vhost '/'"
    )
    default = "ACCESS_REFUSED - operation not permitted on the default exchange"
    assert refused(state, Bind("/", "", "queue", "q", "q")).reply_text == default
    assert refused(state, Bind("/", "x", "exchange", "", "k")).reply_text == default


def test_unbind_with_a_missing_end_removes_nothing_and_succeeds(state: MetadataState) -> None:
    # rabbit_binding:remove answers ok when the source or the destination is not found
    # (only an "absent" queue, one whose node is down, is an error): aio-pika's cleanup
    # unbinds after auto-delete has already removed the exchange.
    state.apply(DeclareExchange("/", "x", "direct"))
    state.apply(DeclareQueue("/", "q"))
    state.apply(Bind("/", "x", "queue", "q", "k"))
    before = state.snapshot()
    for command in (
        Unbind("/", "x", "queue", "nq", "k"),
        Unbind("/", "nx", "queue", "q", "k"),
        Unbind("/", "nx", "queue", "nq", "k"),
        Unbind("/", "x", "exchange", "ny", "k"),
        Unbind("/", "nx", "exchange", "x", "k"),
    ):
        assert state.apply(command) == Applied()
    assert state.snapshot() == before
    default = "ACCESS_REFUSED - operation not permitted on the default exchange"
    assert refused(state, Unbind("/", "", "queue", "nq", "k")).reply_text == default
    assert refused(state, Unbind("/", "nx", "exchange", "", "k")).reply_text == default


def test_bindings_are_validated_by_the_source_type(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "h", "headers"))
    state.apply(DeclareExchange("/", "c", "x-consistent-hash"))
    state.apply(DeclareQueue("/", "q"))
    assert refused(state, Bind("/", "h", "queue", "q", "", {"x-match": "some"})).reply_code == 406
    assert refused(state, Bind("/", "c", "queue", "q", "heavy")).reply_code == 406
    assert state.apply(Bind("/", "h", "queue", "q", "", {"x-match": "any", "a": 1})).changed
    assert state.apply(Bind("/", "c", "queue", "q", "10")).changed


def test_deleting_a_queue_removes_its_bindings(state: MetadataState) -> None:
    for name in ("x", "y"):
        state.apply(DeclareExchange("/", name, "direct"))
    state.apply(DeclareQueue("/", "q"))
    state.apply(DeclareQueue("/", "other"))
    state.apply(Bind("/", "x", "queue", "q", "a"))
    state.apply(Bind("/", "y", "queue", "q", "b"))
    state.apply(Bind("/", "x", "queue", "other", "a"))
    applied = state.apply(DeleteQueue("/", "q", if_unused=True, if_empty=True))
    assert applied.events == (
        QueueDeleted("/", "q", (Binding("x", Q("q"), "a"), Binding("y", Q("q"), "b"))),
    )
    assert state.bindings("/") == (Binding("x", Q("other"), "a"),)
    assert state.queue("/", "q") is None


def test_deleting_an_exchange_removes_bindings_in_both_directions(state: MetadataState) -> None:
    for name in ("x", "up", "down"):
        state.apply(DeclareExchange("/", name, "fanout"))
    state.apply(DeclareQueue("/", "q"))
    state.apply(Bind("/", "x", "queue", "q"))
    state.apply(Bind("/", "x", "exchange", "down"))
    state.apply(Bind("/", "up", "exchange", "x"))
    state.apply(Bind("/", "up", "queue", "q"))
    applied = state.apply(DeleteExchange("/", "x"))
    assert applied.events == (
        ExchangeDeleted("/", "x", (
            Binding("x", Q("q")), Binding("x", X("down")), Binding("up", X("x")),
        )),
    )  # fmt: skip
    assert state.bindings("/") == (Binding("up", Q("q")),)


def test_self_binding_is_removed_once(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "x", "fanout"))
    state.apply(Bind("/", "x", "exchange", "x"))
    applied = state.apply(DeleteExchange("/", "x"))
    assert applied.events == (ExchangeDeleted("/", "x", (Binding("x", X("x")),)),)


def test_auto_delete_exchange_goes_with_its_last_binding(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "ad", "direct", auto_delete=True))
    state.apply(DeclareQueue("/", "q"))
    assert state.exchange("/", "ad") is not None  # no bindings yet: stays
    state.apply(Bind("/", "ad", "queue", "q", "a"))
    state.apply(Bind("/", "ad", "queue", "q", "b"))
    assert state.apply(Unbind("/", "ad", "queue", "q", "a")).events == (
        BindingRemoved("/", Binding("ad", Q("q"), "a")),
    )
    assert state.exchange("/", "ad") is not None
    applied = state.apply(Unbind("/", "ad", "queue", "q", "b"))
    assert applied.events == (
        BindingRemoved("/", Binding("ad", Q("q"), "b")),
        ExchangeDeleted("/", "ad", (), auto_deleted=True),
    )
    assert state.exchange("/", "ad") is None


def test_auto_delete_cascades_through_exchange_chains(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "a", "fanout", auto_delete=True))
    state.apply(DeclareExchange("/", "b", "fanout", auto_delete=True))
    state.apply(DeclareQueue("/", "q"))
    state.apply(Bind("/", "a", "exchange", "b"))
    state.apply(Bind("/", "b", "queue", "q"))
    applied = state.apply(DeleteQueue("/", "q"))
    assert applied.events == (
        QueueDeleted("/", "q", (Binding("b", Q("q")),)),
        ExchangeDeleted("/", "b", (Binding("a", X("b")),), auto_deleted=True),
        ExchangeDeleted("/", "a", (), auto_deleted=True),
    )
    assert [x.name for x in state.exchanges("/") if not x.name.startswith("amq.")] == []


def test_losing_an_inbound_binding_does_not_auto_delete(state: MetadataState) -> None:
    state.apply(DeclareExchange("/", "src", "fanout"))
    state.apply(DeclareExchange("/", "dst", "fanout", auto_delete=True))
    state.apply(Bind("/", "src", "exchange", "dst"))
    state.apply(Unbind("/", "src", "exchange", "dst"))
    assert state.exchange("/", "dst") is not None


def test_delete_vhost_removes_everything_in_it(state: MetadataState) -> None:
    state.apply(AddVhost("v2"))
    state.apply(SetPermissions("guest", "v2", ".*", ".*", ".*"))
    state.apply(DeclareQueue("v2", "q"))
    applied = state.apply(DeleteVhost("v2"))
    event = applied.events[0]
    assert isinstance(event, VhostDeleted) and event.queues == ("q",)
    assert "amq.direct" in event.exchanges
    assert state.vhost("v2") is None and state.queues("v2") == ()
    assert state.permissions("guest", "v2") is None
    assert refused(state, DeleteVhost("v2")).reply_text == "NOT_FOUND - no vhost 'v2'"


def test_users_and_permissions(state: MetadataState) -> None:
    assert refused(state, SetPermissions("bob", "/", "", "", "")).reply_text == (
        "NOT_FOUND - no user 'bob'"
    )
    state.apply(PutUser("bob", "hash", tags=("monitoring",)))
    assert refused(state, SetPermissions("bob", "nope", "", "", "")).reply_code == 404
    assert refused(state, SetPermissions("bob", "/", "(", "", "")).reply_code == 406
    assert refused(state, PutUser("eve", "h", "rabbit_password_hashing_rot13")).reply_code == 406
    state.apply(SetPermissions("bob", "/", "^bob", "", ".*"))
    assert state.apply(SetPermissions("bob", "/", "^bob", "", ".*")) == Applied()
    assert state.apply(ClearPermissions("bob", "/")).events == (PermissionsCleared("bob", "/"),)
    assert state.apply(ClearPermissions("bob", "/")) == Applied()
    state.apply(SetPermissions("bob", "/", ".*", ".*", ".*"))
    assert state.apply(DeleteUser("bob")).events == (UserDeleted("bob", ("/",)),)
    assert state.permissions("bob", "/") is None
    assert refused(state, DeleteUser("bob")).reply_text == "NOT_FOUND - no user 'bob'"


def test_restart_cleanup_deletes_transient_objects(state: MetadataState) -> None:
    state.apply(DeclareQueue("/", "durable", durable=True))
    state.apply(DeclareQueue("/", "transient"))
    state.apply(DeclareQueue("/", "exclusive", durable=True, exclusive_owner="c"))
    state.apply(DeclareExchange("/", "tx", "direct"))
    state.apply(DeclareExchange("/", "dx", "direct", durable=True))
    for command in state.restart_cleanup_commands():
        state.apply(command)
    assert [q.name for q in state.queues("/")] == ["durable"]
    assert state.exchange("/", "tx") is None and state.exchange("/", "dx") is not None


def test_records_and_events_are_hashable(state: MetadataState) -> None:
    applied = state.apply(DeclareQueue("/", "q", arguments={"nested": {"a": [1, 2]}}))
    assert len({applied, applied}) == 1
    assert len({*state.exchanges("/")}) == 6
