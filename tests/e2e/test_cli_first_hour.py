"""The first hour of a new user (issue 14) with `cronsource run` as a process beside the CLI: a
restarted `run` keeps a CLI suspend, and backfilled runs run one after another (the CLI alone:
tests/integration/test_cli_first_hour.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import yaml

from tests.integration.test_cli_first_hour import EXE, ROOT, _hours_ago, cs, manifest


def test_restarting_run_does_not_undo_a_cli_suspend(tmp_path):
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    cs("apply", "-f", "examples/", store=store)
    cs("suspend", "hello", store=store)
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    p = subprocess.Popen(
        [EXE, "--store", store, "run", "examples/", "--workflows-dir", str(tmp_path / "wf")],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stderr is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = p.stderr.readline()
            lines.append(line)
            if line.startswith("next tick:"):
                break
        text = "".join(lines)
        assert "hello unchanged" in text, text
        # Suspended, so nothing is due: `run` says so rather than going quiet.
        assert "next tick: none" in text, text
        # The heartbeat (every 30 s) is words an operator reads, not Python dictionaries.
        beat = ""
        while time.monotonic() < deadline + 45 and "fires=" not in beat:
            beat = p.stderr.readline()
        assert "fires=0" in beat and "lag=readmodel:" in beat and "failures=0" in beat, beat
        assert "{'" not in beat and '{\\"' not in beat
    finally:
        p.terminate()
        p.wait(timeout=30)
    assert (
        json.loads(cs("get", "hello", "-o", "json", store=store).stdout)["spec"]["suspend"] is True
    )


def test_backfilled_runs_run_one_after_another_with_run(tmp_path):
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    """Queue end to end: `run` completes each backfill run, and the next starts after it."""
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(manifest("hourly", concurrencyPolicy="Forbid")))
    cs("apply", "-f", str(f), store=store)
    cs(
        "backfill",
        "hourly",
        "--start",
        _hours_ago(3),
        "--end",
        _hours_ago(1),
        "--overlap",
        "Queue",
        store=store,
    )
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    p = subprocess.Popen(
        [
            EXE,
            "--store",
            store,
            "run",
            "--workflows-dir",
            str(tmp_path / "wf"),
            "--local-run-duration",
            "1s",
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        fired: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            out = cs("history", "hourly", "--type", "ScheduleFired", "-o", "json", store=store)
            fired = json.loads(out.stdout) if out.returncode == 0 else []
            done = json.loads(
                cs("history", "hourly", "--type", "RunCompleted", "-o", "json", store=store).stdout
                or "[]"
            )
            if len(fired) == 3 and len(done) == 3:
                break
            time.sleep(1)
    finally:
        p.terminate()
        p.wait(timeout=30)
    assert [e["scheduledTime"] for e in fired] == [_hours_ago(3), _hours_ago(2), _hours_ago(1)]
    # One after another: each fired only after the one before completed.
    events = json.loads(cs("history", "hourly", "-o", "json", store=store).stdout)
    order = [
        (e["type"], e.get("workflow"))
        for e in events
        if e["type"] in ("ScheduleFired", "RunCompleted")
    ]
    kinds = [k for k, _ in order]
    assert kinds == ["ScheduleFired", "RunCompleted"] * 3, order
    table = cs("history", "hourly", store=store).stdout
    assert "phase=Succeeded" in table and "trigger=backfill" in table
