"""What `simulate` shows of a result (adapters/entrypoints/simulate/report.py): repeated skips
folded with their count and span, decisions in time order across CronWorkflows (`-o
timeline`), the `--name`/`-n`/`--only` filters and the per-reason counts. The CLI over plain
manifests (`-f`), in process here; as the installed program: tests/e2e/test_simulate_files.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.entrypoints.simulate.report import (
    Selection,
    decision_cell,
    fold,
    keep,
    parse_only,
    select,
    summary,
    summary_table,
    timeline,
)

WORKFLOW_SPEC = {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "b"}}]}


def fired(cron: str, tick: str, at: str | None = None) -> dict[str, Any]:
    return {
        "cronWorkflow": cron,
        "type": "ScheduleFired",
        "scheduledTime": tick,
        "at": at or tick,
        "workflow": f"{cron.split('/')[1]}-{tick}",
        "trigger": "schedule",
    }


def skipped(cron: str, tick: str, reason: str = "WhenFalse", **more: Any) -> dict[str, Any]:
    return {
        "cronWorkflow": cron,
        "type": "ScheduleSkipped",
        "scheduledTime": tick,
        "at": more.pop("at", tick),
        "workflow": None,
        "reason": reason,
        "lastScheduledTime": more.pop("last", tick),
        "count": more.pop("count", 1),
        **more,
    }


def t(hour: int, minute: int = 0) -> str:
    return f"2026-03-07T{hour:02d}:{minute:02d}:00Z"


def completed(cron: str, at: str) -> dict[str, Any]:
    return {"cronWorkflow": cron, "type": "RunCompleted", "at": at, "scheduledTime": None}


def test_consecutive_skips_of_one_reason_fold_into_one_row_with_count_and_span() -> None:
    a = "default/a"
    events = [fired(a, t(0))] + [skipped(a, t(1, m)) for m in range(0, 60)]
    events.insert(1, completed(a, t(0, 1)))  # not a decision: does not end a run
    rows = fold(events)
    assert len(rows) == 2
    run = rows[1]
    assert (run.count, run.folded, run.first, run.last) == (60, 60, t(1, 0), t(1, 59))
    assert decision_cell(run) == f"skipped: WhenFalse ×60 ({t(1, 0)} .. {t(1, 59)})"
    assert decision_cell(rows[0]) == "fired (schedule)"


def test_a_fire_or_another_reason_ends_a_run_and_runs_are_per_cronworkflow() -> None:
    a, b = "default/a", "team/b"
    events = [
        skipped(a, t(1)),
        skipped(b, t(1)),  # another CronWorkflow in between does not end a's run
        skipped(a, t(2)),
        skipped(a, t(3), "Suspended"),
        skipped(a, t(4)),
        fired(a, t(5)),
        skipped(a, t(6)),
        # a skip the engine already folded (an outage) counts its ticks
        skipped(a, t(7), count=3, last=t(9)),
    ]
    rows = fold(events)
    got = [(r.cron, r.reason if not r.fired else "fired", r.count) for r in rows]
    assert got == [
        (a, "WhenFalse", 2),
        (b, "WhenFalse", 1),
        (a, "Suspended", 1),
        (a, "WhenFalse", 1),
        (a, "fired", 1),
        (a, "WhenFalse", 4),
    ]
    assert (rows[-1].first, rows[-1].last) == (t(6), t(9))


def test_timeline_orders_decisions_by_tick_across_cronworkflows() -> None:
    a, b = "default/a", "team/b"
    # the log holds a's decisions first (as when one CronWorkflow catches up later)
    events = [fired(a, t(1)), fired(a, t(3)), fired(b, t(2)), fired(b, t(0, 30))]
    # a catch-up decided at 04:00 for the 02:30 tick sits at its tick
    events.append(fired(a, t(2, 30), at=t(4)))
    order = [(r.first, r.cron) for r in timeline(fold(events))]
    assert order == [(t(0, 30), b), (t(1), a), (t(2), b), (t(2, 30), a), (t(3), a)]


def test_only_filters_after_folding_so_a_run_is_not_joined_across_hidden_fires() -> None:
    a = "default/a"
    events = [skipped(a, t(1)), fired(a, t(2)), skipped(a, t(3))]
    rows = keep(fold(events), Selection(only="WhenFalse"))
    assert [r.count for r in rows] == [1, 1]
    assert [r.fired for r in keep(fold(events), Selection(only="fired"))] == [True]
    assert len(keep(fold(events), Selection(only="skipped"))) == 2
    assert keep(fold(events), Selection(only="Suspended")) == []


def test_only_takes_any_case_and_refuses_a_typo_naming_the_choices() -> None:
    assert parse_only("whenfalse") == "WhenFalse"
    assert parse_only("FIRED") == "fired"
    assert parse_only(None) is None
    with pytest.raises(FieldError, match=r"--only: 'WhenFals' is not one of fired, skipped"):
        parse_only("WhenFals")


def _result() -> dict[str, Any]:
    a, b, c = "default/etl-a", "team/etl-b", "team/report"
    events = [fired(a, t(1)), skipped(a, t(2)), skipped(a, t(3)), fired(b, t(1))]
    events += [skipped(c, t(1), "Suspended", count=5, last=t(5))]

    def cron(ref: str, succeeded: int) -> dict[str, Any]:
        ns, name = ref.split("/")
        return {"namespace": ns, "name": name, "status": {"succeeded": succeeded}}

    def wf(ref: str, tick: str) -> dict[str, Any]:
        ns, name = ref.split("/")
        return {"namespace": ns, "cronWorkflow": name, "name": f"{name}-{tick}"}

    return {
        "events": events,
        "cronWorkflows": [cron(a, 1), cron(b, 1), cron(c, 0)],
        "workflows": [wf(a, t(1)), wf(b, t(1))],
        "rejectedWrites": 0,
    }


def test_select_by_name_pattern_namespace_and_decision() -> None:
    r = _result()
    assert select(r, Selection()) is r  # no filter: the result as it was
    by_name = select(r, Selection(names=("etl-*",)))
    assert {e["cronWorkflow"] for e in by_name["events"]} == {"default/etl-a", "team/etl-b"}
    assert len(by_name["workflows"]) == 2
    team = select(r, Selection(namespace="team"))
    assert [c["name"] for c in team["cronWorkflows"]] == ["etl-b", "report"]
    assert [w["name"] for w in team["workflows"]] == [f"etl-b-{t(1)}"]
    only = select(r, Selection(only="Suspended"))
    assert [c["name"] for c in only["cronWorkflows"]] == ["report"]
    assert only["workflows"] == []
    assert [e["reason"] for e in only["events"]] == ["Suspended"]


def test_summary_counts_fires_by_trigger_and_skipped_ticks_by_reason() -> None:
    entries = summary(_result(), {"default/etl-a": "Europe/Berlin"})
    a = entries[0]
    assert a["cronWorkflow"] == "default/etl-a" and a["timezone"] == "Europe/Berlin"
    assert (a["fired"], a["skipped"], a["skippedByReason"]) == (1, 2, {"WhenFalse": 2})
    assert entries[2]["skippedByReason"] == {"Suspended": 5}
    headers, rows = summary_table(entries)
    assert headers == [
        "CRONWORKFLOW",
        "TIMEZONE",
        "FIRED",
        "SKIPPED",
        "Suspended",
        "WhenFalse",
        "SUCCEEDED",
        "FAILED",
        "ACTIVE",
    ]
    assert rows[0] == ["default/etl-a", "Europe/Berlin", "1", "2", "0", "2", "1", "0", "0"]
    assert rows[2][:6] == ["team/report", "UTC", "0", "5", "5", "0"]


# ------------------------------------------------------------------ the command, in process


def _manifest(name: str, schedule: str, namespace: str | None = None, **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": meta,
        "spec": {"schedules": [schedule], "workflowSpec": WORKFLOW_SPEC, **spec},
    }


def _sim(*args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", "memory:", "simulate", *args])


def test_plain_manifests_run_without_a_scenario_and_the_timeline_is_in_time_order(
    tmp_path: Path,
) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(
        yaml.safe_dump_all(
            [_manifest("a", "0 * * * *"), _manifest("b", "30 * * * *", namespace="team")]
        )
    )
    span = ["--start", "2026-03-07", "--end", "2026-03-07T03:00:00Z"]
    r = _sim("-f", str(f), *span, "-o", "timeline")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()[1:]
    # columns: tick (UTC), local date, time and zone, CronWorkflow, decision ...
    assert [(line.split()[0], line.split()[4]) for line in lines] == [
        (t(0, 30), "team/b"),
        (t(1), "default/a"),
        (t(1, 30), "team/b"),
        (t(2), "default/a"),
        (t(2, 30), "team/b"),
        (t(3), "default/a"),
    ]
    r = _sim("-f", str(f), *span, "-o", "json", "--name", "b")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert {e["cronWorkflow"] for e in data["events"]} == {"team/b"}
    assert [s["cronWorkflow"] for s in data["summary"]] == ["team/b"]
    # -n filters, and gives a manifest that names no namespace its namespace (as apply -n)
    r = _sim("-f", str(f), *span, "-o", "json", "-n", "team")
    data = json.loads(r.output)
    assert [s["cronWorkflow"] for s in data["summary"]] == ["team/a", "team/b"]
    r = _sim("-f", str(f), *span, "-o", "json", "-n", "default")
    assert [s["cronWorkflow"] for s in json.loads(r.output)["summary"]] == ["default/a"]


def test_an_outage_flag_is_simulated_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(_manifest("a", "0 * * * *", startingDeadlineSeconds=60)))
    span = ["--start", "2026-03-07", "--end", "2026-03-07T05:00:00Z"]
    outage = "2026-03-07T00:30:00Z..2026-03-07T03:30:00Z"
    r = _sim("-f", str(f), *span, "--outage", outage, "-o", "json")
    assert r.exit_code == 0, r.output
    skips = [e for e in json.loads(r.output)["events"] if e["type"] == "ScheduleSkipped"]
    assert [(e["reason"], e["count"]) for e in skips] == [("DeadlineExceeded", 3)]
    r = _sim("-f", str(f), *span, "--outage", "2026-03-07T03:00:00Z")
    assert r.exit_code == 2 and r.output.startswith("error: --outage: '2026-03-07T03:00:00Z'")


def test_a_large_run_says_its_ticks_and_the_bound_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From SAY_WORK ticks on (lowered here), stderr says how much work is ahead, the bound
    it stays within and that Ctrl-C stops it: a fleet over a day runs for minutes."""
    from cronsource.adapters.entrypoints.cli import simulate as command

    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump_all([_manifest(f"j{i}", "*/5 * * * *") for i in range(3)]))
    span = ["--start", "2026-03-07", "--end", "2026-03-07T01:00:00Z", "-o", "summary"]
    r = _sim("-f", str(f), *span)
    assert r.exit_code == 0 and "simulating" not in r.stderr, r.stderr
    monkeypatch.setattr(command, "SAY_WORK", 30)
    r = _sim("-f", str(f), *span)
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [
        "simulating about 39 ticks of 3 CronWorkflow(s) (simulate's bound: 1,000,000 ticks);"
        " Ctrl-C stops it"
    ]
