"""Runs the world has and the log lost are recorded (issue 27, item 2; recovery.py).

Given/when/then over a real SQLite store and the local target's directory: a Workflow file of
ours with a tick's name and no fire in the log (as a failover to an asynchronous standby leaves
it) is recorded as RunRecovered, its tick is decided by it and never fired again, and the run is
reported when it ends. Someone else's Workflow, or one the log knows, is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.localtarget import ANNOTATION_CREATED, LocalTarget
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.recovery import recover_lost_runs
from cronsource.adapters.runtime.runwatcher import RunWatcher
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import build_workflow
from cronsource.projections.readmodel import rfc3339
from tests.instants import T0


def at(seconds: float) -> Any:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Engine, LocalTarget]]:
    target = LocalTarget(tmp_path / "workflows", run_duration=timedelta(seconds=5))
    engine = bootstrap(f"sqlite:///{tmp_path}/cs.db", target=target)
    yield engine, target
    engine.close()


def apply(
    engine: Engine, name: str = "lost", created: Any = T0, schedule: str = "@every 10s"
) -> Any:
    manifest = parse_manifest(
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
    cron_id, _ = engine.service.apply(manifest, created)
    engine.projector.catch_up(created)
    return cron_id


def leave_workflow(
    target: LocalTarget, engine: Engine, cron_id: Any, tick: Any, **meta: Any
) -> str:
    """A Workflow file as our dispatcher would have written it, with no fire in the log."""
    agg = engine.service.load(cron_id)
    name = workflow_name(agg.name, tick)
    wf = build_workflow(agg, name, tick)
    wf["metadata"].update(meta)
    wf["metadata"]["annotations"][ANNOTATION_CREATED] = rfc3339(tick)
    path = target.manifest_path("default", name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(wf))
    return name


def events(engine: Engine, cron_id: Any) -> list[Any]:
    return list(engine.service.events.get(cron_id))


def test_a_workflow_without_a_fire_is_recovered_and_its_tick_never_fires(
    world: tuple[Engine, LocalTarget],
) -> None:
    engine, target = world
    cron_id = apply(engine)
    lost = leave_workflow(target, engine, cron_id, at(20))

    assert recover_lost_runs(engine, target.workflows(), at(22)) == 1
    agg = engine.service.load(cron_id)
    assert lost in agg.active and agg.last_scheduled_time == at(20)
    kinds = [(event_type(e), getattr(e, "reason", None)) for e in events(engine, cron_id)]
    # The tick before it was undecided: decided first, by the usual rules (missed), then the
    # recovered run is the decision of its own tick.
    assert [k[0] for k in kinds] == ["CronWorkflowCreated", "ScheduleSkipped", "RunRecovered"]
    assert kinds[1][1] == "DeadlineExceeded"  # 12 s late, but not the latest due tick
    recovered = events(engine, cron_id)[-1]
    assert recovered.scheduled_time == at(20) and recovered.trigger == "schedule"
    assert "log had no fire" in recovered.reason

    engine.projector.catch_up(at(22))
    assert recover_lost_runs(engine, target.workflows(), at(23)) == 0  # recorded once
    assert (
        engine.service.tick(
            [cron_id],
            at(
                30,
            ),
        ).fires
        == 1
    )  # the next tick, not 20 s again
    fired = [e.scheduled_time for e in events(engine, cron_id) if event_type(e) == "ScheduleFired"]
    assert fired == [at(30)]

    # The run watcher reports its end like any active run's.
    engine.projector.catch_up(at(30))
    assert RunWatcher(engine, target).poll(at(40)) >= 1
    completed = [e for e in events(engine, cron_id) if event_type(e) == "RunCompleted"]
    assert lost in [e.workflow_name for e in completed]


def test_an_every_created_at_a_fraction_ticks_at_whole_seconds_and_is_recovered_so(
    world: tuple[Engine, LocalTarget],
) -> None:
    """An `@every 1s` created at .25 of a second ticks at whole seconds, as robfig's Every
    does (it ticked at .25 of each, which no time shown to a user could name), and a
    Workflow left for a tick is recovered as that tick, deciding it and no other (the one a
    second earlier was taken once: issue 27's store-down test, on CI)."""
    engine, target = world
    cron_id = apply(engine, created=at(0.25), schedule="@every 1s")
    engine.service.tick([cron_id], at(3.5))  # ticks up to 3 decided, as a replica would
    engine.projector.catch_up(at(3.5))
    fired = [e.scheduled_time for e in events(engine, cron_id) if event_type(e) == "ScheduleFired"]
    assert fired[-1] == at(3)
    lost = leave_workflow(target, engine, cron_id, at(4))
    wf = json.loads(target.manifest_path("default", lost).read_text())
    assert wf["metadata"]["annotations"]["workflows.argoproj.io/scheduled-time"] == rfc3339(at(4))

    assert recover_lost_runs(engine, target.workflows(), at(4.5)) == 1
    recovered = events(engine, cron_id)[-1]
    assert event_type(recovered) == "RunRecovered"
    assert recovered.scheduled_time == at(4) and recovered.trigger == "schedule"
    engine.projector.catch_up(at(4.5))
    assert engine.service.tick([cron_id], at(5.5)).fires == 1
    fired = [e.scheduled_time for e in events(engine, cron_id) if event_type(e) == "ScheduleFired"]
    assert fired[-2:] == [at(3), at(5)]


@pytest.mark.parametrize("annotated", ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"])
def test_a_workflow_annotated_at_the_ends_of_time_is_passed_over_and_the_rest_recovered(
    world: tuple[Engine, LocalTarget], annotated: str
) -> None:
    """A Workflow of ours whose scheduled time no schedule can name (anyone who may create
    Workflows may write it): passed over, not an OverflowError that stopped every recovery."""
    engine, target = world
    cron_id = apply(engine)
    lost = leave_workflow(target, engine, cron_id, at(20))
    odd = target.manifest_path("default", "lost-odd")
    wf = json.loads(target.manifest_path("default", lost).read_text())
    wf["metadata"]["name"] = "lost-odd"
    wf["metadata"]["annotations"]["workflows.argoproj.io/scheduled-time"] = annotated
    odd.write_text(json.dumps(wf))

    assert recover_lost_runs(engine, target.workflows(), at(22)) == 1
    recovered = [e for e in events(engine, cron_id) if event_type(e) == "RunRecovered"]
    assert [e.workflow_name for e in recovered] == [lost]


def test_someone_elses_workflow_is_not_recovered(world: tuple[Engine, LocalTarget]) -> None:
    engine, target = world
    cron_id = apply(engine)
    leave_workflow(
        target,
        engine,
        cron_id,
        at(20),
        ownerReferences=[{"kind": "CronWorkflow", "name": "lost", "uid": "another-uid"}],
    )
    assert recover_lost_runs(engine, target.workflows(), at(22)) == 0
    assert [event_type(e) for e in events(engine, cron_id)] == ["CronWorkflowCreated"]


def test_nothing_is_recovered_while_the_read_model_is_behind_the_log(
    world: tuple[Engine, LocalTarget],
) -> None:
    """A fire committed and not yet projected is not a lost one: look again later."""
    engine, target = world
    cron_id = apply(engine)
    engine.service.tick(
        [cron_id],
        at(
            10,
        ),
    )  # committed, not projected
    engine.projector.dispatch(at(10))  # its Workflow exists
    assert recover_lost_runs(engine, target.workflows(), at(11)) is None
    engine.projector.catch_up(at(11))
    assert recover_lost_runs(engine, target.workflows(), at(11)) == 0


def test_a_run_argo_started_and_counted_before_the_move_is_not_recovered(
    world: tuple[Engine, LocalTarget],
) -> None:
    """Given a CronWorkflow taken over from Argo's controller, whose status counts a run
    Argo started and saw end (its Workflow still kept by the history limit), when the lost-
    run recovery of a start-up lists that Workflow, then it is not recorded as a run the log
    lost: its count is Argo's, already taken, and recording it would count it twice."""
    from cronsource.domain.adoption import read_argo_status

    engine, target = world
    argo_tick = T0 - timedelta(seconds=10)
    obj = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "moved", "namespace": "default", "uid": "u-moved"},
        "spec": {
            "schedules": ["@every 10s"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
        "status": {"succeeded": 1, "lastScheduledTime": rfc3339(argo_tick), "active": []},
    }
    manifest = parse_manifest({k: v for k, v in obj.items() if k != "status"})
    cron_id, _ = engine.service.apply(manifest, T0, adopt=read_argo_status(obj, "default", T0))
    engine.projector.catch_up(T0)
    argos = leave_workflow(target, engine, cron_id, argo_tick)

    assert recover_lost_runs(engine, target.workflows(), at(2)) == 0
    agg = engine.service.load(cron_id)
    assert argos not in agg.active and agg.succeeded == 1
