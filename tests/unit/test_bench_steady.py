"""bench.steady's reckoning of what exactly once must fire (its misses are due ticks minus the
fires it saw), checked on its own: a wrong count would hide a miss or invent one."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from bench.steady import due_ticks


def test_due_ticks_are_those_after_ready_and_by_the_end() -> None:
    a, b = uuid4(), uuid4()
    after = datetime(2026, 3, 7, 10, 0, 30, tzinfo=UTC)
    until = datetime(2026, 3, 7, 10, 3, 0, tzinfo=UTC)
    due = due_ticks([a, b], ["* * * * *", "2 * * * *"], after, until)
    minute = [datetime(2026, 3, 7, 10, m, tzinfo=UTC) for m in (1, 2, 3)]
    assert due == {(str(a), t) for t in minute} | {(str(b), minute[1])}


def test_a_tick_at_the_ready_instant_is_not_due() -> None:
    # Half-open at `after`: a tick at the instant the replica became ready came due before it.
    at = datetime(2026, 3, 7, 10, 0, tzinfo=UTC)
    assert due_ticks([uuid4()], ["0 * * * *"], at, at.replace(minute=59)) == set()
