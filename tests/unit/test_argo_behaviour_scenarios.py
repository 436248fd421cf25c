"""Each behaviour Argo's own cron tests pin (workflow/cron/operator_test.go, test/e2e/cron_test.go),
as a `cronsource simulate` scenario in scenarios/argo/ with Argo's expected outcome.

A scenario NAME.yaml has NAME.expect.yaml in the format of ../shared/scenarios/check.py
(`scheduled`, `remaining`, `created_at`, `status`) plus `labels`: {cron: {key: value}}, the
CronWorkflow labels Argo sets (the completed label of a stopped CronWorkflow). The comment at the
top of each scenario names the Argo test it comes from.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cronsource.adapters.entrypoints.cli import cli

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "argo"
NAMES = sorted(
    p.name[: -len(".yaml")] for p in SCENARIOS.glob("*.yaml") if not p.name.endswith(".expect.yaml")
)


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _short(name: str) -> str:
    return name.split("/")[-1]


def _problems(result: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    errs: list[str] = []
    wfs = [
        w for w in result["workflows"] if w.get("trigger", "schedule") in ("schedule", "catchup")
    ]
    keys = [(w["cronWorkflow"], w["scheduledTime"]) for w in wfs]
    if len(keys) != len(set(keys)):
        errs.append(f"two Workflows for one tick: {keys}")
    for cron, times in (expect.get("scheduled") or {}).items():
        got = sorted(
            (w["scheduledTime"] for w in wfs if _short(w["cronWorkflow"]) == cron), key=_ts
        )
        if got != times:
            errs.append(f"{cron}: scheduled {got}, Argo {times}")
    for cron, names in (expect.get("remaining") or {}).items():
        got = sorted(
            w["name"]
            for w in result["workflows"]
            if _short(w["cronWorkflow"]) == cron and not w.get("deletedAt")
        )
        if got != sorted(names):
            errs.append(f"{cron}: remaining {got}, Argo {sorted(names)}")
    for name, at in (expect.get("created_at") or {}).items():
        got = [w.get("createdAt") for w in result["workflows"] if w["name"] == name]
        if got != [at]:
            errs.append(f"{name}: created at {got}, Argo {at}")
    crons = {_short(c["name"]): c for c in result["cronWorkflows"]}
    for cron, fields in (expect.get("status") or {}).items():
        status = crons[cron].get("status", {})
        for key, want in fields.items():
            got = len(status.get("active") or []) if key == "activeCount" else status.get(key)
            if got != want:
                errs.append(f"{cron}: status.{key} = {got!r}, Argo {want!r}")
    for cron, labels in (expect.get("labels") or {}).items():
        got = (crons[cron].get("metadata") or {}).get("labels") or crons[cron].get("labels") or {}
        for key, want in labels.items():
            if got.get(key) != want:
                errs.append(f"{cron}: label {key} = {got.get(key)!r}, Argo {want!r}")
    return errs


def test_there_is_a_scenario_per_pinned_behaviour() -> None:
    assert len(NAMES) >= 12, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_argo_behaviour(name: str) -> None:
    expect = yaml.safe_load((SCENARIOS / f"{name}.expect.yaml").read_text())
    run = CliRunner().invoke(
        cli, ["--store", "memory:", "simulate", str(SCENARIOS / f"{name}.yaml"), "-o", "json"]
    )
    assert run.exit_code == 0, run.output
    problems = _problems(json.loads(run.output), expect)
    assert not problems, f"scenarios/argo/{name}.yaml differs from Argo:\n  " + "\n  ".join(
        problems
    )
