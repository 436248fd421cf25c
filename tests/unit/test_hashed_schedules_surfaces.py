"""Hashed `H` schedules through every surface: `apply`, `get` (table, json, yaml), `next`, `why`,
`backfill`, the HTTP API's OpenAPI document (the API over real HTTP:
tests/integration/test_hashed_schedules_surfaces.py). Each compiles through the same domain
code, so each must show the same resolution (Argo PR #16604's, pinned by
tests/unit/test_cronhash.py and the differential test); the spec is shown as written.
`simulate` is pinned by the scenario tests/scenarios/hashed-spread.yaml."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from cronsource.adapters.entrypoints.cli import cli

#: `H * * * *` for default/report-a and default/report-b (Argo's util/cronhash agrees).
RESOLVED = {"report-a": "8 * * * *", "report-b": "5 * * * *"}


def manifest(name: str, *schedules: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedules": list(schedules),
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


class Cli:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store = f"sqlite:///{tmp / 'cs.db'}"

    def __call__(self, *args: str) -> Result:
        return CliRunner().invoke(cli, ["--store", self.store, *args])

    def apply(self, *docs: dict[str, Any]) -> Result:
        path = self.tmp / "cw.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        return self("apply", "-f", str(path))


@pytest.fixture
def run(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_get_shows_the_resolution_beside_the_schedule_as_written(run: Cli) -> None:
    result = run.apply(*(manifest(n, "H * * * *", "30 2 * * *") for n in RESOLVED))
    assert result.exit_code == 0, result.output
    for name, resolved in RESOLVED.items():
        table = run("get", name)
        assert table.exit_code == 0, table.output
        lines = {
            k.strip(): v.strip()
            for k, _, v in (ln.partition(":") for ln in table.stdout.splitlines())
        }
        assert lines["Schedules"] == "H * * * *, 30 2 * * *"
        assert lines["ResolvedSchedules"] == f"{resolved}, 30 2 * * *"
        for fmt, load in (("json", json.loads), ("yaml", yaml.safe_load)):
            obj = load(run("get", name, "-o", fmt).stdout)
            assert obj["spec"]["schedules"] == ["H * * * *", "30 2 * * *"]
            assert obj["status"]["resolvedSchedules"] == {"H * * * *": resolved}


def test_a_cronworkflow_without_h_shows_no_resolution(run: Cli) -> None:
    assert run.apply(manifest("plain", "0 * * * *")).exit_code == 0
    assert "ResolvedSchedules" not in run("get", "plain").output
    assert "resolvedSchedules" not in json.loads(run("get", "plain", "-o", "json").stdout)["status"]


def test_next_and_why_use_the_resolution(run: Cli) -> None:
    assert run.apply(*(manifest(n, "H * * * *") for n in RESOLVED)).exit_code == 0
    for name, resolved in RESOLVED.items():
        minute = int(resolved.split()[0])
        times = json.loads(run("next", name, "-c", "3", "-o", "json").stdout)
        utc = [datetime.fromisoformat(t["utc"].replace("Z", "+00:00")) for t in times]
        assert [t.minute for t in utc] == [minute] * 3
        assert [b - a for a, b in zip(utc, utc[1:], strict=False)] == [timedelta(hours=1)] * 2
        first = times[0]["utc"]
        why = json.loads(run("why", name, "--at", first, "-o", "json").stdout)
        assert why["outcome"] == "Pending"
        other = (utc[0] + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        why = json.loads(run("why", name, "--at", other, "-o", "json").stdout)
        assert (why["outcome"], why["nextTick"]) == ("NotATick", times[1]["utc"])


def test_backfill_runs_the_resolved_ticks(run: Cli) -> None:
    assert run.apply(manifest("report-a", "H * * * *")).exit_code == 0
    plan = json.loads(
        run(
            "backfill",
            "report-a",
            "--start",
            "2026-05-04T00:00:00Z",
            "--end",
            "2026-05-04T03:00:00Z",
            "--dry-run",
            "-o",
            "json",
        ).stdout
    )
    assert [i["scheduledTime"] for i in plan["items"]] == [
        "2026-05-04T00:08:00Z",
        "2026-05-04T01:08:00Z",
        "2026-05-04T02:08:00Z",
    ]


def test_a_malformed_h_is_refused_in_one_line_and_nothing_is_stored(run: Cli) -> None:
    result = run.apply(manifest("bad", "H(0-90) * * * *"))
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.endswith(
        'cw.yaml: spec.schedules[0]: "H(0-90)" is malformed: range "0-90" is outside of 0-59,'
        " the range of the minute field (value: 'H(0-90) * * * *')"
    )
    assert not (run.tmp / "cs.db").exists()  # nothing stored, not even an empty store


# -- HTTP ----------------------------------------------------------------------------------------
