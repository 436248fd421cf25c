"""Moving CronWorkflows between Argo's controller and cronsource, against the real API server
(tests/kube/apiserver.py): the watch adopting the status an object carries (issue 21 item 7),
the status written back in the form Argo reads, and `cronsource adopt` / `release` through
the installed CLI. The window logic of the moves (adapters/kubeadopt.py) is tested at the end
on a recording fake and a fake clock, where the instants can be named.

Argo's real controller on both sides of a move is tests/e2e/test_argo_controller_interop.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client

from cronsource.adapters.application.handover import MoveError, Mover
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
    connect,
)
from cronsource.adapters.infrastructure.kube.port import FIELD_MANAGER
from cronsource.adapters.infrastructure.kube.status import ANNOTATION_STREAM
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.kube.watch import LABEL_INSTANCE
from cronsource.domain.adoption import ANNOTATION_LAST_USED_SCHEDULE
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED, LABEL_CRON
from tests.instants import T0

T = TypeVar("T")
INSTANCE = "cronsource"
LAST = T0 - timedelta(minutes=1)  # Argo's last tick
AT = LAST + timedelta(seconds=20)  # when cronsource takes the object, before the next tick


def rfc(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def cron_body(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {
            "name": name,
            "labels": labels if labels is not None else {LABEL_INSTANCE: INSTANCE},
            "annotations": {ANNOTATION_LAST_USED_SCHEDULE: "* * * * *"},
        },
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def child_body(cron: dict[str, Any], t: datetime, phase: str) -> dict[str, Any]:
    """A child Workflow as Argo's controller made it, in `phase`."""
    name = cron["metadata"]["name"]
    status: dict[str, Any] = {"phase": phase}
    if phase in ("Succeeded", "Failed"):
        status["finishedAt"] = rfc(t + timedelta(seconds=10))
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {
            "name": workflow_name(name, t),
            "labels": {LABEL_CRON: name},
            "annotations": {ANNOTATION_SCHEDULED: rfc(t)},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "CronWorkflow",
                    "name": name,
                    "uid": cron["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
        "status": status,
    }


def ref(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow", "name": name, "namespace": ns}


@pytest.fixture
def api(kube_api: Any) -> Any:
    return client.CustomObjectsApi(kube_api)


@pytest.fixture
def kube(kube_apiserver: Any) -> Iterator[AioKube]:
    k = connect(str(kube_apiserver.kubeconfig))
    yield k
    k.close()


@pytest.fixture
def engine(kube: AioKube) -> Iterator[Engine]:
    eng = bootstrap("memory:", target=KubeTarget(kube, Backoff(sleep=lambda s: None)))
    yield eng
    eng.close()


def types(eng: Engine, cron_id: Any) -> list[str]:
    return [event_type(e) for e in eng.service.events.get(cron_id)]


def argo_ran(api: Any, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    """A CronWorkflow Argo's controller ran: three runs it counts as active (one still
    running, one that ended since its last look, one deleted by hand), 1 succeeded and 2
    failed before, and the status it wrote."""
    cron = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, cron_body(name, **spec))
    running, ended, gone = LAST - timedelta(minutes=2), LAST - timedelta(minutes=1), LAST
    for t, phase in ((running, "Running"), (ended, "Succeeded")):
        api.create_namespaced_custom_object(GROUP, VERSION, ns, WF, child_body(cron, t, phase))
    status = {
        "active": [ref(workflow_name(name, t), ns) for t in (running, ended, gone)],
        "lastScheduledTime": rfc(LAST),
        "succeeded": 1,
        "failed": 2,
        "phase": "Active",
    }
    return dict(
        api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, name, {"status": status})
    )


# ---------------------------------------------------------------------- the watch adopts


def test_the_watch_adopts_argos_status_once_and_settles_the_runs_argo_left(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    cron = argo_ran(api, ns, "moved")
    uid = cron["metadata"]["uid"]
    sync = KubeSync(engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT))
    sync.crons.sync_once(AT)
    agg = engine.service.find(ns, "moved", uid)
    running = workflow_name("moved", LAST - timedelta(minutes=2))
    assert types(engine, agg.id) == [
        "CronWorkflowCreated",
        "StatusAdopted",
        "RunCompleted",  # the run that ended before cronsource took the object
        "RunVanished",  # the run deleted by hand
    ]
    assert (agg.succeeded, agg.failed, list(agg.active)) == (2, 2, [running])
    assert agg.last_scheduled_time == LAST
    assert (ns, running) in sync.runs.seen  # watched from here on, as a run of ours

    # Its end is reported by the run watch like one of ours.
    sync.runs.sync_once(AT)
    api.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        WF,
        running,
        {"status": {"phase": "Failed", "finishedAt": rfc(AT)}},
    )
    sync.runs.watch_for(1, AT)
    agg = engine.service.find(ns, "moved", uid)
    assert (agg.succeeded, agg.failed, dict(agg.active)) == (2, 3, {})

    # Later changes of the object adopt nothing: the counts are the stream's now.
    api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, "moved", {"status": {"failed": 0}})
    sync.crons.watch_for(1, AT)
    assert types(engine, agg.id).count("StatusAdopted") == 1
    assert engine.service.find(ns, "moved", uid).failed == 3


