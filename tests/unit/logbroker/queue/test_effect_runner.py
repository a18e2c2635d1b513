"""EffectRunner: effects in order, and everything after a dead letter waits for it."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.queue.effect_runner import EffectRunner
from logbroker.queue.effects import DeadLetter, DeadLetterReason, Effect, Settle


async def test_effects_after_a_dead_letter_wait_for_it_across_calls() -> None:
    done: list[str] = []
    release = asyncio.get_running_loop().create_future()

    async def dead_letter(effect: DeadLetter) -> None:
        await release
        done.append(f"dead {effect.offset}")

    runner = EffectRunner(lambda effect: done.append(repr(effect)), dead_letter)
    first: list[Effect] = [Settle(0, 1), DeadLetter(1, DeadLetterReason.REJECTED),
                           Settle(1, 2)]
    runner.run(first)
    runner.run([Settle(2, 3)])  # a later call keeps its place behind the dead letter
    await asyncio.sleep(0)
    assert done == [repr(Settle(0, 1))]  # carried out at once, up to the dead letter
    release.set_result(None)
    await runner.finished()
    assert done == [repr(Settle(0, 1)), "dead 1", repr(Settle(1, 2)), repr(Settle(2, 3))]


async def test_finished_raises_a_failed_dead_letter_and_drain_does_not() -> None:
    async def dead_letter(_effect: DeadLetter) -> None:
        raise OSError("disk gone")

    runner = EffectRunner(lambda _effect: None, dead_letter)
    runner.run([DeadLetter(5, DeadLetterReason.EXPIRED)])
    with pytest.raises(OSError):
        await runner.finished()
    await runner.drain()
