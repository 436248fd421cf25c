"""`cronsource simulate -f` as the installed program (issue 25, item 3): plain manifests from a
file of several documents, a directory, or stdin, with no scenario file; `-o timeline` in time
order across CronWorkflows; repeated skips folded with their count; the `--name`, `-n` and
`--only` filters; and bad input as one `error:` line. The output logic itself:
tests/unit/test_simulate_report.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from tests.integration.test_cli_first_hour import cs, manifest, one_error_line

SPAN = ["--start", "2026-03-07", "--end", "2026-03-07T03:00:00Z"]


def _two(path: Path) -> str:
    """`a` hourly at :00, and `b` at :30 whose `when` is false from its first tick."""
    a = manifest("a", timezone="UTC")
    b = manifest("b", schedules=["*/10 * * * *"], timezone="UTC", when="{{= false }}")
    b["metadata"]["namespace"] = "team"  # type: ignore[index]
    path.write_text(yaml.safe_dump_all([a, b]))
    return str(path)


def _json(r: Any) -> Any:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_file_of_several_documents_runs_as_one_simulation(tmp_path: Path) -> None:
    data = _json(cs("simulate", "-f", _two(tmp_path / "m.yaml"), *SPAN, "-o", "json"))
    fired = [e["cronWorkflow"] for e in data["events"] if e["type"] == "ScheduleFired"]
    assert fired == ["default/a"] * 3
    counts = {s["cronWorkflow"]: s["skippedByReason"] for s in data["summary"]}
    assert counts == {"default/a": {}, "team/b": {"WhenFalse": 18}}
    # -o json keeps every decision: 18 skip events, not one folded row
    skips = [e for e in data["events"] if e["type"] == "ScheduleSkipped"]
    assert len(skips) == 18


def test_a_directory_and_stdin_read_as_apply_reads_them(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    (d / "sub").mkdir(parents=True)
    (d / "a.yaml").write_text(yaml.safe_dump(manifest("a", timezone="UTC")))
    (d / "sub" / "c.json").write_text(json.dumps(manifest("c", timezone="UTC")))
    (d / "notes.txt").write_text("not a manifest")
    data = _json(cs("simulate", "-f", str(d), *SPAN, "-o", "json"))
    assert [s["cronWorkflow"] for s in data["summary"]] == ["default/a", "default/c"]
    text = Path(_two(tmp_path / "m.yaml")).read_text()
    data = _json(cs("simulate", "-f", "-", *SPAN, "-o", "json", stdin=text))
    assert [s["cronWorkflow"] for s in data["summary"]] == ["default/a", "team/b"]


def test_the_timeline_is_in_time_order_across_cronworkflows_and_skips_fold(
    tmp_path: Path,
) -> None:
    r = cs("simulate", "-f", _two(tmp_path / "m.yaml"), *SPAN, "-o", "timeline")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["SCHEDULED", "(UTC)"]
    rows = [(line.split()[0], line.split()[4], line.split()[5]) for line in lines[1:]]
    assert rows == [
        ("2026-03-07T00:10:00Z", "team/b", "skipped:"),
        ("2026-03-07T01:00:00Z", "default/a", "fired"),
        ("2026-03-07T02:00:00Z", "default/a", "fired"),
        ("2026-03-07T03:00:00Z", "default/a", "fired"),
    ]
    # b's 18 skips in a row are one line with their count and span
    assert "skipped: WhenFalse ×18 (2026-03-07T00:10:00Z .. 2026-03-07T03:00:00Z)" in lines[1]
    table = cs("simulate", "-f", _two(tmp_path / "m.yaml"), *SPAN)
    assert table.returncode == 0, table.stderr
    assert table.stdout.count("skipped: WhenFalse ×18") == 1
    assert "WhenFalse" in table.stdout.split("Summary")[1]  # a column per reason


def test_the_timeline_puts_decisions_made_late_at_their_tick(tmp_path: Path) -> None:
    """After an outage, `a` (a 3 h deadline) and `b` (60 s) are decided at its end: the log
    holds a's catch-up fire of 02:00 before b's skips from 01:30; the timeline does not."""
    a = manifest("a", timezone="UTC", startingDeadlineSeconds=10800)
    b = manifest("b", schedules=["30 * * * *"], timezone="UTC", startingDeadlineSeconds=60)
    f = tmp_path / "o.yaml"
    f.write_text(yaml.safe_dump_all([a, b]))
    outage = ["--outage", "2026-03-07T00:45:00Z..2026-03-07T02:50:00Z"]
    data = _json(cs("simulate", "-f", str(f), *SPAN, *outage, "-o", "json"))
    log = [(e["scheduledTime"], e["cronWorkflow"]) for e in data["events"] if e["scheduledTime"]]
    assert log != sorted(log), log  # the case this test is about
    r = cs("simulate", "-f", str(f), *SPAN, *outage, "-o", "timeline")
    assert r.returncode == 0, r.stderr
    rows = [(line.split()[0], line.split()[4]) for line in r.stdout.splitlines()[1:]]
    assert rows == sorted(rows) and len(rows) == len(log), r.stdout
    assert "DeadlineExceeded ×2 (2026-03-07T01:30:00Z .. 2026-03-07T02:30:00Z)" in r.stdout


def test_name_namespace_and_only_filter_the_output(tmp_path: Path) -> None:
    f = _two(tmp_path / "m.yaml")
    r = cs("simulate", "-f", f, *SPAN, "-o", "timeline", "--only", "fired")
    assert r.returncode == 0, r.stderr
    assert {line.split()[4] for line in r.stdout.splitlines()[1:]} == {"default/a"}
    r = cs("simulate", "-f", f, *SPAN, "-o", "timeline", "--only", "whenfalse")
    assert [line.split()[4] for line in r.stdout.splitlines()[1:]] == ["team/b"]
    data = _json(cs("simulate", "-f", f, *SPAN, "-o", "json", "--name", "a"))
    assert {e["cronWorkflow"] for e in data["events"]} == {"default/a"}
    data = _json(cs("simulate", "-f", f, *SPAN, "-o", "json", "-n", "team"))
    assert [s["cronWorkflow"] for s in data["summary"]] == ["team/b"]
    r = cs("simulate", "-f", f, *SPAN, "--only", "WhenFals")
    assert "--only: 'WhenFals' is not one of fired, skipped" in one_error_line(r)


def test_a_fleet_reads_as_one_row_per_cronworkflow(tmp_path: Path) -> None:
    docs = [manifest(f"job-{i:02d}", timezone="UTC") for i in range(30)]
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump_all(docs))
    r = cs("simulate", "-f", str(tmp_path / "fleet.yaml"), *SPAN)
    assert r.returncode == 0, r.stderr
    assert "30 CronWorkflows: one row each" in r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Summary" and len(lines) == 2 + 30
    assert lines[2].split()[:4] == ["default/job-00", "UTC", "3", "0"]


def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    f = _two(tmp_path / "m.yaml")
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    cases = {
        "is not a CronWorkflow": ["-f", str(cm), *SPAN],
        "no such file or directory": ["-f", str(tmp_path / "missing.yaml"), *SPAN],
        "--outage: '2026-03-07T01:00:00Z' is not FROM..TO": [
            "-f",
            f,
            *SPAN,
            "--outage",
            "2026-03-07T01:00:00Z",
        ],
        "--outage: '2026-03-07T02:00:00Z..2026-03-07T01:00:00Z' ends before it starts": [
            "-f",
            f,
            *SPAN,
            "--outage",
            "2026-03-07T02:00:00Z..2026-03-07T01:00:00Z",
        ],
        "--end: '2026-03-06' is before --start '2026-03-07'": [
            "-f",
            f,
            "--start",
            "2026-03-07",
            "--end",
            "2026-03-06",
        ],
        "--end: needed with -f": ["-f", f, "--start", "2026-03-07"],
        "simulate's bound on work (at most 1,000,000)": [
            "-f",
            f,
            "--start",
            "2026-03-07",
            "--end",
            "2099-01-01",
        ],
    }
    for needle, args in cases.items():
        line = one_error_line(cs("simulate", *args))
        assert needle in line, (args, line)
    # a file of several manifests given as a scenario says what to do instead
    assert "simulate -f FILE" in one_error_line(cs("simulate", f))


def test_ten_thousand_manifests_are_refused_at_once_naming_the_bound(tmp_path: Path) -> None:
    """10,000 CronWorkflows (hourly to every 5 minutes) over a week hold about 5 million
    ticks: refused before anything runs, in one line naming simulate's bound and --end."""
    schedules = ["0 * * * *", "*/15 * * * *", "*/5 * * * *"]
    d = tmp_path / "fleet"
    d.mkdir()
    for part in range(10):
        docs = [
            manifest(f"job-{part}-{i:04d}", schedules=[schedules[i % 3]], timezone="UTC")
            for i in range(1000)
        ]
        (d / f"part-{part}.yaml").write_text(yaml.safe_dump_all(docs))
    t0 = time.monotonic()
    r = cs("simulate", "-f", str(d), "--start", "2026-03-07", "--end", "2026-03-14")
    line = one_error_line(r)
    assert line.startswith("error: --end: 10,000 CronWorkflow(s) hold more than 1,000,000"), line
    assert "simulate's bound on work" in line and "nothing was simulated" in line
    assert time.monotonic() - t0 < 45  # counted, not run


def test_a_calendar_among_the_manifests_excludes_its_dates(tmp_path: Path) -> None:
    # Given a CronWorkflow naming a calendar and the calendar's ConfigMap in one plain file
    cron = manifest("daily", schedules=["0 9 * * *"], timezone="UTC")
    cron["metadata"]["annotations"] = {"cronsource.io/calendars": "holidays"}
    calendar = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "holidays", "labels": {"cronsource.io/calendar": "true"}},
        "data": {"dates": "2026-12-25"},
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([cron, calendar]))
    # When simulate -f runs them over Christmas
    span = ("--start", "2026-12-24T00:00:00Z", "--end", "2026-12-27T00:00:00Z")
    data = _json(cs("simulate", "-f", str(path), *span, "-o", "json"))
    # Then the calendar's date is an Excluded skip and the others fire
    skips = [e for e in data["events"] if e["type"] == "ScheduleSkipped"]
    assert [(e["scheduledTime"], e["reason"]) for e in skips] == [
        ("2026-12-25T09:00:00Z", "Excluded")
    ]
    fired = [e["scheduledTime"] for e in data["events"] if e["type"] == "ScheduleFired"]
    assert fired == ["2026-12-24T09:00:00Z", "2026-12-26T09:00:00Z"]