def test_a_malformed_status_is_adopted_in_part_naming_each_field_it_could_not_read(
    engine: Engine,
    kube: AioKube,
    api: Any,
    kube_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = kube_namespace
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, cron_body("odd"))
    bad = {
        "lastScheduledTime": rfc(LAST),
        "succeeded": 7,
        "failed": "two",
        "active": [{"name": 5}],
        "conditions": "none",
    }
    obj = api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, "odd", {"status": bad})
    sync = KubeSync(engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT))
    with caplog.at_level(logging.WARNING, logger="adapters.kube"):
        sync.crons.sync_once(AT)
    lines = [r.getMessage() for r in caplog.records if "adopted its status without" in r.message]
    assert [line.split(" without ", 1)[1].split(":")[0] for line in lines] == [
        "status.failed",
        "status.active[0].name",
        "status.conditions",
    ]
    assert all(line.startswith(f"cronworkflow {ns}/odd:") for line in lines)
    agg = engine.service.find(ns, "odd", obj["metadata"]["uid"])
    assert (agg.succeeded, agg.failed, agg.last_scheduled_time) == (7, 0, LAST)
    (adopted,) = [e for e in engine.service.events.get(agg.id) if event_type(e) == "StatusAdopted"]
    assert adopted.unreadable[0] == "status.failed: 'two' is not a count (a whole number >= 0)"


# ---------------------------------------------------------------------- the status Argo reads


def test_the_status_names_each_active_run_with_its_uid_and_the_stream_that_wrote_it(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    """Argo's controller matches active runs by uid (reconcileActiveWfs): a run named without
    one is dropped from `active` uncounted when it ends after the hand-back."""
    ns = kube_namespace
    cron = argo_ran(api, ns, "back")
    sync = KubeSync(engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT))
    sync.crons.sync_once(AT)
    agg = engine.service.find(ns, "back", cron["metadata"]["uid"])
    # A fire of ours: its Workflow is created by the dispatcher, which remembers its uid.
    engine.service.tick([agg.id], T0 + timedelta(minutes=1))
    engine.projector.catch_up(T0 + timedelta(minutes=1))
    sync.poll(T0 + timedelta(minutes=1))
    got = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "back")
    uids = {
        w["metadata"]["name"]: w["metadata"]["uid"]
        for w in api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
    }
    active = got["status"]["active"]
    assert len(active) == 2 and all(a["uid"] == uids[a["name"]] for a in active)
    meta = got["metadata"]
    assert meta["annotations"][ANNOTATION_STREAM] == str(agg.id)
    assert meta["annotations"][ANNOTATION_SEQUENCE] == str(engine.service.load(agg.id).version)
    # The cluster says who wrote what: the dispatcher's Workflow and the status are ours.
    ours = workflow_name("back", T0 + timedelta(minutes=1))
    wf = api.get_namespaced_custom_object(GROUP, VERSION, ns, WF, ours)
    assert [m["manager"] for m in wf["metadata"]["managedFields"]] == [FIELD_MANAGER]
    status_writers = [
        m["manager"] for m in meta["managedFields"] if "f:status" in m.get("fieldsV1", {})
    ]
    assert FIELD_MANAGER in status_writers


