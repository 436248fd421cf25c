"""Argo parity through the Kubernetes entrypoint (issue 10), against the real API server:
what the watcher admits or rejects, lookup by name of a watched object, and the completed
label the status writer puts on a stopped CronWorkflow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    AioKube,
    KubeTarget,
    StatusWriter,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import CronWorkflowWatcher
from cronsource.domain.service import event_type
from cronsource.projections.readmodel import LABEL_COMPLETED

pytestmark = pytest.mark.k8s

T0 = datetime(2026, 5, 4, 10, 0, 30, tzinfo=UTC)
TEMPLATES = [{"name": "main", "container": {"image": "busybox"}}]


def cron_workflow(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {"entrypoint": "main", "templates": TEMPLATES},
            **spec,
        },
    }


@pytest.fixture
def target(kube_target: KubeTarget) -> KubeTarget:
    """tests/conftest.py's `engine` creates its Workflows in the test cluster."""
    return kube_target


def kinds(eng: Engine, cron_id: Any) -> list[str]:
    return [event_type(e) for e in eng.service.events.get(cron_id)]


def test_an_invalid_workflow_spec_from_the_cluster_is_spec_rejected_and_fires_nothing(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, cron_workflow("job"))
    bad = cron_workflow("broken")
    bad["spec"]["workflowSpec"]["templates"] = [{"name": "bad template name"}]
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, bad)
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=ns, clock=VirtualClock(T0))
    watcher.sync_once(T0)
    assert "'bad template name' is invalid" in watcher.rejected[(ns, "broken")]

    # A watched object has a uid; it is still found by its name alone.
    agg = engine.service.find(ns, "job")
    assert agg.uid

    # kubectl bypasses lint: an entrypoint removed in the cluster is Argo's SpecError.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "job", {"spec": {"workflowSpec": {"entrypoint": None}}}
    )
    watcher.watch_for(1, at=T0 + timedelta(seconds=5))
    engine.service.tick([agg.id], T0 + timedelta(minutes=3))
    rejected = engine.service.load(agg.id)
    assert "cannot validate Workflow: spec.entrypoint is required" in (rejected.spec_error or "")
    assert "SpecRejected" in kinds(engine, agg.id)
    assert "ScheduleFired" not in kinds(engine, agg.id)


def test_a_stopped_cronworkflow_gets_argos_completed_label_in_the_cluster(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    body = cron_workflow("stops", stopStrategy={"expression": "cronworkflow.failed == 0"})
    api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body)
    CronWorkflowWatcher(kube, engine.service, namespace=ns, clock=VirtualClock(T0)).sync_once(T0)
    agg = engine.service.find(ns, "stops")
    engine.service.tick([agg.id], T0 + timedelta(seconds=30))
    assert StatusWriter(kube).write_aggregate(engine.service.load(agg.id))
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "stops")
    assert obj["metadata"]["labels"] == {"team": "a", LABEL_COMPLETED: "true"}
    assert obj["status"]["phase"] == "Stopped"
