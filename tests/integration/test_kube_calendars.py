"""Calendars against the real API server (issue 23 item 2), as `cronsource run --kube` wires
them: the watcher reads ConfigMaps labelled `cronsource.io/calendar: "true"` into calendar
streams. Given a calendar that does not name today and a CronWorkflow naming it, a tick runs;
when the ConfigMap is edited to name today, the next tick is an `Excluded` skip naming the
calendar's version 2 and no child is created; an edit with a malformed date is not admitted
(the calendar keeps version 2, nothing half stored); when the ConfigMap is deleted, the
ticks are `SpecError` skips naming the missing calendar, and the object in the cluster shows
a `SpecError` condition naming it. An unlabelled ConfigMap is not read.
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
from cronsource.domain.service import NotFound, event_type
from tests.instants import T0
from tests.integration.test_kube_flow import until

pytestmark = pytest.mark.k8s

MANIFEST = """
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: workdays
  annotations:
    cronsource.io/calendars: holidays
spec:
  schedules:
    - "@every 2s"
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        container:
          image: busybox
"""


def configmap(dates: str, name: str = "holidays", labelled: bool = True) -> dict[str, Any]:
    labels = {"cronsource.io/calendar": "true"} if labelled else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"dates": dates},
    }


def version(svc: Any, ns: str) -> int | None:
    cal = svc.calendar(ns, "holidays")
    return None if cal is None else int(cal.version)


def test_the_watcher_reads_calendar_configmaps_and_each_edit_is_a_version(
    kube_apiserver: Any, kube_api: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)
    core = client.CoreV1Api(kube_api)
    clock = VirtualClock(T0)
    kube = connect(str(kube_apiserver.kubeconfig))
    engine = bootstrap("memory:", target=KubeTarget(kube))
    svc = engine.service
    sync = KubeSync(engine, kube, namespace=ns, clock=clock)
    loop = SchedulerLoop(engine, SoleOwner(), watcher=sync, clock=clock)
    sync.start(watch_seconds=1)
    try:
        plain = configmap("2026-05-05", name="unrelated", labelled=False)
        core.create_namespaced_config_map(ns, plain)
        core.create_namespaced_config_map(ns, configmap("2026-05-05"))
        until(lambda: svc.calendar(ns, "holidays") is not None, loop.turn, "the calendar")
        assert svc.calendar(ns, "unrelated") is None
        obj = api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, yaml.safe_load(MANIFEST))

        def cron_id_or_none() -> Any:
            try:
                return svc.find(ns, "workdays", obj["metadata"]["uid"]).id
            except NotFound:
                return None

        until(lambda: cron_id_or_none() is not None, loop.turn, "admission")
        cron_id = cron_id_or_none()

        def children() -> set[str]:
            items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            return {w["metadata"]["name"] for w in items}

        def skips() -> list[Any]:
            return [e for e in svc.events.get(cron_id) if event_type(e) == "ScheduleSkipped"]

        first = svc.load(cron_id).next_due()
        assert first is not None
        clock.set(first)
        until(lambda: len(children()) == 1, loop.turn, "the first child")

        # Edited to name today (T0's date): version 2, read by the next decision.
        core.patch_namespaced_config_map("holidays", ns, {"data": {"dates": "2026-05-04"}})
        until(lambda: version(svc, ns) == 2, loop.turn, "version 2")
        clock.set(first + timedelta(seconds=2))
        until(lambda: len(skips()) == 1, loop.turn, "the excluded tick")
        [skip] = skips()
        assert skip.reason == "Excluded"
        assert skip.values == {"calendar": "holidays", "version": "2", "date": "2026-05-04"}
        assert len(children()) == 1

        # A malformed edit is not admitted: the calendar stays at version 2.
        core.patch_namespaced_config_map("holidays", ns, {"data": {"dates": "2026-02-30"}})
        until(lambda: bool(sync.calendars.rejected), loop.turn, "the rejection")
        assert "data.dates: '2026-02-30' is not a date" in sync.calendars.rejected[(ns, "holidays")]
        assert version(svc, ns) == 2

        # Deleted: the ticks are SpecError skips naming it.
        core.delete_namespaced_config_map("holidays", ns)
        until(lambda: version(svc, ns) == 3, loop.turn, "the deletion")
        assert svc.calendar(ns, "holidays").deleted  # type: ignore[union-attr]
        clock.set(first + timedelta(seconds=4))
        until(lambda: len(skips()) == 2, loop.turn, "the SpecError skip")
        last = skips()[-1]
        assert last.reason == "SpecError"
        assert f"calendar 'holidays' not found in namespace {ns}" in last.message
        assert len(children()) == 1

        # The object in the cluster says so: a SpecError condition naming the calendar.
        def spec_error() -> str:
            obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "workdays")
            conds = (obj.get("status") or {}).get("conditions") or []
            return next((c["message"] for c in conds if c["type"] == "SpecError"), "")

        until(lambda: "calendar 'holidays' not found" in spec_error(), loop.turn, "the condition")
    finally:
        sync.stop()
        kube.close()
        engine.close()


def test_a_cronworkflow_invalid_from_its_creation_shows_argos_spec_error_condition(
    kube_apiserver: Any, kube_api: Any, kube_namespace: str
) -> None:
    """Never admitted, it has no stream and no status row: it showed nothing but a log line
    (`.status` null, `cronsource get` not found). Argo's controller sets SpecError with the
    message; fixed, it is admitted and its status written as any other's."""
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)
    clock = VirtualClock(T0)
    kube = connect(str(kube_apiserver.kubeconfig))
    engine = bootstrap("memory:", target=KubeTarget(kube))
    sync = KubeSync(engine, kube, namespace=ns, clock=clock)
    loop = SchedulerLoop(engine, SoleOwner(), watcher=sync, clock=clock)
    sync.start(watch_seconds=1)
    try:
        bad = yaml.safe_load(MANIFEST.replace("@every 2s", "61 * * * *"))
        del bad["metadata"]["annotations"]
        api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, bad)

        def conditions() -> list[dict[str, Any]]:
            obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "workdays")
            return list((obj.get("status") or {}).get("conditions") or [])

        until(lambda: bool(conditions()), loop.turn, "the SpecError condition")
        [cond] = conditions()
        assert (cond["type"], cond["status"]) == ("SpecError", "True")
        assert "spec.schedules[0]" in cond["message"] and "61" in cond["message"]
        assert engine.view.statuses(ns) == []  # nothing admitted, nothing stored

        api.patch_namespaced_custom_object(
            GROUP, VERSION, ns, CWF, "workdays", {"spec": {"schedules": ["0 * * * *"]}}
        )
        until(lambda: conditions() == [], loop.turn, "the condition cleared once admitted")
        assert [r.name for r in engine.view.statuses(ns)] == ["workdays"]
    finally:
        sync.stop()
        kube.close()
        engine.close()
