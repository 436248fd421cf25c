"""Projections: exactly-once views, idempotent dispatch, poison events, the local target."""

from datetime import timedelta
from uuid import UUID

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.localtarget import LocalTarget, WorkflowConflict
from cronsource.adapters.runtime.runwatcher import RunWatcher
from cronsource.adapters.runtime.supervisor import Supervisor
from cronsource.domain.manifest import parse_manifest
from tests.instants import T0


def manifest(name="job", schedule="* * * * *", **spec):
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
                **spec,
            },
        }
    )


class RecordingTarget:
    """A fake target that records what was asked of it and can be told to fail."""

    def __init__(self):
        self.created, self.deleted, self.terminated = [], [], []
        self.fail_with = None

    def create(self, workflow, *, cron_id, trigger, at):
        if self.fail_with is not None:
            raise self.fail_with
        self.created.append(workflow["metadata"]["name"])

    def terminate(self, namespace, name, at):
        self.terminated.append(name)

    def delete(self, namespace, name, at):
        self.deleted.append(name)


@pytest.fixture
def store_url(tmp_path):
    """tests/conftest.py's `engine`, on SQLite: a view transaction that fails is rolled back."""
    return f"sqlite:///{tmp_path / 'p.db'}"


@pytest.fixture
def target():
    return RecordingTarget()


def fire_once(eng):
    cron_id, _ = eng.service.apply(manifest(), T0)
    eng.service.tick([cron_id], T0 + timedelta(minutes=1))
    return cron_id


def test_read_model_applies_each_event_exactly_once(engine):
    fire_once(engine)
    assert engine.projector.catch_up(T0) == 2
    app = engine.service
    notes = app.recorder.select_notifications(start=1, limit=10)
    ev, n = app.mapper.to_domain_event(notes[-1]), notes[-1]
    from eventsourcing.persistence import Tracking

    engine.readmodel.process_event(ev, Tracking(app.name, n.id))  # a replay after a crash
    assert [r.type for r in engine.view.audit()] == ["CronWorkflowCreated", "ScheduleFired"]


def test_a_failed_view_transaction_leaves_the_position_where_it_was(engine):
    fire_once(engine)
    real = engine.view

    class FailingAfterRows:
        """Writes the rows, then dies before the commit (the transaction rolls back)."""

        def write_batch(self, items):
            with real.db.transaction() as conn:
                conn.execute("DELETE FROM cronsource_status")
                raise RuntimeError("killed inside the projection transaction")

    engine.readmodel.view = FailingAfterRows()
    with pytest.raises(RuntimeError):
        engine.projector.catch_up(T0)
    assert engine.view.max_tracking_id(engine.service.name) is None
    engine.readmodel.view = real
    engine.projector.catch_up(T0)
    assert [r.type for r in engine.view.audit()] == ["CronWorkflowCreated", "ScheduleFired"]
    assert len(engine.view.statuses()) == 1


def test_dispatch_retries_a_transient_failure_without_moving_on(engine, target):
    fire_once(engine)
    target.fail_with = ConnectionResetError("api server went away")
    sup = Supervisor("projections")
    sup.run(lambda: engine.projector.catch_up(T0))
    assert sup.failures == 1 and sup.backoff > 0 and "api server" in sup.last_error
    assert target.created == []
    assert (engine.view.max_tracking_id(engine.service.name, "dispatch") or 0) < 2
    target.fail_with = None
    engine.projector.catch_up(T0)
    assert target.created == ["job-1777888860"]


def test_permanent_submission_failure_becomes_an_event(engine, target):
    from cronsource.projections.dispatch import PermanentSubmissionError

    cron_id = fire_once(engine)
    target.fail_with = PermanentSubmissionError("422 invalid workflowSpec")
    engine.projector.catch_up(T0)
    agg = engine.service.load(cron_id)
    assert agg.active == {}
    engine.projector.catch_up(T0)
    types = [r.type for r in engine.view.audit()]
    assert types[-1] == "SubmissionFailed"


