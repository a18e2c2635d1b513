"""The federation link plan (pure): which links a policy and the parameters make, and
which node runs each."""

from logbroker.federation.link_plan import LinkKey, plan_exchange_links, runner_of
from logbroker.metadata import DeclareExchange, MetadataState, PutPolicy, SetParameter


def state_with(*commands: object) -> MetadataState:
    state = MetadataState.bootstrap("hash")
    state.apply(DeclareExchange("/", "fed-x", "topic"))
    state.apply(DeclareExchange("/", "plain", "topic"))
    for command in commands:
        state.apply(command)  # type: ignore[arg-type]
    return state


def upstream(name: str, **settings: object) -> SetParameter:
    return SetParameter.of("/", "federation-upstream", name, {"uri": f"amqp://{name}",
                                                              **settings})


def policy(definition: dict[str, object]) -> PutPolicy:
    return PutPolicy("/", "fed", "^fed-", "exchanges", 0, definition)


def test_the_set_all_links_every_upstream_with_rabbitmqs_defaults() -> None:
    plan = plan_exchange_links(state_with(upstream("a"), upstream("b", **{"max-hops": 2}),
                                          policy({"federation-upstream-set": "all"})))
    assert sorted(plan.links) == [LinkKey("/", "fed-x", "a"), LinkKey("/", "fed-x", "b")]
    a, b = plan.links[LinkKey("/", "fed-x", "a")], plan.links[LinkKey("/", "fed-x", "b")]
    assert (a.uris, a.max_hops, a.ack_mode, a.prefetch_count) == (("amqp://a",), 1,
                                                                   "on-confirm", 1000)
    assert b.max_hops == 2
    assert plan.missing == {}


def test_a_set_member_overrides_its_upstream() -> None:
    plan = plan_exchange_links(state_with(
        upstream("a"), SetParameter.of("/", "federation-upstream-set", "s",
                                       [{"upstream": "a", "max-hops": 3}]),
        policy({"federation-upstream-set": "s"})))
    assert plan.links[LinkKey("/", "fed-x", "a")].max_hops == 3


def test_what_a_policy_names_but_nobody_defined_makes_no_link_and_says_so() -> None:
    plan = plan_exchange_links(state_with(policy({"federation-upstream": "ghost"})))
    assert plan.links == {}
    assert plan.missing == {("/", "fed-x"): "upstream 'ghost' is not defined"}
    plan = plan_exchange_links(state_with(policy({"federation-upstream-set": "nobody"})))
    assert plan.missing == {("/", "fed-x"): "upstream set 'nobody' is not defined"}


def test_each_link_has_one_runner_that_moves_only_when_its_node_goes() -> None:
    keys = [("/", f"x{index}", "up") for index in range(30)]
    three = {key: runner_of(key, ["n1", "n2", "n3"]) for key in keys}
    assert set(three.values()) == {"n1", "n2", "n3"}
    two = {key: runner_of(key, ["n1", "n3"]) for key in keys}
    assert all(two[key] == three[key] for key in keys if three[key] != "n2")
    assert runner_of(keys[0], []) is None
