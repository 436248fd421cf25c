"""Retention: the log and the audit keep a window (issue 20, item 2).

On SQLite and a real PostgreSQL: events older than the retention that a snapshot covers, that
every follower has passed, that are not their stream's last and that nothing still needs are
removed; the state loaded afterwards is the state before; an active run's fire and a pending
backfill are kept whatever their age; the audit is bounded the same way; history, `why` and
backfill say when a time is before the window; `--retain` too short is refused in one line.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.application.loggaps import find_gaps
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.retention import Retention, RetentionTooShort, check_retain
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import SNAPSHOT_INTERVAL
from tests.http_helpers import manifest as manifest_document
from tests.instants import T0

RETAIN = timedelta(days=2)


def manifest(name: str, **spec: Any) -> Any:
    return parse_manifest(manifest_document(name, **{"successfulJobsHistoryLimit": 1, **spec}))


@pytest.fixture
def target(tmp_path: Path) -> LocalTarget:
    """tests/conftest.py's `engine` dispatches here: fires are created within their deadline."""
    return LocalTarget(tmp_path / "wf")


def hours(engine: Engine, cron_id: UUID, n: int, *, complete: bool = True) -> datetime:
    """n hourly ticks, each fired, dispatched and (with `complete`) completed."""
    svc, t = engine.service, T0
    for k in range(1, n + 1):
        t = T0 + timedelta(hours=k, seconds=1)
        svc.tick([cron_id], t)
        engine.projector.catch_up(t)  # dispatched at once: created within its deadline
        if complete:
            for run in list(svc.load(cron_id).active):
                svc.run_completed(cron_id, run, "Succeeded", t, t)
    engine.projector.catch_up(t)
    return t


def versions(engine: Engine, cron_id: UUID) -> list[int]:
    return [e.originator_version for e in engine.service.recorder.select_events(cron_id)]


def retain(engine: Engine, now: datetime) -> int:
    return Retention(engine, RETAIN).step(now, lambda: True)


@pytest.mark.stores("sqlite", "postgres")
def test_old_covered_events_go_and_the_state_stays(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("hourly"), T0)
    end = hours(engine, cron_id, 24 * 5)  # five days: ~360 events, snapshots every 100
    before = svc.load(cron_id).snapshot_state()
    top = versions(engine, cron_id)[-1]
    audit_before = len(engine.view.audit())

    removed = retain(engine, end)

    kept = versions(engine, cron_id)
    assert removed > 0 and kept[-1] == top, "the last event stays"
    assert kept == list(range(kept[0], top + 1)), "what stays is the tail, without holes"
    assert kept[0] > 1 and (kept[0] - 1) % SNAPSHOT_INTERVAL == 0 or kept[0] - 1 <= top
    svc.forget()
    assert svc.load(cron_id).snapshot_state() == before
    assert svc.load_many({cron_id: None})[cron_id].snapshot_state() == before
    # The audit is bounded the same way, and says from when.
    cutoff = end - RETAIN
    assert all(r.at >= cutoff for r in engine.view.audit()), "audit rows older than the window"
    assert len(engine.view.audit()) < audit_before
    assert engine.view.kept_from() == cutoff
    # Nothing older is left to remove, and the stream goes on: the next tick still fires.
    assert retain(engine, end) == 0
    svc.tick([cron_id], end + timedelta(hours=1))
    assert versions(engine, cron_id)[-1] > top


