"""Adopting an object whose status Argo's controller had just written a run out of, against the
real API server (tests/kube/apiserver.py).

Argo v4.0.5's `syncAll` patches each CronWorkflow from lists taken when its pass began, so a run
fired during the pass is written out of `status.active`; Argo's next pass lists it again (every
child that has not ended, `reconcileActiveWfs`), and counts it when it ends. Seen in
tests/e2e/test_argo_controller_interop.py under load: the object moved to cronsource between
the two passes, cronsource took the status alone, and the run was never counted by anyone
("ok-7 shows (7, 0) ..., ran (8, 0)"). cronsource now takes what Argo's controller would: the
status, and the object's children still running that it does not list.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    WF,
    AioKube,
    Backoff,
    KubeTarget,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.kube.watch import LABEL_INSTANCE
from cronsource.domain.adoption import ANNOTATION_LAST_USED_SCHEDULE
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED, LABEL_CRON
from tests.instants import T0

pytestmark = pytest.mark.k8s

INSTANCE = "cronsource"
#: Argo's ticks: `counted` ended and was counted, `listed` runs and is in `active`, `dropped`
#: runs and was written out of `active` by a syncAll pass that began before its fire.
COUNTED, LISTED, DROPPED = (T0 - timedelta(minutes=m) for m in (3, 2, 1))
AT = DROPPED + timedelta(seconds=4)  # cronsource takes the object between two passes


def rfc(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def engine(kube: AioKube) -> Iterator[Engine]:
    eng = bootstrap("memory:", target=KubeTarget(kube, Backoff(sleep=lambda s: None)))
    yield eng
    eng.close()


def cron_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {
            "name": name,
            "labels": {LABEL_INSTANCE: INSTANCE},
            "annotations": {ANNOTATION_LAST_USED_SCHEDULE: "* * * * *"},
        },
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


def child_body(cron: str, owner_uid: str, t: datetime, phase: str) -> dict[str, Any]:
    """A child Workflow as Argo's controller makes it (label, annotation, owner), in `phase`."""
    status: dict[str, Any] = {"phase": phase}
    if phase == "Succeeded":
        status["finishedAt"] = rfc(t + timedelta(seconds=10))
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {
            "name": workflow_name(cron, t),
            "labels": {LABEL_CRON: cron},
            "annotations": {ANNOTATION_SCHEDULED: rfc(t)},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "CronWorkflow",
                    "name": cron,
                    "uid": owner_uid,
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


def test_a_running_child_argos_status_dropped_is_adopted_as_active_and_counted_when_it_ends(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str, caplog: Any
) -> None:
    ns = kube_namespace
    cron = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, cron_body("moved"))
    uid = cron["metadata"]["uid"]
    counted, listed, dropped = (workflow_name("moved", t) for t in (COUNTED, LISTED, DROPPED))
    for t, phase in ((COUNTED, "Succeeded"), (LISTED, "Running"), (DROPPED, "Running")):
        api.create_namespaced_custom_object(
            GROUP, VERSION, ns, WF, child_body("moved", uid, t, phase)
        )
    # A run of an earlier object of that name (another uid), still running: not this one's.
    earlier = child_body("moved", "0b7b4b7e-0000-4000-8000-00000000dead", T0, "Running")
    api.create_namespaced_custom_object(GROUP, VERSION, ns, WF, earlier)
    # What Argo's syncAll wrote: `counted` counted, `listed` active, `dropped` written out.
    ref = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow", "namespace": ns}
    status = {
        "active": [{**ref, "name": listed}],
        "lastScheduledTime": rfc(DROPPED),
        "succeeded": 1,
        "failed": 0,
        "phase": "Active",
    }
    api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, "moved", {"status": status})

    sync = KubeSync(engine, kube, namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT))
    with caplog.at_level(logging.WARNING, logger="cronsource.adapters.infrastructure.kube"):
        sync.crons.sync_once(AT)
    agg = engine.service.find(ns, "moved", uid)
    assert (agg.succeeded, sorted(agg.active)) == (1, sorted([listed, dropped]))
    assert agg.active[dropped] == DROPPED  # its tick, from Argo's annotation
    (adopted,) = [e for e in engine.service.events.get(agg.id) if event_type(e) == "StatusAdopted"]
    assert dropped in adopted.active_workflows
    assert any(
        dropped in r.getMessage() and "does not list" in r.getMessage() for r in caplog.records
    )

    # Both end; the run watch reports them as runs of ours, and both are counted.
    sync.runs.sync_once(AT)
    done = {"status": {"phase": "Succeeded", "finishedAt": rfc(AT + timedelta(seconds=5))}}
    for name in (listed, dropped):
        api.patch_namespaced_custom_object(GROUP, VERSION, ns, WF, name, done)
    sync.runs.watch_for(1, AT + timedelta(seconds=6))
    agg = engine.service.find(ns, "moved", uid)
    assert (agg.succeeded, dict(agg.active)) == (3, {})


class Counting:
    """The client, counting the lists of Workflows asked of it."""

    def __init__(self, inner: AioKube, lists: list[str]) -> None:
        self.inner = inner
        self.lists = lists

    def list(self, namespace: str | None, plural: str, selector: str) -> Any:
        if plural == WF:
            self.lists.append(selector)
        return self.inner.list(namespace, plural, selector)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_an_object_taken_again_later_lists_its_children_once(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    """The children are read when an object with a status is first taken, not at each of its
    changes (each would be a list request): a status write or a spec change lists nothing."""
    ns = kube_namespace
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, cron_body("moved"))
    status = {"lastScheduledTime": rfc(DROPPED), "succeeded": 1, "phase": "Active"}
    api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, "moved", {"status": status})
    lists: list[str] = []
    sync = KubeSync(
        engine, Counting(kube, lists), namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT)
    )
    sync.crons.sync_once(AT)
    assert lists == [f"{LABEL_CRON}=moved"]
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "moved", {"spec": {"suspend": True}}
    )
    sync.crons.watch_for(1, AT)
    sync.crons.sync_once(AT)
    assert lists == [f"{LABEL_CRON}=moved"]


def test_a_restart_on_the_same_store_lists_no_children(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    """A replica that starts on a store that holds the object's stream already updates it and
    adopts nothing: it lists no children (at every restart, one request per CronWorkflow)."""
    ns = kube_namespace
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, cron_body("kept"))
    status = {"lastScheduledTime": rfc(DROPPED), "succeeded": 1, "phase": "Active"}
    api.patch_namespaced_custom_object(GROUP, VERSION, ns, CWF, "kept", {"status": status})
    first: list[str] = []
    KubeSync(
        engine, Counting(kube, first), namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT)
    ).crons.sync_once(AT)
    assert first == [f"{LABEL_CRON}=kept"]
    again: list[str] = []
    KubeSync(
        engine, Counting(kube, again), namespace=ns, instance_id=INSTANCE, clock=VirtualClock(AT)
    ).crons.sync_once(AT)
    assert again == []
