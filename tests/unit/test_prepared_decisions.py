"""Decisions made in advance (SchedulerLoop.prepare_once): the scheduler decides the next due
instant's CronWorkflows a few seconds ahead and commits them when the instant comes.

What must hold: nothing is committed before its instant; a CronWorkflow changed in between
(suspended here) is decided again on fresh state, never fired from the stale decision; every
tick fires exactly once; and a decision whose instant passed too long ago is dropped and made
again at the time it is really made.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime import scheduler as scheduler_module
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.settings import PREPARED_MAX_DELAY
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.service import event_type
from tests.http_helpers import manifest as manifest_document

H = datetime(2026, 5, 4, 11, 0, tzinfo=UTC)
NAMES = ("a", "b", "c")


def manifest(name: str) -> CronWorkflowManifest:
    return parse_manifest(manifest_document(name))


def setup(engine: Engine) -> tuple[dict[str, UUID], SchedulerLoop, VirtualClock]:
    ids = {}
    for name in NAMES:
        ids[name], _ = engine.service.apply(manifest(name), H - timedelta(minutes=30))
    engine.projector.catch_up(H - timedelta(minutes=30))
    clock = VirtualClock(H - timedelta(seconds=2))
    return ids, SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=clock), clock


def fires(engine: Engine, cron_id: UUID) -> list[Any]:
    return [e for e in engine.service.events.get(cron_id) if event_type(e) == "ScheduleFired"]


@pytest.mark.stores("sqlite", "postgres")
def test_decided_ahead_committed_at_the_instant_and_never_before(engine: Engine) -> None:
    ids, loop, clock = setup(engine)
    assert loop.prepare_once(clock.now()) == len(NAMES)
    head = engine.service.recorder.max_notification_id()
    # A turn before the instant commits nothing.
    assert loop.schedule_once(H - timedelta(seconds=1)) == 0
    assert engine.service.recorder.max_notification_id() == head
    clock.set(H)
    assert loop.schedule_once(H) == len(NAMES)
    for cron_id in ids.values():
        (fired,) = fires(engine, cron_id)
        assert fired.scheduled_time == H and fired.fired_at == H
    # The next turn at the instant finds nothing left to decide.
    engine.projector.catch_up(H)
    assert loop.schedule_once(H) == 0
    assert all(len(fires(engine, cron_id)) == 1 for cron_id in ids.values())


@pytest.mark.stores("sqlite", "postgres")
def test_a_cronworkflow_changed_after_the_decision_is_decided_again(engine: Engine) -> None:
    """Suspended by another writer (a CLI process) between the decision made in advance and
    the instant: the store refuses the stale save, the batch is decided again, the suspended
    one does not fire."""
    ids, loop, clock = setup(engine)
    loop.prepare_once(clock.now())
    engine.replica().suspend(ids["b"], H - timedelta(seconds=1), by="test")
    engine.projector.catch_up(H - timedelta(seconds=1))
    rejected = engine.rejected_writes
    assert loop.schedule_once(H) == 2
    assert engine.rejected_writes > rejected
    assert fires(engine, ids["b"]) == []
    assert [len(fires(engine, ids[n])) for n in ("a", "c")] == [1, 1]


@pytest.mark.stores("sqlite", "postgres")
def test_another_writers_change_the_due_index_shows_is_decided_again_unrefused(
    engine: Engine,
) -> None:
    """Relabelled by another writer (as another replica's run watcher records a completion)
    after the decision made in advance, and the due index has seen it: that one is decided
    again on fresh state at the instant, and the store refuses nothing."""
    ids, loop, clock = setup(engine)
    loop.prepare_once(clock.now())
    relabelled = parse_manifest(manifest_document("b", labels={"team": "x"}))
    engine.replica().apply(relabelled, H - timedelta(seconds=1))
    engine.projector.catch_up(H - timedelta(seconds=1))
    rejected = engine.rejected_writes
    assert loop.schedule_once(H) == 3
    assert engine.rejected_writes == rejected
    assert [len(fires(engine, ids[n])) for n in NAMES] == [1, 1, 1]
    assert engine.service.load(ids["b"]).labels == {"team": "x"}


@pytest.mark.stores("sqlite", "postgres")
def test_our_own_write_after_the_decision_is_seen_without_a_refused_save(
    engine: Engine,
) -> None:
    """Changed by this process itself (its run watcher, a command it served) after the
    decision made in advance: the scheduler knows its own write, decides that one again on
    fresh state, and the store refuses nothing (one replica rejects no write)."""
    ids, loop, clock = setup(engine)
    loop.prepare_once(clock.now())
    engine.service.suspend(ids["b"], H - timedelta(seconds=1), by="test")
    engine.projector.catch_up(H - timedelta(seconds=1))
    rejected = engine.rejected_writes
    assert loop.schedule_once(H) == 2
    assert engine.rejected_writes == rejected
    assert fires(engine, ids["b"]) == []
    assert [len(fires(engine, ids[n])) for n in ("a", "c")] == [1, 1]


@pytest.mark.stores("sqlite", "postgres")
def test_a_decision_whose_instant_is_long_past_is_made_again(engine: Engine) -> None:
    """Committed later than PREPARED_MAX_DELAY after its instant, a decision made in advance
    would claim a decision time it was not made at: it is dropped and made again."""
    ids, loop, _ = setup(engine)
    loop.prepare_once(H - timedelta(seconds=2))
    late = H + PREPARED_MAX_DELAY + timedelta(seconds=4)
    assert loop.schedule_once(late) == len(NAMES)
    for cron_id in ids.values():
        (fired,) = fires(engine, cron_id)
        assert fired.scheduled_time == H and fired.fired_at == late


@pytest.mark.stores("sqlite", "postgres")
def test_the_due_index_behind_our_own_save_is_not_trusted_until_our_next_due(
    engine: Engine,
) -> None:
    """Due filtering: right after a commit, before the projection moves the due index, the
    index still lists what this replica just decided; the scheduler leaves those out (they
    are decided) until the due time it saved has come, then lists them again even though
    the index is still behind (a stalled projection must not stop the schedule)."""
    ids, loop, _ = setup(engine)
    assert loop.schedule_once(H) == len(NAMES)  # committed, not projected
    scheduling = loop.scheduler
    assert set(dict(engine.view.due_versions(H))) == {str(i) for i in ids.values()}
    assert scheduling.due(H) == {}
    later = H + timedelta(hours=1)
    assert set(scheduling.due(later)) == set(ids.values())


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_burst_decided_in_advance_commits_first_and_looks_up_the_rest_after(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More than one batch decided in advance: the commits start at once, each prepared
    batch is checked as it comes (one changed since is decided again on fresh state), and
    what is due but was not prepared (created after the decision) is looked up after them.
    Every tick fires once; the suspended one not at all."""
    monkeypatch.setattr(scheduler_module, "BATCH", 2)  # a, b | c: two prepared batches
    ids, loop, clock = setup(engine)
    assert loop.prepare_once(clock.now()) == len(NAMES)
    late_id, _ = engine.service.apply(manifest("d"), H - timedelta(seconds=1))
    engine.service.suspend(ids["c"], H - timedelta(seconds=1), by="test")
    engine.projector.catch_up(H - timedelta(seconds=1))
    rejected = engine.rejected_writes
    clock.set(H)
    assert loop.schedule_once(H) == 3
    assert engine.rejected_writes == rejected
    assert [len(fires(engine, ids[n])) for n in ("a", "b", "c")] == [1, 1, 0]
    assert [e.scheduled_time for e in fires(engine, late_id)] == [H]


STATE = (
    "decided_until",
    "suspended",
    "active",
    "last_scheduled_time",
    "finished",
    "spec",
    "modified_on",
)


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_what_is_prepared_ahead_is_stored_as_a_save_would_store_it(engine: Engine) -> None:
    """Decided in advance, the events' stored form and the cache's copy are made before the
    instant (CronService.encode_ahead): the log then holds the very bytes an ordinary save
    writes, and the next command starts from a copy equal to one rebuilt from the log."""
    ids, loop, clock = setup(engine)
    loop.prepare_once(clock.now())
    assert loop.scheduler._prepared is not None
    encode = engine.service.mapper.to_stored_event
    expected = {
        a.id: [(encode(e).topic, encode(e).state) for e in a.pending_events]
        for batch in loop.scheduler._prepared[1]
        for a in batch
    }
    assert set(expected) == set(ids.values())
    clock.set(H)
    assert loop.schedule_once(H) == len(NAMES)
    for cron_id in ids.values():
        stored = engine.service.recorder.select_events(cron_id)
        assert [(s.topic, s.state) for s in stored[-len(expected[cron_id]) :]] == expected[cron_id]
        cached, rebuilt = engine.service.load(cron_id), engine.replica().load(cron_id)
        assert cached.version == rebuilt.version and cached.pending_events == []
        for key in STATE:
            assert getattr(cached, key) == getattr(rebuilt, key), key
        assert cached.next_due() == rebuilt.next_due() == H + timedelta(hours=1)


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_save_of_other_events_at_the_same_version_ignores_what_was_prepared(
    engine: Engine,
) -> None:
    """What was prepared for one decision is never stored for another: decided again on a
    fresh load (same version, another decision time), the save encodes its own events and
    caches its own copy."""
    ids, _, _ = setup(engine)
    svc = engine.service
    cron_id = ids["a"]
    (ahead,) = svc.decide_batch([cron_id], H)
    svc.encode_ahead([ahead])
    late = H + timedelta(seconds=20)  # within the late tolerance: fired, later
    (again,) = svc.decide_batch([cron_id], late)
    assert again is not ahead and again.version == ahead.version
    assert svc.commit_batch([again], late).fires == 1
    assert [e.fired_at for e in fires(engine, cron_id)] == [late]
    cached, rebuilt = svc.load(cron_id), engine.replica().load(cron_id)
    assert cached.version == rebuilt.version == again.version
    assert cached.modified_on == late  # the decision saved, not the one prepared
    for key in STATE:
        assert getattr(cached, key) == getattr(rebuilt, key), key


@pytest.mark.stores("memory", "sqlite")
def test_what_was_prepared_for_an_earlier_instant_is_not_kept(engine: Engine) -> None:
    """Each preparation replaces the one before (bounded by one instant's decisions, never
    by the fleet's history); a decision prepared earlier still saves its own events."""
    ids, _, _ = setup(engine)
    svc = engine.service
    (a,) = svc.decide_batch([ids["a"]], H)
    svc.encode_ahead([a])
    (b,) = svc.decide_batch([ids["b"]], H)
    svc.encode_ahead([b])
    assert set(svc._ahead) == {ids["b"]}
    assert svc.commit_batch([a], H).fires == 1
    assert [e.fired_at for e in fires(engine, ids["a"])] == [H]
    assert svc.commit_batch([b], H).fires == 1
    assert svc._ahead == {}


@pytest.mark.stores("sqlite", "postgres")
def test_the_warm_up_leaves_alone_what_a_decision_made_in_advance_holds(
    engine: Engine,
) -> None:
    """The copies a decision made in advance was made on are out of the cache until the
    commit puts the saved ones back; the warm-up does not load them again (for 5,000 that
    was half a second on the loop's thread, into the instant). One changed by another writer
    since (its spec edited: still due), which the due index shows at a newer version, is
    loaded, and decided again at the instant."""
    ids, loop, clock = setup(engine)
    loop.warm_once(clock.now())  # every copy in memory
    assert loop.prepare_once(clock.now()) == len(NAMES)
    assert loop.warm_once(clock.now()) == 0
    edited = parse_manifest(manifest_document("b", suspend=False, startingDeadlineSeconds=60))
    engine.replica().apply(edited, H - timedelta(seconds=1))
    engine.projector.catch_up(H - timedelta(seconds=1))
    assert loop.warm_once(clock.now()) == 1
    clock.set(H)
    assert loop.schedule_once(H) == len(NAMES)
    assert [len(fires(engine, ids[n])) for n in NAMES] == [1, 1, 1]
