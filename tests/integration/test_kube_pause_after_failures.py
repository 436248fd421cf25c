"""The pause after failures against the real API server (issue 23 item 1), as `cronsource run
--kube` wires it: a CronWorkflow with `cronsource.io/pause-after-failures: "2"`, two children
failed by patching their status as Argo's executor would, and the object in the cluster then
shows an Argo-valid `PausedAfterFailures` condition naming both runs with phase Active; no
child is created while paused; `cronsource resume` (on the store) clears the condition on the
object. An edit that sets the annotation to a bad value is rejected (`SpecError` naming the
annotation and the value), as any invalid spec arriving from the cluster is.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml
from kubernetes import client

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF, KubeTarget, connect
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import NotFound
from tests.instants import T0
from tests.integration.test_kube_flow import until, z

pytestmark = pytest.mark.k8s

MANIFEST = """
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: flaky
  annotations:
    cronsource.io/pause-after-failures: "2"
spec:
  schedules:
    - "@every 2s"
  failedJobsHistoryLimit: 5
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        container:
          image: busybox
          args: ["false"]
"""


def paused(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in status.get("conditions") or [] if c["type"] == "PausedAfterFailures"]


def test_two_failed_children_pause_and_the_object_shows_the_condition_until_resume(
    kube_apiserver: Any, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)
    clock = VirtualClock(T0)
    kube = connect(str(kube_apiserver.kubeconfig))
    engine = bootstrap("memory:", target=KubeTarget(kube))
    sync = KubeSync(engine, kube, namespace=ns, clock=clock)
    loop = SchedulerLoop(engine, SoleOwner(), watcher=sync, clock=clock)
    sync.start(watch_seconds=1)
    try:
        obj = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, yaml.safe_load(MANIFEST))

        def cron_id_or_none() -> Any:
            try:
                return engine.service.find(ns, "flaky", obj["metadata"]["uid"]).id
            except NotFound:
                return None

        until(lambda: cron_id_or_none() is not None, loop.turn, "admission")
        cron_id = cron_id_or_none()
        first = engine.service.load(cron_id).next_due()
        assert first is not None
        ticks = [first, first + timedelta(seconds=2)]
        names = [workflow_name("flaky", t) for t in ticks]

        def cwf() -> dict[str, Any]:
            return dict(api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "flaky"))

        def children() -> set[str]:
            items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            return {w["metadata"]["name"] for w in items}

        for i, tick in enumerate(ticks):
            clock.set(tick)
            until(lambda i=i: children() >= set(names[: i + 1]), loop.turn, f"child {i}")
        for i, (name, phase) in enumerate(zip(names, ["Failed", "Error"], strict=True)):
            api.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                WF,
                name,
                {"status": {"phase": phase, "finishedAt": z(ticks[-1] + timedelta(seconds=i))}},
            )
        clock.set(ticks[-1] + timedelta(seconds=1))
        until(lambda: bool(paused(cwf().get("status") or {})), loop.turn, "the condition")

        status = cwf()["status"]
        [cond] = paused(status)
        assert cond["status"] == "True"
        assert f"paused after 2 consecutive failed runs: {names[0]}, {names[1]};" in cond["message"]
        assert status["phase"] == "Active" and status["failed"] == 2
        assert cwf()["spec"].get("suspend") is not True  # a pause is not a suspension

        # Paused: the next ticks create nothing.
        for k in range(1, 4):
            clock.set(ticks[-1] + timedelta(seconds=2 * k))
            loop.turn()
        assert children() == set(names)

        # `cronsource resume` writes to the store; the status writer clears the condition.
        engine.service.resume(cron_id, clock.now(), by="cli")
        until(lambda: not paused(cwf().get("status") or {}), loop.turn, "the condition cleared")
        clock.set(clock.now() + timedelta(seconds=2))
        until(lambda: len(children()) == 3, loop.turn, "a run after the resume")

        # A bad threshold arriving from the cluster is rejected, naming the annotation.
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            CWF,
            "flaky",
            {"metadata": {"annotations": {"cronsource.io/pause-after-failures": "lots"}}},
        )

        def spec_error() -> str:
            conds = cwf().get("status", {}).get("conditions") or []
            return next((c["message"] for c in conds if c["type"] == "SpecError"), "")

        until(lambda: bool(spec_error()), loop.turn, "the SpecError condition")
        assert "cronsource.io/pause-after-failures must be a whole number" in spec_error()
        assert "(value: 'lots')" in spec_error()
    finally:
        sync.stop()
        engine.close()
        kube.close()
