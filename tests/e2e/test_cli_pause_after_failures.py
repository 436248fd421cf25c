"""The pause after failures through the installed CLI (issue 23 item 1): `lint` and `apply`
refuse a bad `cronsource.io/pause-after-failures` with one line naming it and its value and
store nothing; a real `cronsource run` (local target, real clock) pauses a CronWorkflow whose
two runs fail (their `.phase` files written as a person or a runner would), and then `list`,
`get` and `history` show the pause with its runs, and `resume` clears it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cli_first_hour import EXE, ROOT, cs, one_error_line, stored

pytestmark = pytest.mark.timeout(180)

PAUSE = "cronsource.io/pause-after-failures"


def manifest(value: str, schedule: str = "@every 3s") -> str:
    return f"""\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: flaky
  annotations:
    {PAUSE}: "{value}"
spec:
  schedules: ["{schedule}"]
  failedJobsHistoryLimit: 5
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        container: {{image: busybox, args: ["false"]}}
"""


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
@pytest.mark.parametrize("command", ["lint", "apply"])
def test_a_bad_threshold_is_one_line_naming_the_annotation_and_nothing_is_stored(
    tmp_path: Path, command: str, value: str
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "bad.yaml"
    f.write_text(manifest(value))
    args = [command, str(f)] if command == "lint" else [command, "-f", str(f)]
    line = one_error_line(cs(*args, store=store))
    assert PAUSE in line and f"(value: {value!r})" in line, line
    assert "metadata.annotations" in line, line
    if command == "apply":
        assert stored(store) == []


def _get(store: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cs("get", "flaky", "-o", "json", store=store).stdout)
    return out


def _paused(obj: dict[str, Any]) -> list[dict[str, Any]]:
    conds = obj["status"].get("conditions") or []
    return [c for c in conds if c["type"] == "PausedAfterFailures"]


def test_run_pauses_after_two_failed_runs_and_the_cli_shows_it_until_resume(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    wf_dir = tmp_path / "wf"
    f = tmp_path / "flaky.yaml"
    f.write_text(manifest("2"))
    assert EXE
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    # Runs last 10 minutes unless a phase is written: the test fails them itself.
    p = subprocess.Popen(
        [EXE, "--store", store, "run", str(f), "--workflows-dir", str(wf_dir)]
        + ["--local-run-duration", "10m"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        failed: list[str] = []
        deadline = time.monotonic() + 90
        while not (failed and _paused(_get(store))):
            assert time.monotonic() < deadline, f"not paused; failed {failed}"
            runs = sorted(q.stem for q in (wf_dir / "default").glob("flaky-*.json"))
            for name in runs[:2]:
                if name not in failed:
                    (wf_dir / "default" / f"{name}.phase").write_text("Failed\n")
                    failed.append(name)
            time.sleep(0.3)
    finally:
        p.terminate()
        p.wait(timeout=30)

    obj = _get(store)
    [cond] = _paused(obj)
    assert cond["message"].startswith(
        f"paused after 2 consecutive failed runs: {', '.join(failed)};"
    )
    assert obj["status"]["phase"] == "Active" and obj["status"]["nextScheduledTime"] is None

    listed = cs("list", store=store).stdout
    assert "paused after 2 failures" in listed, listed
    got = cs("get", "flaky", store=store).stdout
    assert "Suspended:" in got and "paused after 2 failures" in got, got
    assert "Condition PausedAfterFailures:" in got and failed[0] in got, got
    events = json.loads(
        cs("history", "flaky", "--type", "PausedAfterFailures", "-o", "json", store=store).stdout
    )
    assert [e["workflows"] for e in events] == [failed]
    table = cs("history", "flaky", "--type", "PausedAfterFailures", store=store).stdout
    assert f"after 2 failed runs: {','.join(failed)}" in table, table
    unknown = one_error_line(cs("history", "flaky", "--reason", "Paused", store=store))
    assert "PausedAfterFailures" in unknown

    resumed = cs("resume", "flaky", store=store)
    assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed
    after = _get(store)
    assert _paused(after) == [] and after["status"]["nextScheduledTime"] is not None
    assert "paused" not in cs("list", store=store).stdout
