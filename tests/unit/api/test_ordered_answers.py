"""OrderedAnswers: entries complete in any order and are answered in the order they came."""

from __future__ import annotations

import asyncio

from api.ordered_answers import OrderedAnswers


async def test_entries_are_answered_in_order_once_the_head_is_ready() -> None:
    done: set[str] = set()
    answered: list[str] = []
    passes: list[int] = []
    answers = OrderedAnswers(done.__contains__, answered.append,
                             lambda: passes.append(len(answered)))
    for name in "abc":
        answers.append(name)
    done.update("bc")
    answers.changed()
    answers.changed()  # one pass per loop iteration, however many completed
    await asyncio.sleep(0)
    assert answered == [] and passes == [0] and len(answers) == 3
    done.add("a")
    answers.changed()
    await asyncio.sleep(0)
    assert answered == ["a", "b", "c"] and passes == [0, 3] and len(answers) == 0


async def test_nothing_is_answered_after_close_even_during_a_pass() -> None:
    answered: list[str] = []

    def answer(entry: str) -> None:
        answered.append(entry)
        if entry == "a":
            answers.close()  # the channel closed while answering

    answers: OrderedAnswers[str] = OrderedAnswers(lambda _: True, answer)
    for name in "abc":
        answers.append(name)
    answers.changed()
    await asyncio.sleep(0)
    assert answered == ["a"] and len(answers) == 0
    answers.append("d")
    answers.changed()
    await asyncio.sleep(0)
    assert answered == ["a"]
