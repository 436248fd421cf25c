"""The opt-in per-CronWorkflow counters of `cronsource run --per-cronworkflow-metrics`
(adapters/metrics.py), over a real scrape of a real `run` process: absent by default, present
with the flag (or its environment variable), labelled namespace and name, and in agreement
with the per-namespace counters of the same scrape, both as they are tailed and as they are
loaded from the history at start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.probe_helpers import RunProcess, samples, total

Found = dict[str, list[tuple[dict[str, str], float]]]

CLI = str(Path(sys.executable).parent / "cronsource")
FIRES = "cronsource_cronworkflow_fires_total"
SKIPPED = "cronsource_cronworkflow_skipped_ticks_total"

#: One CronWorkflow that fires every second, one whose 3 s runs make Forbid skip most ticks.
MANIFESTS = """\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: every-second, namespace: team-a}
spec:
  schedules: ["@every 1s"]
  workflowSpec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}
---
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: forbid, namespace: team-b}
spec:
  schedules: ["@every 1s"]
  concurrencyPolicy: Forbid
  workflowSpec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}
"""


def _run(store: str, tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> RunProcess:
    manifests = tmp_path / "crons.yaml"
    manifests.write_text(MANIFESTS)
    argv = [CLI, "--store", store, "run", str(manifests), "--http-port", "0", *flags]
    argv += ["--workflows-dir", str(tmp_path / "workflows"), "--local-run-duration", "3s"]
    run = RunProcess(argv, env=env)
    run.wait_for_probes()
    return run


def cron_total(found: Found, metric: str, **labels: str) -> float:
    """`total` for the families with a label called `name` (it would clash with the
    metric's name argument): `cron=` stands for it."""
    if "cron" in labels:
        labels["name"] = labels.pop("cron")
    return sum(v for ls, v in found.get(metric, []) if labels.items() <= ls.items())


def _scrape(run: RunProcess) -> tuple[str, Found]:
    code, _, text = run.get("/metrics")
    assert code == 200, text
    return text, samples(text)


def _agree(found: Found) -> None:
    """The per-CronWorkflow counters add up to the per-namespace ones of the same scrape."""
    for ns in ("team-a", "team-b"):
        assert cron_total(found, FIRES, namespace=ns) == total(
            found, "cronsource_fires_total", namespace=ns
        )
        for reason in {ls["reason"] for ls, _ in found.get(SKIPPED, [])}:
            assert cron_total(found, SKIPPED, namespace=ns, reason=reason) == total(
                found, "cronsource_skipped_ticks_total", namespace=ns, reason=reason
            )


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_per_cronworkflow_counters_are_opt_in_and_add_up(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        store = f"sqlite:///{tmp_path / 'cronsource.db'}"
    else:
        store = request.getfixturevalue("pg_url")
        done = subprocess.run([CLI, "--store", store, "migrate"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    run = _run(store, tmp_path, "--per-cronworkflow-metrics")
    try:
        deadline = time.monotonic() + 60
        while True:  # until both have decided a few ticks: fires, and Forbid's skips
            text, found = _scrape(run)
            fired = cron_total(found, FIRES, namespace="team-a", cron="every-second")
            skipped = cron_total(found, SKIPPED, namespace="team-b", cron="forbid")
            if fired >= 3 and skipped >= 2:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        assert {tuple(sorted(ls)) for ls, _ in found[FIRES]} == {("name", "namespace")}
        assert {tuple(sorted(ls)) for ls, _ in found[SKIPPED]} == {("name", "namespace", "reason")}
        assert cron_total(found, FIRES, namespace="team-b", cron="forbid") >= 1  # its first run
        assert cron_total(found, SKIPPED, namespace="team-a") == 0
        _agree(found)
    finally:
        assert run.stop() == 0, run.stderr[-3000:]
    before = (fired, skipped)

    # A restart counts the history again (the aggregate at the first scrape, not the tail),
    # here switched on by the variable the chart's ConfigMap could set.
    run = _run(store, tmp_path, env=_env(CRONSOURCE_PER_CRONWORKFLOW_METRICS="true"))
    try:
        text, found = _scrape(run)
        fired = cron_total(found, FIRES, namespace="team-a", cron="every-second")
        skipped = cron_total(found, SKIPPED, namespace="team-b", cron="forbid")
        assert (fired, skipped) >= before and fired >= before[0], text
        _agree(found)
    finally:
        assert run.stop() == 0, run.stderr[-3000:]

    # Off by default: not one line of the two families, even with the history there.
    run = _run(store, tmp_path)
    try:
        text, found = _scrape(run)
        assert total(found, "cronsource_fires_total", namespace="team-a") >= before[0]
        assert "cronsource_cronworkflow_" not in text
    finally:
        assert run.stop() == 0, run.stderr[-3000:]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}
