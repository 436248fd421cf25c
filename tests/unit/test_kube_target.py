"""The dispatcher's target on a cluster (adapters/infrastructure/kube/target.py), on the in-memory
API (tests/kube/fake.py): a create is idempotent on the Workflow's name (409 AlreadyExists is
done only when the object is ours, for the same tick), 400/403/422 and a missing namespace are
permanent, 5xx, 429 and no answer are retried and then raised, and terminate/delete accept what
is gone. The same target against the real server: tests/integration/test_kube_contract.py and
test_target_conformance.py.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest

from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    WF,
    ApiError,
    Backoff,
    Creation,
    KubeTarget,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED, PermanentSubmissionError
from tests.instants import T0
from tests.kube.fake import FakeKube
from tests.unit.test_kube_watch import NS, TICK, admitted, children, cron_workflow

OWNER = "0b6c1b1e-0000-4000-8000-000000000001"


def workflow(name: str = "job-1", owner: str = OWNER, tick: str = "2026-05-04T10:01:00Z") -> Any:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {ANNOTATION_SCHEDULED: tick},
            "ownerReferences": [{"kind": "CronWorkflow", "name": "job", "uid": owner}],
        },
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    }


def create(target: KubeTarget, wf: dict[str, Any]) -> None:
    target.create(wf, cron_id="cron", trigger="schedule", at=TICK)


@pytest.fixture
def target(kube_target: KubeTarget) -> KubeTarget:
    return kube_target


def test_a_replayed_create_of_our_workflow_is_done_and_leaves_one(
    kube: FakeKube, target: KubeTarget
) -> None:
    create(target, workflow())
    create(target, workflow())  # the dispatcher repeats its batch after a crash
    assert children(kube) == ["job-1"]
    assert target.created(workflow(), cron_id="cron")


@pytest.mark.parametrize(
    "theirs",
    [
        pytest.param(workflow(owner="someone-else"), id="another owner"),
        pytest.param(workflow(tick="2026-05-04T11:00:00Z"), id="our owner, another tick"),
    ],
)
def test_a_name_that_is_not_our_workflow_for_that_tick_is_refused_and_left_alone(
    kube: FakeKube, target: KubeTarget, theirs: dict[str, Any]
) -> None:
    kube.user.create(NS, WF, theirs)
    with pytest.raises(PermanentSubmissionError, match="exists and is not ours"):
        create(target, workflow())
    left = kube.user.get(NS, WF, "job-1")["metadata"]
    assert left["ownerReferences"] == theirs["metadata"]["ownerReferences"]
    assert left["annotations"] == theirs["metadata"]["annotations"]
    assert left["generation"] == 1  # untouched
    assert not target.created(workflow(), cron_id="cron")


def test_transient_errors_are_retried_then_raised_and_refusals_are_permanent(
    kube: FakeKube,
) -> None:
    sleeps: list[float] = []
    target = KubeTarget(kube, Backoff(attempts=3, sleep=sleeps.append))
    kube.fail("create", 503)
    kube.fail("create", 0)  # no answer: a reset connection
    create(target, workflow("job-1"))
    assert children(kube) == ["job-1"] and len(sleeps) == 2

    kube.fail("create", 429, times=3)
    with pytest.raises(ApiError) as gave_up:  # the dispatcher's position does not move
        create(target, workflow("job-2"))
    assert gave_up.value.status == 429

    with pytest.raises(PermanentSubmissionError, match="422"):
        create(target, workflow("Not_A_Name"))
    kube.fail("create", 403)
    with pytest.raises(PermanentSubmissionError, match="403"):
        create(target, workflow("job-3"))
    assert children(kube) == ["job-1"]


def test_a_namespace_that_does_not_exist_is_a_permanent_refusal() -> None:
    """With NamespaceLifecycle, as in a cluster: retrying would hold up every later fire."""
    kube = FakeKube(namespaces=("elsewhere",))
    try:
        target = KubeTarget(kube, Backoff(sleep=lambda s: None))
        (refused,) = target.create_many([Creation(workflow(), "cron")], TICK)
        assert isinstance(refused, PermanentSubmissionError) and "404" in str(refused)
    finally:
        kube.close()


def test_create_many_answers_per_creation_in_order(kube: FakeKube, target: KubeTarget) -> None:
    kube.user.create(NS, WF, workflow("job-2", owner="someone-else"))
    answers = target.create_many(
        [Creation(workflow(f"job-{i}"), "cron") for i in range(1, 5)], TICK
    )
    assert [type(a).__name__ for a in answers] == [
        "NoneType",
        "PermanentSubmissionError",
        "NoneType",
        "NoneType",
    ]
    assert children(kube) == ["job-1", "job-2", "job-3", "job-4"]


def test_quiet_is_clear_while_any_creation_sent_waits_for_its_answer(
    kube: FakeKube, target: KubeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the Kubernetes Events wait for (adapters/infrastructure/kube/events.py): no
    creation of any call still unanswered."""
    held = {"job-1": threading.Event(), "job-3": threading.Event()}
    create_now = kube.create

    async def answered_when_let_go(ns: str, plural: str, body: dict[str, Any]) -> Any:
        let_go = held.get(body["metadata"]["name"])
        while let_go is not None and not let_go.is_set():
            await asyncio.sleep(0.005)
        return await create_now(ns, plural, body)

    monkeypatch.setattr(kube, "create", answered_when_let_go)
    assert target.quiet.is_set()
    first = target.submit_many([Creation(workflow(f"job-{i}"), "cron") for i in (1, 2)])
    second = target.submit_many([Creation(workflow("job-3"), "cron")])
    kube.run(asyncio.sleep(0))  # both calls have started on the client's loop
    assert not target.quiet.is_set()
    held["job-1"].set()
    assert first.result(timeout=10) == [None, None]
    assert not target.quiet.is_set()  # job-3 is still unanswered
    held["job-3"].set()
    assert second.result(timeout=10) == [None]
    assert target.quiet.is_set()
    assert children(kube) == ["job-1", "job-2", "job-3"]