@pytest.mark.stores("sqlite", "postgres")
def test_what_retention_removed_is_no_hole_to_check_or_repair(engine: Engine) -> None:
    """`check` reported the removed versions as holes (1..300 missing) and `--repair`
    recorded them as lost from version 1: every read of the store failed after it. A hole
    above the snapshots is still one."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("hourly"), T0)
    end = hours(engine, cron_id, 24 * 5)
    assert retain(engine, end) > 0 and versions(engine, cron_id)[0] > 1
    assert find_gaps(engine) == []
    # A hole above what retention may remove (the second latest snapshot) is still one.
    top = versions(engine, cron_id)[-1]
    recorder: Any = svc.recorder
    key: Any = cron_id if engine.config.kind == "postgresql" else cron_id.hex
    mark = "%s" if engine.config.kind == "postgresql" else "?"
    with recorder.datastore.transaction(commit=True) as curs:
        curs.execute(
            f"DELETE FROM {recorder.events_table_name}"  # noqa: S608
            f" WHERE originator_id = {mark} AND originator_version = {mark}",
            (key, top - 1),
        )
    (gap,) = find_gaps(engine)
    assert (gap.stream, gap.missing) == (cron_id, range(top - 1, top))


@pytest.mark.stores("sqlite", "postgres")
def test_a_cronworkflow_whose_audit_retention_removed_still_exists_for_history(
    engine: Engine,
) -> None:
    """All of a quiet CronWorkflow's audit rows were older than the window: `history` said
    its namespace had no CronWorkflows, and the HTTP history 404, while `get` showed it."""
    svc = engine.service
    quiet, _ = svc.apply(manifest("quiet", namespace="team-q"), T0)
    busy, _ = svc.apply(manifest("busy"), T0)
    hours(engine, quiet, 3)
    svc.suspend(quiet, T0 + timedelta(hours=4), by="test")
    end = hours(engine, busy, 24 * 5)
    assert retain(engine, end) > 0
    view = engine.view
    assert not [r for r in view.audit() if r.namespace == "team-q"], "its audit is gone"
    assert view.has_namespace("team-q") and "team-q" in view.audit_namespaces()
    assert view.ever_existed("team-q", "quiet")
    assert not view.has_namespace("team-x") and not view.ever_existed("team-q", "loud")


@pytest.mark.stores("sqlite", "postgres")
def test_an_active_runs_fire_and_a_pending_backfill_are_kept_whatever_their_age(
    engine: Engine,
) -> None:
    svc = engine.service
    runs, _ = svc.apply(manifest("runs"), T0)
    queued, _ = svc.apply(manifest("queued", concurrencyPolicy="Forbid"), T0)
    hours(engine, runs, 3, complete=False)  # three runs that never end
    # Forbid, its 13:00 run never ends: a backfill of the ticks before it queues them behind
    # it, and the queue waits for as long as that run goes on.
    hours(engine, queued, 3, complete=False)
    plan = svc.run_backfill(
        queued, T0, T0 + timedelta(hours=2), T0 + timedelta(hours=3, minutes=1), overlap="Queue"
    )
    assert plan.queue, "the backfill must leave a queue"
    end = T0 + timedelta(days=5)
    for k in range(4, 24 * 5):  # history to remove (manual runs have no deadline)
        svc.trigger(runs, T0 + timedelta(hours=k, seconds=1), f"r{k}")
        svc.trigger(queued, T0 + timedelta(hours=k, seconds=2), f"q{k}")
    engine.projector.catch_up(end)
    lasting = {f"runs-{int((T0 + timedelta(hours=k)).timestamp())}" for k in (1, 2, 3)}
    assert lasting <= set(svc.load(runs).active)

    assert retain(engine, end) > 0

    fires = {r.workflow for r in engine.view.audit(name="runs", types=("ScheduleFired",))}
    assert lasting <= fires, "the audit lost the fire of a run still active"
    assert engine.view.audit(name="queued", types=("BackfillQueued",)), (
        "the BackfillQueued of a queue not drained was removed"
    )
    assert svc.load(queued).backfill_queue == list(plan.queue)
    assert len(engine.view.audit(name="runs")) < 3 * 24 * 5, "nothing of the rest was removed"
    # `why` about a queued tick says Pending (queued by a backfill), not Removed.
    why = Operations(engine).why("default", "queued", plan.queue[0])
    assert why["outcome"] == "Pending" and "queued by a backfill" in why["explanation"], why


@pytest.mark.stores("sqlite", "postgres")
def test_a_deadline_applied_after_start_widens_the_window_it_needs(engine: Engine) -> None:
    """Start-up refuses a `--retain` shorter than the longest startingDeadlineSeconds, but a
    CronWorkflow applied while `run --retain` runs may set a longer one: its window is kept
    (and the window's start says so), not removed under it."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("hourly"), T0)
    end = hours(engine, cron_id, 24 * 5)
    svc.apply(manifest("patient", startingDeadlineSeconds=3 * 86400), end)
    engine.projector.catch_up(end)
    assert engine.view.longest_deadline() == 3 * 86400

    assert retain(engine, end) > 0
    assert engine.view.kept_from() == end - timedelta(days=3)
    assert all(r.at >= end - timedelta(days=3) for r in engine.view.audit())
    assert min(r.at for r in engine.view.audit()) < end - RETAIN, "the deadline's window went"


@pytest.mark.parametrize(
    ("retain_for", "deadline", "words"),
    [
        (timedelta(hours=20), timedelta(0), "shorter than a day"),
        (timedelta(days=2), timedelta(days=3), "longest startingDeadlineSeconds"),
    ],
)
def test_a_retention_too_short_is_refused(
    retain_for: timedelta, deadline: timedelta, words: str
) -> None:
    with pytest.raises(RetentionTooShort, match=words):
        check_retain(retain_for, deadline)


@pytest.mark.stores("sqlite", "postgres")
def test_after_retention_a_latest_snapshot_that_cannot_be_read_falls_back_to_the_one_before(
    engine: Engine,
) -> None:
    """The events before the latest snapshot are gone, so a replay from the start cannot be
    the fallback any more: retention keeps the two latest snapshots and the events after the
    older one, and a load whose latest snapshot is unreadable starts from the one before."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("fallback"), T0)
    end = hours(engine, cron_id, 24 * 5)
    before = svc.load(cron_id).snapshot_state()
    assert retain(engine, end) > 0
    assert svc.snapshots is not None
    recorder: Any = svc.snapshots.recorder
    snaps = [s.originator_version for s in recorder.select_events(cron_id)]
    assert len(snaps) == 2, snaps
    key: Any = cron_id.hex if engine.config.kind == "sqlite" else cron_id
    mark = "?" if engine.config.kind == "sqlite" else "%s"
    with recorder.datastore.transaction(commit=True) as c:
        c.execute(
            f"UPDATE {recorder.events_table_name} SET state = {mark}"  # noqa: S608
            f" WHERE originator_id = {mark} AND originator_version = {mark}",
            (b"{broken", key, snaps[-1]),
        )
    svc.forget()
    assert svc.load(cron_id).snapshot_state() == before
    assert svc.load_many({cron_id: None})[cron_id].snapshot_state() == before


@pytest.mark.stores("sqlite", "postgres")
def test_a_deleted_or_idle_stream_keeps_only_its_last_event_and_passes_warn_of_nothing(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A deleted stream's latest snapshot is of its last version, and so was every snapshot
    retention took to cover it: refused as a duplicate, it kept its whole history for ever
    (a fleet that churns grew without bound), and the refusal cost the other streams of the
    batch their snapshots. It keeps its last event now, loads as it was (also from the
    snapshot before, when the latest cannot be read), and its name is created again."""
    svc = engine.service
    gone, _ = svc.apply(manifest("gone"), T0)
    idle, _ = svc.apply(manifest("idle"), T0)
    live, _ = svc.apply(manifest("live"), T0)
    t = T0
    for k in range(1, 24 * 5):
        t = T0 + timedelta(hours=k, seconds=1)
        svc.tick([live] + ([gone, idle] if k < 30 else []), t)
        engine.projector.catch_up(t)
        for cron_id in (live, gone, idle):
            for run in list(svc.load(cron_id).active):
                svc.run_completed(cron_id, run, "Succeeded", t, t)
        if k == 30:
            svc.delete(gone, t)
            svc.suspend(idle, t)
    engine.projector.catch_up(t)
    states = {c: svc.load(c).snapshot_state() for c in (gone, idle, live)}
    last = {c: versions(engine, c)[-1] for c in (gone, idle)}
    live_events = len(versions(engine, live))
    caplog.set_level(logging.WARNING, logger="cronsource")
    assert retain(engine, t) > 0
    assert versions(engine, gone) == [last[gone]]
    assert len(versions(engine, live)) < live_events / 2  # not held back by the others
    # The idle one's snapshot as it is now was taken by this pass; the next (a day later,
    # from the start of the log again) takes the one before it, and none refuses anything.
    assert retain(engine, t + timedelta(days=1)) > 0
    assert versions(engine, idle) == [last[idle]]
    retain(engine, t + timedelta(days=2))  # the live one's events, older now
    assert [versions(engine, c) for c in (gone, idle)] == [[last[gone]], [last[idle]]]
    assert [r.getMessage() for r in caplog.records] == []
    svc.forget()
    assert {c: svc.load(c).snapshot_state() for c in states} == states
    assert svc.snapshots is not None
    recorder: Any = svc.snapshots.recorder
    snaps = [s.originator_version for s in recorder.select_events(gone)]
    assert snaps == [last[gone] - 1, last[gone]]
    again, _ = svc.apply(manifest("gone"), t + timedelta(days=2))
    assert again != gone and svc.load(again).incarnation == 1


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("90d", timedelta(days=90)),
        ("2160h", timedelta(days=90)),
        ("1d12h", timedelta(hours=36)),  # refused while `36h` was taken
        ("1d1h30m", timedelta(hours=25, minutes=30)),
    ],
)
def test_a_retention_is_days_a_go_duration_or_both(text: str, kept: timedelta) -> None:
    from cronsource.adapters.entrypoints.cli.store import parse_retain

    assert parse_retain(text) == kept


@pytest.mark.parametrize("text", ["1dx", "1d-1h", "d", "9999999999d"])
def test_a_retention_that_is_none_is_refused_naming_it_whole(text: str) -> None:
    from cronsource.adapters.entrypoints.cli.store import parse_retain

    with pytest.raises(ValueError, match=f"duration '{text}'"):
        parse_retain(text)
