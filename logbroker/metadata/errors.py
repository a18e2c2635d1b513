"""`MetadataError`: a refused metadata operation, with its AMQP reply code.

The text is RabbitMQ's explanation; `reply_text` prefixes it with the code's
name exactly as RabbitMQ does on the wire (`NOT_FOUND - no queue 'q' in vhost
'/'`). The helpers below build the errors whose wording several modules share.
"""

from __future__ import annotations

from typing import Literal

from logbroker.metadata.reply_codes import (
    ACCESS_REFUSED,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RESOURCE_LOCKED,
    ReplyCode,
    is_connection_error,
)

ResourceKind = Literal["queue", "exchange"]


class MetadataError(Exception):
    """An operation the metadata refused; carries the AMQP reply code and text."""

    def __init__(self, reply_code: int, text: str) -> None:
        self.reply_code = reply_code
        self.text = text
        super().__init__(self.reply_text)

    @property
    def reply_name(self) -> str:
        return ReplyCode(self.reply_code).name

    @property
    def reply_text(self) -> str:
        """What goes into channel.close / connection.close: `NAME - text`."""
        return f"{self.reply_name} - {self.text}"

    @property
    def connection_error(self) -> bool:
        """True when the error closes the connection, False when only the channel."""
        return is_connection_error(self.reply_code)

    def __repr__(self) -> str:
        return f"MetadataError({self.reply_code}, {self.text!r})"


def rs(kind: str, vhost: str, name: str) -> str:
    """RabbitMQ's `rabbit_misc:rs/1`: how a resource is named in error texts."""
    return f"{kind} '{name}' in vhost '{vhost}'"


def not_found(kind: str, vhost: str, name: str) -> MetadataError:
    return MetadataError(NOT_FOUND, f"no {rs(kind, vhost, name)}")


def no_vhost(vhost: str) -> MetadataError:
    return MetadataError(NOT_FOUND, f"no vhost '{vhost}'")


def no_user(user: str) -> MetadataError:
    return MetadataError(NOT_FOUND, f"no user '{user}'")


def precondition_failed(text: str) -> MetadataError:
    return MetadataError(PRECONDITION_FAILED, text)


def reserved_name(kind: str, name: str) -> MetadataError:
    return MetadataError(ACCESS_REFUSED, f"{kind} name '{name}' contains reserved prefix 'amq.*'")


def default_exchange_refused() -> MetadataError:
    return MetadataError(ACCESS_REFUSED, "operation not permitted on the default exchange")


def resource_locked(vhost: str, name: str) -> MetadataError:
    return MetadataError(
        RESOURCE_LOCKED,
        f"cannot obtain exclusive access to locked {rs('queue', vhost, name)}. It could be "
        "originally declared on another connection or the exclusive property value does "
        "not match that of the original declaration.",
    )
