"""The error for a bad connector option: it names the option and says what is accepted."""

from __future__ import annotations


class OptionError(ValueError):
    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"logbroker option '{option}': {problem}")
        self.option = option
