"""`cronsource run .` as a process (issue 15): it skips the files that are not CronWorkflows and
the Workflow files it writes itself under the same directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.hostile.procs import ROOT
from tests.unit.test_cli_hostile import GOOD


def test_run_dot_skips_other_kinds_and_its_own_workflow_files(tmp_path: Path) -> None:
    (tmp_path / "cron.yaml").write_text(GOOD)
    (tmp_path / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    )
    own = tmp_path / "workflows" / "default"
    own.mkdir(parents=True)
    (own / "hello-1777888800.yaml").write_text(
        json.dumps(
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "w"}}
        )
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cronsource.adapters.entrypoints.cli",
            "--store",
            f"sqlite:///{tmp_path}/c.db",
            "run",
            ".",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        lines.extend(iter(proc.stderr.readline, ""))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any("cronsource ready" in x for x in lines) and proc.poll() is None:
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.2)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    err = "".join(lines)
    assert proc.returncode == 0, err
    assert "cronworkflow.argoproj.io/hello created" in err
    assert "skipped configmap.yaml: kind ConfigMap is not a CronWorkflow" in err
    assert "hello-1777888800" not in err
