"""The pure routing core: exchanges, bindings and where a message goes.

No I/O and no asyncio: the broker feeds declarations, bindings and messages
in and gets routing decisions back. `ExchangeRouter` is the entry point; the
matchers (`TopicMatcher`, `headers_match`, `ConsistentHashRing`) are usable on
their own.
"""

from logbroker.routing.consistent_hash import (
    DEFAULT_POINTS_PER_WEIGHT,
    ConsistentHashRing,
    HashSource,
    parse_weight,
    stable_hash,
)
from logbroker.routing.errors import (
    ExchangeNotFoundError,
    InvalidBindingError,
    InvalidExchangeError,
    RoutingError,
    UnknownExchangeTypeError,
)
from logbroker.routing.exchange_router import DEFAULT_EXCHANGE, ExchangeRouter
from logbroker.routing.exchange_types import EXCHANGE_TYPES
from logbroker.routing.headers_match import (
    HeadersPattern,
    compile_headers_pattern,
    headers_match,
    validate_x_match,
)
from logbroker.routing.topic_matcher import TopicMatcher, split_words
from logbroker.routing.types import (
    Binding,
    Destination,
    ExchangeSpec,
    RoutedMessage,
    RoutingResult,
)

__all__ = [
    "DEFAULT_EXCHANGE",
    "DEFAULT_POINTS_PER_WEIGHT",
    "EXCHANGE_TYPES",
    "Binding",
    "ConsistentHashRing",
    "Destination",
    "ExchangeNotFoundError",
    "ExchangeRouter",
    "ExchangeSpec",
    "HashSource",
    "HeadersPattern",
    "InvalidBindingError",
    "InvalidExchangeError",
    "RoutedMessage",
    "RoutingError",
    "RoutingResult",
    "TopicMatcher",
    "UnknownExchangeTypeError",
    "compile_headers_pattern",
    "headers_match",
    "parse_weight",
    "split_words",
    "stable_hash",
    "validate_x_match",
]
