"""Errors raised by the routing core.

The routing core knows nothing about AMQP reply codes; the broker maps these
to them: `ExchangeNotFoundError` -> 404 NOT_FOUND; `UnknownExchangeTypeError`,
`InvalidExchangeError` and `InvalidBindingError` -> 406 PRECONDITION_FAILED
(current RabbitMQ answers an unknown exchange type and `binding_invalid` that way). Names
the broker reserves (the default exchange, `amq.*`) should be refused by the
broker before it gets here, with 403 ACCESS_REFUSED; the router only guards
against the default exchange so its own invariants hold.
"""

from __future__ import annotations


class RoutingError(Exception):
    """Base class of every error the routing core raises."""


class ExchangeNotFoundError(RoutingError):
    """An operation named an exchange that is not declared."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no exchange '{name}'")
        self.name = name


class UnknownExchangeTypeError(RoutingError):
    """An exchange was declared with a type the router does not implement."""

    def __init__(self, exchange_type: str) -> None:
        super().__init__(f"unknown exchange type '{exchange_type}'")
        self.exchange_type = exchange_type


class InvalidExchangeError(RoutingError):
    """An exchange declaration is not acceptable (arguments, type change, name)."""


class InvalidBindingError(RoutingError):
    """A binding is not acceptable for its source exchange's type."""
