"""Snapshots bound every load (issue 20, item 1).

A CronWorkflow is snapshotted every SNAPSHOT_INTERVAL events, from the aggregate just saved;
every load (a command's, a batch's) reads the latest snapshot and the events after it. The
state a snapshot holds is versioned: one written by the previous release loads through the
aggregate's upcaster (a golden file written by that release's code). A snapshot that cannot be
read is logged and the stream replayed, never fatal.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import SNAPSHOT_INTERVAL, CronService
from tests.golden_snapshots import store_golden
from tests.http_helpers import manifest as manifest_document
from tests.instants import T0

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "snapshot-v1.json"


def manifest(name: str = "snap", **spec: Any) -> Any:
    return parse_manifest(
        manifest_document(name, "* * * * *", **{"successfulJobsHistoryLimit": 2, **spec})
    )


def grow(svc: CronService, cron_id: UUID, minutes: int) -> datetime:
    """A minute of history each: a fire, its completion, a history pruning now and then."""
    t = T0
    for k in range(1, minutes + 1):
        t = T0 + timedelta(minutes=k, seconds=1)
        svc.tick([cron_id], t)
        for name in list(svc.load(cron_id).active):
            svc.run_completed(cron_id, name, "Succeeded", t, t)
    return t


def replayed(svc: CronService, cron_id: UUID) -> CronWorkflow:
    """The aggregate from every event, no snapshot: the reference."""
    agg: Any = None
    for ev in svc.events.get(cron_id):
        agg = ev.mutate(agg)
    assert isinstance(agg, CronWorkflow)
    return agg


def same_state(a: CronWorkflow, b: CronWorkflow) -> None:
    assert a.version == b.version
    assert a.snapshot_state() == b.snapshot_state()
    assert a.next_due() == b.next_due()


def snapshot_versions(svc: CronService, cron_id: UUID) -> list[int]:
    assert svc.snapshots is not None
    return [s.originator_version for s in svc.snapshots.recorder.select_events(cron_id)]


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_load_reads_the_latest_snapshot_and_the_events_after_it(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest(), T0)
    grow(svc, cron_id, 130)  # about 2 events a minute: past two multiples of the interval
    top = svc.load(cron_id).version
    assert top > 2 * SNAPSHOT_INTERVAL
    versions = snapshot_versions(svc, cron_id)
    assert len(versions) == top // SNAPSHOT_INTERVAL
    assert all(v // SNAPSHOT_INTERVAL == k + 1 for k, v in enumerate(versions))

    reads: list[dict[str, Any]] = []
    real = svc.recorder.select_events

    def spy(originator_id: Any, **kwargs: Any) -> Any:
        reads.append(kwargs)
        return real(originator_id, **kwargs)

    svc.recorder.select_events = spy  # type: ignore[method-assign]
    svc.forget()
    loaded = svc.load(cron_id)
    svc.recorder.select_events = real  # type: ignore[method-assign]
    assert [r.get("gt") for r in reads] == [versions[-1]], "the load replayed more than the tail"
    same_state(loaded, replayed(svc, cron_id))
    same_state(svc.load_many({cron_id: None})[cron_id], loaded)
    # At a version, the latest snapshot at or below it.
    at = versions[0] + 7
    same_state(svc.load_many({cron_id: at})[cron_id], svc.repository.get(cron_id, version=at))


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_the_snapshot_state_round_trips_every_field(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest(concurrencyPolicy="Allow"), T0)
    t = grow(svc, cron_id, 3)
    svc.trigger(cron_id, t, "r-1")
    svc.run_backfill(cron_id, T0, t, t, overlap="Queue")
    svc.suspend(cron_id, t + timedelta(seconds=5), by="alice")
    svc.resume(cron_id, t + timedelta(seconds=9), by="alice")
    agg = svc.load(cron_id)
    assert agg.manual_runs and agg.suspension_end is not None
    snapshot = CronWorkflow.Snapshot.take(agg)
    stored = svc.mapper.to_stored_event(snapshot)
    back = svc.mapper.to_domain_event(stored).mutate(None)
    same_state(back, agg)
    assert back.manual_runs == agg.manual_runs and isinstance(back.manual_runs, set)
    assert back.finished == agg.finished and all(isinstance(f, tuple) for f in back.finished)


def test_a_snapshot_of_the_previous_release_loads_through_the_upcaster(tmp_path: Path) -> None:
    """tests/golden/snapshot-v1.json was written by the code of ad489ff (the aggregate's state
    v1: no suspension_end, suspension_reason, last_applied), with the events that followed
    it. The events before it are gone, as retention removes them: the load must come from
    the snapshot, upcast to v2, and the events after it, and give what that code gave."""
    golden = json.loads(GOLDEN.read_text())
    engine = bootstrap(f"sqlite:///{tmp_path}/g.db")
    try:
        svc = engine.service
        cron_id = store_golden(svc, golden)
        for agg in (svc.load(cron_id), svc.load_many({cron_id: None})[cron_id]):
            want = golden["expect"]
            assert agg.version == want["version"]
            assert (agg.succeeded, agg.failed) == (want["succeeded"], want["failed"])
            assert agg.last_scheduled_time is not None
            assert agg.last_scheduled_time.isoformat() == want["last_scheduled_time"]
            assert agg.decided_until.isoformat() == want["decided_until"]
            assert agg.suspended is want["suspended"]
            assert sorted(agg.active) == want["active"]
            assert sorted(f[0] for f in agg.finished) == want["finished"]
            assert sorted(agg.manual_runs) == want["manual_runs"]
            assert agg.last_applied is None and agg.suspension_reason == "Suspended"
    finally:
        engine.close()


def test_a_snapshot_that_cannot_be_read_is_logged_and_the_stream_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = bootstrap(f"sqlite:///{tmp_path}/c.db")
    try:
        svc = engine.service
        cron_id, _ = svc.apply(manifest(), T0)
        grow(svc, cron_id, 60)
        [version] = snapshot_versions(svc, cron_id)
        assert svc.snapshots is not None
        recorder: Any = svc.snapshots.recorder
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(
                f"UPDATE {recorder.events_table_name} SET state = ?",  # noqa: S608
                (b'{"not": "a snapshot"',),
            )
        svc.forget()
        with caplog.at_level(logging.WARNING, logger="cronsource"):
            loaded = svc.load(cron_id)
            many = svc.load_many({cron_id: None})[cron_id]
        same_state(loaded, replayed(svc, cron_id))
        same_state(many, loaded)
        assert any(f"at version {version} cannot be read" in r.getMessage() for r in caplog.records)
    finally:
        engine.close()


def test_a_load_reads_one_snapshot_however_many_the_stream_has(engine: Engine) -> None:
    """A stream of a million events has 10,000 snapshots: a load reads the latest only (and
    the one before it when the latest cannot be read), never all of them."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest(), T0)
    grow(svc, cron_id, 200)
    versions = snapshot_versions(svc, cron_id)
    assert len(versions) >= 3
    assert svc.snapshots is not None
    recorder: Any = svc.snapshots.recorder
    rows: list[int] = []
    real = recorder.select_events

    def spy(originator_id: Any, **kwargs: Any) -> Any:
        found = real(originator_id, **kwargs)
        rows.append(len(found))
        return found

    recorder.select_events = spy
    try:
        svc.forget()
        loaded = svc.load(cron_id)
    finally:
        recorder.select_events = real
    assert sum(rows) == 1, f"the load read {sum(rows)} snapshots of {len(versions)}"
    same_state(loaded, replayed(svc, cron_id))


