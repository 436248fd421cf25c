"""A log that lost its tail is never written over (issue 27, item 1).

After a failover to an asynchronous standby, or a restore, the log ends earlier than the copies
writers hold. A save must then be refused like a stale one (the stream's last version in the
log is not the one the copy followed), the writer must drop its copy and decide again on what
the log holds, and no stream may ever get a gap. Each test runs on every store kind that can
lose a tail: the memory store at the recorder level, SQLite and a real PostgreSQL throughout.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.infrastructure.store.recorders import StaleAppend
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.scheduler import Scheduler
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.service import event_type
from tests.instants import T0


def minute(k: int, seconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=k, seconds=seconds)


def manifest(name: str, schedule: str = "* * * * *") -> CronWorkflowManifest:
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "schedules": [schedule],
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
    )


def versions(engine: Engine, cron_id: UUID) -> list[int]:
    return [e.originator_version for e in engine.service.recorder.select_events(cron_id)]


def cut_tail(engine: Engine, cron_id: UUID, n: int) -> None:
    """Delete the last `n` events of a stream behind every writer's back."""
    top = versions(engine, cron_id)[-1]
    key: Any = cron_id.hex if engine.config.kind == "sqlite" else cron_id
    mark = "?" if engine.config.kind == "sqlite" else "%s"
    recorder: Any = engine.service.recorder
    with recorder.datastore.transaction(commit=True) as curs:
        curs.execute(
            f"DELETE FROM {recorder.events_table_name} WHERE originator_id = {mark}"  # noqa: S608
            f" AND originator_version > {mark}",
            (key, top - n),
        )


def fired(engine: Engine, cron_id: UUID) -> list[datetime]:
    return [
        e.scheduled_time  # type: ignore[attr-defined]
        for e in engine.service.events.get(cron_id)
        if event_type(e) == "ScheduleFired"
    ]


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_an_append_must_follow_the_last_version_in_the_log(engine: Engine) -> None:
    """Version N+1 commits only when the stream's last version is N: a save ahead of the log
    is refused (naming the stream and both versions), a duplicate too, the next one is not."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("a"), T0)
    svc.tick([cron_id], minute(1, 1))
    assert versions(engine, cron_id) == [1, 2]
    stored = svc.recorder.select_events(cron_id)[-1]

    def at(version: int) -> StoredEvent:
        return StoredEvent(stored.originator_id, version, stored.topic, stored.state)

    with pytest.raises(StaleAppend) as ahead:
        svc.recorder.insert_events([at(4)])
    assert ahead.value.stale == {cron_id: (4, 2)}
    assert "the log ends at version 2, the save starts at 4" in str(ahead.value)
    with pytest.raises(IntegrityError):
        svc.recorder.insert_events([at(2)])
    assert versions(engine, cron_id) == [1, 2]
    svc.recorder.insert_events([at(3)])
    assert versions(engine, cron_id) == [1, 2, 3]


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_batch_with_one_stream_ahead_of_the_log_writes_nothing(engine: Engine) -> None:
    svc = engine.service
    a, _ = svc.apply(manifest("a"), T0)
    b, _ = svc.apply(manifest("b"), T0)
    ea, eb = svc.recorder.select_events(a)[-1], svc.recorder.select_events(b)[-1]
    good = StoredEvent(ea.originator_id, 2, ea.topic, ea.state)
    ahead = StoredEvent(eb.originator_id, 3, eb.topic, eb.state)
    with pytest.raises(StaleAppend) as refused:
        svc.recorder.insert_events([good, ahead])
    assert refused.value.streams == {b}
    assert versions(engine, a) == [1] and versions(engine, b) == [1]


@pytest.mark.stores("sqlite", "postgres")  # a tail cut with SQL, as a failover or a restore would
def test_a_command_after_a_lost_tail_decides_on_what_the_log_holds(engine: Engine) -> None:
    """The repository's cached copy is ahead of the log: the save is refused, the copy
    dropped, and the command runs again on the log's state; the stream stays gapless."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("a"), T0)
    svc.tick([cron_id], minute(3, 1))  # three fires: versions 2..4 (folded skips aside)
    svc.trigger(cron_id, minute(3, 2), "r1")  # cached at the latest version
    top = versions(engine, cron_id)[-1]
    cut_tail(engine, cron_id, 2)
    name = svc.trigger(cron_id, minute(3, 3), "r2")
    assert name is not None
    assert versions(engine, cron_id) == list(range(1, top))  # top-2 kept, then the new one
    assert svc.load(cron_id).version == top - 1
    assert svc.rejected_writes >= 1


@pytest.mark.stores("sqlite", "postgres")  # a tail cut with SQL, as a failover or a restore would
def test_the_scheduler_after_a_lost_tail_fires_each_tick_once_without_gaps(
    engine: Engine,
) -> None:
    """The scheduler's own copies (its decision cache) are ahead of the log after the cut:
    the next batch is refused, decided again on the log's state, and every tick up to now
    has exactly one decision in the log, in a stream without gaps."""
    svc = engine.service
    ids = [svc.apply(manifest(f"c{i}"), T0)[0] for i in range(3)]
    engine.projector.catch_up(minute(0))
    scheduler = Scheduler(svc, engine.view, SoleOwner())
    for k in (1, 2, 3):
        assert scheduler.schedule_once(minute(k)) == 3
        engine.projector.catch_up(minute(k))
    assert len(scheduler.cache) == 3
    for cron_id in ids:
        cut_tail(engine, cron_id, 2)  # the fires of minutes 2 and 3 are lost
    assert scheduler.schedule_once(minute(4)) > 0
    for cron_id in ids:
        v = versions(engine, cron_id)
        assert v == list(range(1, len(v) + 1)), f"gap in {v}"
        ticks = fired(engine, cron_id)
        assert len(ticks) == len(set(ticks))
        assert ticks[0] == minute(1) and ticks[-1] == minute(4)
    assert svc.rejected_writes >= 1
