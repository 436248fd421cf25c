"""A wall clock stepped back (adapters/runtime/loop.py `watch_wall_clock`): logged once,
counted in a metric, and the scheduler keeps deciding the ticks it has not decided, so no tick
is decided twice and the next one waits for the wall clock to reach it again.

The runtime's own loop on a virtual clock whose wall time is stepped back while its monotonic
counter keeps counting, as an NTP step or `date -s` does to a real clock."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from uuid import UUID

import pytest
from prometheus_client.core import Metric

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.observability.metrics import Metrics
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from tests.instants import T0

MINUTELY = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "minutely", "namespace": "default"},
    "spec": {
        "schedules": ["* * * * *"],
        "workflowSpec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    },
}


def decisions(engine: Engine, cron_id: UUID) -> list[tuple[str, datetime]]:
    """(event type, tick) of every decision in the CronWorkflow's log."""
    return [
        (event_type(e), e.scheduled_time)  # type: ignore[attr-defined]
        for e in engine.service.events.get(cron_id)
        if event_type(e) in ("ScheduleFired", "ScheduleSkipped")
    ]


def run_until(loop: SchedulerLoop, clock: VirtualClock, until: datetime) -> None:
    """Turn and wait as `run` does, until the wall clock reads `until`."""
    while clock.now() < until:
        loop.turn()
        clock.wait(max(0.1, loop.sleep_seconds()))


def jumps_metric(loop: SchedulerLoop, clock: VirtualClock) -> float:
    metrics = Metrics(loop.engine, clock, loop=loop)
    found: list[Metric] = [
        m for m in metrics.registry.collect() if m.name == "cronsource_clock_backward_jumps"
    ]
    assert len(found) == 1
    return float(found[0].samples[0].value)


@pytest.mark.parametrize(
    ("back", "logged"),
    [
        pytest.param(timedelta(hours=1), 1, id="an hour back"),
        pytest.param(timedelta(seconds=20), 0, id="within the late tolerance"),
    ],
)
def test_a_backward_step_of_the_wall_clock_is_logged_counted_and_decides_no_tick_twice(
    back: timedelta, logged: int, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock(T0)
    engine = bootstrap("memory:")
    loop = SchedulerLoop(
        engine, SoleOwner(), clock=clock, poll_seconds=5, heartbeat=False, log_decisions=False
    )
    try:
        cron_id, _ = engine.service.apply(parse_manifest(MINUTELY), T0)
        minute = timedelta(minutes=1)
        run_until(loop, clock, T0 + 3 * minute + timedelta(seconds=1))
        before = decisions(engine, cron_id)
        assert before == [("ScheduleFired", T0 + k * minute) for k in (1, 2, 3)]
        assert jumps_metric(loop, clock) == 0
        caplog.clear()
        caplog.set_level(logging.WARNING, logger="cronsource")

        clock.step_wall(clock.now() - back)
        # Until the wall clock is back where it was, the ticks it passes again were decided:
        # nothing is decided, not even a skip.
        run_until(loop, clock, T0 + 3 * minute + timedelta(seconds=1))
        assert decisions(engine, cron_id) == before
        warnings = [r.getMessage() for r in caplog.records if "moved back" in r.getMessage()]
        assert len(warnings) == logged, warnings
        if logged:
            assert "moved back by 3600s" in warnings[0], warnings
        assert loop.clock_backward_jumps == logged == jumps_metric(loop, clock)

        # The next undecided tick fires on time when the wall clock reaches it, once.
        run_until(loop, clock, T0 + 4 * minute + timedelta(seconds=1))
        assert decisions(engine, cron_id) == [*before, ("ScheduleFired", T0 + 4 * minute)]
    finally:
        engine.close()


def test_a_wall_step_leaves_the_virtual_monotonic_counter_counting() -> None:
    clock = VirtualClock(T0)
    clock.wait(10)
    clock.step_wall(T0 - timedelta(hours=1))
    assert (clock.now(), clock.monotonic()) == (T0 - timedelta(hours=1), 10.0)
    clock.wait(5)
    assert (clock.now(), clock.monotonic()) == (T0 - timedelta(minutes=59, seconds=55), 15.0)
