from __future__ import annotations

import pytest

from logbroker.metadata import (
    AddVhost,
    MetadataError,
    MetadataState,
    PutUser,
    SetPermissions,
    can_access_vhost,
    can_configure,
    can_read,
    can_write,
    check_access,
    check_vhost_access,
)
from tests.unit.logbroker.metadata.helpers import new_state


@pytest.fixture
def state() -> MetadataState:
    state = new_state()
    state.apply(AddVhost("v2"))
    state.apply(PutUser("bob", "h"))
    state.apply(SetPermissions("bob", "/", "^bob-", "", "ord"))
    return state


def test_guest_may_do_everything_on_slash(state: MetadataState) -> None:
    for check in (can_configure, can_write, can_read):
        assert check(state, "guest", "/", "anything")
    assert not can_read(state, "guest", "v2", "anything")
    assert can_access_vhost(state, "guest", "/") and not can_access_vhost(state, "guest", "v2")


def test_regexes_are_unanchored_searches(state: MetadataState) -> None:
    assert can_configure(state, "bob", "/", "bob-q")
    assert not can_configure(state, "bob", "/", "x-bob-q")
    assert can_read(state, "bob", "/", "orders") and can_read(state, "bob", "/", "new-orders")


def test_empty_regex_matches_nothing_not_even_the_empty_name(state: MetadataState) -> None:
    assert not can_write(state, "bob", "/", "bob-q")
    assert not can_write(state, "bob", "/", "")


def test_default_exchange_is_checked_as_amq_default(state: MetadataState) -> None:
    state.apply(SetPermissions("bob", "/", "", r"^amq\.default$", ""))
    assert can_write(state, "bob", "/", "")
    assert not can_write(state, "bob", "/", "other")


def test_unknown_users_and_vhosts_have_no_rights(state: MetadataState) -> None:
    assert not can_read(state, "nobody", "/", "q")
    assert not can_read(state, "bob", "nope", "q")


def test_refusal_texts(state: MetadataState) -> None:
    with pytest.raises(MetadataError) as caught:
        check_access(state, "bob", "/", "queue", "q", "configure")
    assert caught.value.reply_text == (
        "ACCESS_REFUSED - configure access to queue 'q' in vhost '/' refused for user 'bob'"
    )
    with pytest.raises(MetadataError) as caught:
        check_access(state, "bob", "/", "exchange", "", "write")
    assert caught.value.reply_text == (
        "ACCESS_REFUSED - write access to exchange 'amq.default' in vhost '/' refused for "
        "user 'bob'"
    )
    check_access(state, "bob", "/", "queue", "bob-q", "configure")
    with pytest.raises(MetadataError) as caught:
        check_vhost_access(state, "bob", "v2")
    assert caught.value.reply_code == 530
    assert caught.value.connection_error
    assert caught.value.text == "access to vhost 'v2' refused for user 'bob'"
    check_vhost_access(state, "bob", "/")
