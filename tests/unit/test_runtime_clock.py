"""The runtime's clock port: the virtual clock jumps by the wait the runtime asks for."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from cronsource.adapters.clock import SystemClock, VirtualClock

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def test_a_virtual_wait_moves_time_and_the_monotonic_counter_by_that_much() -> None:
    clock = VirtualClock(T0)
    assert clock.wait(59.999999) is False
    assert clock.now() == T0 + timedelta(seconds=59, microseconds=999999)
    assert clock.monotonic() == pytest.approx(59.999999)
    due = T0 + timedelta(days=3, microseconds=7)
    clock.wait((due - clock.now()).total_seconds())
    assert clock.now() == due  # lands exactly on the instant it was asked to wait for


def test_a_virtual_wait_already_woken_does_not_move_time() -> None:
    clock = VirtualClock(T0)
    wake = threading.Event()
    wake.set()
    assert clock.wait(30, wake) is True
    assert clock.now() == T0
    wake.clear()
    assert clock.wait(30, wake) is False
    assert clock.now() == T0 + timedelta(seconds=30)


def test_the_system_clock_is_aware_utc_and_a_set_wake_ends_its_wait() -> None:
    clock = SystemClock()
    assert clock.now().tzinfo is UTC
    wake = threading.Event()
    wake.set()
    before = clock.monotonic()
    assert clock.wait(10, wake) is True
    assert clock.monotonic() - before < 5  # it did not sleep its 10 s (5: a loaded machine)


def test_a_virtual_clock_needs_an_aware_start() -> None:
    with pytest.raises(ValueError, match="aware"):
        VirtualClock(datetime(2026, 5, 4))


def test_a_supervisor_runs_its_step_when_the_clock_was_set_back_before_its_start() -> None:
    """bench.burst steps a virtual clock back 30 s before the instant it was made at: its
    monotonic time is then negative, and a supervisor that compared it with a retry time of
    0.0 skipped every step (warming and deciding in advance never ran)."""
    from cronsource.adapters.runtime.supervisor import Supervisor

    clock = VirtualClock(T0)
    clock.set(T0 - timedelta(seconds=30))
    ran: list[int] = []
    sup = Supervisor("warm-up", clock)
    sup.run(lambda: ran.append(1))
    assert ran == [1]

    def fail() -> None:
        raise RuntimeError("store down")

    sup.run(fail)
    sup.run(lambda: ran.append(2))  # backing off: not yet
    clock.wait(sup.backoff)
    sup.run(lambda: ran.append(3))
    assert ran == [1, 3] and sup.retry_at is None


def test_the_dispatch_backs_off_at_most_five_seconds_the_others_thirty() -> None:
    """A fire waits for the dispatch's retry within its starting deadline (30 s unset): with
    the backoff doubling to 30 s, the first retry after an API server outage of half a minute
    came past that deadline, and every run of the tick was lost though the server had been
    answering for 12 s."""
    from cronsource.adapters.runtime.supervisor import DISPATCH_MAX_BACKOFF, Supervisor

    def fail() -> None:
        raise RuntimeError("503")

    clock = VirtualClock(T0)
    dispatch = Supervisor("dispatch", clock, max_backoff=DISPATCH_MAX_BACKOFF)
    other = Supervisor("scheduler", clock)
    for _ in range(12):
        for sup in (dispatch, other):
            sup.run(fail)
        clock.wait(max(dispatch.backoff, other.backoff))
    assert (dispatch.backoff, other.backoff) == (5.0, 30.0)
    # `run`'s dispatch thread is supervised so (simulate's dispatch too: tests/scenarios).
    import threading

    from cronsource.adapters.runtime.dispatchworker import DispatchWorker

    worker = DispatchWorker(
        None,  # type: ignore[arg-type]
        clock,
        threading.Event(),
        poll_seconds=1.0,
        runs_projections=lambda: False,
        store_probe=lambda: None,
    )
    assert worker.supervisor.max_backoff == DISPATCH_MAX_BACKOFF
