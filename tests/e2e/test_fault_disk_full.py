"""A full disk under a running `cronsource run`, with real processes (issue 27, "Done when").

The store's disk is filled to the last byte for FULL_SECONDS while 20 CronWorkflows fire every
2 s, then freed. Every write of the store fails meanwhile; reads go on. Afterwards nothing may
be lost or doubled: no Workflow twice, no stream with a version gap, no Workflow without its
event, no tick without exactly one decision (and each by the catch-up rules for the time it
was made), and the read model equal to a rebuild from the log. The figures, including how long
after the space came back the first fire came, are printed (run with -s).

- SQLite: the database file on a small tmpfs the test mounts (as tests/e2e/test_readiness.py does;
  that file checks /readyz, this one what the log and the Workflows hold afterwards).
- PostgreSQL: the database in a tablespace on such a tmpfs, the server's own files (its WAL
  among them) elsewhere: a data volume that fills while the server keeps running. (A server
  whose WAL disk fills stops with a PANIC: that is the store going down, tests/e2e/test_faults.py
  and tests/e2e/test_fault_store_down.py.)
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cronsource.adapters.bootstrap import bootstrap
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from tests import pgserver
from tests.faults.harness import (
    Replica,
    all_events,
    check_catch_up_rules,
    check_decisions,
    check_read_model,
    check_workflow_files,
    cron_manifest,
    fill_disk,
    final_catch_up,
    migrate,
    read_logs,
    tmpfs,
    utcnow,
    wait_for,
    workflow_files,
    write_manifests,
)

CRONS = 20
PERIOD = 2  # seconds: @every 2s
FULL_SECONDS = 10.0
#: The longest wait a worker's backoff reaches within FULL_SECONDS of failures (0.5 s doubling:
#: failed at 0, 0.5, 1.5, 3.5 and 7.5 s, the next try at 15.5 s).
BACKOFF_AFTER_FULL = 8.0


def say(*parts: object) -> None:
    print("[disk full]", *parts, flush=True)


def failures(replica: Replica) -> float:
    """The replica's failed worker turns so far (every worker, from its /metrics)."""
    return sum(
        v for k, v in replica.metrics().items() if k.startswith("cronsource_worker_failures_total")
    )