def test_an_object_handed_back_and_taken_again_gets_the_new_streams_status(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    """The sequence on the object is the old stream's; the new stream starts lower and must
    not be taken for a stale writer."""
    ns = kube_namespace
    cron = argo_ran(api, ns, "twice")
    uid = cron["metadata"]["uid"]
    sync = KubeSync(engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT))
    sync.crons.sync_once(AT)
    first = engine.service.find(ns, "twice", uid)
    for k in range(5):  # a long first stay: the first stream's version grows past the second's
        engine.service.suspend(first.id, AT + timedelta(seconds=k))
        engine.service.resume(first.id, AT + timedelta(seconds=k))
    engine.service.tick([first.id], AT + timedelta(minutes=1))
    engine.projector.catch_up(AT + timedelta(minutes=1))
    sync.write_statuses()
    old = int(
        api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "twice")["metadata"][
            "annotations"
        ][ANNOTATION_SEQUENCE]
    )
    assert old == engine.service.load(first.id).version > 5

    # Released: Argo's label; its controller counts two more failures.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "twice", {"metadata": {"labels": {LABEL_INSTANCE: None}}}
    )
    sync.crons.watch_for(1, AT + timedelta(minutes=2))
    assert engine.service.load(first.id).deleted
    failed = engine.service.load(first.id).failed + 2
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "twice", {"status": {"failed": failed, "active": []}}
    )
    # Taken again: a new stream adopts what Argo counted, and its status is written.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "twice", {"metadata": {"labels": {LABEL_INSTANCE: INSTANCE}}}
    )
    sync.crons.watch_for(1, AT + timedelta(minutes=3))
    second = engine.service.find(ns, "twice", uid)
    assert second.id != first.id and second.failed == failed
    assert second.version < old
    engine.projector.catch_up(AT + timedelta(minutes=3))
    sync.write_statuses()
    meta = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "twice")["metadata"]
    assert meta["annotations"][ANNOTATION_STREAM] == str(second.id)
    assert meta["annotations"][ANNOTATION_SEQUENCE] == str(engine.service.load(second.id).version)


# ---------------------------------------------------------------------- the CLI moves


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "cronsource"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def labels(api: Any, ns: str) -> dict[str, str | None]:
    items = api.list_namespaced_custom_object(GROUP, VERSION, ns, CWF)["items"]
    return {
        o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(LABEL_INSTANCE)
        for o in items
    }


