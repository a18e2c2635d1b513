"""The broker's errors carry an AMQP reply code; the metadata layer defines them."""

from logbroker.metadata.errors import MetadataError as BrokerError
from logbroker.metadata.reply_codes import (
    ACCESS_REFUSED,
    NOT_FOUND,
    NOT_IMPLEMENTED,
    PRECONDITION_FAILED,
    RESOURCE_LOCKED,
)

__all__ = [
    "ACCESS_REFUSED",
    "NOT_FOUND",
    "NOT_IMPLEMENTED",
    "PRECONDITION_FAILED",
    "RESOURCE_LOCKED",
    "BrokerError",
]