def test_a_latest_snapshot_that_cannot_be_read_loads_from_the_one_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = bootstrap(f"sqlite:///{tmp_path}/c.db")
    try:
        svc = engine.service
        cron_id, _ = svc.apply(manifest(), T0)
        grow(svc, cron_id, 200)
        *_, before, latest = snapshot_versions(svc, cron_id)
        assert svc.snapshots is not None
        recorder: Any = svc.snapshots.recorder
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(
                f"UPDATE {recorder.events_table_name} SET state = ?"  # noqa: S608
                " WHERE originator_version = ?",
                (b'{"not": "a snapshot"', latest),
            )
        reads: list[dict[str, Any]] = []
        real = svc.recorder.select_events

        def spy(originator_id: Any, **kwargs: Any) -> Any:
            reads.append(kwargs)
            return real(originator_id, **kwargs)

        svc.forget()
        svc.recorder.select_events = spy  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger="cronsource"):
            loaded = svc.load(cron_id)
        svc.recorder.select_events = real  # type: ignore[method-assign]
        assert [r.get("gt") for r in reads] == [before], "not loaded from the one before"
        same_state(loaded, replayed(svc, cron_id))
        assert any(f"at version {latest} cannot be read" in r.getMessage() for r in caplog.records)
    finally:
        engine.close()


@pytest.mark.stores("sqlite", "postgres")
def test_a_replica_that_stops_leaves_the_next_start_no_tail_to_replay(engine: Engine) -> None:
    """Given a CronWorkflow with events after its latest snapshot, held by a running loop,
    when the loop stops, then it snapshots the copy it holds, and the next start's load
    reads that snapshot and no event after it (a redeploy replays nothing)."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest(), T0)
    now = grow(svc, cron_id, SNAPSHOT_INTERVAL // 4)  # a tail, no snapshot yet
    assert snapshot_versions(svc, cron_id) == []
    clock = VirtualClock(now)
    loop = SchedulerLoop(engine, SoleOwner(), clock=clock, heartbeat=False)
    loop.turn()
    held = {a.id: a.version for a in loop.cache.held()}
    assert held == {cron_id: svc.load(cron_id).version}

    loop.stop_event.set()
    loop.run()

    top = svc.load(cron_id).version
    assert snapshot_versions(svc, cron_id) == [top]
    restarted = bootstrap(engine.config, create_tables=False)
    try:
        tails = restarted.service.recorder.select_events_many([cron_id], {cron_id: top})
        assert list(tails.get(cron_id, ())) == []
        same_state(restarted.service.load_many({cron_id: None})[cron_id], replayed(svc, cron_id))
        # A second stop with nothing new writes nothing.
        again = SchedulerLoop(restarted, SoleOwner(), clock=clock, heartbeat=False)
        again.turn()
        assert again.snapshot_at_stop() == 0
    finally:
        restarted.close()


@pytest.mark.stores("sqlite")
def test_a_replica_whose_last_step_failed_takes_no_snapshots_at_stop(engine: Engine) -> None:
    """Given a held copy with a tail (which a stop would snapshot), when a step's last run
    failed (the store stopped answering the step in flight at SIGTERM), then the stop asks
    the store nothing: it would wait a pool timeout for a store that does not answer."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest(), T0)
    now = grow(svc, cron_id, SNAPSHOT_INTERVAL // 4)
    loop = SchedulerLoop(engine, SoleOwner(), clock=VirtualClock(now), heartbeat=False)
    loop.turn()
    assert loop.cache.held()

    def unreachable() -> None:
        raise ConnectionError("couldn't get a connection after 3.00 sec")

    loop.supervise_scheduler.run(unreachable)
    assert loop.snapshot_at_stop() == 0
    assert snapshot_versions(svc, cron_id) == []
    loop.supervise_scheduler.forget()  # it works again: the stop takes them
    assert loop.snapshot_at_stop() == 1
    assert snapshot_versions(svc, cron_id) == [svc.load(cron_id).version]
