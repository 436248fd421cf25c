"""The whole flow against the real API server, as `cronsource run --kube` wires it: a
CronWorkflow applied as kubectl-style YAML, the scheduler loop firing an `@every 2s` schedule
(on a virtual clock stepped 2 s at a time), children completed by patching their status as
Argo's executor would, and the CronWorkflow object showing `active`, `lastScheduledTime`,
`succeeded`/`failed`, with finished children beyond the history limits deleted, oldest first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
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
from cronsource.domain.service import NotFound, event_type
from tests.instants import T0

pytestmark = pytest.mark.k8s


MANIFEST = """
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: nightly
spec:
  schedules:
    - "@every 2s"
  concurrencyPolicy: Allow
  successfulJobsHistoryLimit: 1
  failedJobsHistoryLimit: 1
  workflowMetadata:
    labels:
      team: data
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        container:
          image: busybox
          args: ["true"]
"""


def until(
    check: Callable[[], bool], step: Callable[[], Any], what: str, timeout: float = 20
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        step()
        time.sleep(0.05)


def z(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_four_ticks_completed_show_on_the_object_and_history_beyond_the_limits_is_deleted(
    kube_apiserver: Any, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)  # the user and Argo's executor
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
                return engine.service.find(ns, "nightly", obj["metadata"]["uid"]).id
            except NotFound:
                return None

        until(lambda: cron_id_or_none() is not None, loop.turn, "admission")
        cron_id = cron_id_or_none()
        first = engine.service.load(cron_id).next_due()
        assert first is not None
        ticks = [first + timedelta(seconds=2 * k) for k in range(4)]
        names = [workflow_name("nightly", t) for t in ticks]

        def cwf() -> dict[str, Any]:
            return dict(api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "nightly"))

        def children() -> set[str]:
            items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            return {w["metadata"]["name"] for w in items}

        for i, tick in enumerate(ticks):
            clock.set(tick)
            until(lambda i=i: children() >= set(names[: i + 1]), loop.turn, f"child {i}")
        until(
            lambda: [a["name"] for a in cwf().get("status", {}).get("active", [])] == names,
            loop.turn,
            "four active children on the object",
        )
        status = cwf()["status"]
        assert status["lastScheduledTime"] == z(ticks[-1])
        (child,) = [
            w
            for w in api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            if w["metadata"]["name"] == names[0]
        ]
        assert child["metadata"]["labels"]["team"] == "data"
        assert child["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]

        # The executor finishes them in order: Succeeded, Failed, Succeeded, Failed.
        phases = ["Succeeded", "Failed", "Succeeded", "Failed"]
        for i, (name, phase) in enumerate(zip(names, phases, strict=True)):
            api.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                WF,
                name,
                {"status": {"phase": phase, "finishedAt": z(ticks[-1] + timedelta(seconds=i))}},
            )
        clock.set(ticks[-1] + timedelta(seconds=1))  # before the next tick: nothing new fires

        def settled() -> bool:
            s = cwf().get("status") or {}
            return (
                s.get("succeeded") == 2
                and s.get("failed") == 2
                and children()
                == {
                    names[2],
                    names[3],
                }
            )

        until(settled, loop.turn, "completions counted and history pruned")
        status = cwf()["status"]
        assert status["active"] == []
        assert status["lastScheduledTime"] == z(ticks[-1])
        # One of each kind is kept (limits 1 and 1); the older of each was deleted.
        pruned = [
            n
            for e in engine.service.events.get(cron_id)
            if event_type(e) == "HistoryPruned"
            for n in e.workflow_names
        ]
        assert sorted(pruned) == sorted([names[0], names[1]])
        assert types_of(engine, cron_id).count("ScheduleFired") == 4
    finally:
        sync.stop()
        engine.close()
        kube.close()


def types_of(engine: Any, cron_id: Any) -> list[str]:
    return [event_type(e) for e in engine.service.events.get(cron_id)]
