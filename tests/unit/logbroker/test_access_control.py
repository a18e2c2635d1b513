"""`AccessControl`: logins, vhost access and permissions, read from the metadata."""

from __future__ import annotations

import pytest

from logbroker.access_control import AccessControl
from logbroker.broker_config import BrokerConfig, Session
from logbroker.definitions_loaded import DefinitionsLoaded, DefinitionsNotLoaded
from logbroker.errors import BrokerError
from logbroker.metadata import (
    AddVhost,
    MetadataState,
    PutUser,
    SetPermissions,
    bootstrap_commands,
    hash_password,
)


def state_with_bob() -> MetadataState:
    state = MetadataState()
    for command in bootstrap_commands(hash_password("guest", b"salt"), "guest"):
        state.apply(command)
    state.apply(AddVhost("v2"))
    state.apply(PutUser("bob", hash_password("secret", b"pepp")))
    state.apply(SetPermissions("bob", "/", "^bob-.*", "^bob-.*", ".*"))
    return state


def access(loaded: bool = True) -> AccessControl:
    state = state_with_bob()
    return AccessControl(BrokerConfig(data_dir="/nowhere"), lambda: state,
                         DefinitionsLoaded("n1", lambda: loaded))


def test_a_password_is_checked_and_guest_comes_only_from_this_machine() -> None:
    control = access()
    assert control.authenticate("bob", "secret", "10.0.0.7") == "bob"
    assert control.authenticate("bob", "wrong", "10.0.0.7") is None
    assert control.authenticate("nobody", "secret", None) is None
    assert control.authenticate("guest", "guest", "127.0.0.1") == "guest"
    assert control.authenticate("guest", "guest", "::1") == "guest"
    assert control.authenticate("guest", "guest", "10.0.0.7") is None


def test_a_node_that_cannot_tell_yet_refuses_nobody() -> None:
    with pytest.raises(DefinitionsNotLoaded):
        access(loaded=False).authenticate("bob", "secret", None)


def test_vhost_access_and_permissions() -> None:
    control = access()
    control.check_vhost("bob", "/")
    with pytest.raises(BrokerError, match="not found"):
        control.check_vhost("bob", "nowhere")
    with pytest.raises(BrokerError):
        control.check_vhost("bob", "v2")  # no permissions there
    bob = Session("conn-1", "bob", "/")
    control.check(bob, "queue", "bob-work", "configure")
    control.check(bob, "queue", "anything", "read")
    with pytest.raises(BrokerError) as refused:
        control.check(bob, "queue", "alice-work", "write")
    assert refused.value.reply_code == 403
