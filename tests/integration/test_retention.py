"""Retention: the log and the audit keep a window. tests/unit/test_retention.py's tests on a
real PostgreSQL, and what the installed CLI (a subprocess) says of the window, on SQLite and
PostgreSQL.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

import gzip
import json
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.backfill import HistoryRemoved
from tests.faults.harness import cronsource_bin
from tests.http_helpers import manifest as manifest_document
from tests.instants import T0
from tests.probe_helpers import fill
from tests.unit.test_retention import (  # noqa: F401 (collected here by pytest)
    RETAIN,
    hours,
    manifest,
    retain,
    target,
    test_a_cronworkflow_whose_audit_retention_removed_still_exists_for_history,
    test_a_deadline_applied_after_start_widens_the_window_it_needs,
    test_a_deleted_or_idle_stream_keeps_only_its_last_event_and_passes_warn_of_nothing,
    test_after_retention_a_latest_snapshot_that_cannot_be_read_falls_back_to_the_one_before,
    test_an_active_runs_fire_and_a_pending_backfill_are_kept_whatever_their_age,
    test_old_covered_events_go_and_the_state_stays,
    test_what_retention_removed_is_no_hole_to_check_or_repair,
)


@pytest.mark.stores("sqlite", "postgres")
def test_history_why_and_backfill_name_the_window(engine: Engine, store_url: str) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("named"), T0)
    end = hours(engine, cron_id, 24 * 5)
    retain(engine, end)
    kept_from = engine.view.kept_from()
    assert kept_from == end - RETAIN
    old = T0 + timedelta(hours=5)
    with pytest.raises(HistoryRemoved) as err:
        svc.plan_backfill(cron_id, old, old + timedelta(hours=2))
    assert "retention" in str(err.value)
    engine.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cronsource_bin(), "--store", store_url, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    history = cli("history", "named", "-o", "json")
    assert history.returncode == 0, history.stderr
    assert "were removed by retention" in history.stderr
    assert json.loads(history.stdout), "the window's events are listed"
    why = cli("why", "named", "--at", old.isoformat(), "-o", "json")
    assert why.returncode == 0, why.stderr
    assert json.loads(why.stdout)["outcome"] == "Removed"
    exported = cli("export", "--before", end.isoformat(), "-o", "-")
    assert exported.returncode == 0, exported.stderr
    assert "were removed by retention" in exported.stderr  # an auditor is told where it starts
    backfill = cli(
        "backfill", "named", "--start", old.isoformat(), "--end", end.isoformat(), "--dry-run"
    )
    assert backfill.returncode == 1
    assert backfill.stderr.count("\n") == 1 and "--start:" in backfill.stderr


@pytest.mark.stores("sqlite", "postgres")
def test_export_writes_json_lines_and_gzip(engine: Engine, store_url: str, tmp_path: Path) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(manifest("exported"), T0)
    end = hours(engine, cron_id, 10)
    want = [r.notification_id for r in engine.view.audit() if r.at < end - timedelta(hours=5)]
    engine.close()
    for name in ("out.jsonl", "out.jsonl.gz"):
        path = tmp_path / name
        done = subprocess.run(
            [
                cronsource_bin(),
                "--store",
                store_url,
                "export",
                "--before",
                (end - timedelta(hours=5)).isoformat(),
                "-o",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        opener: Any = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt") as f:
            lines = [json.loads(line) for line in f]
        assert [line["position"] for line in lines] == want
        assert {"cronWorkflow", "type", "at", "version"} <= set(lines[0])


@pytest.mark.stores("sqlite")
def test_an_export_that_fails_leaves_the_earlier_export_whole(
    engine: Engine, store_url: str, tmp_path: Path, small_disk: Path
) -> None:
    """An export is written beside its file and renamed over it when complete: one that fails
    (here the disk fills) leaves the earlier export as it was, which may hold events retention
    has removed since, and no part of its own. It used to truncate the earlier file first."""
    svc = engine.service
    cron_id, _ = svc.apply(manifest("kept"), T0)
    end = hours(engine, cron_id, 48)
    engine.close()
    path = small_disk / "audit.jsonl"

    def export(before: Any) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            [cronsource_bin(), "--store", store_url, "export", "--before", before.isoformat()]
            + ["-o", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    first = export(end - timedelta(hours=40))
    assert first.returncode == 0, first.stderr
    earlier = path.read_bytes()
    assert earlier.count(b"\n") >= 3
    fill(small_disk)
    failed = export(end)
    assert failed.returncode == 1
    assert failed.stderr.strip() == f"error: --output-file {path}: No space left on device"
    assert path.read_bytes() == earlier
    assert sorted(p.name for p in small_disk.iterdir()) == ["audit.jsonl", "filler"]


@pytest.mark.parametrize(
    ("retain", "said"),
    [
        ("12h", "error: --retain 12h: shorter than a day (24h, or 1d)"),  # as written
        # Days past the bound of every duration: an OverflowError from timedelta.
        ("9999999999d", "error: --retain: duration '9999999999d' is longer than 100 years"),
        ("36700d", "error: --retain: duration '36700d' is longer than 100 years"),
    ],
)
def test_run_refuses_a_retention_out_of_bounds_in_one_line(
    tmp_path: Path, retain: str, said: str
) -> None:
    done = subprocess.run(
        [cronsource_bin(), "--store", f"sqlite:///{tmp_path}/x.db", "run", "--retain", retain],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip() == said


@pytest.mark.parametrize(
    ("output", "said"),
    [
        # `-o json` as the global flag would be: it wrote a file named json.
        ("json", "error: --output-file json: a file name, not an output format"),
        # A full disk: `OSError: [Errno 28] ...`, naming no file.
        ("/dev/full", "error: --output-file /dev/full: No space left on device"),
    ],
)
def test_export_names_its_file_when_it_cannot_write_it(
    tmp_path: Path, output: str, said: str
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    example = Path(__file__).parents[2] / "examples" / "hello.yaml"
    applied = subprocess.run(
        [cronsource_bin(), "--store", store, "apply", "-f", str(example)],
        capture_output=True,
        timeout=60,
    )
    assert applied.returncode == 0  # an event to write
    done = subprocess.run(
        [cronsource_bin(), "--store", store, "export", "--before", "2030-01-01", "-o", output],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 1 and done.stderr.startswith(said), done.stderr
    assert not (tmp_path / "json").exists()


@pytest.mark.parametrize("command", ["run", "serve"])
def test_run_and_serve_refuse_a_retention_shorter_than_a_deadline(
    tmp_path: Path, command: str
) -> None:
    """`serve --retain` removes as `run --retain` does: it started with any window."""
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    f = tmp_path / "patient.yaml"
    f.write_text(json.dumps(manifest_document("patient", startingDeadlineSeconds=3 * 86400)))
    applied = subprocess.run(
        [cronsource_bin(), "--store", store, "apply", "-f", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr
    done = subprocess.run(
        [cronsource_bin(), "--store", store, command, "--retain", "2d"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip() == (
        "error: --retain 2d: shorter than the longest startingDeadlineSeconds (259200s)"
    )
