"""One behaviour, three stores: `memory:`, SQLite and a real PostgreSQL database.

Every test here runs against each store URL the product accepts, through the one composition
root (`bootstrap`, tests/conftest.py's `engine`), so a difference between stores shows up as
one failing id: `memory:` and SQLite here, PostgreSQL in
tests/integration/test_store_conformance.py.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import IntegrityError
from psycopg.conninfo import conninfo_to_dict

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.infrastructure.readside import views
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.infrastructure.store.config import CONNINFO, StoreConfig, StoreURLError
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.scheduler import Scheduler
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.service import CronService, event_type
from tests.instants import T0


def minute(k: int, seconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=k, seconds=seconds)


def manifest(
    name: str, schedule: str = "* * * * *", namespace: str = "default", **spec: Any
) -> CronWorkflowManifest:
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "schedules": [schedule],
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
                **spec,
            },
        }
    )


def topics(svc: CronService) -> list[str]:
    return [n.topic for n in svc.recorder.select_notifications(start=1, limit=100)]


def fired(svc: CronService, cron_id: UUID) -> list[datetime]:
    return [
        e.scheduled_time  # type: ignore[attr-defined]
        for e in svc.events.get(cron_id)
        if event_type(e) == "ScheduleFired"
    ]


# ---------------------------------------------------------------------------- URLs


def test_store_urls_parse_to_their_kind(tmp_path: Path) -> None:
    assert StoreConfig.parse("memory:").kind == "memory"
    cfg = StoreConfig.parse(f"sqlite:///{tmp_path}/x.db")
    assert cfg.kind == "sqlite"
    assert os.path.samefile(os.path.dirname(cfg.sqlite_path), tmp_path)
    assert os.path.basename(cfg.sqlite_path) == "x.db"
    assert StoreConfig.parse("sqlite:///rel/x.db").sqlite_path == "rel/x.db"
    cfg = StoreConfig.parse("postgres://u:p%40ss@db:5433/cron?schema=s1")
    assert (cfg.kind, cfg.pg_schema) == ("postgresql", "s1")
    env = cfg.env()
    assert env["POSTGRES_SCHEMA"] == "s1"
    # The event store connects with the URL's whole conninfo (store/recorders/postgres.py,
    # ConninfoFactory).
    assert conninfo_to_dict(env[CONNINFO]) == {
        "host": "db",
        "port": "5433",
        "dbname": "cron",
        "user": "u",
        "password": "p@ss",
    }


@pytest.mark.parametrize(
    "url",
    [
        "mysql://u@db/cron",
        "bogus",
        "sqlite://",
        "sqlite:///",
        "postgresql://u@db",
        "postgresql://u@db/",
        "memory:x",
    ],
)
def test_invalid_store_urls_raise_with_the_url(url: str) -> None:
    with pytest.raises(StoreURLError) as err:
        StoreConfig.parse(url)
    assert url in str(err.value)
    with pytest.raises(StoreURLError, match="not a valid store URL") as err:
        bootstrap(url)
    assert url in str(err.value)


# ---------------------------------------------------------------------------- commands


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_apply_creates_then_updates_and_is_idempotent(engine: Engine) -> None:
    svc = engine.service
    cron_id, what = svc.apply(manifest("nightly", "30 2 * * *"), T0)
    assert what == "created"
    assert svc.apply(manifest("nightly", "30 2 * * *"), minute(1)) == (cron_id, "unchanged")
    assert svc.apply(manifest("nightly", "45 3 * * *"), minute(2)) == (cron_id, "updated")
    agg = svc.find("default", "nightly")
    assert agg.id == cron_id and agg.spec["schedules"] == ["45 3 * * *"]
    assert agg.version == 2
    other, what = svc.apply(manifest("nightly", "30 2 * * *", namespace="other"), T0)
    assert what == "created" and other != cron_id


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_tick_fires_each_due_tick_once(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("every-minute"), T0)
    assert svc.tick([cron_id], minute(0, 30)).fires == 0  # nothing due yet (strictly after T0)
    report = svc.tick([cron_id], minute(1, 2))
    assert (report.saved, report.fires, report.rejected) == (1, 1, 0)
    assert report.next_due == {cron_id: minute(2)}
    again = svc.tick([cron_id], minute(1, 2))
    assert (again.fires, again.saved) == (0, 0)
    assert svc.tick([cron_id], minute(2, 1)).fires == 1
    assert fired(svc, cron_id) == [minute(1), minute(2)]
    agg = svc.load(cron_id)
    assert agg.last_scheduled_time == minute(2)
    assert list(agg.active) == [f"every-minute-{int(minute(k).timestamp())}" for k in (1, 2)]


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_stale_save_is_rejected_by_the_store(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("stale"), T0)
    first, second = svc.load(cron_id), svc.load(cron_id)
    assert first is not second and first.version == second.version == 1
    first.trigger(minute(0, 10), "request-1")
    second.trigger(minute(0, 10), "request-2")
    svc.save(first)
    with pytest.raises(IntegrityError):
        svc.save(second)
    assert svc.load(cron_id).version == 2
    assert topics(svc) == ["cronsource:CronWorkflowCreated/v1", "cronsource:ScheduleFired/v1"]


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_stale_commit_is_a_rejected_write_and_its_retry_records_nothing(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("seed"), T0)
    stale = svc.decide_batch([cron_id], minute(1, 1))  # decided, not saved
    assert svc.tick([cron_id], minute(1, 1)).fires == 1  # someone else saves first
    report = svc.commit_batch(stale, minute(1, 1))
    assert (report.fires, report.rejected) == (0, 1)
    assert svc.rejected_writes == 1
    assert fired(svc, cron_id) == [minute(1)]
    assert len(topics(svc)) == 2


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_command_retries_on_fresh_state_after_losing_the_race(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("manual"), T0)
    calls: list[int] = []

    def do(agg: Any) -> Any:
        calls.append(agg.version)
        if len(calls) == 1:  # another writer saves between our load and our save
            rival = svc.load(cron_id)
            rival.trigger(minute(0, 5), "rival")
            svc.save(rival)
        return agg.trigger(minute(0, 6), "mine")

    name = svc.command(cron_id, do)
    assert name is not None and name.startswith("manual-m")
    assert calls == [1, 2]  # the retry ran on the state that includes the rival's event
    assert svc.rejected_writes == 1
    runs = [e.workflow_name for e in svc.events.get(cron_id) if event_type(e) == "ScheduleFired"]  # type: ignore[attr-defined]
    assert len(runs) == 2 and len(set(runs)) == 2
    # The same request again is a no-op, not a second run.
    assert svc.trigger(cron_id, minute(0, 7), "mine") is None


# ---------------------------------------------------------------------------- the log


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_events_read_back_in_order_with_explicit_topics(engine: Engine) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("log"), T0)
    svc.tick([cron_id], minute(1, 1))
    svc.suspend(cron_id, minute(1, 30), by="alice", note="maintenance")
    svc.resume(cron_id, minute(3, 10), by="alice")  # 10:02 and 10:03 were suspended
    svc.tick([cron_id], minute(3, 10))  # the scheduler decides them (the resume does not)
    svc.delete(cron_id, minute(4))

    notes = svc.recorder.select_notifications(start=1, limit=100)
    assert [n.topic for n in notes] == [
        "cronsource:CronWorkflowCreated/v1",
        "cronsource:ScheduleFired/v1",
        "cronsource:Suspended/v1",
        "cronsource:Resumed/v1",
        "cronsource:ScheduleSkipped/v1",
        "cronsource:CronWorkflowDeleted/v1",
    ]
    assert [n.id for n in notes] == sorted(n.id for n in notes)
    assert len({n.id for n in notes}) == len(notes)
    assert {n.originator_id for n in notes} == {cron_id}
    assert [n.originator_version for n in notes] == list(range(1, 7))

    events = list(svc.events.get(cron_id))
    assert [e.originator_version for e in events] == list(range(1, 7))
    fire, skip = events[1], events[4]
    assert fire.scheduled_time == minute(1)  # type: ignore[attr-defined]
    assert fire.scheduled_time.tzinfo is not None  # type: ignore[attr-defined]
    assert fire.workflow_name == f"log-{int(minute(1).timestamp())}"  # type: ignore[attr-defined]
    assert fire.trigger == "schedule"  # type: ignore[attr-defined]
    assert (skip.scheduled_time, skip.last_scheduled_time, skip.count, skip.reason) == (  # type: ignore[attr-defined]
        minute(2),
        minute(3),
        2,
        "Suspended",
    )
    # A fresh service on the same store reads the same history (not for `memory:`, whose
    # events live in the first service's process memory only).
    if engine.config.kind != "memory":
        other = CronService(env=engine.config.env(create_table=False))
        try:
            assert [type(e) for e in other.events.get(cron_id)] == [type(e) for e in events]
            assert other.load(cron_id).deleted
        finally:
            other.close()


# ---------------------------------------------------------------------------- read model


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_read_model_statuses_and_audit(engine: Engine) -> None:
    svc = engine.service
    a, _ = svc.apply(manifest("alpha"), T0)
    b, _ = svc.apply(manifest("beta", "0 * * * *", namespace="team"), T0)
    svc.tick([a, b], minute(1, 1))
    svc.suspend(b, minute(1, 30), by="bob")
    svc.run_completed(
        a, f"alpha-{int(minute(1).timestamp())}", "Failed", minute(1, 40), minute(1, 40)
    )

    assert engine.projector.catch_up() == 5
    statuses = engine.view.statuses()
    assert [(s.namespace, s.name) for s in statuses] == [
        ("default", "alpha"),
        ("team", "beta"),
    ]
    alpha, beta = statuses
    assert alpha.cron_id == str(a)
    assert alpha.status == {
        "active": [],
        "lastScheduledTime": "2026-05-04T10:01:00Z",
        "conditions": [],
        "succeeded": 0,
        "failed": 1,
        "phase": "Active",
    }
    assert alpha.next_due == minute(2)
    assert alpha.version == 3
    assert beta.spec["suspend"] is True
    assert beta.status["lastScheduledTime"] is None
    assert engine.view.statuses("team") == [beta]

    audit = engine.view.audit()
    assert [(r.name, r.type, r.version) for r in audit] == [
        ("alpha", "CronWorkflowCreated", 1),
        ("beta", "CronWorkflowCreated", 1),
        ("alpha", "ScheduleFired", 2),
        ("beta", "Suspended", 2),
        ("alpha", "RunCompleted", 3),
    ]
    fire = audit[2]
    assert fire.scheduled_time == minute(1) and fire.at == minute(1, 1)
    assert fire.workflow == f"alpha-{int(minute(1).timestamp())}"
    assert fire.as_event()["trigger"] == "schedule"
    assert [r.type for r in engine.view.audit(name="alpha", types=["ScheduleFired"])] == [
        "ScheduleFired"
    ]
    # Catching up again writes nothing twice.
    assert engine.projector.catch_up() == 0
    assert len(engine.view.audit()) == 5


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_due_returns_ids_due_by_then_soonest_first(engine: Engine) -> None:
    svc = engine.service
    a, _ = svc.apply(manifest("minutely"), T0)
    b, _ = svc.apply(manifest("hourly", "0 * * * *"), T0)
    c, _ = svc.apply(manifest("paused", suspend=True), T0)
    engine.projector.catch_up()
    assert engine.view.due(minute(0, 59)) == []
    assert engine.view.due(minute(1)) == [str(a)]
    assert engine.view.due(minute(60)) == [str(a), str(b)]
    assert engine.view.next_due() == minute(1)
    assert str(c) not in engine.view.due(minute(10_000))

    svc.tick([a], minute(1, 1))
    engine.projector.catch_up()
    assert engine.view.due(minute(1, 30)) == []
    assert engine.view.due(minute(2)) == [str(a)]
    svc.resume(c, minute(2, 30))
    engine.projector.catch_up()
    # The resumed one is due at once: the ticks of its suspension (10:01, 10:02) are still
    # undecided, and the scheduler decides them by the resume rule.
    assert engine.view.due(minute(3)) == [str(c), str(a)]


# ---------------------------------------------------------------------------- replicas


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_replica_shares_the_store(engine: Engine) -> None:
    """`Engine.replica()` is another writer on the same store (`memory:` included, where it
    shares the first service's recorder): the version check arbitrates between them."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("shared"), T0)
    replica = engine.replica()
    at = minute(1, 1)
    mine, theirs = svc.decide_batch([cron_id], at), replica.decide_batch([cron_id], at)
    assert len(theirs) == 1, "the replica does not see the CronWorkflow"
    assert svc.commit_batch(mine, at).fires == 1
    assert replica.commit_batch(theirs, at).rejected == 1
    assert engine.rejected_writes == 1
    assert fired(svc, cron_id) == [minute(1)]
    assert topics(replica) == topics(svc)


# ---------------------------------------------------------------------------- batch paths


#: What an aggregate that was used keeps besides its state (derived from it, memoised).
MEMOS = {"_spec_model", "_compiled", "_policy", "_due_at_version"}


def state_keys(agg: Any) -> set[str]:
    return set(agg.__dict__) - MEMOS


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_load_many_equals_loading_one_by_one(engine: Engine) -> None:
    """The one-query batch load (adapters/infrastructure/store/recorders/) rebuilds exactly
    what the repository rebuilds, at the latest version and at a given one, and leaves out
    unknown ids."""
    svc = engine.service
    a, _ = svc.apply(manifest("a"), minute(0))
    b, _ = svc.apply(manifest("b", "*/2 * * * *"), minute(0))
    svc.tick([a, b], minute(5))
    svc.suspend(a, minute(6))
    missing = UUID(int=7)
    many = svc.load_many({a: None, b: None, missing: None})
    assert set(many) == {a, b}
    for cron_id in (a, b):
        one = svc.load(cron_id)
        assert many[cron_id].version == one.version
        # Less the memos an aggregate that was used keeps (its parsed spec, compiled
        # schedule and tick policy, derived from its state): `load` now starts from the
        # copy the last save left, which the scheduler had used.
        assert state_keys(many[cron_id]) == state_keys(one)
        for key in ("decided_until", "suspended", "active", "last_scheduled_time", "spec"):
            assert getattr(many[cron_id], key) == getattr(one, key), key
    at_two = svc.load_many({a: 2})[a]
    assert (
        at_two.version == 2
        and at_two.decided_until == svc.repository.get(a, version=2).decided_until
    )


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_failed_commit_leaves_no_decided_copy_behind(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler decides on copies it keeps in memory (its DecisionCache); when the
    commit fails for a reason other than a stale version (the store went away mid-insert),
    the next decision must not build on the unsaved copy: it loads afresh and fires the lost
    tick once."""
    svc = engine.service
    a, _ = svc.apply(manifest("a"), minute(0))
    engine.projector.catch_up()
    scheduler = Scheduler(svc, engine.view, SoleOwner())
    assert scheduler.schedule_once(minute(1)) == 1
    engine.projector.catch_up()
    assert len(scheduler.cache) == 1  # the saved copy is kept for the next decision

    def store_down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("store unreachable")

    monkeypatch.setattr(svc.recorder, "insert_events", store_down)
    with pytest.raises(ConnectionError):
        scheduler.schedule_once(minute(2))
    monkeypatch.undo()
    assert len(scheduler.cache) == 0
    assert scheduler.schedule_once(minute(2)) == 1
    assert fired(svc, a) == [minute(1), minute(2)]


@pytest.mark.stores("sqlite", "postgres")
def test_active_runs_come_from_an_upgraded_table_too(store_url: str) -> None:
    """A read model made before the `active` column existed is upgraded by migrate: the
    column is added and filled from the status documents, so active runs stay visible.
    (Not `memory:`: its read model is made afresh every time, there is nothing to upgrade.)"""
    migrate(StoreConfig.parse(store_url))
    engine = bootstrap(store_url)
    try:
        a, _ = engine.service.apply(manifest("a"), minute(0))
        engine.service.tick([a], minute(1))
        engine.projector.catch_up(minute(1))
        before = engine.view.active_runs()
        assert len(before) == 1
        with engine.view.db.transaction() as conn:
            # A read model that old had no audit views either (they read the column).
            views.drop_views(conn)
            conn.execute("DROP INDEX IF EXISTS cronsource_status_active")
            conn.execute("ALTER TABLE cronsource_status DROP COLUMN active")
        engine.view.create_tables()
        assert engine.view.active_runs() == before
    finally:
        engine.close()
