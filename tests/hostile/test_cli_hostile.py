"""The command line and the local target under hostile input (issue 15, the smaller items):
one clear line and a non-zero exit, never a traceback or a hang; the local target stays in
its directory; `run .` skips what is not a CronWorkflow and its own output; `simulate` is
bounded and obeys SIGINT; temp files a `kill -9` left are cleaned at start."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.cli import cli
from adapters.localtarget import STALE_TEMP_SECONDS, LocalTarget, OutsideDirectory
from projections.dispatch import Creation
from tests.hostile.procs import ROOT

GOOD = (
    "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata:\n  name: hello\n"
    "spec:\n  schedule: '0 * * * *'\n  workflowSpec:\n    entrypoint: main\n"
)


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(b"\xff\xfe" + GOOD.encode("utf-16-le"), "UTF-16", id="utf-16"),
        pytest.param(GOOD.encode("latin-1") + b"\xe9\xff", "not UTF-8", id="latin-1 bytes"),
        pytest.param(
            ("a: " + "[" * 2000 + "]" * 2000).encode(), "deeper than|nesting depth", id="2000 deep"
        ),
        pytest.param(
            GOOD.replace("hello", "hello\\n").encode(), "DNS-1123", id="name with newline"
        ),
        pytest.param((GOOD + "metadata:\n  name: other\n").encode(), "duplicate key", id="dup key"),
    ],
)
def test_lint_and_apply_refuse_with_one_line_and_no_traceback(
    tmp_path: Path, content: bytes, message: str
) -> None:
    f = str(tmp_path / "f.yaml")
    (tmp_path / "f.yaml").write_bytes(content)
    for command in (["lint", f], ["apply", "-f", f]):
        r = CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path}/c.db", *command])
        assert r.exit_code == 1, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        assert re.search(message, r.output) and "Traceback" not in r.output, r.output


def test_yes_where_a_string_is_expected_stays_the_string_yes(tmp_path: Path) -> None:
    """YAML 1.1 made `enabled: yes` the boolean true, which a label (a string) refused and
    a workflowSpec stored as true; by the core schema it is the text "yes"."""
    text = GOOD.replace("  name: hello\n", "  name: hello\n  labels: {enabled: yes}\n")
    text += "    arguments: {parameters: [{name: p, value: on}]}\n"
    (tmp_path / "y.yaml").write_text(text)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    r = CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / "y.yaml")])
    assert r.exit_code == 0, r.output
    got = json.loads(CliRunner().invoke(cli, [*store, "get", "hello", "-o", "json"]).stdout)
    assert got["metadata"]["labels"] == {"enabled": "yes"}
    assert got["spec"]["workflowSpec"]["arguments"]["parameters"][0]["value"] == "on"


def test_a_file_over_3_mib_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(GOOD.encode() + b"#" * (4 * 1024 * 1024))
    r = CliRunner().invoke(cli, ["lint", str(tmp_path / "big.yaml")])
    assert r.exit_code == 1 and "3 MiB" in r.output


def test_backfill_from_year_one_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    assert CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / "a.yaml")]).exit_code == 0
    r = CliRunner().invoke(
        cli,
        [
            *store,
            "backfill",
            "hello",
            "--start",
            "0001-01-01T00:00:00Z",
            "--end",
            "2026-01-01T00:00:00Z",
        ],
    )
    assert r.exit_code == 1 and "between 1970-01-01 and 2199-12-31" in r.output, r.output
    assert not isinstance(r.exception, OverflowError)


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
        [sys.executable, "-m", "adapters.cli", "--store", f"sqlite:///{tmp_path}/c.db", "run", "."],
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


def test_simulate_refuses_a_scenario_longer_than_400_days(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("start: 2026-01-01T00:00:00Z\nend: 20260-01-01T00:00:00Z\n")
    r = CliRunner().invoke(cli, ["--store", "memory:", "simulate", str(tmp_path / "s.yaml")])
    assert r.exit_code == 2, r.output
    (tmp_path / "s.yaml").write_text("start: 2026-01-01T00:00:00Z\nend: 2030-01-01T00:00:00Z\n")
    r = CliRunner().invoke(cli, ["--store", "memory:", "simulate", str(tmp_path / "s.yaml")])
    assert r.exit_code == 2 and "at most 400 days" in r.output, r.output


def test_simulate_stops_on_sigint_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A shell starts background jobs with SIGINT ignored; simulate installs its own."""
    (tmp_path / "s.yaml").write_text(
        "start: 2026-01-01T00:00:00Z\nend: 2027-01-01T00:00:00Z\ncronWorkflows:\n- "
        + GOOD.replace("\n", "\n  ").replace("'0 * * * *'", "'* * * * *'")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "--store", "memory:", "simulate", "s.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    time.sleep(10)  # well into the year of every-minute ticks (startup included)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 5
    assert proc.returncode == 130 and "interrupted at" in err, err


# ---------------------------------------------------------------------- local target


def _workflow(namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": namespace, "annotations": {}},
    }


def test_the_local_target_refuses_a_namespace_directory_symlinked_outside(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root = tmp_path / "workflows"
    root.mkdir()
    (root / "evil").symlink_to(outside)
    target = LocalTarget(root)
    at = datetime(2026, 5, 4, tzinfo=UTC)
    errors = target.create_many(
        [
            Creation(_workflow("evil", "w-1"), "id", "schedule"),
            Creation(_workflow("ok", "w-2"), "id", "schedule"),
        ],
        at,
    )
    assert isinstance(errors[0], OutsideDirectory) and errors[1] is None
    assert list(outside.iterdir()) == []
    assert (root / "ok" / "w-2.yaml").exists()


def test_stale_temp_files_are_removed_at_start_and_fresh_ones_kept(tmp_path: Path) -> None:
    ns = tmp_path / "default"
    ns.mkdir()
    stale, fresh = ns / ".tmp-dead", ns / ".tmp-live"
    stale.write_text("half")
    fresh.write_text("half")
    old = time.time() - STALE_TEMP_SECONDS - 10
    os.utime(stale, (old, old))
    target = LocalTarget(tmp_path)
    assert target.removed_temps == 1 and not stale.exists() and fresh.exists()


def test_a_corrupt_database_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    for i in range(20):
        (tmp_path / f"m{i}.yaml").write_text(GOOD.replace("hello", f"hello-{i}"))
    for i in range(20):
        r = CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / f"m{i}.yaml")])
        assert r.exit_code == 0, r.output
    with open(tmp_path / "c.db", "r+b") as f:
        f.seek(4096)
        f.write(b"\xde\xad" * 2048)
    proc = subprocess.run(
        [sys.executable, "-m", "adapters.cli", *store, "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "the store cannot be read" in proc.stderr
