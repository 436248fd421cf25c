"""The CLI says when nothing decides (issue 21, item 3), through the installed `cronsource`.

With no `cronsource run` holding the store, `list`, `get`, `apply`, `trigger` and `backfill`
print one line on stderr saying that nothing fires until one runs, and `trigger` says its run
is queued, not triggered. The signal is the one the status page reads
(adapters/application/presence.py): the projector file lock on SQLite, the replicas' member locks on
PostgreSQL. With a `run` going, nothing extra is printed, and the triggered run is created. Once the
`run` is gone (SIGTERM, or kill -9: the kernel and the server drop its locks), the line is back.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from cronsource.adapters.application.statuspage import scheduler_health
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.cli import NOTHING_RUNS
from tests.faults.harness import wait_for
from tests.integration.test_cli_first_hour import EXE, cs
from tests.probe_helpers import RunProcess

QUEUED = "queued: nothing creates it until `cronsource run` runs"
#: The commands that warn, each with its arguments (`backfill` of a range before the
#: CronWorkflow existed: nothing in it, so it changes nothing).
WARNING_COMMANDS = [
    ("list",),
    ("get",),
    ("get", "hello"),
    ("backfill", "hello", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T01:00:00Z"),
]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    url = (
        f"sqlite:///{tmp_path / 'cs.db'}"
        if request.param == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    migrated = cs("migrate", store=url)
    assert migrated.returncode == 0, migrated.stderr
    yield url


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    f = tmp_path / "hello.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "CronWorkflow",
                "metadata": {"name": "hello"},
                "spec": {
                    "schedules": ["0 0 1 1 *"],
                    "workflowSpec": {
                        "entrypoint": "main",
                        "templates": [{"name": "main", "container": {"image": "busybox"}}],
                    },
                },
            }
        )
    )
    return f


def warned(r: subprocess.CompletedProcess[str]) -> bool:
    """Whether the command succeeded and said, once, that nothing fires."""
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines.count(NOTHING_RUNS) <= 1, r.stderr
    return NOTHING_RUNS in lines


def page_schedulers(store: str) -> int | None:
    """What the status page says (`GET /api/v1/scheduler`, `schedulers`)."""
    engine = bootstrap(store)
    try:
        return scheduler_health(engine, datetime.now(UTC))["schedulers"]  # type: ignore[no-any-return]
    finally:
        engine.close()


def start_run(store: str, tmp_path: Path) -> RunProcess:
    run = RunProcess(
        [EXE, "--store", store, "run", "--workflows-dir", str(tmp_path / "workflows")],
        cwd=tmp_path,
    )
    run.wait_for_line("cronsource ready after")
    return run


def test_without_a_run_the_commands_say_nothing_fires_and_trigger_says_queued(
    store: str, manifest: Path
) -> None:
    applied = cs("apply", "-f", str(manifest), store=store)
    assert warned(applied) and applied.stderr.splitlines() == [NOTHING_RUNS]
    assert applied.stdout.strip() == "cronworkflow.argoproj.io/hello created"

    for args in WARNING_COMMANDS:
        assert warned(cs(*args, store=store)), args

    triggered = cs("trigger", "hello", "--request-id", "r1", store=store)
    assert warned(triggered)
    assert triggered.stdout.startswith("workflow hello-m") and QUEUED in triggered.stdout

    # Commands that record only themselves, and reads of the log, say nothing of it.
    for args in (("suspend", "hello"), ("resume", "hello"), ("history", "hello")):
        quiet = cs(*args, store=store)
        assert quiet.returncode == 0 and NOTHING_RUNS not in quiet.stderr, args


def test_with_a_run_going_nothing_extra_is_printed_and_the_trigger_runs(
    store: str, manifest: Path, tmp_path: Path
) -> None:
    assert warned(cs("apply", "-f", str(manifest), store=store))
    assert page_schedulers(store) == 0  # the status page reads the same signal
    run = start_run(store, tmp_path)
    try:
        assert page_schedulers(store) == 1
        applied = cs("apply", "-f", str(manifest), store=store)
        assert not warned(applied) and applied.stderr == ""
        for args in WARNING_COMMANDS:
            assert not warned(cs(*args, store=store)), args

        triggered = cs("trigger", "hello", "--request-id", "r2", store=store)
        assert not warned(triggered) and triggered.stderr == ""
        name = triggered.stdout.split()[1]
        assert triggered.stdout.strip() == f"workflow {name} triggered"
        created = tmp_path / "workflows" / "default" / f"{name}.json"
        wait_for(f"{name} to be created by the run", created.exists, 30)
    finally:
        assert run.stop() == 0, run.stderr
    assert warned(cs("list", store=store))  # SIGTERM released the store
    assert page_schedulers(store) == 0


def test_after_a_kill_9_of_the_run_the_warning_is_back(
    store: str, manifest: Path, tmp_path: Path
) -> None:
    cs("apply", "-f", str(manifest), store=store)
    run = start_run(store, tmp_path)
    try:
        assert not warned(cs("list", store=store))
        run.proc.send_signal(signal.SIGKILL)
        run.proc.wait(timeout=30)
    finally:
        run.stop()
    # The kernel drops the file lock at once; PostgreSQL ends the session when it sees the
    # connection closed, which may take a moment.
    wait_for("the warning after kill -9", lambda: warned(cs("list", store=store)), 30, 0.5)