def test_poison_event_is_retried_with_backoff_and_never_skipped(engine):
    fire_once(engine)
    engine.readmodel.follower.follow = lambda ev: (_ for _ in ()).throw(ValueError("poison"))
    sup = Supervisor("projections")
    for _ in range(3):
        sup.retry_at = 0
        sup.run(lambda: engine.projector.catch_up(T0))
    assert sup.failures == 3 and sup.backoff == 2.0
    assert engine.view.max_tracking_id(engine.service.name) is None


def test_local_target_creates_exclusively_and_checks_ownership(tmp_path):
    target = LocalTarget(tmp_path, timedelta(seconds=5))
    wf = {
        "metadata": {
            "name": "job-1",
            "namespace": "default",
            "annotations": {"workflows.argoproj.io/scheduled-time": "2026-05-04T10:00:00Z"},
            "ownerReferences": [{"uid": "u1"}],
        },
        "spec": {},
    }
    target.create(wf, cron_id="c", trigger="schedule", at=T0)
    first = target.manifest_path("default", "job-1").read_text()
    target.create(wf, cron_id="c", trigger="schedule", at=T0 + timedelta(seconds=9))  # replay
    assert target.manifest_path("default", "job-1").read_text() == first
    other = {**wf, "metadata": {**wf["metadata"], "ownerReferences": [{"uid": "u2"}]}}
    with pytest.raises(WorkflowConflict):
        target.create(other, cron_id="c", trigger="schedule", at=T0)
    assert target.observe("default", "job-1", T0 + timedelta(seconds=4)) is None
    done = target.observe("default", "job-1", T0 + timedelta(seconds=6))
    assert done.phase == "Succeeded" and done.finished_at == T0 + timedelta(seconds=5)
    target.delete("default", "job-1", T0)
    assert target.observe("default", "job-1", T0).phase is None


def test_watcher_reports_completion_and_hand_deletion_but_not_undispatched_runs(tmp_path):
    target = LocalTarget(tmp_path / "wf", timedelta(seconds=1))
    eng = bootstrap(f"sqlite:///{tmp_path / 'w.db'}", target=target)
    a, _ = eng.service.apply(manifest("a"), T0)
    b, _ = eng.service.apply(manifest("b"), T0)
    t1 = T0 + timedelta(minutes=1)
    eng.service.tick([a, b], t1)
    # The read model sees the fires, the dispatcher not yet:
    while eng.projector._pending("readmodel", 100):
        for ev, tr in eng.projector._pending("readmodel", 100):
            eng.readmodel.process_event(ev, tr)
    watcher = RunWatcher(eng, target)
    assert watcher.poll(t1) == 0  # no file yet, but not dispatched: not vanished
    eng.projector.catch_up(t1)
    target.delete("default", "b-1777888860", t1)
    assert watcher.poll(t1 + timedelta(seconds=2)) == 2
    eng.projector.catch_up(t1)
    types = {r.workflow: r.type for r in eng.view.audit(types=["RunCompleted", "RunVanished"])}
    assert types == {"a-1777888860": "RunCompleted", "b-1777888860": "RunVanished"}
    assert eng.service.load(UUID(str(a))).succeeded == 1
    eng.close()


def test_a_when_that_cannot_evaluate_shows_as_a_spec_error_condition(tmp_path):
    eng = bootstrap(f"sqlite:///{tmp_path / 'c.db'}")
    cron_id, _ = eng.service.apply(manifest(when="cronworkflow.nope > 1"), T0)
    eng.service.tick([cron_id], T0 + timedelta(minutes=1))
    eng.projector.catch_up(T0)
    (status,) = [c.status for c in eng.view.statuses()]
    assert status["conditions"][0]["type"] == "SpecError"
    assert "cronworkflow.nope" in status["conditions"][0]["message"]
    assert [r.reason for r in eng.view.audit(types=["ScheduleSkipped"])] == ["WhenFalse"]
    eng.close()
