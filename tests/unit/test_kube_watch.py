"""The watchers (adapters/runtime/kube/watch.py) turn what the cluster says into domain commands:
CronWorkflows into apply, reject_spec and delete; child Workflows into run_completed and
run_vanished. Here on the in-memory API (tests/kube/fake.py), stepped (`sync_once`,
`watch_for`); the same adapter against the real server: tests/integration/test_kube_contract.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    WF,
    KubeTarget,
    StatusWriter,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import (
    LABEL_INSTANCE,
    CronWorkflowWatcher,
    ViewProgress,
    WorkflowWatcher,
)
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import NotFound, event_type
from tests.instants import T0
from tests.kube.fake import FakeKube

NS = "team"
TICK = T0 + timedelta(minutes=1)


@pytest.fixture
def target(kube_target: KubeTarget) -> KubeTarget:
    """tests/conftest.py's `engine` creates its Workflows in the fake cluster."""
    return kube_target


def cron_workflow(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def types(engine: Engine, cron_id: UUID) -> list[str]:
    return [event_type(e) for e in engine.service.events.get(cron_id)]


def admitted(engine: Engine, kube: FakeKube, name: str = "job", **spec: Any) -> UUID:
    """A CronWorkflow created in the cluster and admitted through a watcher's list."""
    obj = kube.user.create(NS, CWF, cron_workflow(name, **spec))
    CronWorkflowWatcher(kube, engine.service, namespace=NS).sync_once(T0)
    return engine.service.find(NS, name, obj["metadata"]["uid"]).id


def children(kube: FakeKube) -> list[str]:
    return [w["metadata"]["name"] for w in kube.user.list(NS, WF)]


# -- CronWorkflows ---------------------------------------------------------------------------


def test_a_list_admits_ours_and_leaves_argos_instance_alone(engine: Engine, kube: FakeKube) -> None:
    kube.user.create(NS, CWF, cron_workflow("ours"))
    kube.user.create(NS, CWF, cron_workflow("argos", labels={LABEL_INSTANCE: "argo"}))
    ours = CronWorkflowWatcher(kube, engine.service, namespace=NS)
    assert ours.sync_once(T0) == 1
    assert set(ours.known) == {(NS, "ours")}
    assert engine.service.find(NS, "ours", ours.known[(NS, "ours")]).uid
    argo = CronWorkflowWatcher(kube, engine.service, namespace=NS, instance_id="argo")
    assert argo.sync_once(T0) == 1 and set(argo.known) == {(NS, "argos")}


def test_watched_changes_become_apply_spec_rejected_and_delete(
    engine: Engine, kube: FakeKube
) -> None:
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=NS)
    watcher.sync_once(T0)
    listed = kube.user.create(NS, CWF, cron_workflow("listed"))
    kube.user.create(NS, CWF, {**cron_workflow("broken"), "spec": {"schedules": ["nope"]}})
    assert watcher.watch_for(1) == 2
    uid = listed["metadata"]["uid"]
    cron_id = engine.service.find(NS, "listed", uid).id
    assert (NS, "broken") in watcher.rejected  # never admitted: nothing stored
    with pytest.raises(NotFound):
        engine.service.find(NS, "broken")

    kube.user.patch(NS, CWF, "listed", {"spec": {"suspend": True}})
    watcher.watch_for(1)
    assert engine.service.load(cron_id).suspended
    kube.user.patch(NS, CWF, "listed", {"spec": {"schedules": ["nope"]}})
    watcher.watch_for(1)
    assert types(engine, cron_id)[-1] == "SpecRejected"
    kube.user.delete(NS, CWF, "listed")
    watcher.watch_for(1)
    assert types(engine, cron_id)[-1] == "CronWorkflowDeleted"
    assert (NS, "listed") not in watcher.known


def test_our_own_status_write_does_not_come_back_as_a_spec_change(
    engine: Engine, kube: FakeKube
) -> None:
    """A status write bumps the generation (no status subresource) and our annotation: the
    watch delivers it as MODIFIED, and the store must not record it as a change of spec."""
    cron_id = admitted(engine, kube)
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=NS)
    watcher.sync_once(T0)
    before = types(engine, cron_id)
    assert StatusWriter(kube).write_aggregate(engine.service.load(cron_id))
    assert kube.user.get(NS, CWF, "job")["metadata"]["generation"] == 2
    assert watcher.watch_for(1, at=T0) == 1
    assert types(engine, cron_id) == before


def test_a_410_relists_and_reconciles_a_deletion_made_while_blind(
    engine: Engine, kube: FakeKube
) -> None:
    kube.user.create(NS, CWF, cron_workflow("stays"))
    gone = kube.user.create(NS, CWF, cron_workflow("goes"))
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=NS)
    watcher.sync_once(T0)
    relists = watcher.relists
    gone_id = engine.service.find(NS, "goes", gone["metadata"]["uid"]).id
    kube.user.delete(NS, CWF, "goes")
    kube.user.create(NS, CWF, cron_workflow("new"))
    kube.expire_history()  # blind: the watch's history is gone
    watcher.watch_for(1, at=T0 + timedelta(seconds=5))
    assert watcher.relists == relists + 1
    assert types(engine, gone_id)[-1] == "CronWorkflowDeleted"
    assert set(watcher.known) == {(NS, "stays"), (NS, "new")}
    watcher.watch_for(1)  # the watch resumes from the new list
    assert watcher.relists == relists + 1


