from __future__ import annotations

from logbroker.metadata import MetadataError
from logbroker.metadata import reply_codes as codes
from logbroker.metadata.errors import not_found, reserved_name, resource_locked


def test_every_amqp_0_9_1_reply_code_is_known_with_its_scope() -> None:
    channel = {311, 312, 313, 403, 404, 405, 406}
    connection = {320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541}
    assert set(codes.ReplyCode) == channel | connection | {200}
    assert all(not codes.is_connection_error(code) for code in channel)
    assert all(codes.is_connection_error(code) for code in connection)
    assert codes.ACCESS_REFUSED == 403
    assert codes.NOT_FOUND == 404
    assert codes.RESOURCE_LOCKED == 405
    assert codes.PRECONDITION_FAILED == 406
    assert codes.COMMAND_INVALID == 503
    assert codes.NOT_ALLOWED == 530
    assert codes.NOT_IMPLEMENTED == 540
    assert codes.INTERNAL_ERROR == 541


def test_reply_text_is_prefixed_like_rabbitmq() -> None:
    error = not_found("queue", "/", "q")
    assert error.reply_code == 404
    assert error.text == "no queue 'q' in vhost '/'"
    assert error.reply_text == "NOT_FOUND - no queue 'q' in vhost '/'"
    assert str(error) == error.reply_text
    assert not error.connection_error
    assert MetadataError(codes.NOT_ALLOWED, "x").connection_error


def test_shared_texts() -> None:
    assert reserved_name("queue", "amq.x").reply_text == (
        "ACCESS_REFUSED - queue name 'amq.x' contains reserved prefix 'amq.*'"
    )
    assert resource_locked("/", "q").reply_text.startswith(
        "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'q' in vhost '/'."
    )
