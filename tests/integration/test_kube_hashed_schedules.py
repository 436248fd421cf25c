"""Hashed `H` schedules against the real API server: `status.resolvedSchedules` is written
as Argo PR #16604 writes it (a map of each hashed schedule to its resolution, stale keys
removed, the whole map dropped when no schedule is hashed), the spec is never rewritten, and
the CRD update docs/argo-compatibility.md gives lets Argo v4.0.5's CRD take both."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    AioKube,
    KubeTarget,
    SeenMetadata,
    StatusWriter,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import CronWorkflowWatcher
from cronsource.domain.cronhash import expand
from tests.argo import peer
from tests.instants import T0
from tests.kube.apiserver import ApiServer, install_crds, wait_established
from tests.kube.apiserver import _until as until

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
CRD_PATCH = REPO / "deploy" / "argo-crd-patches" / "hashed-schedules.json"


@pytest.fixture
def target(kube_target: KubeTarget) -> KubeTarget:
    """tests/conftest.py's `engine` creates its Workflows in the test cluster."""
    return kube_target


def cron_workflow(name: str, schedules: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name},
        "spec": {
            "schedules": schedules,
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


def test_resolved_schedules_are_written_and_follow_spec_edits(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    names = ("nightly-a", "nightly-b")
    for name in names:
        api.create_namespaced_custom_object(
            GROUP, VERSION, ns, CWF, cron_workflow(name, ["H H * * *", "30 * * * *"])
        )
    seen = SeenMetadata()
    watcher = CronWorkflowWatcher(
        kube, engine.service, namespace=ns, clock=VirtualClock(T0), seen=seen
    )
    assert watcher.sync_once(T0) == 2
    writer = StatusWriter(kube, seen=seen)
    for name in names:
        assert writer.write_aggregate(engine.service.find(ns, name))

    objects = {n: api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, n) for n in names}
    resolved = {n: o["status"]["resolvedSchedules"] for n, o in objects.items()}
    assert resolved == {n: {"H H * * *": expand("H H * * *", ns, n)} for n in names}
    assert resolved["nightly-a"] != resolved["nightly-b"]  # the same schedule, spread out
    for obj in objects.values():
        assert obj["spec"]["schedules"] == ["H H * * *", "30 * * * *"]  # never rewritten

    # An edit to another hashed schedule: the old key goes, the new one comes.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "nightly-a", {"spec": {"schedules": ["H/15 H(9-17) * * *"]}}
    )
    watcher.watch_for(1, at=T0)
    assert writer.write_aggregate(engine.service.find(ns, "nightly-a"))
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "nightly-a")
    assert obj["status"]["resolvedSchedules"] == {
        "H/15 H(9-17) * * *": expand("H/15 H(9-17) * * *", ns, "nightly-a")
    }

    # No hashed schedule any more: the field is gone, not left empty or stale.
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, "nightly-a", {"spec": {"schedules": ["0 * * * *"]}}
    )
    watcher.watch_for(1, at=T0)
    assert writer.write_aggregate(engine.service.find(ns, "nightly-a"))
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "nightly-a")
    assert "resolvedSchedules" not in obj["status"]
    assert obj["status"]["phase"] == "Active"


def test_a_malformed_h_from_the_cluster_is_rejected_with_argos_message(
    engine: Engine, kube: AioKube, api: Any, kube_namespace: str
) -> None:
    """kubectl bypasses lint: the watcher refuses the spec, nothing is stored for it."""
    ns = kube_namespace
    api.create_namespaced_custom_object(
        GROUP, VERSION, ns, CWF, cron_workflow("broken", ["H(0-90) * * * *"])
    )
    watcher = CronWorkflowWatcher(kube, engine.service, namespace=ns, clock=VirtualClock(T0))
    watcher.sync_once(T0)
    assert (ns, "broken") in watcher.rejected
    assert 'range "0-90" is outside of 0-59, the range of the minute field' in str(
        watcher.rejected[(ns, "broken")]
    )


