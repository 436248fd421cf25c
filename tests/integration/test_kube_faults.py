"""The engine against the real API server through a fault-injecting proxy
(tests/kube/faultproxy.py): 500s, connection resets before and after the server applied a
request, delays, and watch streams cut mid-way, on a seeded random schedule.

What must hold whatever the faults: nothing fires twice (one Workflow per scheduled time in the
cluster, one ScheduleFired per tick in the store), nothing is lost (every due tick has its
Workflow), and once the faults stop the CronWorkflow's `.status` converges to the store's.

Time is stepped: the scheduler loop runs on a virtual clock that moves 2 s per step through an
`@every 2s` schedule, so the test does not wait for the wall clock; the HTTP traffic is real.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import (
    ANNOTATION_SEQUENCE,
    CWF,
    GROUP,
    VERSION,
    WF,
    KubeTarget,
    connect,
)
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import NotFound, event_type
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED
from tests.instants import T0
from tests.kube.faultproxy import FaultProxy, Faults

pytestmark = pytest.mark.k8s

TICKS = 8
NAMES = ("alpha", "beta", "gamma")
SEED = 20260504
#: About one request in three meets a fault, every kind represented; five transient faults in
#: a row (what exhausts one Backoff) then happen about once in 250 calls, so the loop's own
#: supervisor retry is exercised too.
FAULTS = Faults(error=0.12, reset=0.08, lost=0.12, delay=0.1, cut=0.4, max_delay=0.4)


@pytest.fixture
def proxy(kube_apiserver: Any, tmp_path: Path) -> Iterator[FaultProxy]:
    with FaultProxy(kube_apiserver.kubeconfig, tmp_path / "proxy", FAULTS, seed=SEED) as p:
        yield p


def until(check: Callable[[], bool], step: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        step()
        time.sleep(0.05)


def test_faults_between_client_and_server_lose_nothing_and_fire_nothing_twice(
    proxy: FaultProxy, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    direct = client.CustomObjectsApi(kube_api)  # the user and the "Argo executor": no faults
    proxied = connect(str(proxy.kubeconfig))
    clock = VirtualClock(T0)
    engine: Engine = bootstrap("memory:", target=KubeTarget(proxied))
    sync = KubeSync(engine, proxied, namespace=ns, clock=clock)
    loop = SchedulerLoop(engine, SoleOwner(), watcher=sync, clock=clock)
    sync.start(watch_seconds=2)
    try:
        uids = {}
        for name in NAMES:
            obj = direct.create_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                CWF,
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "CronWorkflow",
                    "metadata": {"name": name},
                    "spec": {
                        "schedules": ["@every 2s"],
                        "concurrencyPolicy": "Allow",
                        # Keep every child, so "nothing lost" can be read off the cluster.
                        "successfulJobsHistoryLimit": 50,
                        "workflowSpec": {
                            "entrypoint": "main",
                            "templates": [{"name": "main", "container": {"image": "busybox"}}],
                        },
                    },
                },
            )
            uids[name] = obj["metadata"]["uid"]

        def admitted() -> bool:
            try:
                for name, uid in uids.items():
                    engine.service.find(ns, name, uid)
                return True
            except NotFound:
                return False

        until(admitted, loop.turn, 60, "admission through the proxy")
        cron_ids = {name: engine.service.find(ns, name, uid).id for name, uid in uids.items()}
        # Admitted at the same virtual instant: one `@every 2s` timeline for all of them.
        (first,) = {engine.service.load(c).next_due() for c in cron_ids.values()}
        assert first is not None
        ticks = [first + timedelta(seconds=2 * k) for k in range(TICKS)]

        def complete_children_before(at: datetime) -> None:
            """The executor: children scheduled 4 s or more ago succeed."""
            for wf in direct.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]:
                meta = wf["metadata"]
                scheduled = datetime.fromisoformat(
                    meta["annotations"][ANNOTATION_SCHEDULED].replace("Z", "+00:00")
                )
                if (wf.get("status") or {}).get("phase") or scheduled > at - timedelta(seconds=4):
                    continue
                direct.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    ns,
                    WF,
                    meta["name"],
                    {
                        "status": {
                            "phase": "Succeeded",
                            "finishedAt": _z(scheduled + timedelta(seconds=1)),
                        }
                    },
                )

        for tick in ticks:
            clock.set(tick)
            complete_children_before(tick)
            end = time.monotonic() + 0.6
            while time.monotonic() < end:
                loop.turn()
                time.sleep(0.05)

        # Faults off: everything converges.
        proxy.enabled = False
        clock.set(ticks[-1] + timedelta(seconds=1))  # no new tick due
        complete_children_before(clock.now() + timedelta(seconds=5))
        expected = {workflow_name(n, t): t for n in NAMES for t in ticks}

        def cluster_children() -> dict[str, str]:
            items = direct.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            return {w["metadata"]["name"]: w["metadata"]["annotations"][ANNOTATION_SCHEDULED]
                    for w in items}  # fmt: skip

        def converged() -> bool:
            if set(cluster_children()) != set(expected):
                return False
            rows = {r.name: r for r in engine.view.statuses(ns)}
            for name in NAMES:
                cwf = direct.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, name)
                shown = (cwf["metadata"].get("annotations") or {}).get(ANNOTATION_SEQUENCE)
                row = rows[name]
                if not (
                    row.status["succeeded"] == TICKS
                    and shown == str(row.version)
                    and cwf.get("status") == row.status
                ):
                    return False
            return True

        until(converged, loop.turn, 60, "status convergence once the faults stopped")

        # Nothing fired twice, nothing was lost: in the cluster ...
        assert cluster_children() == {name: _z(t) for name, t in expected.items()}
        # ... and in the store.
        for name, cron_id in cron_ids.items():
            evs = list(engine.service.events.get(cron_id))
            fired = [e.scheduled_time for e in evs if event_type(e) == "ScheduleFired"]
            assert sorted(fired) == ticks, name
            # Five transient faults in a row outlive the target's own retries: that fire is
            # recorded once as retried (TransientSubmissionError) and must then be recovered
            # by a later create; nothing is failed for good.
            failed = [e for e in evs if event_type(e) == "SubmissionFailed"]
            assert not [e for e in failed if not e.transient], name
            recovered = {e.workflow_name for e in evs if event_type(e) == "SubmissionRecovered"}
            assert {e.workflow_name for e in failed} <= recovered, name
            cwf = direct.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, name)
            assert cwf["status"]["active"] == []
            assert cwf["status"]["lastScheduledTime"] == _z(ticks[-1])
        print(
            "faults injected:",
            dict(proxy.counts),
            "loop failures:",
            loop.supervise_projections.failures,
            loop.supervise_runs.failures,
        )
        # The faults did happen, each kind of them.
        assert all(proxy.counts[k] > 0 for k in ("error", "reset", "lost", "delay", "cut")), (
            proxy.counts
        )
    finally:
        sync.stop()
        engine.close()
        proxied.close()


def _z(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
