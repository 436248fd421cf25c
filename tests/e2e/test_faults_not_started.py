"""A `kill -9` of `cronsource run` between a fire and its Workflow (issue 21, "Bad input and
faults"), with real processes and real stores.

`cronsource run` (through tests/faults/crashy_run.py) is killed at the crash point
`dispatch-before-create`: the fire is committed and projected, its Workflow file is not written.
Restarted within the fire's starting deadline, the new process creates the Workflow, once.
Restarted past it, the fire is recorded as not started (RunNotStarted) and no Workflow exists;
the installed CLI's `history` and `why` say so. Either way every other fire of the run has
exactly one Workflow file or one RunNotStarted, never both (tests/faults/harness.py).
"""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronsource.adapters.bootstrap import bootstrap
from cronsource.domain.service import event_type
from tests.faults.harness import (
    Replica,
    all_events,
    check_decisions,
    check_workflow_files,
    cron_manifest,
    cronsource_bin,
    final_catch_up,
    migrate,
    read_logs,
    utcnow,
    wait_for,
    workflow_files,
    write_manifests,
)

FAULT = "dispatch-before-create:1"


def store_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'cronsource.db'}"


def events(url: str) -> list[Any]:
    engine = bootstrap(url)
    try:
        return [ev for _, ev in all_events(engine)]
    finally:
        engine.close()


def first_fire(url: str) -> Any:
    fires = [ev for ev in events(url) if event_type(ev) == "ScheduleFired"]
    assert fires, "the killed run committed no fire"
    return fires[0]


def not_started(url: str, workflow: str) -> list[Any]:
    return [
        ev
        for ev in events(url)
        if event_type(ev) == "RunNotStarted" and ev.workflow_name == workflow
    ]


def killed_between_fire_and_create(replica: Replica) -> None:
    replica.start(fault=FAULT)
    assert replica.proc is not None
    rc = replica.proc.wait(timeout=60)
    replica.exits.append(rc)
    assert "FAULT dispatch-before-create 1" in replica.log(), replica.tail()
    assert rc == -9, f"exit {rc}:\n{replica.tail()}"


def created_at(path: Path) -> datetime:
    meta = yaml.safe_load(path.read_text())["metadata"]
    return datetime.fromisoformat(meta["annotations"]["cronsource.io/created-at"])


def check_all(url: str, wf_dir: Path) -> str:
    """After SIGTERM: the dispatcher brought to the end of the log, then every fire has one
    Workflow file or one RunNotStarted, never both, and no tick fired twice."""
    final_catch_up(url, wf_dir, read_model=False)
    engine = bootstrap(url)
    try:
        logs = read_logs(engine)
    finally:
        engine.close()
    summary = check_decisions(logs)
    files = check_workflow_files(wf_dir, logs)
    gone = sum(sum(lg.not_started.values()) for lg in logs.values())
    return f"{summary.fires} fires, {files} Workflow files, {gone} not started"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.timeout(180)
def test_restarted_within_the_deadline_the_workflow_is_created_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    migrate(url)
    manifest = write_manifests(
        tmp_path / "crons.yaml",
        [
            cron_manifest(
                "job", "@every 4s", startingDeadlineSeconds=30, successfulJobsHistoryLimit=1000
            )
        ],
    )
    wf_dir = tmp_path / "workflows"
    replica = Replica("solo", url, manifest, wf_dir, tmp_path)
    try:
        killed_between_fire_and_create(replica)
        fire = first_fire(url)
        assert fire.workflow_name not in workflow_files(wf_dir)

        replica.start().wait_running(60)
        path = wait_for(
            f"{fire.workflow_name} to be created",
            lambda: workflow_files(wf_dir).get(fire.workflow_name),
            60,
        )
        assert created_at(path) < fire.scheduled_time + timedelta(seconds=30)
        assert replica.terminate() == 0, replica.tail()

        assert not_started(url, fire.workflow_name) == []
        print(f"[{kind}] within the deadline:", check_all(url, wf_dir))
    finally:
        replica.cleanup()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.timeout(180)
def test_restarted_past_the_deadline_the_fire_is_recorded_as_not_started(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    migrate(url)
    deadline = timedelta(seconds=3)
    manifest = write_manifests(
        tmp_path / "crons.yaml",
        [
            cron_manifest(
                "job",
                "@every 4s",
                startingDeadlineSeconds=int(deadline.total_seconds()),
                successfulJobsHistoryLimit=1000,
            )
        ],
    )
    wf_dir = tmp_path / "workflows"
    replica = Replica("solo", url, manifest, wf_dir, tmp_path)
    try:
        killed_between_fire_and_create(replica)
        fire = first_fire(url)
        wait = (fire.scheduled_time + deadline - utcnow()).total_seconds() + 1
        time.sleep(max(0.0, wait))  # down until the deadline has passed: real processes

        replica.start().wait_running(60)
        (ev,) = wait_for(
            f"{fire.workflow_name} to be recorded as not started",
            lambda: not_started(url, fire.workflow_name),
            60,
        )
        assert ev.late_seconds >= deadline.total_seconds() and ev.reason == "DeadlineExceeded"
        # The restarted run goes on: later ticks are created as usual.
        wait_for("a Workflow of a later tick", lambda: workflow_files(wf_dir), 60)
        assert replica.terminate() == 0, replica.tail()

        assert fire.workflow_name not in workflow_files(wf_dir)
        assert len(not_started(url, fire.workflow_name)) == 1
        print(f"[{kind}] past the deadline:", check_all(url, wf_dir))

        # What a user sees, through the installed CLI.
        tick = fire.scheduled_time.isoformat()
        # The answer names the instant asked, with a fraction if it has one (`@every` ticks
        # are whole seconds now; a store written before kept fractions).
        t = fire.scheduled_time
        fraction = f".{t.microsecond:06d}".rstrip("0") if t.microsecond else ""
        shown = t.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
        cli = [cronsource_bin(), "--store", url]
        why = subprocess.run([*cli, "why", "job", "--at", tick], capture_output=True, text=True)
        assert why.returncode == 0, why.stderr
        assert f"default/job at {shown}: NotStarted (DeadlineExceeded)" in why.stdout
        history = subprocess.run(
            [*cli, "history", "job", "--type", "RunNotStarted", "-o", "json"],
            capture_output=True,
            text=True,
        )
        assert history.returncode == 0, history.stderr
        # Only the killed fire's row: on a loaded machine a later 4 s tick may also be
        # reached past its 3 s deadline by the restarted replica, and is recorded so too.
        (row,) = [r for r in yaml.safe_load(history.stdout) if r["workflow"] == fire.workflow_name]
        assert row["reason"] == "DeadlineExceeded"
        assert row["deadlineSeconds"] == deadline.total_seconds()
    finally:
        replica.cleanup()
