"""`cronsource project`: a process that runs only the projections and the dispatcher, placed
apart from the schedulers. On PostgreSQL, a `run --role scheduler` decides and a `project`
creates every Workflow and keeps the status: each does its own part and only it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import cronsource
from tests.probe_helpers import EVERY_SECOND, RunProcess

CLI = str(Path(sys.executable).parent / "cronsource")

pytestmark = pytest.mark.postgres


def wait_for(what: str, check: object, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"no {what} within {within:.0f}s"
        time.sleep(0.2)


def test_project_creates_the_workflows_of_a_scheduler_elsewhere(
    pg_url: str, tmp_path: Path
) -> None:
    subprocess.run([CLI, "--store", pg_url, "migrate"], check=True, capture_output=True)
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    decided_here, created_here = tmp_path / "scheduler-wf", tmp_path / "project-wf"
    scheduler = RunProcess(
        [CLI, "--store", pg_url, "run", str(manifest), "--role", "scheduler"]
        + ["--workflows-dir", str(decided_here), "--http-port", "0"]
    )
    projector = RunProcess(
        [CLI, "--store", pg_url, "project", "--workflows-dir", str(created_here)]
        + ["--http-port", "0"]
    )
    try:
        scheduler.wait_for_probes()
        projector.wait_for_probes()
        assert "role projector" in projector.stderr
        wait_for(
            "Workflow created by `project`", lambda: len(list(created_here.rglob("*.json"))) >= 3
        )
        with cronsource.open(pg_url) as api:
            status = api.get("probes", "every-second").status
            assert status.lastScheduledTime is not None  # the status view moves too
    finally:
        stopped = projector.stop(), scheduler.stop()
    assert stopped == (0, 0), projector.stderr[-3000:] + scheduler.stderr[-3000:]
    # The scheduler replica decided but created nothing: dispatching is the projector's.
    assert not list(decided_here.rglob("*.json")) if decided_here.exists() else True
