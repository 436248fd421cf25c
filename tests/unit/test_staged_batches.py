"""A batch of decisions is staged, appended, then settled (CronService.stage_batch,
append_batch and the `finish` it returns), so that a burst settles batch k while batch k+1 is
at the store (adapters/runtime/scheduler.py).

What must hold: the store has a batch as soon as `append_batch` returns, before the service
updates what it keeps about it; a command that saves in between is not undone by the late
settling; and a burst whose append fails stops there, with every batch before it settled.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime import scheduler as scheduler_module
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import BATCH_RETRIES, StagedBatch, event_type
from tests.http_helpers import manifest

H = datetime(2026, 5, 4, 11, 0, tzinfo=UTC)


def created(engine: Engine, *names: str) -> list[UUID]:
    ids = [
        engine.service.apply(parse_manifest(manifest(n)), H - timedelta(minutes=30))[0]
        for n in names
    ]
    engine.projector.catch_up(H - timedelta(minutes=30))
    return ids


def fires(engine: Engine, cron_id: UUID) -> list[Any]:
    return [e for e in engine.replica().events.get(cron_id) if event_type(e) == "ScheduleFired"]


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_the_store_has_a_batch_before_its_aftermath(engine: Engine) -> None:
    (cron_id,) = created(engine, "a")
    svc = engine.service
    before = svc.load(cron_id).version
    staged = svc.stage_batch(svc.decide_batch([cron_id], H))
    assert staged.fires == 1 and staged.deadline is not None
    report, finish = svc.append_batch(staged, H)
    assert report.fires == 1 and report.saved == 1
    # In the log already (another service reads it), not yet in what this one keeps.
    assert [e.scheduled_time for e in fires(engine, cron_id)] == [H]
    assert svc.saved_versions.get(cron_id, 0) < before + 1
    assert report.versions == {}
    finish()
    assert svc.saved_versions[cron_id] == before + 1
    assert report.versions == {cron_id: before + 1}
    assert report.next_due == {cron_id: H + timedelta(hours=1)}


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_command_saved_before_the_aftermath_is_not_undone(engine: Engine) -> None:
    """A run completion or a suspend saved between a batch's append and its settling: the
    saved version never goes back, and the next load is the command's state."""
    (cron_id,) = created(engine, "a")
    svc = engine.service
    staged = svc.stage_batch(svc.decide_batch([cron_id], H))
    _, finish = svc.append_batch(staged, H)
    svc.suspend(cron_id, H + timedelta(seconds=1), by="test")
    suspended = svc.saved_versions[cron_id]
    finish()
    assert svc.saved_versions[cron_id] == suspended
    agg = svc.load(cron_id)
    assert agg.suspended and agg.version == suspended


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_burst_stops_at_a_failed_append_with_the_batches_before_it_settled(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three batches of one: the second append fails (the store went away). The third is
    never sent, the first is settled (the scheduler knows what it saved), and the next turn
    decides the two left on fresh state: every tick fires once."""
    monkeypatch.setattr(scheduler_module, "BATCH", 1)
    ids = created(engine, "a", "b", "c")
    loop = SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=VirtualClock(H))
    svc = engine.service
    append = svc.append_batch
    sent: list[UUID] = []

    def failing_second(staged: StagedBatch, at: datetime, decided_by: str | None = None) -> Any:
        sent.extend(a.id for a in staged.aggs)
        if len(sent) == 2:
            raise ConnectionError("store went away")
        return append(staged, at, decided_by)

    monkeypatch.setattr(svc, "append_batch", failing_second)
    with pytest.raises(ConnectionError):
        loop.scheduler.schedule_once(H)
    assert len(sent) == 2  # the third batch was never sent
    first = sent[0]
    assert svc.saved_versions[first] == svc.load(first).version
    assert [len(fires(engine, i)) for i in ids].count(1) == 1
    monkeypatch.setattr(svc, "append_batch", append)
    loop.scheduler.forget()
    assert loop.scheduler.schedule_once(H) == 2
    assert [len(fires(engine, i)) for i in ids] == [1, 1, 1]


def count_inserts(svc: Any, before: Any = None) -> list[int]:
    """Each append `svc` sends to the store, as the number of events in it; `before` runs
    ahead of each (another writer saving first)."""
    sizes: list[int] = []
    insert = svc.recorder.insert_events

    def counted(stored: Any, **kwargs: Any) -> Any:
        sizes.append(len(stored))
        if before is not None:
            before(len(sizes))
        return insert(stored, **kwargs)

    svc.recorder.insert_events = counted
    return sizes


@pytest.mark.stores("sqlite", "postgres")
def test_a_refused_batch_is_decided_again_as_a_batch(engine: Engine) -> None:
    """Another writer saved one of a batch decided ahead (a run completion its run watcher
    recorded): the store refuses the batch, and it is decided again on fresh state and
    appended as one batch, not one transaction per CronWorkflow. Each fires once."""
    ids = created(engine, "a", "b", "c", "d")
    svc = engine.service
    staged = svc.stage_batch(svc.decide_batch(ids, H))
    engine.replica().suspend(ids[1], H - timedelta(seconds=1), by="other")
    sizes = count_inserts(svc)
    report, finish = svc.append_batch(staged, H)
    finish()
    assert len(sizes) == 2  # the refused append, then the batch again
    assert (report.rejected, report.fires) == (1, 3)
    assert [len(fires(engine, i)) for i in ids] == [1, 0, 1, 1]
    assert report.versions == {i: svc.load(i).version for i in ids}


@pytest.mark.stores("sqlite", "postgres")
def test_a_batch_refused_every_time_is_saved_one_by_one(engine: Engine) -> None:
    """Another writer wins before every batch append (constant contention): after
    BATCH_RETRIES refusals more, each CronWorkflow is saved on its own, and still each
    due tick is decided once."""
    ids = created(engine, "a", "b", "c")
    svc = engine.service
    other = engine.replica()
    staged = svc.stage_batch(svc.decide_batch(ids, H))
    batches = BATCH_RETRIES + 1

    def win_first(n: int) -> None:
        # Before each batch append another writer relabels `a` (a change that leaves its
        # tick due), so every batch holds a stale copy of it.
        if n <= batches:
            relabelled = parse_manifest(manifest("a", labels={"round": str(n)}))
            other.apply(relabelled, H - timedelta(seconds=1))

    sizes = count_inserts(svc, win_first)
    report, finish = svc.append_batch(staged, H)
    finish()
    assert report.rejected == batches
    assert len(sizes) == batches + 3  # then one save per CronWorkflow
    assert report.fires == 3
    assert [len(fires(engine, i)) for i in ids] == [1, 1, 1]
    assert svc.load(ids[0]).labels == {"round": str(batches)}


def test_the_dispatcher_is_woken_as_each_batch_is_in_the_store_before_its_aftermath(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three batches of one, committed on the committing thread: the dispatch thread's wake-up
    for a batch comes as soon as its append returns, not after the batch is settled (which in
    a burst of 500 held the first Workflow back by 30 ms)."""
    monkeypatch.setattr(scheduler_module, "BATCH", 1)
    created(engine, "a", "b", "c")
    loop = SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=VirtualClock(H))
    svc = engine.service
    append = svc.append_batch
    woken: list[str] = []
    settled_after: list[int] = []  # wake-ups seen when each batch was settled

    def append_then_settle(staged: StagedBatch, at: datetime, decided_by: str | None = None) -> Any:
        report, finish = append(staged, at, decided_by)

        def settle() -> None:
            settled_after.append(len(woken))
            finish()

        return report, settle

    monkeypatch.setattr(svc, "append_batch", append_then_settle)
    loop.scheduler.on_fired = lambda: woken.append(threading.current_thread().name)
    assert loop.scheduler.schedule_once(H) == 3
    assert len(woken) == 3
    assert all(name.startswith("commit") for name in woken)
    assert [n >= k for k, n in enumerate(settled_after, start=1)] == [True, True, True]
