"""Contract tests of the Kubernetes adapter (adapters/infrastructure/kube/) against the real API
server (tests/kube/apiserver.py): watchers into domain commands, the dispatcher target, the status
writer. Times given to the domain are fixed; the server's own clock never matters."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import (
    ANNOTATION_SEQUENCE,
    CWF,
    GROUP,
    VERSION,
    WF,
    AioKube,
    ApiError,
    Backoff,
    KubeTarget,
    SeenMetadata,
    StatusWriter,
    connect,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import (
    LABEL_INSTANCE,
    CronWorkflowWatcher,
    KubeSync,
    ViewProgress,
    WorkflowWatcher,
)
from cronsource.adapters.runtime.kube.sync import STATUS_WAITS_AT_MOST, STATUS_WAITS_FOR_DISPATCH
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import NotFound, event_type
from cronsource.projections.dispatch import (
    ANNOTATION_SCHEDULED,
    LABEL_CRON,
    PermanentSubmissionError,
)
from cronsource.projections.readmodel import status_row
from tests.instants import T0

pytestmark = pytest.mark.k8s

TICK = T0 + timedelta(minutes=1)


def cron_workflow(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowMetadata": {"labels": {"team": "a"}},
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


@pytest.fixture
def target(kube_target: KubeTarget) -> KubeTarget:
    """tests/conftest.py's `engine` creates its Workflows in the test cluster."""
    return kube_target


def events(eng: Engine, cron_id: UUID) -> list[Any]:
    return list(eng.service.events.get(cron_id))


def types(eng: Engine, cron_id: UUID) -> list[str]:
    return [event_type(e) for e in events(eng, cron_id)]


def create_cwf(api: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body))


def admitted(
    eng: Engine, kube: AioKube, api: Any, ns: str, name: str = "job"
) -> tuple[UUID, dict[str, Any]]:
    """A CronWorkflow created in the cluster and admitted through the watcher."""
    obj = create_cwf(api, ns, cron_workflow(name))
    watcher = CronWorkflowWatcher(kube, eng.service, namespace=ns, clock=VirtualClock(T0))
    watcher.sync_once(T0)
    return eng.service.find(ns, name, obj["metadata"]["uid"]).id, obj


def children(api: Any, ns: str) -> list[dict[str, Any]]:
    return list(api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"])


# -- CronWorkflow watcher ---------------------------------------------------------------------


def test_cron_workflow_in_the_cluster_reaches_the_store(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    create_cwf(api, ns, cron_workflow("listed"))
    create_cwf(api, ns, cron_workflow("argos", labels={LABEL_INSTANCE: "argo"}))
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=ns, clock=VirtualClock(T0))
    assert watcher.sync_once(T0) == 1  # the instance-labelled one is Argo's
    agg = engine.service.find(ns, "listed", watcher.known[(ns, "listed")])
    assert agg.uid and not agg.suspended

    watched = create_cwf(api, ns, cron_workflow("watched"))
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "listed", {"spec": {"suspend": True}}
    )
    bad = cron_workflow("broken")
    bad["spec"]["schedules"] = ["not a cron"]
    create_cwf(api, ns, bad)
    assert watcher.watch_for(1) == 3
    assert engine.service.find(ns, "watched", watched["metadata"]["uid"]).uid
    assert engine.service.find(ns, "listed", agg.uid).suspended
    assert (ns, "broken") in watcher.rejected

    # A spec turned invalid on an admitted object is a SpecRejected.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "watched", {"spec": {"schedules": ["nope"]}}
    )
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, CWF, "listed")
    watcher.watch_for(1)
    watched_id = engine.service.find(ns, "watched", watched["metadata"]["uid"]).id
    assert "SpecRejected" in types(engine, watched_id)
    assert types(engine, agg.id)[-1] == "CronWorkflowDeleted"

    # An instance-id watcher sees exactly the labelled object.
    argo = CronWorkflowWatcher(kube, engine.service, namespace=ns, instance_id="argo")
    assert argo.sync_once(T0) == 1 and set(argo.known) == {(ns, "argos")}