def test_a_restarted_watcher_seeded_from_the_store_reconciles_deletions_made_while_down(
    engine: Engine, kube: FakeKube
) -> None:
    cron_id = admitted(engine, kube)
    local = {**cron_workflow("cli-applied"), "metadata": {"name": "cli-applied", "namespace": NS}}
    engine.service.apply(parse_manifest(local), T0)
    engine.projector.catch_up(T0)
    kube.user.delete(NS, CWF, "job")  # while no watcher ran
    fresh = CronWorkflowWatcher(kube, engine.service, namespace=NS)
    assert fresh.seed(engine.view.statuses(NS)) == 1  # the CLI-applied one has no uid
    assert fresh.sync_once(T0) == 0
    assert types(engine, cron_id)[-1] == "CronWorkflowDeleted"
    assert engine.service.find(NS, "cli-applied")  # not the watcher's to delete


def test_a_cronworkflow_handed_to_argos_instance_leaves_the_store(
    engine: Engine, kube: FakeKube
) -> None:
    """Labelled with Argo's instance id it leaves our selector: the watch says DELETED."""
    cron_id = admitted(engine, kube)
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=NS)
    watcher.sync_once(T0)
    kube.user.patch(NS, CWF, "job", {"metadata": {"labels": {LABEL_INSTANCE: "argo"}}})
    watcher.watch_for(1)
    assert types(engine, cron_id)[-1] == "CronWorkflowDeleted"


# -- child Workflows -------------------------------------------------------------------------


def test_child_phases_and_deletion_become_run_events(engine: Engine, kube: FakeKube) -> None:
    cron_id = admitted(engine, kube, concurrencyPolicy="Allow")
    t2 = TICK + timedelta(minutes=1)
    for t in (TICK, t2):
        engine.service.tick([cron_id], t)
        engine.projector.catch_up(t)
    first, second = workflow_name("job", TICK), workflow_name("job", t2)
    assert set(children(kube)) == {first, second}
    runs = WorkflowWatcher(kube, engine.service, namespace=NS)
    runs.sync_once(t2)  # both running: nothing to report
    assert set(engine.service.load(cron_id).active) == {first, second}

    finished = {"status": {"phase": "Succeeded", "finishedAt": "2026-05-04T10:02:30Z"}}
    kube.user.patch(NS, WF, first, finished)
    kube.user.delete(NS, WF, second)
    runs.watch_for(1, at=t2 + timedelta(seconds=40))
    ended = [
        e
        for e in engine.service.events.get(cron_id)
        if event_type(e) in ("RunCompleted", "RunVanished")
    ]
    assert [(event_type(e), e.workflow_name) for e in ended] == [
        ("RunCompleted", first),
        ("RunVanished", second),
    ]
    assert ended[0].phase == "Succeeded"
    assert ended[0].finished_at == datetime(2026, 5, 4, 10, 2, 30, tzinfo=UTC)
    assert engine.service.load(cron_id).active == {}
    runs.watch_for(1)  # nothing twice
    assert types(engine, cron_id).count("RunCompleted") == 1


def test_a_fire_not_yet_dispatched_is_not_taken_for_a_vanished_run(kube: FakeKube) -> None:
    from cronsource.adapters.bootstrap import bootstrap

    undispatched = bootstrap("memory:")  # no dispatcher: fires committed, never created
    try:
        cron_id = admitted(undispatched, kube)
        undispatched.service.tick([cron_id], TICK)
        undispatched.projector.catch_up(TICK)
        progress = ViewProgress(undispatched.view, undispatched.service.name)
        runs = WorkflowWatcher(kube, undispatched.service, NS, progress=progress)
        runs.sync_once(TICK + timedelta(seconds=5))
        assert list(undispatched.service.load(cron_id).active) == [workflow_name("job", TICK)]
        assert "RunVanished" not in types(undispatched, cron_id)
    finally:
        undispatched.close()


def test_a_child_deleted_while_nobody_watched_is_vanished_at_the_next_list(
    engine: Engine, kube: FakeKube
) -> None:
    """Forbid waits on its active run: one deleted while no watcher ran must not hold the
    CronWorkflow back for ever."""
    cron_id = admitted(engine, kube, concurrencyPolicy="Forbid")
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    name = workflow_name("job", TICK)
    kube.user.delete(NS, WF, name)
    t2 = TICK + timedelta(minutes=1)
    engine.service.tick([cron_id], t2)  # forbidden: the run still counts
    engine.projector.catch_up(t2)
    assert list(engine.service.load(cron_id).active) == [name]
    progress = ViewProgress(engine.view, engine.service.name)
    WorkflowWatcher(kube, engine.service, NS, progress=progress).sync_once(t2)
    assert types(engine, cron_id).count("RunVanished") == 1
    t3 = t2 + timedelta(minutes=1)
    engine.service.tick([cron_id], t3)
    engine.projector.catch_up(t3)
    assert children(kube) == [workflow_name("job", t3)]
