"""Fakes shared by the tests: only for our own logic's unit tests (real components elsewhere)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.instants import T0


class FixedClock:
    """A clock for code that takes one (`() -> datetime`): it reads `now`, which only the test
    moves."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now
