"""Reply code table and the hard / soft split."""

from __future__ import annotations

from api.amqp.reply_texts import reply_text, truncate_shortstr
from logbroker.metadata.reply_codes import (
    ReplyCode,
    is_channel_error,
    is_connection_error,
    is_valid_reply_code,
    reply_name,
)


def test_every_spec_code_is_listed() -> None:
    assert sorted(int(c) for c in ReplyCode) == [
        200, 311, 312, 313, 320, 402, 403, 404, 405, 406,
        501, 502, 503, 504, 505, 506, 530, 540, 541,
    ]  # fmt: skip


def test_hard_and_soft_split_follows_the_spec() -> None:
    soft = {c for c in ReplyCode if is_channel_error(c)}
    hard = {c for c in ReplyCode if is_connection_error(c)}
    assert soft == {311, 312, 313, 403, 404, 405, 406}
    assert hard == {320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541}
    assert not is_channel_error(200) and not is_connection_error(200)
    assert not is_valid_reply_code(999) and is_valid_reply_code(200)


def test_names_and_texts_read_like_rabbitmq() -> None:
    assert reply_name(406) == "PRECONDITION_FAILED"
    assert reply_name(1) == "UNKNOWN"
    assert reply_text(404, "no queue 'q' in vhost '/'") == "NOT_FOUND - no queue 'q' in vhost '/'"


def test_texts_fit_a_shortstr() -> None:
    assert len(truncate_shortstr("ü" * 200).encode()) == 254  # never half a character
    assert truncate_shortstr("ok") == "ok"
    assert truncate_shortstr("bad \udcff surrogate") == "bad ? surrogate"
