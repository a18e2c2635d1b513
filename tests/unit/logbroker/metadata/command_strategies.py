"""Hypothesis strategies for commands over a small universe of names, so they collide."""

from __future__ import annotations

from hypothesis import strategies as st

from logbroker.metadata import (
    AddVhost,
    Bind,
    ClearPermissions,
    Command,
    DeclareExchange,
    DeclareQueue,
    DeleteExchange,
    DeletePolicy,
    DeleteQueue,
    DeleteUser,
    DeleteVhost,
    PutPolicy,
    PutUser,
    SetPermissions,
    Unbind,
)

vhosts = st.sampled_from(["/", "/", "/", "v"])
queues = st.sampled_from(["q1", "q2", "amq.q"])
exchanges = st.sampled_from(["x1", "x1", "x2", "x2", "amq.direct", ""])
users = st.sampled_from(["guest", "bob"])
owners = st.sampled_from([None, None, "c1", "c2"])
keys = st.sampled_from(["", "a", "b"])
queue_args = st.sampled_from([
    {}, {"x-max-length": 1}, {"x-max-length": 2}, {"x-message-ttl": -1},
    {"x-dead-letter-exchange": "x1"}, {"x-queue-type": "classic"},
])  # fmt: skip
exchange_args = st.sampled_from([{}, {"alternate-exchange": "x2"}])
definitions = st.sampled_from([
    {"message-ttl": 5}, {"max-length": 1, "dead-letter-exchange": "x2"},
    {"alternate-exchange": "x2"}, {"ha-mode": "exactly", "ha-params": 2}, {"bogus": 1},
])  # fmt: skip
kinds = st.sampled_from(["queue", "exchange"])


def _bind_args(kind: str) -> st.SearchStrategy[str]:
    return queues if kind == "queue" else exchanges


binds = kinds.flatmap(lambda kind: st.tuples(
    vhosts, exchanges, st.just(kind), _bind_args(kind), keys
))  # fmt: skip

declare_exchanges = st.builds(
    DeclareExchange, vhosts, exchanges, st.sampled_from(["direct", "fanout", "fanout", "nope"]),
    st.booleans(), st.booleans(), st.just(False), exchange_args,
)  # fmt: skip
declare_queues = st.builds(
    DeclareQueue, vhosts, queues, st.booleans(), owners, st.booleans(), queue_args
)
commands: st.SearchStrategy[Command] = st.one_of(
    st.builds(AddVhost, st.just("v")),
    st.builds(DeleteVhost, st.just("v")),
    declare_exchanges,
    declare_exchanges,
    declare_queues,
    declare_queues,
    binds.map(lambda t: Bind(*t)),
    binds.map(lambda t: Bind(*t)),
    st.builds(PutUser, users, st.just("h")),
    st.builds(DeleteUser, users),
    st.builds(SetPermissions, users, vhosts, st.just(".*"), st.just(""),
              st.sampled_from(["", "("])),
    st.builds(ClearPermissions, users, vhosts),
    st.builds(DeleteExchange, vhosts, exchanges, st.booleans()),
    binds.map(lambda t: Bind(*t)),
    binds.map(lambda t: Unbind(*t)),
    st.builds(DeleteQueue, vhosts, queues),
    st.builds(PutPolicy, vhosts, st.sampled_from(["p1", "p2"]), st.sampled_from(["q", "^x", "("]),
              st.sampled_from(["all", "queues", "exchanges"]), st.integers(0, 2), definitions),
    st.builds(DeletePolicy, vhosts, st.sampled_from(["p1", "p2"])),
)  # fmt: skip

# A starting topology, so random commands meet existing objects and cascades.
SETUP: list[Command] = [
    AddVhost("v"),
    PutUser("bob", "h"),
    DeclareExchange("/", "x1", "direct", auto_delete=True),
    DeclareExchange("/", "x2", "fanout", auto_delete=True),
    DeclareQueue("/", "q1"),
    DeclareQueue("/", "q2", durable=True, arguments={"x-max-length": 1}),
    Bind("/", "x1", "queue", "q1", "a"),
    Bind("/", "x2", "exchange", "x1", "a"),
    Bind("/", "x2", "queue", "q2", "b"),
    DeclareExchange("v", "x1", "fanout"),
    DeclareQueue("v", "q1", exclusive_owner="c1"),
    Bind("v", "x1", "queue", "q1"),
]
sequences = st.lists(commands, max_size=40).map(lambda tail: SETUP + tail)
