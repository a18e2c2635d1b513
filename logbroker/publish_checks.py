"""What RabbitMQ refuses at basic.publish, with its reply codes and texts."""

from __future__ import annotations

from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import ACCESS_REFUSED, NOT_FOUND, PRECONDITION_FAILED, BrokerError
from logbroker.message import Properties, valid_expiration


def check_publish(broker: Broker, session: Session, exchange: str, properties: Properties,
                  body_bytes: int, exchanges_checked: set[str] | None = None) -> None:
    """Refuse what RabbitMQ refuses. `exchanges_checked`: exchanges this batch of
    publishes (one REST request, one WebSocket frame) already passed the exchange
    checks for, which are done once per batch then (RabbitMQ caches its permission
    checks per channel)."""
    if exchanges_checked is None or exchange not in exchanges_checked:
        _check_exchange(broker, session, exchange)
        if exchanges_checked is not None:
            exchanges_checked.add(exchange)
    if properties.user_id is not None and properties.user_id != session.user:
        raise BrokerError(PRECONDITION_FAILED,
                          f"user_id property set to '{properties.user_id}' but authenticated "
                          f"user was '{session.user}'")
    if not valid_expiration(properties.expiration):
        raise BrokerError(PRECONDITION_FAILED, f"invalid expiration '{properties.expiration}'")
    if body_bytes > broker.config.max_message_bytes:
        raise BrokerError(PRECONDITION_FAILED,
                          f"message size {body_bytes} is larger than configured max size "
                          f"{broker.config.max_message_bytes}")


def _check_exchange(broker: Broker, session: Session, exchange: str) -> None:
    vhost = session.vhost
    if exchange:
        record = broker.state.exchange(vhost, exchange)
        if record is None:
            raise BrokerError(NOT_FOUND, f"no exchange '{exchange}' in vhost '{vhost}'")
        if record.internal:
            raise BrokerError(
                ACCESS_REFUSED,
                f"cannot publish to internal exchange '{exchange}' in vhost '{vhost}'",
            )
    broker.access.check(session, "exchange", exchange, "write")
