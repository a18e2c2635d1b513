"""Carry out a queue core's effects strictly in order.

Most effects (`Deliver`, `Settle`, `QueueExpired`) are carried out at once. A
`DeadLetter` is a republish that must be awaited before the effects after it
(the `Settle` that follows it, above all: so a crash duplicates rather than
loses), so from the first one on, the rest of the list runs in a task, and
every later list waits for that task: effects keep their order across calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from logbroker.queue.effects import DeadLetter, Effect

__all__ = ["EffectRunner"]


class EffectRunner:
    def __init__(self, carry_out: Callable[[Effect], None],
                 dead_letter: Callable[[DeadLetter], Awaitable[None]]) -> None:
        self._carry_out_one = carry_out
        self._dead_letter = dead_letter
        self._chain: asyncio.Future[None] | None = None  # effects waiting on a dead letter

    def run(self, effects: list[Effect]) -> None:
        if not effects:
            return
        if self._chain is not None and not self._chain.done():
            self._chain = asyncio.ensure_future(self._after(self._chain, effects))
            return
        for index, effect in enumerate(effects):
            if isinstance(effect, DeadLetter):
                self._chain = asyncio.ensure_future(self._carry_out(effects[index:]))
                return
            self._carry_out_one(effect)

    async def finished(self) -> None:
        """Wait for the effects under way; a failed dead letter raises here."""
        if self._chain is not None:
            await asyncio.shield(self._chain)

    async def drain(self) -> None:
        """Wait for the effects under way (a failed dead letter is its own to report)."""
        if self._chain is not None:
            await asyncio.gather(self._chain, return_exceptions=True)

    async def _after(self, previous: asyncio.Future[None], effects: list[Effect]) -> None:
        await previous
        await self._carry_out(effects)

    async def _carry_out(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, DeadLetter):
                await self._dead_letter(effect)
            else:
                self._carry_out_one(effect)
