"""Reply texts as they go on the wire: `"<NAME> - <explanation>"`, fitted into a shortstr.

The codes, their names and their scope are `logbroker.metadata.reply_codes` (the
one table); this is only how the AMQP listener writes them.
"""

from __future__ import annotations

from logbroker.metadata.reply_codes import reply_name

#: A reply-text is an AMQP shortstr: at most 255 bytes of UTF-8.
MAX_REPLY_TEXT_BYTES = 255


def truncate_shortstr(text: str) -> str:
    """Cut `text` to at most 255 UTF-8 bytes without splitting a character.

    Characters that cannot be encoded (lone surrogates) become `?`.
    """
    raw = text.encode("utf-8", "replace")  # lone surrogates would not encode on the wire
    return raw[:MAX_REPLY_TEXT_BYTES].decode("utf-8", "ignore")


def reply_text(code: int, explanation: str) -> str:
    """`"<NAME> - <explanation>"` as RabbitMQ writes it, fitted into a shortstr."""
    return truncate_shortstr(f"{reply_name(code)} - {explanation}")
