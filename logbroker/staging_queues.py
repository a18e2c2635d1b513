"""Where a transactional batch's staged parts live: a staging queue per batch, and its parts.

Pure: names, tokens and the choice of a commit's messages among what a staging
queue holds; `producer_batches` does the I/O.

A batch (producer, seq) stages into its own durable queue, named by
`staging_queue_name`, replicated like any queue in a cluster, so staged parts
survive a restart and a failover of the node that took them. A part is one
stage request: its messages carry the part's token in a header, and the token
says how many messages the part has, so a commit can tell a whole part from a
part that was partly lost or never staged. The staging queue expires
(`x-expires`) when a batch is abandoned, and is deleted once its batch is
applied or aborted.

Invariants: a token names exactly one part; `select_parts` returns the listed
parts whole, in the order listed, or raises `UnknownParts` naming each listed
part it cannot return whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

STAGING_PREFIX = "amq.staging."
PART_HEADER = "x-staged-part"
EXCHANGE_HEADER = "x-staged-exchange"
ROUTING_KEY_HEADER = "x-staged-routing-key"
STAGING_HEADERS = (PART_HEADER, EXCHANGE_HEADER, ROUTING_KEY_HEADER)
T = TypeVar("T")


class BatchKey(NamedTuple):
    vhost: str
    producer: str
    seq: int


@dataclass(frozen=True)
class StagingLimits:
    max_batch_bytes: int = 256 << 20  # one batch is routed in one go
    timeout_ms: int = 15 * 60 * 1000  # an abandoned batch's queue expires after this
    max_open_batches: int = 10_000  # per vhost


class UnknownParts(Exception):
    """A commit named parts that are not staged whole (expired, aborted, never staged)."""

    def __init__(self, tokens: Sequence[str]) -> None:
        super().__init__(", ".join(tokens))
        self.tokens = tuple(tokens)


def staging_queue_name(producer: str, seq: int) -> str:
    """The batch's staging queue: `amq.` is reserved, so no client declares it."""
    digest = hashlib.sha256(producer.encode()).hexdigest()[:24]
    return f"{STAGING_PREFIX}{digest}.{seq}"


def is_staging_queue(name: str) -> bool:
    return name.startswith(STAGING_PREFIX)


def part_token(nonce: str, count: int) -> str:
    return f"{nonce}.{count}"


def part_count(token: str) -> int | None:
    """How many messages the part named by `token` has; None for a malformed token."""
    nonce, _, count = token.rpartition(".")
    return int(count) if nonce and count.isdigit() else None


def select_parts(staged: Mapping[str, Sequence[T]], tokens: Sequence[str]) -> list[T]:
    """The messages of the listed parts, part after part in the order listed."""
    listed = list(dict.fromkeys(tokens))
    missing = [t for t in listed if len(staged.get(t, ())) != part_count(t)]
    if missing:
        raise UnknownParts(missing)
    return [message for token in listed for message in staged[token]]
