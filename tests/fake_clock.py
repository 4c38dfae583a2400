"""A clock a test moves by hand: ``clock.now += 10`` instead of sleeping."""

from __future__ import annotations


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
