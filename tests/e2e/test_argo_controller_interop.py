"""Argo v4.0.5's real workflow-controller beside `cronsource run --kube`, on the test
kube-apiserver with Argo's own CRDs (manifests/base/crds/minimal of its module), exactly as
docs/operator-guide.md ("Kubernetes, beside Argo") tells an operator to run them:

* Argo's controller fires the CronWorkflows without the instance-id label and ignores those
  labelled `workflows.argoproj.io/controller-instanceid: cronsource`; cronsource run with
  `--instance-id cronsource` does the reverse;
* moving a CronWorkflow over by the documented step (add the label between two ticks) neither
  loses nor doubles a tick;
* a Workflow cronsource creates is taken by Argo's workflow controller (it sets the phase and
  creates the Pod, which stays Pending: the server has no kubelet);
* what cronsource writes to `.status` decodes with Argo's Go types (strictly) and shows the
  fields `argo cron get` shows.

Argo's cron controller fires standard schedules on whole minutes with the real clock (no fake
is possible in another process), so the test lasts about two minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF
from tests.argo import peer
from tests.kube import apiserver

pytestmark = pytest.mark.k8s

LABEL_INSTANCE = "workflows.argoproj.io/controller-instanceid"
LABEL_CRON = "workflows.argoproj.io/cron-workflow"
LABEL_WORKFLOW = "workflows.argoproj.io/workflow"


@pytest.fixture(scope="module")
def argo_apiserver(tmp_path_factory: Any) -> Iterator[apiserver.ApiServer]:
    """A server of our own with Argo's CRDs (not cronsource's deploy/crds)."""
    server = apiserver.start(tmp_path_factory.mktemp("argo-apiserver"), crds=peer.argo_crds())
    try:
        yield server
    finally:
        server.stop(remove_data=True)


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _start_cronsource(server: apiserver.ApiServer, store: str, log: Path) -> subprocess.Popen[str]:
    out = log.open("w")
    proc = subprocess.Popen(
        [
            _cronsource_exe(),
            "--store",
            store,
            "run",
            "--kube",
            "--kubeconfig",
            str(server.kubeconfig),
            "--instance-id",
            "cronsource",
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out.close()
    return proc


def _cron(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedules": ["* * * * *"],
            "concurrencyPolicy": "Allow",
            "workflowSpec": {
                "entrypoint": "main",
                # a command, so that Argo's emissary executor need not ask a registry
                "templates": [
                    {"name": "main", "container": {"image": "busybox", "command": ["true"]}}
                ],
            },
        },
    }


def _fired_by_cronsource(store: str, ns: str, cron: str) -> set[str]:
    """The Workflows cronsource decided to create for `cron` (its ScheduleFired events). A
    Workflow of the cluster that is not among them was created by Argo's cron controller, the
    only other writer."""
    proc = subprocess.run(
        [_cronsource_exe(), "--store", store, "-n", ns, "history", cron, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode == 1 and "never applied" in proc.stderr:
        return set()  # cronsource never took this CronWorkflow (it is Argo's): it fired none
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {e["workflow"] for e in json.loads(proc.stdout) if e["type"] == "ScheduleFired"}


def _cronsource_exe() -> str:
    return str(Path(sys.executable).parent / "cronsource")


def _until(
    check: Callable[[], bool], what: object, deadline: float, alive: Callable[[], None]
) -> None:
    """Wait for `check`; `what` (or what it returns, if callable) names it on a timeout."""
    while not check():
        alive()
        assert time.time() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        time.sleep(0.5)


def _minute_after(t: float) -> float:
    return (int(t) // 60 + 1) * 60.0


def test_argo_and_cronsource_share_a_cluster_as_the_operator_guide_says(
    argo_apiserver: apiserver.ApiServer, tmp_path: Path
) -> None:
    server = argo_apiserver
    ns = f"t-{os.urandom(5).hex()}"
    server.create_namespace(ns)
    kube = server.api_client()
    api = client.CustomObjectsApi(kube)
    core = client.CoreV1Api(kube)
    argo_log, cs_log = tmp_path / "argo.log", tmp_path / "cronsource.log"
    argo = peer.start_argo(server, ns, argo_log)
    store = f"sqlite:///{tmp_path / 'cronsource.db'}"
    cronsource = _start_cronsource(server, store, cs_log)

    def alive() -> None:
        assert argo.poll() is None, f"Argo's controller exited:\n{_tail(argo_log)}"
        assert cronsource.poll() is None, f"cronsource exited:\n{_tail(cs_log)}"

    def workflows() -> dict[str, dict[str, Any]]:
        items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
        return {w["metadata"]["name"]: w for w in items}

    def names(cron: str, minute: float) -> str:
        return f"{cron}-{int(minute)}"

    try:
        # Create the objects at least 20 s before a minute, so that both controllers see them
        # in time and that minute is the first tick of each.
        if _minute_after(time.time()) - time.time() < 20:
            time.sleep(_minute_after(time.time()) - time.time() + 0.5)
        m1 = _minute_after(time.time())
        m2 = m1 + 60
        for name, labels in (
            ("argo-own", {}),
            ("cs-own", {LABEL_INSTANCE: "cronsource"}),
            ("moved", {}),
        ):
            api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, _cron(name, labels))

        first = [names(c, m1) for c in ("argo-own", "cs-own", "moved")]
        _until(lambda: set(first) <= set(workflows()), f"{first}", m1 + 40, alive)
        # Between two ticks, the documented step: label it for cronsource.
        assert time.time() < m2 - 10, "the first tick came too late to move between ticks"
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            CWF,
            "moved",
            {"metadata": {"labels": {LABEL_INSTANCE: "cronsource"}}},
        )
        second = [names(c, m2) for c in ("argo-own", "cs-own", "moved")]
        _until(lambda: set(second) <= set(workflows()), f"{second}", m2 + 40, alive)
        time.sleep(3)  # anything doubled or late would show now
        wfs = workflows()

        ours = set().union(
            *(_fired_by_cronsource(store, ns, c) for c in ("argo-own", "cs-own", "moved"))
        )
        made = {n: "cronsource" if n in ours else "argo" for n in wfs}
        assert made == {
            names("argo-own", m1): "argo",
            names("argo-own", m2): "argo",
            names("cs-own", m1): "cronsource",
            names("cs-own", m2): "cronsource",
            names("moved", m1): "argo",
            names("moved", m2): "cronsource",
        }, f"who created which Workflow:\n{made}\nArgo's log:\n{_tail(argo_log)}"

        for n, w in wfs.items():  # both controllers label a child with its CronWorkflow
            assert w["metadata"]["labels"][LABEL_CRON] == n.rsplit("-", 1)[0], n

        # Argo's workflow controller takes cronsource's Workflow: a phase and a Pod.
        taken = names("cs-own", m1)

        seen: dict[str, Any] = {}

        def running() -> bool:
            seen["status"] = workflows()[taken].get("status") or {}
            seen["pods"] = [
                p.metadata.name
                for p in core.list_namespaced_pod(
                    ns, label_selector=f"{LABEL_WORKFLOW}={taken}"
                ).items
            ]
            return seen["status"].get("phase") in ("Pending", "Running") and len(seen["pods"]) == 1

        _until(running, lambda: f"Argo running {taken} (seen {seen})", time.time() + 30, alive)
        pod = core.list_namespaced_pod(ns, label_selector=f"{LABEL_WORKFLOW}={taken}").items[0]
        assert pod.status.phase == "Pending"  # no kubelet

        # What cronsource wrote to .status reads in Argo's types and in `argo cron get`.
        cron = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "cs-own")
        decoded = peer.cron_get(cron)
        last = datetime.fromtimestamp(m2, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert decoded["status"]["lastScheduledTime"] == last
        active = {ref["name"] for ref in decoded["status"].get("active") or []}
        assert taken in active or names("cs-own", m2) in active
        shown = dict(
            (line.split(":", 1)[0].strip(), line.split(":", 1)[1].strip())
            for line in decoded["get"].splitlines()
            if ":" in line
        )
        assert shown["Name"] == "cs-own" and shown["Namespace"] == ns
        assert shown["Schedules"] == "* * * * *"
        assert "LastScheduledTime" in shown
        assert names("cs-own", m2) in shown["Active Workflows"]
        # The status Argo itself wrote decodes too (the oracle is not lenient with ours only).
        peer.cron_get(api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "argo-own"))
    finally:
        peer.stop(argo)
        peer.stop(cronsource, grace=20)
        kube.close()
