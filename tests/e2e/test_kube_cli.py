"""`cronsource run --kube` end to end against the real API server: the installed entry point
with a kubeconfig, a CronWorkflow created in the cluster, its child Workflows and its status
appearing there, and SIGTERM ending the process cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF
from cronsource.projections.dispatch import LABEL_CRON

pytestmark = pytest.mark.k8s


def test_run_kube_fires_creates_children_writes_status_and_stops_on_sigterm(
    kube_apiserver: Any, kube_api: Any, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_api)
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        CWF,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "CronWorkflow",
            "metadata": {"name": "every2"},
            "spec": {
                "schedules": ["@every 2s"],
                "concurrencyPolicy": "Allow",
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        },
    )
    exe = Path(sys.executable).parent / "cronsource"
    proc = subprocess.Popen(
        [
            str(exe),
            "--store",
            f"sqlite:///{tmp_path / 'cronsource.db'}",
            "run",
            "--kube",
            "--kubeconfig",
            str(kube_apiserver.kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            status = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "every2").get(
                "status"
            )
            if len(items) >= 2 and status and status.get("active"):
                break
            assert time.monotonic() < deadline, "no children or no status from run --kube"
            time.sleep(0.2)
        assert all(w["metadata"]["labels"][LABEL_CRON] == "every2" for w in items)
        assert status["lastScheduledTime"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert "cronsource stopped after" in err
