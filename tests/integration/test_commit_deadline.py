"""A decision is committed within the late tolerance or decided again (issue 27, item 3).

A store that keeps the scheduler's commit waiting (a lock held elsewhere, a reconnecting pool)
must not turn a decision made on time into a fire committed late as if on time: the commit is
bounded by the fires' deadline, and past it the ticks are decided again on the time it is then.
Real stores, a real lock held by another connection, the real clock (the rule itself, on
decided aggregates: tests/unit/test_commit_deadline.py).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from cronsource.adapters.clock import SystemClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.scheduler import Scheduler
from cronsource.domain.service import event_type
from tests.unit.test_commit_deadline import manifest

TOLERANCE = timedelta(seconds=2)
HOLD = 4.0  # seconds the other connection keeps the log locked: past the tolerance


@pytest.fixture
def late_tolerance() -> timedelta:
    return TOLERANCE


def hold_log_lock(
    engine: Engine, seconds: float, held: threading.Event, released: list[datetime]
) -> threading.Thread:
    """Another process's writer holding the event log's write lock for `seconds`; the wall
    time it let go goes into `released`."""
    recorder: Any = engine.service.recorder
    table = recorder.events_table_name

    def run() -> None:
        if engine.config.kind == "sqlite":
            conn = sqlite3.connect(engine.config.sqlite_path, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            held.set()
            time.sleep(seconds)
            conn.execute("ROLLBACK")
            released.append(datetime.now(UTC))
            conn.close()
        else:
            with psycopg.connect(engine.config.pg_conninfo) as conn:
                schema = engine.config.pg_schema or "public"
                conn.execute(f'LOCK TABLE "{schema}".{table} IN EXCLUSIVE MODE')
                held.set()
                time.sleep(seconds)
                conn.rollback()
                released.append(datetime.now(UTC))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.stores("sqlite", "postgres")
def test_a_commit_held_up_past_the_tolerance_is_decided_again_as_missed(engine: Engine) -> None:
    svc = engine.service
    created = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=10)
    cron_id, _ = svc.apply(manifest("held"), created)
    svc.tick([cron_id], created + timedelta(seconds=9, milliseconds=500))
    engine.projector.catch_up()
    scheduler = Scheduler(svc, engine.view, SoleOwner(), clock=SystemClock())
    held = threading.Event()
    released: list[datetime] = []
    locker = hold_log_lock(engine, HOLD, held, released)
    assert held.wait(10)
    started = time.monotonic()
    now = datetime.now(UTC)
    scheduler.schedule_once(now)  # decided on time, now; committed only after the lock
    waited = time.monotonic() - started
    locker.join()
    assert waited >= TOLERANCE.total_seconds() * 0.9, "the commit did not wait for the lock"
    # Nothing could be committed before the lock was let go: a schedule fire whose tick is
    # more than the tolerance before that moment was committed late as if on time.
    fires = [
        e
        for e in svc.events.get(cron_id)
        if event_type(e) == "ScheduleFired" and e.trigger == "schedule"
    ]
    late = [
        e.scheduled_time  # type: ignore[attr-defined]
        for e in fires
        if e.scheduled_time >= created + timedelta(seconds=10)
        and e.scheduled_time + TOLERANCE < released[0] - timedelta(seconds=0.2)
    ]
    assert not late, f"fires decided on time were committed late as on time: {late}"
    skips = [e for e in svc.events.get(cron_id) if event_type(e) == "ScheduleSkipped"]
    assert any(e.reason == "DeadlineExceeded" for e in skips), (
        "the ticks of the wait were not decided again as missed"
    )
    versions = [e.originator_version for e in svc.recorder.select_events(cron_id)]
    assert versions == list(range(1, len(versions) + 1))