def test_adopt_and_release_through_the_cli(
    kube_apiserver: Any, kube: AioKube, api: Any, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    kubeconfig = str(kube_apiserver.kubeconfig)
    daily = {"schedules": ["0 3 * * *"]}  # its window is open all day but a few seconds
    for name, team in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        body = cron_body(name, labels={"team": team}, **daily)
        api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body)
    body = cron_body("mine", labels={"team": "a", LABEL_INSTANCE: INSTANCE}, **daily)
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body)

    bad = cli("adopt", "-l", "team in (a", "-n", ns, "--kubeconfig", kubeconfig)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("error: -l:"), bad.stderr
    nothing = cli("adopt", "-n", ns, "--kubeconfig", kubeconfig)
    assert nothing.returncode != 0 and "-l SELECTOR" in nothing.stderr
    assert labels(api, ns) == {"a1": None, "a2": None, "b1": None, "mine": INSTANCE}

    done = cli("adopt", "-l", "team=a", "-n", ns, "--kubeconfig", kubeconfig, "-o", "json")
    assert done.returncode == 0, done.stderr
    moves = {m["name"]: m for m in json.loads(done.stdout)}
    assert {n: m["moved"] for n, m in moves.items()} == {"a1": True, "a2": True, "mine": False}
    assert moves["mine"]["note"] == "already cronsource's"
    assert labels(api, ns) == {"a1": INSTANCE, "a2": INSTANCE, "b1": None, "mine": INSTANCE}

    # Release, checked against the store of the cronsource that took them: the object must
    # show the status of the stream's last decision first.
    store = f"sqlite:///{tmp_path / 'cronsource.db'}"
    assert cli("--store", store, "migrate").returncode == 0
    engine = bootstrap(store)
    now = datetime.now(UTC)  # the CLI judges the store's state on the real clock
    try:
        sync = KubeSync(engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(now))
        sync.crons.sync_once(now)
        engine.projector.catch_up(now)
        sync.write_statuses()
        a1 = engine.service.find(ns, "a1")
        engine.service.suspend(a1.id, now)  # a decision its status does not show yet
    finally:
        engine.close()
    late = cli(
        "--store",
        store,
        "release",
        "a1",
        "-n",
        ns,
        "--kubeconfig",
        kubeconfig,
        "--timeout",
        "1s",
    )
    assert late.returncode == 1, late.stderr
    assert "not moved" in late.stdout and "is `cronsource run --kube` running?" in late.stdout
    assert labels(api, ns)["a1"] == INSTANCE

    # The set: a2 and mine move at once; a1 waits until the status writer catches up, which
    # the command sees by reading the object again while it waits.
    exe = Path(sys.executable).parent / "cronsource"
    release = subprocess.Popen(
        [
            str(exe),
            "--store",
            store,
            "release",
            "-l",
            "team=a",
            "-n",
            ns,
            "--kubeconfig",
            kubeconfig,
            "--timeout",
            "60s",
            "-o",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while labels(api, ns)["a2"] is not None:  # the command judged the set once
            assert release.poll() is None, release.communicate()
            assert time.monotonic() < deadline, "a2 was not released"
            time.sleep(0.1)
        assert labels(api, ns)["a1"] == INSTANCE
        engine = bootstrap(store)
        try:
            sync = KubeSync(
                engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(now)
            )
            engine.projector.catch_up(now)
            sync.write_statuses()  # a1's status now shows its suspend
        finally:
            engine.close()
        out, err = release.communicate(timeout=90)
    finally:
        if release.poll() is None:
            release.kill()
    assert release.returncode == 0, err
    assert {m["name"] for m in json.loads(out) if m["moved"]} == {"a1", "a2", "mine"}
    assert labels(api, ns) == {"a1": None, "a2": None, "b1": None, "mine": None}


# ---------------------------------------------------------------------- the window, on a fake


class FakeKube:
    """KubeApi over a dict of CronWorkflows: list, get, and merge patches with a
    resourceVersion precondition, each recorded with the fake clock's time."""

    def __init__(self, objs: list[dict[str, Any]], clock: Any) -> None:
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.clock = clock
        self.patched: list[tuple[str, datetime, dict[str, Any]]] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)

    async def list(self, namespace: str | None, plural: str, label_selector: str) -> Any:
        return {"items": list(self.objs.values())}

    async def get(self, namespace: str, plural: str, name: str) -> Any:
        return self.objs[name]

    async def patch(self, namespace: str, plural: str, name: str, body: Any) -> Any:
        obj = self.objs[name]
        if body["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict")
        labels = dict(obj["metadata"].get("labels") or {})
        for k, v in body["metadata"]["labels"].items():
            if v is None:
                labels.pop(k, None)
            else:
                labels[k] = v
        obj["metadata"]["labels"] = labels
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self.patched.append((name, self.clock.now(), body))
        return obj


def every10(name: str, last: datetime, updated: datetime, **extra: Any) -> dict[str, Any]:
    body = cron_body(name, labels={}, schedules=["@every 10s"])
    body["metadata"].update(
        resourceVersion="1",
        namespace="default",
        creationTimestamp=rfc(last - timedelta(minutes=5)),
        managedFields=[{"manager": "workflow-controller", "time": rfc(updated)}],
    )
    body["status"] = {"lastScheduledTime": rfc(last), **extra}
    return body


S = datetime(2026, 5, 4, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("start", "updated", "moved_at"),
    [
        pytest.param(S + timedelta(seconds=4), S, S + timedelta(seconds=4), id="in the window"),
        # Argo fired at :00 and wrote its status in that second, or just after it turned:
        # its next tick is :10, or :11.
        pytest.param(S + timedelta(seconds=8), S, S + timedelta(seconds=13), id="tick near: waits"),
        pytest.param(S + timedelta(seconds=1), S, S + timedelta(seconds=3), id="just after one"),
        pytest.param(
            S + timedelta(seconds=4),
            S + timedelta(seconds=3),  # Argo registered the schedule again at 10:00:03
            S + timedelta(seconds=6),  # its period counts from :03 (or :04): settled at :06
            id="period restarted by an update",
        ),
    ],
)
def test_an_every_schedule_moves_between_two_of_argos_ticks(
    start: datetime, updated: datetime, moved_at: datetime
) -> None:
    clock = VirtualClock(start)
    fake = FakeKube([every10("e", S, updated)], clock)
    mover = Mover(fake, INSTANCE, clock=clock)  # type: ignore[arg-type]
    (move,) = mover.adopt("default", "", (), timedelta(minutes=1))
    assert move.moved and move.at is not None
    assert abs((move.at - moved_at).total_seconds()) < 0.3, move
    assert fake.patched[0][2]["metadata"]["labels"] == {LABEL_INSTANCE: INSTANCE}


def test_a_move_judged_on_an_old_version_is_judged_again() -> None:
    """The owner fired and wrote its status between the look and the patch: 409, read again."""
    clock = VirtualClock(S + timedelta(seconds=4))
    obj = every10("e", S, S)
    fake = FakeKube([obj], clock)
    stale = json.loads(json.dumps(obj))
    obj["metadata"]["resourceVersion"] = "2"
    fake.objs["e"] = obj

    lists: list[int] = []

    async def listed(*_: Any) -> Any:
        lists.append(1)
        return {"items": [stale if len(lists) == 1 else obj]}  # the first list was taken before

    fake.list = listed  # type: ignore[method-assign]
    mover = Mover(fake, INSTANCE, clock=clock)  # type: ignore[arg-type]
    (move,) = mover.adopt("default", "", (), timedelta(minutes=1))
    assert move.moved and [p[2]["metadata"]["resourceVersion"] for p in fake.patched] == ["2"]


def test_no_window_before_the_timeout_moves_nothing() -> None:
    clock = VirtualClock(S + timedelta(seconds=8))
    fake = FakeKube([every10("e", S, S)], clock)
    mover = Mover(
        fake,  # type: ignore[arg-type]
        INSTANCE,
        margin=timedelta(seconds=6),
        settle=timedelta(seconds=5),
        clock=clock,
    )
    (move,) = mover.adopt("default", "", (), timedelta(seconds=30))
    assert not move.moved and move.note.startswith("not moved: no window before the timeout")
    assert fake.patched == []


def test_cronsource_needs_an_instance_id_of_its_own() -> None:
    with pytest.raises(MoveError, match="--instance-id"):
        Mover(FakeKube([], VirtualClock(S)), "")  # type: ignore[arg-type]
    with pytest.raises(MoveError, match="--argo-instance-id"):
        Mover(FakeKube([], VirtualClock(S)), "x", argo_instance_id="x")  # type: ignore[arg-type]


def test_not_found_names_are_an_error_before_anything_moves() -> None:
    clock = VirtualClock(S + timedelta(seconds=4))
    fake = FakeKube([every10("e", S, S)], clock)
    mover = Mover(fake, INSTANCE, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(MoveError, match="cronworkflow nope not found"):
        mover.adopt("default", "", ("e", "nope"), timedelta(minutes=1))
    assert fake.patched == []


def test_an_adopted_run_the_api_did_not_answer_for_is_read_again_at_the_next_drain() -> None:
    """Left unread, a run that ended before the adoption would hold Forbid for good."""
    from cronsource.adapters.runtime.kube import WorkflowWatcher
    from cronsource.domain.adoption import read_argo_status
    from cronsource.domain.manifest import parse_manifest
    from cronsource.domain.service import CronService

    svc = CronService(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    name = workflow_name("c", LAST)
    obj = cron_body("c", concurrencyPolicy="Forbid")
    obj["metadata"]["namespace"] = "default"
    obj["status"] = {"active": [ref(name, "default")], "lastScheduledTime": rfc(LAST)}
    manifest = parse_manifest({k: v for k, v in obj.items() if k != "status"})
    cron_id, _ = svc.apply(manifest, AT, adopt=read_argo_status(obj, "default", AT))
    ended = {
        "metadata": {"name": name, "namespace": "default"},
        "status": {"phase": "Succeeded", "finishedAt": rfc(AT)},
    }
    answers: list[Any] = [ApiError(503, "Service Unavailable"), ended]

    class Flaky(FakeKube):
        async def get(self, namespace: str, plural: str, name: str) -> Any:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    runs = WorkflowWatcher(Flaky([], VirtualClock(AT)), svc, "default")  # type: ignore[arg-type]
    runs.backoff = Backoff(attempts=1, sleep=lambda s: None)
    runs.check(cron_id, "default", [name], AT)
    assert svc.load(cron_id).active == {name: LAST} and runs.to_check
    runs.drain(AT)
    agg = svc.load(cron_id)
    assert (agg.active, agg.succeeded, runs.to_check) == ({}, 1, {})
