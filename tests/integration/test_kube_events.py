"""Retried submissions and Kubernetes Events against the real API server (issue 23 items 5
and 6), as `cronsource run --kube` wires them.

- Every create of a Workflow fails with a 500 (the fault proxy of tests/kube/faultproxy.py,
  forced for `POST .../workflows` only): the fire is retried until its deadline, recorded as
  retried then given up with the last error, the CronWorkflow's `.status` shows
  `TransientSubmissionError`, and Warning Events of that reason are on the object. Once
  creates go through again, the next fire's Workflow is created (`SuccessfulCreate`) and the
  condition clears.
- 1,000 fires of one CronWorkflow, through the recorder and the real client, leave a dozen
  Event objects: aggregated and rate limited as client-go's recorder does.

The Events are listed as `kubectl describe cronworkflow` lists them: core v1 Events in the
object's namespace with `involvedObject.name` and `involvedObject.uid` its own (a field
selector the API server serves).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF, KubeTarget, connect
from cronsource.adapters.infrastructure.kube.events import (
    COMBINED_PREFIX,
    EventRecorder,
    ObjectRef,
    created_event,
)
from cronsource.adapters.infrastructure.kube.target import Backoff
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import NotFound, event_type
from tests.instants import T0
from tests.kube.faultproxy import FaultProxy, Faults

pytestmark = pytest.mark.k8s

MINUTE = timedelta(minutes=1)


def manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name},
        "spec": {
            "schedules": ["* * * * *"],
            "startingDeadlineSeconds": 30,
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


def until(
    check: Callable[[], bool], step: Callable[[], Any], what: str, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        step()
        time.sleep(0.05)


def described(core: client.CoreV1Api, ns: str, name: str, uid: str) -> list[Any]:
    """The Events `kubectl describe cronworkflow NAME` shows, oldest first."""
    got = core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name},involvedObject.uid={uid}"
    )
    return sorted(got.items, key=lambda e: (e.first_timestamp, e.metadata.name))


@pytest.fixture
def proxy(kube_apiserver: Any, tmp_path: Path) -> Iterator[FaultProxy]:
    with FaultProxy(kube_apiserver.kubeconfig, tmp_path / "proxy", Faults()) as p:
        yield p


def test_a_create_failing_transiently_is_retried_then_given_up_with_condition_and_events(
    proxy: FaultProxy, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)  # the user: no faults
    core = client.CoreV1Api(kube_api)
    creates = 0

    def fail_creates(line: str) -> str | None:
        nonlocal creates
        if line.startswith("POST ") and f"/namespaces/{ns}/workflows" in line:
            creates += 1
            return "error"
        return None

    proxy.force = fail_creates
    kube = connect(str(proxy.kubeconfig))
    clock = VirtualClock(T0)
    # The client's own retries kept short: the dispatch step's backoff (on the virtual
    # clock) does the rest.
    engine = bootstrap("memory:", target=KubeTarget(kube, Backoff(attempts=2, base=0.01, cap=0.02)))
    sync = KubeSync(engine, kube, namespace=ns, clock=clock)
    loop = SchedulerLoop(engine, SoleOwner(), watcher=sync, clock=clock)
    sync.start(watch_seconds=1)
    try:
        obj = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, manifest("flaky"))
        uid = obj["metadata"]["uid"]

        def cron_id() -> Any:
            try:
                return engine.service.find(ns, "flaky", uid).id
            except NotFound:
                return None

        until(lambda: cron_id() is not None, loop.turn, "admission")
        tick = engine.service.load(cron_id()).next_due()
        assert tick is not None

        def reasons() -> list[str]:
            return [
                e.reason
                for e in engine.service.events.get(cron_id())
                if event_type(e) == "SubmissionFailed"
            ]

        # The fire, then turns 5 s apart past its 30 s deadline.
        clock.set(tick)
        until(lambda: reasons() == ["TransientSubmissionError"], loop.turn, "the first failure")
        for s in range(5, 45, 5):
            clock.set(tick + timedelta(seconds=s))
            loop.turn()
        until(
            lambda: reasons() == ["TransientSubmissionError", "SubmissionRetriesExhausted"],
            loop.turn,
            "the fire given up",
        )
        assert creates > 2  # retried
        given_up = [e for e in engine.service.events.get(cron_id())][-1]
        assert "injected by the fault proxy" in given_up.message or "500" in given_up.message
        assert api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"] == []

        def conditions() -> dict[str, str]:
            cwf = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "flaky")
            return {
                c["type"]: c["message"] for c in (cwf.get("status") or {}).get("conditions", [])
            }

        until(
            lambda: "given up" in conditions().get("TransientSubmissionError", ""),
            loop.turn,
            "the condition on the object",
        )

        def warnings() -> list[str]:
            return [
                e.message
                for e in described(core, ns, "flaky", uid)
                if e.type == "Warning" and e.reason == "TransientSubmissionError"
            ]

        until(lambda: len(warnings()) == 2, loop.turn, "two Warning Events")
        assert "will retry" in warnings()[0] and "given up" in warnings()[1]
        event = described(core, ns, "flaky", uid)[0]
        assert (event.involved_object.kind, event.source.component) == (
            "CronWorkflow",
            "cronsource",
        )

        # Creates go through again: the next fire's Workflow is created, the condition clears.
        proxy.force = None
        clock.set(tick + MINUTE)
        child = workflow_name("flaky", tick + MINUTE)
        until(
            lambda: "SuccessfulCreate" in {e.reason for e in described(core, ns, "flaky", uid)},
            loop.turn,
            "SuccessfulCreate",
        )
        (created,) = [
            e for e in described(core, ns, "flaky", uid) if e.reason == "SuccessfulCreate"
        ]
        assert (created.type, created.message) == ("Normal", f"Created workflow {child}")
        # The same Events through the events.k8s.io API, as `kubectl events --for` reads them
        # (as JSON: the Python client's model refuses the null `eventTime` of core Events).
        regarding = client.EventsV1Api(kube_api).list_namespaced_event(
            ns, field_selector=f"regarding.name=flaky,regarding.uid={uid}", _preload_content=False
        )
        assert {e["reason"] for e in json.loads(regarding.data)["items"]} == {
            "TransientSubmissionError",
            "SuccessfulCreate",
        }
        until(lambda: "TransientSubmissionError" not in conditions(), loop.turn, "cleared")
        assert sync.events.recorder.stats.failed == sync.events.recorder.stats.dropped == 0
    finally:
        sync.stop()
        engine.close()
        kube.close()


def test_a_thousand_fires_on_one_object_leave_few_event_objects(
    kube_apiserver: Any, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)
    core = client.CoreV1Api(kube_api)
    obj = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, manifest("busy"))
    uid = obj["metadata"]["uid"]
    kube = connect(str(kube_apiserver.kubeconfig))
    clock = VirtualClock(T0)
    recorder = EventRecorder(kube, clock=clock, queue_size=2000)
    try:
        ref = ObjectRef(ns, "busy", uid)
        for i in range(1000):
            at = T0 + i * MINUTE
            clock.set(at)
            recorder.emit(ref, *created_event(workflow_name("busy", at)), at)
            recorder.drain()
        events = described(core, ns, "busy", uid)
        assert len(events) == 10, [e.message for e in events]
        (combined,) = [e for e in events if e.message.startswith(COMBINED_PREFIX)]
        stats = recorder.stats
        assert stats.failed == stats.dropped == 0
        # Its count is of every fire it stands for (the 10th on), rate limited or not, as
        # client-go counts: as of the last write the spam filter let through.
        assert 1 + stats.patched < combined.count <= 991
        assert stats.created + stats.patched + stats.rate_limited == 1000
        assert stats.created + stats.patched < 250  # what the API server was sent
    finally:
        kube.close()
