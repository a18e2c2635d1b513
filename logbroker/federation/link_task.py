"""What every federation link and shovel shares: its task, its AMQP connections, retries.

`LinkTask` runs a link's loop as one asyncio task and stops it. `amqp_connection`
opens an aiormq connection within `CONNECT_TIMEOUT_S` and closes it however the
block ends. `reconnect_forever` runs a link's session against its URIs in turn: a
session that fails is recorded in the link's status and logged, and the next URI
is tried after the link's reconnect delay, until the task is cancelled. URIs in
statuses and logs go through `redact` (no password).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiormq

from logbroker.federation.link_status import LinkStatus
from segments.clock import Clock

__all__ = ["CONNECT_TIMEOUT_S", "LinkTask", "amqp_connection", "describe", "reconnect_forever",
           "record_failure", "redact"]

logger = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10.0


def redact(uri: str) -> str:
    parts = urlsplit(uri)
    return uri if parts.password is None else uri.replace(f":{parts.password}@", ":***@", 1)


def describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if text != type(error).__name__ else text


class LinkTask:
    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: Coroutine[Any, Any, None]) -> None:
        self._task = asyncio.ensure_future(loop)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@contextlib.asynccontextmanager
async def amqp_connection(uri: str) -> AsyncIterator[aiormq.Connection]:
    async with asyncio.timeout(CONNECT_TIMEOUT_S):
        connection = await aiormq.connect(uri)
    try:
        yield connection
    finally:
        with contextlib.suppress(Exception):
            await connection.close()


def record_failure(status: LinkStatus, clock: Clock, uri: str, error: Exception,
                   what: str) -> None:
    """A session failed: say so in the status and the log (once per failure)."""
    status.failed(clock.wall_ms(), redact(uri), describe(error))
    logger.warning("%s: %s", what, describe(error))


async def reconnect_forever(uris: Sequence[str], session: Callable[[str], Awaitable[None]],
                            status: LinkStatus, clock: Clock, delay_s: float,
                            what: str) -> None:
    while True:
        for uri in uris:
            try:
                await session(uri)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # any failure: status, then reconnect
                record_failure(status, clock, uri, error, what)
            await asyncio.sleep(delay_s)
