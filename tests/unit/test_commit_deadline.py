"""A decision is committed within the late tolerance or decided again (issue 27, item 3).

A store that keeps the scheduler's commit waiting (a lock held elsewhere, a reconnecting pool)
must not turn a decision made on time into a fire committed late as if on time: the commit is
bounded by the fires' deadline, and past it the ticks are decided again on the time it is then.
Real stores, a real lock held by another connection, the real clock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.clock import SystemClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.scheduler import Scheduler
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import commit_deadline, event_type

TOLERANCE = timedelta(seconds=2)
HOLD = 4.0  # seconds the other connection keeps the log locked: past the tolerance


def manifest(name: str) -> Any:
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedules": ["@every 1s"], "workflowSpec": {"entrypoint": "main"}},
        }
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    url = (
        f"sqlite:///{tmp_path}/x.db"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    migrate(StoreConfig.parse(url))
    e = bootstrap(url, late_tolerance=TOLERANCE)
    yield e
    e.close()


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


def test_the_commit_deadline_is_the_earliest_fire_within_its_rule() -> None:
    """On time: tick + tolerance; catch-up: tick + startingDeadlineSeconds; skips: none."""
    svc_env = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    from cronsource.domain.service import CronService

    svc = CronService(env=svc_env)
    t0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
    cron_id, _ = svc.apply(manifest("d"), t0)
    [agg] = svc.decide_batch([cron_id], t0 + timedelta(seconds=3, milliseconds=100))
    # ticks 1 s, 2 s, 3 s: the latest fires on time (tolerance 30 s), the rest are skipped
    assert commit_deadline([agg], timedelta(seconds=30)) == t0 + timedelta(seconds=33)
    # Decided 0.1 s after the latest tick with a tolerance of 50 ms: every tick is missed,
    # and skips have no deadline.
    svc.late_tolerance = timedelta(milliseconds=50)
    [idle] = svc.decide_batch([cron_id], t0 + timedelta(seconds=3, milliseconds=100))
    assert commit_deadline([idle], svc.late_tolerance) is None
