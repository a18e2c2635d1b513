"""Rows every other cluster member answers for a cluster-wide listing: RabbitMQ's
management API lists connections, channels, federation links and shovels of the whole
cluster, each row naming its node, from any node.

A listing asks every other member up once, all at once, each within a timeout. A
member that fails or does not answer in time is left out (the log says so) rather
than holding the listing up; what it holds is not known. Each answer is an `ok`
envelope whose `rows` are dicts, at most `MAX_ROWS` of them taken.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.errors import BrokerError

__all__ = ["MAX_ROWS", "rows_of_members"]

logger = logging.getLogger(__name__)
MAX_ROWS = 10_000  # per member and request: an answer stays one bounded frame


async def rows_of_members(rpc: ClusterRpc, members: Iterable[str], request: Envelope,
                          timeout_s: float) -> list[dict[str, Any]]:
    """The rows each of `members` answers to `request` (those that answered in time)."""
    answers = await asyncio.gather(*(_rows_of(rpc, member, request, timeout_s)
                                     for member in sorted(set(members))))
    return [row for rows in answers for row in rows]


async def _rows_of(rpc: ClusterRpc, member: str, request: Envelope, timeout_s: float
                   ) -> list[dict[str, Any]]:
    try:
        answer = await rpc.call(member, request, timeout_s)
    except BrokerError as error:
        logger.info("%s of node %s left out: %s", request.op, member, error.text)
        return []
    rows = answer.header.get("rows")
    return [row for row in rows[:MAX_ROWS] if isinstance(row, dict)] \
        if isinstance(rows, list) else []