def test_status_writes_do_not_echo_back_as_spec_updates(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    cron_id, _ = admitted(engine, kube, api, kube_namespace)
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=kube_namespace)
    watcher.sync_once(T0)
    before = types(engine, cron_id)
    assert StatusWriter(kube).write_aggregate(engine.service.load(cron_id))
    watcher.watch_for(1, at=T0)  # the MODIFIED event of our own write (generation bumped)
    assert types(engine, cron_id) == before


def test_watch_expired_with_410_relists_and_reconciles_a_deletion_made_while_blind(
    kube_apiserver: Any,
    engine: Engine,
    kube: AioKube,
    api: Any,
    kube_namespace: str,
) -> None:
    ns = kube_namespace
    create_cwf(api, ns, cron_workflow("stays"))
    gone = create_cwf(api, ns, cron_workflow("goes"))
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=ns)
    watcher.sync_once(T0)
    relists = watcher.relists
    gone_id = engine.service.find(ns, "goes", gone["metadata"]["uid"]).id
    # Blind: changes happen, then the watch cache's history is gone.
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, CWF, "goes")
    create_cwf(api, ns, cron_workflow("new"))
    kube_apiserver.expire_watch_cache("cronworkflows.argoproj.io")
    watcher.watch_for(1, at=T0 + timedelta(seconds=5))
    assert watcher.relists == relists + 1
    assert types(engine, gone_id)[-1] == "CronWorkflowDeleted"
    assert set(watcher.known) == {(ns, "stays"), (ns, "new")}
    assert engine.service.find(ns, "new", watcher.known[(ns, "new")]).uid
    watcher.watch_for(1)  # and the watch resumes from the new list
    assert watcher.relists == relists + 1


