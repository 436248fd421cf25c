"""Readiness tells the truth (adapters/entrypoints/probes.py): /readyz of a real `cronsource run`
is 503 while its store takes no writes, though reads still work (a full disk, a read-only
PostgreSQL database), and 200 again once it does.

The SQLite stores live on a small tmpfs each test mounts and unmounts (the suite runs as root,
as CI does); the PostgreSQL ones on the throwaway server of tests/pgserver.py."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.probe_helpers import EVERY_SECOND, RunProcess, fill, ready_body, samples, total

CLI = str(Path(sys.executable).parent / "cronsource")


def start_run(store: str, tmp_path: Path) -> RunProcess:
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    run = RunProcess(
        [CLI, "--store", store, "run", str(manifest), "--http-port", "0"]
        + ["--workflows-dir", str(tmp_path / "workflows")]
    )
    run.wait_for_probes()
    return run


def wait_ready(
    run: RunProcess, want: Callable[[int, dict[str, Any]], bool], within: float
) -> tuple[int, dict[str, Any]]:
    deadline = time.monotonic() + within
    while True:
        code, body = ready_body(run)
        if want(code, body):
            return code, body
        assert time.monotonic() < deadline, (code, body, run.stderr[-2000:])
        time.sleep(0.2)


def metric(run: RunProcess, name: str, **labels: str) -> float:
    return total(samples(run.get("/metrics")[2]), name, **labels)


def test_readyz_is_503_while_the_sqlite_disk_is_full_and_200_once_it_has_room(
    small_disk: Path, tmp_path: Path
) -> None:
    run = start_run(f"sqlite:///{small_disk / 'cronsource.db'}", tmp_path)
    try:
        assert ready_body(run)[0] == 200
        filler = fill(small_disk)
        code, body = wait_ready(run, lambda c, _: c == 503, within=10)
        assert body["status"] == "store not writable", body
        assert "No space left on device" in body["error"], body
        # The workers' own writes fail too (the scheduler decides every second), while reads
        # go on: the projection lag is still reported.
        wait_ready(run, lambda _, __: metric(run, "cronsource_worker_failures_total") > 0, 10)
        assert "lag" in ready_body(run)[1]
        fires = metric(run, "cronsource_fires_total")
        filler.unlink()
        wait_ready(run, lambda c, _: c == 200, within=20)
        wait_ready(run, lambda _, __: metric(run, "cronsource_fires_total") > fires, 10)
    finally:
        code = run.stop()
    assert code == 0, run.stderr[-3000:]


@pytest.mark.postgres
def test_readyz_is_503_while_the_postgres_database_is_read_only(
    pg_url: str, tmp_path: Path
) -> None:
    done = subprocess.run([CLI, "--store", pg_url, "migrate"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    db = sql.Identifier(str(psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]))
    run = start_run(pg_url, tmp_path)
    try:
        assert ready_body(run)[0] == 200
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(db)
            )
        code, body = wait_ready(run, lambda c, _: c == 503, within=10)
        assert (body["status"], body["error"]) == (
            "store not writable",
            "sessions are read-only (default_transaction_read_only)",
        ), body
        with psycopg.connect(
            pg_url, autocommit=True, options="-c default_transaction_read_only=off"
        ) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(db)
            )
        wait_ready(run, lambda c, _: c == 200, within=20)
    finally:
        code = run.stop()
    assert code == 0, run.stderr[-3000:]