# -- Argo's own CRD -----------------------------------------------------------------------------

#: Argo v4.0.5's CronWorkflow CRD under a group of its own, so that it stands beside ours in
#: the session's server without replacing it.
TEST_GROUP = "argo-v405.cronsource.test"


@pytest.fixture
def argo_crd(kube_apiserver: ApiServer, kube_api: Any) -> Iterator[dict[str, Any]]:
    path = peer.source_tree() / "manifests/base/crds/full/argoproj.io_cronworkflows.yaml"
    crd = yaml.safe_load(path.read_text())
    crd["metadata"] = {"name": f"cronworkflows.{TEST_GROUP}"}
    crd["spec"]["group"] = TEST_GROUP
    install_crds(kube_apiserver, [crd])
    ext = client.ApiextensionsV1Api(kube_api)
    try:
        yield crd
    finally:
        ext.delete_custom_resource_definition(crd["metadata"]["name"])


def _create(api: Any, ns: str, name: str, schedules: list[str]) -> dict[str, Any]:
    body = cron_workflow(name, schedules)
    body["apiVersion"] = f"{TEST_GROUP}/v1alpha1"
    return dict(api.create_namespaced_custom_object(TEST_GROUP, "v1alpha1", ns, CWF, body))


def _status_kept(api: Any, ns: str, name: str) -> dict[str, Any]:
    """Merge-patch a status with resolvedSchedules; what the server kept of it."""
    patched = api.patch_namespaced_custom_object(
        TEST_GROUP,
        "v1alpha1",
        ns,
        CWF,
        name,
        {"status": {"phase": "Active", "resolvedSchedules": {"H H * * *": "9 6 * * *"}}},
    )
    return dict(patched.get("status") or {})


def test_argo_v4_0_5_crd_refuses_h_until_the_documented_update(
    argo_crd: dict[str, Any],
    kube_apiserver: ApiServer,
    kube_api: Any,
    api: Any,
    kube_namespace: str,
) -> None:
    ns = kube_namespace
    pattern = argo_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["schedules"]["items"]["pattern"]
    assert "([0-9*,/?-]+\\s+){4}" in pattern  # v4.0.5's: digits and `*,/?-` only
    for schedule in ("H H * * *", "H(0-29)/10 * * * *"):
        with pytest.raises(ApiException) as refused:
            _create(api, ns, "hashed", [schedule])
        assert refused.value.status == 422
        assert "spec.schedules[0]" in json.loads(refused.value.body)["message"]
    # Its structural status schema prunes the field it does not know.
    _create(api, ns, "plain", ["0 * * * *"])
    assert _status_kept(api, ns, "plain") == {"phase": "Active"}

    ops = json.loads(CRD_PATCH.read_text())
    client.ApiextensionsV1Api(kube_api).patch_custom_resource_definition(
        argo_crd["metadata"]["name"], copy.deepcopy(ops)
    )
    # The server takes the new schema up a moment after the PATCH answers: wait for the
    # CRD to be Established again, then for the first create it admits.
    wait_established(kube_apiserver, [argo_crd["metadata"]["name"]], 30)

    def admitted() -> bool:
        try:
            _create(api, ns, "hashed", ["H H * * *", "H(0-29)/10 H(9-17) * * MON-FRI"])
        except ApiException as e:
            if e.status != 422:
                raise
            return False
        return True

    until(admitted, 30, "the updated CRD to admit H")
    assert _status_kept(api, ns, "hashed")["resolvedSchedules"] == {"H H * * *": "9 6 * * *"}
    # Descriptors and @every keep being accepted, and anything else keeps being refused.
    _create(api, ns, "daily", ["@daily", "@every 1h30m"])
    with pytest.raises(ApiException) as still:
        _create(api, ns, "six", ["H * * * * *"])
    assert still.value.status == 422