def test_a_restarted_watcher_seeded_from_the_store_reconciles_deletions_made_while_down(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron_id, _ = admitted(engine, kube, api, ns)
    engine.service.apply(
        parse_manifest(
            {**cron_workflow("cli-applied"), "metadata": {"name": "cli-applied", "namespace": ns}}
        ),
        T0,
    )
    engine.projector.catch_up(T0)
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")  # while down
    fresh = CronWorkflowWatcher(kube, engine.service, namespace=ns)
    assert fresh.seed(engine.view.statuses(ns)) == 1  # the CLI-applied one has no uid
    assert fresh.sync_once(T0) == 0
    assert types(engine, cron_id)[-1] == "CronWorkflowDeleted"
    assert engine.service.find(ns, "cli-applied")  # not the watcher's to delete


# -- dispatcher target ---------------------------------------------------------------------------


def test_a_fire_creates_exactly_one_workflow_and_a_replay_is_a_no_op(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron_id, obj = admitted(engine, kube, api, ns)
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    (wf,) = children(api, ns)
    meta = wf["metadata"]
    assert meta["name"] == workflow_name("job", TICK)
    assert meta["labels"] == {LABEL_CRON: "job", "team": "a"}
    assert meta["annotations"][ANNOTATION_SCHEDULED] == "2026-05-04T10:01:00Z"
    (ref,) = meta["ownerReferences"]
    assert ref["uid"] == obj["metadata"]["uid"] and ref["controller"] is True
    assert ref["kind"] == "CronWorkflow" and ref["name"] == "job"
    assert wf["spec"] == obj["spec"]["workflowSpec"]

    # The dispatcher repeats its batch (a crash before the position moved): still one.
    from cronsource.projections.dispatch import build_workflow

    agg = engine.service.load(cron_id)
    engine.dispatcher.target.create(  # type: ignore[union-attr]
        build_workflow(agg, meta["name"], TICK), cron_id=str(cron_id), trigger="schedule", at=TICK
    )
    assert len(children(api, ns)) == 1
    assert "SubmissionFailed" not in types(engine, cron_id)


def test_aggregate_without_uid_gets_the_owner_uid_from_the_cluster(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    obj = create_cwf(api, ns, cron_workflow("local"))
    body = cron_workflow("local")
    body["metadata"]["namespace"] = ns
    cron_id, _ = engine.service.apply(parse_manifest(body), T0)  # applied by CLI: no uid
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    (wf,) = children(api, ns)
    assert wf["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]


def test_a_foreign_object_with_our_name_is_submission_failed(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron_id, _ = admitted(engine, kube, api, ns)
    foreign = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {"name": workflow_name("job", TICK), "labels": {LABEL_CRON: "job"}},
        "spec": {
            "entrypoint": "theirs",
            "templates": [{"name": "theirs", "container": {"image": "busybox"}}],
        },
    }
    api.create_namespaced_custom_object(GROUP, VERSION, ns, WF, foreign)
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    assert types(engine, cron_id)[-1] == "SubmissionFailed"
    (wf,) = children(api, ns)
    assert wf["spec"] == {
        "entrypoint": "theirs",
        "templates": [{"name": "theirs", "container": {"image": "busybox"}}],
    }  # untouched


def test_422_is_permanent_and_5xx_is_retried_with_backoff(kube: AioKube) -> None:
    target = KubeTarget(kube, Backoff(sleep=lambda s: None))
    wf = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {"name": "Not_A_Valid_Name", "namespace": "x", "annotations": {}},
        "spec": {},
    }
    with pytest.raises(PermanentSubmissionError):
        target.create(wf, cron_id="c", trigger="schedule", at=T0)

    sleeps: list[float] = []
    calls = {"n": 0}

    async def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ApiError(503, "Service Unavailable")
        return "ok"

    assert asyncio.run(Backoff(sleep=sleeps.append, base=0.1, cap=1.0).call(flaky)) == "ok"
    assert len(sleeps) == 2 and all(0 <= s <= 1.0 for s in sleeps)
    calls["n"] = -10
    with pytest.raises(ApiError):
        asyncio.run(Backoff(attempts=3, sleep=sleeps.append).call(flaky))  # bounded: gives up


def test_terminate_and_delete(engine: Engine, kube: AioKube, api: Any, kube_namespace: str) -> None:
    ns = kube_namespace
    cron_id, _ = admitted(engine, kube, api, ns)
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    name = workflow_name("job", TICK)
    target = KubeTarget(kube)
    target.terminate(ns, name, TICK)
    got = api.get_namespaced_custom_object(GROUP, VERSION, ns, WF, name)
    assert got["spec"]["shutdown"] == "Terminate"
    target.delete(ns, name, TICK)
    assert children(api, ns) == []
    target.delete(ns, name, TICK)  # 404 is fine
    target.terminate(ns, name, TICK)


# -- status writer -----------------------------------------------------------------------------


def test_status_writer_writes_and_a_stale_writer_is_dropped(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron_id, _ = admitted(engine, kube, api, ns)
    old = status_row(engine.service.load(cron_id))
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    new = status_row(engine.service.load(cron_id))
    assert new.version > old.version
    writer = StatusWriter(kube)
    assert writer.write(new)
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
    assert obj["status"]["lastScheduledTime"] == "2026-05-04T10:01:00Z"
    assert obj["status"]["active"][0]["name"] == workflow_name("job", TICK)
    assert obj["metadata"]["annotations"][ANNOTATION_SEQUENCE] == str(new.version)
    assert not writer.write(old)  # older sequence: dropped
    assert not writer.write(new)  # same sequence: dropped (idempotent)
    again = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
    assert again["status"] == obj["status"]
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_a_409_from_a_concurrent_edit_is_retried_and_loses_neither(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron_id, _ = admitted(engine, kube, api, ns)
    edits = iter([{"metadata": {"labels": {"user": "edit"}}}, {"spec": {"suspend": True}}])

    def user_edits() -> None:
        edit = next(edits, None)
        if edit is not None:
            api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job", edit)

    writer = StatusWriter(EditsAfterRead(kube, user_edits))
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert writer.conflicts == 2
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
    assert obj["metadata"]["labels"] == {"user": "edit"}
    assert obj["spec"]["suspend"] is True
    assert obj["status"]["phase"] == "Active"


def test_the_writer_patches_from_the_watchs_copy_and_reads_only_after_a_409(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron_id, _ = admitted(engine, kube, api, ns)
    seen = SeenMetadata()
    CronWorkflowWatcher(kube, engine.service, namespace=ns, seen=seen).sync_once(T0)
    writer = StatusWriter(kube, seen=seen)
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert (writer.reads, writer.conflicts) == (0, 0)

    # A user's edit the watch has not delivered: the copy is stale, the PATCH a 409.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "job", {"metadata": {"labels": {"user": "edit"}}}
    )
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    new = status_row(engine.service.load(cron_id))
    assert writer.write(new)
    assert (writer.reads, writer.conflicts) == (1, 1)
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
    assert obj["metadata"]["labels"] == {"user": "edit"}
    assert obj["metadata"]["annotations"][ANNOTATION_SEQUENCE] == str(new.version)
    assert obj["status"]["lastScheduledTime"] == "2026-05-04T10:01:00Z"
    # The copy now holds the PATCH's answer; dropping the same write again is confirmed by
    # a read, never decided on the copy alone.
    assert not writer.write(new)
    assert writer.reads == 2


def test_a_stale_copy_of_a_recreated_object_does_not_drop_its_status(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    _, old = admitted(engine, kube, api, ns)
    seen = SeenMetadata()
    seen.saw(old)  # the watch's copy of the first object of that name
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
    cron_id, new = admitted(engine, kube, api, ns)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    writer = StatusWriter(kube, seen=seen)
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert writer.reads == 1
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
    assert obj["status"]["phase"] == "Active"


def test_status_writes_wait_for_the_dispatcher_but_not_longer_than_the_bound(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    sync = KubeSync(engine, kube, namespace=ns)
    first, _ = admitted(engine, kube, api, ns, "first")
    second, _ = admitted(engine, kube, api, ns, "second")
    engine.projector.catch_up(T0)
    assert sync.write_statuses(T0) == 2  # the dispatcher is not behind: written at once

    def shown(name: str) -> Any:
        obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, name)
        return obj["status"].get("lastScheduledTime")

    engine.service.tick([first], TICK)
    engine.projector.catch_up(TICK, dispatch=False)  # the status view shows a fire not yet created
    assert sync.dispatch_behind()
    assert sync.write_statuses(TICK) == 0
    assert sync.write_statuses(TICK + STATUS_WAITS_FOR_DISPATCH / 2) == 0
    assert shown("first") is None and children(api, ns) == []
    engine.projector.dispatch(TICK)
    assert not sync.dispatch_behind()
    assert sync.write_statuses(TICK + STATUS_WAITS_FOR_DISPATCH / 2) == 1
    assert shown("first") == "2026-05-04T10:01:00Z"
    assert [c["metadata"]["name"] for c in children(api, ns)] == [workflow_name("first", TICK)]

    # A dispatcher that is behind but moving holds statuses back past the bound...
    later = TICK + timedelta(minutes=1)
    engine.service.tick([first, second], later)
    engine.projector.catch_up(later, dispatch=False)
    assert sync.write_statuses(later) == 0
    engine.projector.dispatch(later, batch=1, budget=0)  # one event: the dispatcher moved
    assert sync.dispatch_behind()
    assert sync.write_statuses(later + STATUS_WAITS_FOR_DISPATCH) == 0
    # ...and one that stopped moving holds them back for the bound, not for ever.
    assert sync.write_statuses(later + 2 * STATUS_WAITS_FOR_DISPATCH) == 2
    assert sync.dispatch_behind() and shown("second") == "2026-05-04T10:02:00Z"

    # One that keeps moving but never catches up holds them back at most STATUS_WAITS_AT_MOST.
    again = later + timedelta(minutes=1)
    engine.service.tick([first, second], again)
    engine.projector.catch_up(again, dispatch=False)
    step, waited, turn = STATUS_WAITS_FOR_DISPATCH / 2, timedelta(0), 0

    def one_more_event_and_one_dispatched(at: datetime) -> None:
        command = engine.service.suspend if turn % 2 == 0 else engine.service.resume
        command(first, at)  # a new event in the log: the view moves ahead
        engine.projector.catch_up(at, dispatch=False)
        engine.projector.dispatch(at, batch=1, budget=0)  # the dispatcher moves, and stays behind
        assert sync.dispatch_behind()

    while waited < STATUS_WAITS_AT_MOST:
        one_more_event_and_one_dispatched(again + waited)
        assert sync.write_statuses(again + waited) == 0, waited
        waited, turn = waited + step, turn + 1
    one_more_event_and_one_dispatched(again + waited)
    assert sync.write_statuses(again + waited) == 2


def test_the_environments_proxy_is_honoured_and_read_once_at_connect(
    kube_apiserver: Any, kube_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    proxied = connect(str(kube_apiserver.kubeconfig))
    try:
        with pytest.raises(ApiError) as failed:
            proxied.run(proxied.get(kube_namespace, CWF, "absent"))
        assert failed.value.status == 0  # no answer: the request went to the proxy
    finally:
        proxied.close()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    direct = connect(str(kube_apiserver.kubeconfig))
    try:
        monkeypatch.delenv("NO_PROXY")  # read at connect, not per request
        with pytest.raises(ApiError) as missing:
            direct.run(direct.get(kube_namespace, CWF, "absent"))
        assert missing.value.status == 404
    finally:
        direct.close()


class EditsAfterRead:
    """The KubeApi port, with a user's edit landing between each read and the next call."""

    def __init__(self, kube: AioKube, edit: Any) -> None:
        self.kube, self.edit = kube, edit

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        obj = await self.kube.get(namespace, plural, name)
        await asyncio.to_thread(self.edit)
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)


# -- workflow watcher ----------------------------------------------------------------------------


def test_child_phases_and_deletion_become_run_events(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    body = cron_workflow("job", concurrencyPolicy="Allow")
    obj = create_cwf(api, ns, body)
    CronWorkflowWatcher(kube, engine.service, namespace=ns).sync_once(T0)
    cron_id = engine.service.find(ns, "job", obj["metadata"]["uid"]).id
    t2 = TICK + timedelta(minutes=1)
    for t in (TICK, t2):
        engine.service.tick([cron_id], t)
        engine.projector.catch_up(t)
    first, second = workflow_name("job", TICK), workflow_name("job", t2)
    assert {c["metadata"]["name"] for c in children(api, ns)} == {first, second}

    runs = WorkflowWatcher(kube, engine.service, namespace=ns)
    runs.sync_once(t2)  # both running: nothing to report
    assert set(engine.service.load(cron_id).active) == {first, second}

    api.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        WF,
        first,
        {"status": {"phase": "Succeeded", "finishedAt": "2026-05-04T10:02:30Z"}},
    )
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, WF, second)
    runs.watch_for(1, at=t2 + timedelta(seconds=40))
    evs = [e for e in events(engine, cron_id) if event_type(e) in ("RunCompleted", "RunVanished")]
    assert [(event_type(e), e.workflow_name) for e in evs] == [
        ("RunCompleted", first),
        ("RunVanished", second),
    ]
    assert evs[0].phase == "Succeeded"
    assert evs[0].finished_at == datetime(2026, 5, 4, 10, 2, 30, tzinfo=UTC)
    assert engine.service.load(cron_id).active == {}
    runs.watch_for(1)  # replays nothing twice
    assert types(engine, cron_id).count("RunCompleted") == 1


def test_a_fire_not_yet_dispatched_is_not_taken_for_a_vanished_run(
    kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    eng = bootstrap("memory:")  # no dispatcher: fires are committed, never created
    try:
        cron_id, _ = admitted(eng, kube, api, ns)
        eng.service.tick([cron_id], TICK)
        eng.projector.catch_up(TICK)
        runs = WorkflowWatcher(
            kube, eng.service, ns, progress=ViewProgress(eng.view, eng.service.name)
        )
        runs.sync_once(TICK + timedelta(seconds=5))
        assert list(eng.service.load(cron_id).active) == [workflow_name("job", TICK)]
        assert "RunVanished" not in types(eng, cron_id)
    finally:
        eng.close()


def test_a_child_deleted_while_the_watcher_was_down_stops_counting_and_forbid_runs_again(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    obj = create_cwf(api, ns, cron_workflow("job", concurrencyPolicy="Forbid"))
    uid = obj["metadata"]["uid"]
    first = KubeSync(engine, kube, namespace=ns, clock=VirtualClock(T0))
    first.start(watch_seconds=1)
    try:
        poll_until(first, lambda: _admitted(engine, ns, "job", uid), T0)
        cron_id = engine.service.find(ns, "job", uid).id
        engine.service.tick([cron_id], TICK)
        engine.projector.catch_up(TICK)
        name = workflow_name("job", TICK)
        assert [c["metadata"]["name"] for c in children(api, ns)] == [name]
    finally:
        first.stop()

    # Down: the child is deleted while still running, and the next tick is forbidden.
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, WF, name)
    t2 = TICK + timedelta(minutes=1)
    engine.service.tick([cron_id], t2)
    engine.projector.catch_up(t2)
    assert types(engine, cron_id).count("ScheduleFired") == 1
    assert list(engine.service.load(cron_id).active) == [name]

    # Restarted: its first list shows the child gone.
    second = KubeSync(engine, kube, namespace=ns, clock=VirtualClock(t2))
    second.start(watch_seconds=1)
    try:
        poll_until(second, lambda: not engine.service.load(cron_id).active, t2)
        assert types(engine, cron_id).count("RunVanished") == 1
        t3 = t2 + timedelta(minutes=1)
        engine.service.tick([cron_id], t3)
        engine.projector.catch_up(t3)
        assert {c["metadata"]["name"] for c in children(api, ns)} == {workflow_name("job", t3)}
    finally:
        second.stop()


def _admitted(eng: Engine, ns: str, name: str, uid: str) -> bool:
    try:
        eng.service.find(ns, name, uid)
        return True
    except NotFound:
        return False


def poll_until(sync: KubeSync, check: Any, at: datetime, timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        sync.poll(at)
        time.sleep(0.05)


# -- the composition: tasks watch, the loop thread applies ---------------------------------------


def test_kube_sync_whole_flow(engine: Engine, kube: AioKube, api: Any, kube_namespace: str) -> None:
    import time

    ns = kube_namespace
    sync = KubeSync(engine, kube, namespace=ns)
    sync.start(watch_seconds=1)
    try:

        def poll_until(check: Any, at: datetime, timeout: float = 15.0) -> None:
            deadline = time.monotonic() + timeout
            while not check():
                assert time.monotonic() < deadline, "timed out"
                sync.poll(at)
                time.sleep(0.05)

        obj = create_cwf(api, ns, cron_workflow("job"))
        uid = obj["metadata"]["uid"]

        def admitted_now() -> bool:
            try:
                engine.service.find(ns, "job", uid)
                return True
            except NotFound:
                return False

        poll_until(admitted_now, T0)
        cron_id = engine.service.find(ns, "job", uid).id
        engine.service.tick([cron_id], TICK)
        sync.poll(TICK)  # dispatches (catch_up) is the loop's job; poll writes the status
        engine.projector.catch_up(TICK)
        sync.poll(TICK)
        name = workflow_name("job", TICK)
        got = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
        assert [a["name"] for a in got["status"]["active"]] == [name]

        api.patch_namespaced_custom_object(
            GROUP, VERSION, ns, WF, name, {"status": {"phase": "Failed"}}
        )
        at = TICK + timedelta(seconds=30)

        def counted() -> bool:
            s = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")["status"]
            return bool(s["failed"] == 1 and s["active"] == [])

        poll_until(counted, at)
        assert types(engine, cron_id).count("RunCompleted") == 1
        assert (
            got["spec"] == api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")["spec"]
        )
    finally:
        sync.stop()
