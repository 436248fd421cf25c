"""The command line as a process under hostile conditions (issue 15): a corrupt database is one
line, not a traceback; `simulate` started with SIGINT ignored (a shell's background job) still
stops on SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from cronsource.adapters.entrypoints.cli import cli
from tests.hostile.procs import ROOT
from tests.unit.test_cli_hostile import GOOD


def test_simulate_stops_on_sigint_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A shell starts background jobs with SIGINT ignored; simulate installs its own."""
    (tmp_path / "s.yaml").write_text(
        "start: 2026-01-01T00:00:00Z\nend: 2027-01-01T00:00:00Z\ncronWorkflows:\n- "
        + GOOD.replace("\n", "\n  ").replace("'0 * * * *'", "'* * * * *'")
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cronsource.adapters.entrypoints.cli",
            "--store",
            "memory:",
            "simulate",
            "s.yaml",
        ],
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
        [sys.executable, "-m", "cronsource.adapters.entrypoints.cli", *store, "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "the store cannot be read" in proc.stderr


def test_run_kube_refuses_an_instance_id_no_label_can_hold(tmp_path: Path) -> None:
    """It started, and every watch failed 400 for ever: the id selects objects by the label
    workflows.argoproj.io/controller-instanceid. Refused before anything is stored."""
    from tests.integration.test_cli_first_hour import cs, one_error_line

    store = f"sqlite:///{tmp_path / 'cs.db'}"
    for value, said in [
        ("a b", "error: --instance-id: value 'a b' must be letters, digits"),
        ("x" * 64, "error: --instance-id: value is 64 characters, at most 63 allowed"),
    ]:
        line = one_error_line(cs("run", "--kube", "--instance-id", value, store=store))
        assert line.startswith(said), line
    assert not (tmp_path / "cs.db").exists()


def test_a_cli_change_to_a_cronworkflow_from_a_cluster_warns_it_is_the_stores_alone(
    tmp_path: Path,
) -> None:
    """`suspend` on a store `run --kube` feeds suspended the store's copy only: kubectl still
    showed it running, and the next edit in the cluster read it back. Said, not silent."""
    from cronsource.adapters.bootstrap import bootstrap
    from cronsource.domain.manifest import parse_manifest
    from tests.http_helpers import manifest
    from tests.instants import T0
    from tests.integration.test_cli_first_hour import cs

    store = f"sqlite:///{tmp_path / 'cs.db'}"
    engine = bootstrap(store, create_tables=True)
    try:
        synced = manifest("synced")
        synced["metadata"]["uid"] = "5f0c1c0e-0000-4000-8000-000000000001"  # as the watch has it
        engine.service.apply(parse_manifest(synced), T0)
        engine.service.apply(parse_manifest(manifest("local")), T0)
        engine.projector.catch_up(T0)
    finally:
        engine.close()
    warned = cs("suspend", "synced", store=store)
    assert warned.returncode == 0, warned.stderr
    assert "warning: default/synced comes from a Kubernetes cluster (run --kube)" in warned.stderr
    quiet = cs("suspend", "local", store=store)
    assert quiet.returncode == 0 and "Kubernetes" not in quiet.stderr
    # `delete -f` says it as `delete NAME` does.
    f = tmp_path / "synced.json"
    f.write_text(json.dumps(manifest("synced")))
    deleted = cs("delete", "-f", str(f), store=store)
    assert deleted.returncode == 0, deleted.stderr
    assert "warning: default/synced comes from a Kubernetes cluster" in deleted.stderr
