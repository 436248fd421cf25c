"""An API server that stops answering (SIGSTOP, a partition that drops packets) while the
store answers: the scheduler decides on the store alone, so its ticks must not wait for the
cluster. Status writes ran on the loop's thread, each waiting out its request timeout and
retries: the loop was held for most of a minute and 200 CronWorkflows' tick was decided 45 s
late (DeadlineExceeded), found by a hostile probe. A turn now spends at most
STATUS_WRITES_AT_MOST on them; what is not written is written at a later turn."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, KubeTarget, connect
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.kube.sync import STATUS_WRITES_AT_MOST
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.service import NotFound
from tests.instants import T0
from tests.integration.test_kube_flow import until
from tests.kube.faultproxy import FaultProxy, Faults

pytestmark = pytest.mark.k8s


@pytest.fixture
def proxy(kube_apiserver: Any, tmp_path: Path) -> Iterator[FaultProxy]:
    with FaultProxy(kube_apiserver.kubeconfig, tmp_path / "proxy", Faults()) as p:
        yield p


def test_a_hung_api_server_holds_a_turn_no_longer_than_the_status_budget(
    proxy: FaultProxy, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)
    clock = VirtualClock(T0)
    kube = connect(str(proxy.kubeconfig))
    engine = bootstrap("memory:", target=KubeTarget(kube))
    sync = KubeSync(engine, kube, namespace=ns, clock=clock)
    loop = SchedulerLoop(engine, SoleOwner(), watcher=sync, clock=clock)
    sync.start(watch_seconds=1)
    try:
        proxy.force = lambda line: "hang" if line.startswith("PATCH") else None
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            CWF,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "CronWorkflow",
                "metadata": {"name": "hourly"},
                "spec": {
                    "schedules": ["0 * * * *"],
                    "workflowSpec": {
                        "entrypoint": "main",
                        "templates": [{"name": "main", "container": {"image": "busybox"}}],
                    },
                },
            },
        )

        def admitted() -> bool:
            try:
                engine.service.find(ns, "hourly")
                return True
            except NotFound:
                return False

        until(admitted, lambda: sync.crons.drain(clock.now()), "admission")
        engine.projector.catch_up(clock.now())

        began = time.monotonic()
        with pytest.raises(TimeoutError, match="does not answer in time"):
            sync.write_statuses()
        assert time.monotonic() - began < STATUS_WRITES_AT_MOST + 5

        began = time.monotonic()
        loop.turn()  # the run watcher fails (and backs off); the turn goes on
        assert time.monotonic() - began < STATUS_WRITES_AT_MOST + 5
        assert loop.supervise_runs.failing

        proxy.force = None
        assert sync.write_statuses() == 1  # written at a later turn, once it answers
        obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "hourly")
        assert obj.get("status") is not None
    finally:
        proxy.force = None
        sync.stop()
        kube.close()
        engine.close()