def test_an_aggregate_without_uid_gets_the_owner_uid_from_the_cluster(
    engine: Engine, kube: FakeKube
) -> None:
    obj = kube.user.create(NS, CWF, cron_workflow("local"))
    body = {**cron_workflow("local"), "metadata": {"name": "local", "namespace": NS}}
    cron_id, _ = engine.service.apply(parse_manifest(body), T0)  # applied by the CLI: no uid
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    (wf,) = kube.user.list(NS, WF)
    assert wf["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]


def test_a_fire_of_a_cronworkflow_gone_from_the_cluster_is_submission_failed(
    engine: Engine, kube: FakeKube
) -> None:
    body = {**cron_workflow("local"), "metadata": {"name": "local", "namespace": NS}}
    cron_id, _ = engine.service.apply(parse_manifest(body), T0)  # no such object in the cluster
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    assert [event_type(e) for e in engine.service.events.get(cron_id)][-1] == "SubmissionFailed"
    assert children(kube) == []


def test_terminate_and_delete_accept_what_is_gone_or_finished(
    engine: Engine, kube: FakeKube, target: KubeTarget
) -> None:
    cron_id = admitted(engine, kube)
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    name = workflow_name("job", TICK)
    target.terminate(NS, name, TICK)
    assert kube.user.get(NS, WF, name)["spec"]["shutdown"] == "Terminate"
    kube.user.patch(NS, WF, name, {"spec": {"shutdown": None}, "status": {"phase": "Failed"}})
    target.terminate(NS, name, TICK + timedelta(seconds=1))  # finished: left as it is
    assert "shutdown" not in kube.user.get(NS, WF, name)["spec"]
    target.delete(NS, name, TICK)
    assert children(kube) == []
    target.delete(NS, name, TICK)  # gone: fine
    target.terminate(NS, name, TICK)