def run_disk_full(
    url: str, disk: Path, tmp_path: Path, store: str, *, recovery_limit: float
) -> dict[str, Any]:
    """One replica on `url`, whose data lives on `disk`; fill it, free it, stop, check. The
    first fire must come within `recovery_limit` seconds of the disk having room again."""
    t_test = time.monotonic()
    docs = [
        cron_manifest(f"d{i:02d}", f"@every {PERIOD}s", successfulJobsHistoryLimit=1000)
        for i in range(CRONS)
    ]
    manifest = write_manifests(tmp_path / "crons.yaml", docs)
    wf_dir = tmp_path / "workflows"  # not on the full disk: the store's writes are the fault
    run_args = ("--local-run-duration", "1s", "--http-port", "0")
    replica = Replica("solo", url, manifest, wf_dir, tmp_path, run_args=run_args)
    try:
        replica.start().wait_running()
        wait_for("three rounds of fires", lambda: len(workflow_files(wf_dir)) >= 3 * CRONS, 60)
        failed_before = failures(replica)

        filler = fill_disk(disk)
        full_at = utcnow()
        left = shutil.disk_usage(disk).free
        # Every write fails from now on: the workers say so in their metric. (A store may
        # commit a little more first: SQLite reuses its write-ahead log's pages.)
        wait_for(
            "the replica's writes to fail",
            lambda: failures(replica) > failed_before,
            FULL_SECONDS,
            0.2,
        )
        failing_after = (utcnow() - full_at).total_seconds()
        time.sleep(max(0.0, FULL_SECONDS - failing_after))
        failed_while_full = failures(replica) - failed_before
        files_while_full = len(workflow_files(wf_dir))
        filler.unlink()
        freed_at = utcnow()
        # Every CronWorkflow must fire again after the recovery: a few ticks past its limit.
        time.sleep(recovery_limit + 3 * PERIOD)
        stopped_at = utcnow()
        rc = replica.terminate()
        assert rc == 0, f"exit status {rc} after SIGTERM:\n{replica.tail()}"
        log = replica.log()
    finally:
        replica.cleanup()

    final_catch_up(url, wf_dir)
    engine = bootstrap(url)
    try:
        recorder: Any = engine.service.recorder
        gaps = recorder.gaps()
        assert not gaps, f"streams with holes after the full disk: {gaps[:5]}"
        events = all_events(engine)
        logs = read_logs(engine, events)
        summary = check_decisions(logs)  # every tick exactly one decision, none fired twice
        check_catch_up_rules(logs, DEFAULT_LATE_TOLERANCE)
        files = check_workflow_files(wf_dir, logs)  # one Workflow per fire, none without
        compared = check_read_model(engine, events, tmp_path / "rebuilt.db")
    finally:
        engine.close()

    def first_after(times: list[datetime]) -> float | None:
        later = [t for t in times if t > freed_at]
        return round((min(later) - freed_at).total_seconds(), 2) if later else None

    fires = [f.fired_at for lg in logs.values() for f in lg.fires]
    decisions = [t for lg in logs.values() for t in lg.decision_times()]
    # What was still committed while the disk was full, once writes were seen to fail: room
    # left inside the store's pages (PostgreSQL) or its write-ahead log (SQLite).
    failing_from = full_at + timedelta(seconds=failing_after)
    during = [t for t in decisions if failing_from < t < freed_at]
    # Nothing left behind: every CronWorkflow decided within its last two periods.
    stale = [
        lg.name
        for lg in logs.values()
        if summary.last_decided[lg.cron_id] < stopped_at - 2 * lg.period
    ]
    figures = {
        "store": store,
        "expected ticks (creation to SIGTERM)": sum(
            math.floor((stopped_at - lg.created) / lg.period) for lg in logs.values()
        ),
        "ticks decided": sum(
            math.floor((summary.last_decided[lg.cron_id] - lg.created) / lg.period)
            for lg in logs.values()
        ),
        "fires": summary.fires,
        "fires by trigger": dict(summary.fires_by_trigger),
        "skipped ticks by reason": dict(summary.skipped_ticks_by_reason),
        "Workflows": files,
        "Workflows when the disk was freed": files_while_full,
        "disk full s": round((freed_at - full_at).total_seconds(), 1),
        "bytes left on the full disk": left,
        "writes failing after s": round(failing_after, 2),
        "failed worker turns while full": failed_while_full,
        "decisions committed while full": len(during),
        "first decision after the space came back s": first_after(decisions),
        "first fire after the space came back s": first_after(fires),
        "read model equal to a rebuild, events": compared,
        "test s": round(time.monotonic() - t_test),
    }
    say(figures)
    assert failed_while_full > 0, "the disk never stopped a write: the test proves nothing"
    assert "No space left on device" in log or "database or disk is full" in log, log[-3000:]
    assert not stale, f"{len(stale)} CronWorkflows not decided since the disk came back: {stale}"
    first_fire = figures["first fire after the space came back s"]
    assert first_fire is not None and first_fire <= recovery_limit, figures
    return figures


@pytest.mark.timeout(180)
def test_a_full_disk_under_sqlite_loses_nothing(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "32m") as disk:
        # The next tick is at most a period away, and the write probe sees the room within
        # a second (adapters/runtime/writeprobe.py): no worker waits out its backoff.
        run_disk_full(
            f"sqlite:///{disk / 'cronsource.db'}",
            disk,
            tmp_path,
            "sqlite",
            recovery_limit=PERIOD + 2.0,
        )


@pytest.mark.postgres
@pytest.mark.timeout(180)
def test_a_full_tablespace_under_postgres_loses_nothing(tmp_path: Path) -> None:
    server = pgserver.start_server()
    # Not under tmp_path: the server runs as its own user, who must reach the tablespace.
    mount = Path(tempfile.mkdtemp(prefix="cs-disk-"))
    mount.chmod(0o755)
    try:
        with tmpfs(mount, "32m") as disk:
            try:
                location = disk / "tablespace"
                location.mkdir()
                user = pgserver.server_user()
                if user is not None:
                    shutil.chown(location, user, user)
                with psycopg.connect(server.url, autocommit=True) as conn:
                    conn.execute(
                        sql.SQL("CREATE TABLESPACE small_disk LOCATION {}").format(
                            sql.Literal(str(location))
                        )
                    )
                    conn.execute("CREATE DATABASE on_small_disk TABLESPACE small_disk")
                url = pgserver.with_database(server.url, "on_small_disk")
                migrate(url)
                # The write probe cannot see a full tablespace (it asks for read-only and
                # privileges, and writes nothing): the workers wait out their backoff.
                run_disk_full(
                    url,
                    disk,
                    tmp_path,
                    "postgresql, tablespace on the full disk",
                    recovery_limit=BACKOFF_AFTER_FULL + PERIOD + 1.0,
                )
            finally:
                # Its tablespace lives on the tmpfs: stop the server while it is mounted.
                server.stop()
    finally:
        server.stop()
        shutil.rmtree(mount, ignore_errors=True)
