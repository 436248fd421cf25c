"""The runtime's clock port: wall time, a monotonic counter and a wait that may be woken.

Every loop of the runtime asks this port, never `time` or `datetime.now`, so the same loop runs
on the system clock (`cronsource run`) and on a virtual one (`cronsource simulate`, tests),
where waiting does not sleep but moves time forward by the wait the runtime asked for.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a counter that never goes back (for budgets and backoffs)."""
        ...

    def wait(self, seconds: float, wake: threading.Event | None = None) -> bool:
        """Wait `seconds` or until `wake` is set; returns whether it was woken."""
        ...


class SystemClock:
    """The wall clock: `cronsource run`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float, wake: threading.Event | None = None) -> bool:
        if wake is not None:
            return wake.wait(max(0.0, seconds))
        if seconds > 0:
            time.sleep(seconds)
        return False


class VirtualClock:
    """Time that moves only when the runtime waits: `wait(s)` jumps s seconds at once.

    A wake already set ends the wait at once without moving time (the log changed: turn
    again at the same instant). The monotonic counter moves with the time, so budgets and
    backoffs measure virtual seconds; nothing passes while a turn runs.
    """

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("VirtualClock needs an aware start instant")
        self._start = start
        self._now = start
        self._stepped = 0.0  # seconds the wall time was stepped back (step_wall)

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return (self._now - self._start).total_seconds() + self._stepped

    def wait(self, seconds: float, wake: threading.Event | None = None) -> bool:
        if wake is not None and wake.is_set():
            return True
        if seconds > 0:
            # timedelta keeps microseconds: a wait computed as (instant - now) lands on it.
            self._now += timedelta(seconds=seconds)
        return False

    def set(self, at: datetime) -> None:
        """Put the clock at `at` (tests stepping time by hand); the monotonic counter moves
        with it."""
        self._now = at

    def step_wall(self, at: datetime) -> None:
        """Put the wall time at `at` and leave the monotonic counter where it is: what an NTP
        step or an operator's `date -s` does to a real clock."""
        self._stepped += (self._now - at).total_seconds()
        self._now = at


#: The system clock, for code that is handed no other: one instance, so nothing outside this
#: module reads `time` or `datetime.now`.
SYSTEM_CLOCK = SystemClock()
