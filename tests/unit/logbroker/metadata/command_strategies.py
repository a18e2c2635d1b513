"""Hypothesis strategies for commands over a small universe of names, so they collide."""

from __future__ import annotations

from hypothesis import strategies as st

from logbroker.metadata import (
    AddClusterNode,
    AddVhost,
    Bind,
    ClearParameter,
    ClearPermissions,
    Command,
    CommitGroupOffsets,
    CommitProducerBatch,
    DeclareExchange,
    DeclareQueue,
    DeleteConsumerGroup,
    DeleteExchange,
    DeletePolicy,
    DeleteQueue,
    DeleteUser,
    DeleteVhost,
    ElectQueueLeader,
    ProducerBatchApplied,
    PutPolicy,
    PutUser,
    RemoveClusterNode,
    SetNodeLiveness,
    SetParameter,
    SetPermissions,
    SetQueueInSync,
    SetQueuePlacement,
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
producers = st.sampled_from(["sink-1", "sink-2", ""])
nodes = st.sampled_from(["n1", "n2", "n3", ""])
placements = st.sampled_from([
    (None, ()), (None, ()), ("n1", ("n1",)), ("n2", ("n2", "n1")), ("n3", ("n3", "n1", "n2")),
    ("n1", ()), ("n1", ("n2", "n1")), (None, ("n1",)), ("n1", ("n1", "n1")),
])  # fmt: skip
declare_queues = st.tuples(
    vhosts, queues, st.booleans(), owners, st.booleans(), queue_args, placements
).map(lambda t: DeclareQueue(t[0], t[1], t[2], t[3], t[4], t[5], False, t[6][0], t[6][1]))
set_placements = st.tuples(vhosts, queues, placements).map(
    lambda t: SetQueuePlacement(t[0], t[1], t[2][0] or "", t[2][1])
)
groups = st.sampled_from(["g1", "g2", ""])
group_offsets = st.dictionaries(queues, st.sampled_from([0, 3, 7, -1, True]), max_size=2)
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
    st.builds(AddClusterNode, nodes, st.sampled_from(["h1", "h2", ""]),
              st.sampled_from([25672, 25673, 0]), st.just(5672), st.just(15672),
              st.integers(0, 5)),
    st.builds(RemoveClusterNode, nodes),
    st.builds(SetNodeLiveness, nodes, st.booleans(), st.integers(0, 5)),
    set_placements,
    set_placements,
    st.builds(SetQueueInSync, vhosts, queues, st.integers(0, 3),
              st.sampled_from([(), ("n1",), ("n1", "n2"), ("n2", "n1"), ("n1", "n1"), ("n3",)])),
    st.builds(ElectQueueLeader, vhosts, queues, st.integers(0, 3), nodes,
              st.sampled_from([(), ("n1",), ("n2", "n1"), ("n3", "n1", "n2"), ("n2", "n2")]),
              st.booleans()),
    st.builds(CommitProducerBatch, vhosts, producers, st.integers(-1, 4), st.integers(0, 9)),
    st.builds(ProducerBatchApplied, vhosts, producers, st.integers(0, 4)),
    st.builds(CommitGroupOffsets, vhosts, groups, group_offsets),
    st.builds(CommitGroupOffsets, vhosts, groups, group_offsets),
    st.builds(DeleteConsumerGroup, vhosts, groups),
    st.builds(SetParameter.of, vhosts, st.sampled_from(["vhost-limits", "unknown"]),
              st.sampled_from(["limits", "other"]),
              st.sampled_from([{}, {"max-queues": 1}, {"max-queues": -1}, [],
                               {"max-connections": 0, "max-queues": 3}, {"max-queues": "1"}])),
    st.builds(ClearParameter, vhosts, st.just("vhost-limits"), st.just("limits")),
)  # fmt: skip

# A starting topology, so random commands meet existing objects and cascades.
SETUP: list[Command] = [
    AddVhost("v"),
    PutUser("bob", "h"),
    AddClusterNode("n1", "h1", 25672, 5672, 15672, 0),
    AddClusterNode("n2", "h2", 25672, 5672, 15672, 0),
    DeclareExchange("/", "x1", "direct", auto_delete=True),
    DeclareExchange("/", "x2", "fanout", auto_delete=True),
    DeclareQueue("/", "q1"),
    DeclareQueue(
        "/",
        "q2",
        durable=True,
        arguments={"x-max-length": 1},
        leader_node="n2",
        members=("n2", "n1"),
    ),
    Bind("/", "x1", "queue", "q1", "a"),
    Bind("/", "x2", "exchange", "x1", "a"),
    Bind("/", "x2", "queue", "q2", "b"),
    DeclareExchange("v", "x1", "fanout"),
    DeclareQueue("v", "q1", exclusive_owner="c1"),
    Bind("v", "x1", "queue", "q1"),
]
sequences = st.lists(commands, max_size=40).map(lambda tail: SETUP + tail)
