"""The Go tools the chart and the monitoring files are checked with (scripts/build-helm.sh,
scripts/build-promcheck.sh), and what the checks share: rendering the chart, parsing PromQL
with Prometheus's parser, and the metric names a real `cronsource run` exports.

``CRONSOURCE_HELM``, ``CRONSOURCE_MONCHECK`` and ``CRONSOURCE_PROMCHECK`` name the binaries
(scripts/test.sh exports them); without them the build script is run, which builds once per
machine and reuses its cache after. A tool that cannot be built fails the test that needs it,
never skips it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.buildscript import REPO, built_paths
from tests.probe_helpers import RunProcess

CHART = REPO / "deploy" / "helm" / "cronsource"
RULE_FILE = CHART / "files" / "prometheusrule.yaml"
DASHBOARD = CHART / "files" / "grafana-dashboard.json"
CLI = str(Path(sys.executable).parent / "cronsource")
BUILD_TIMEOUT = 3600.0  # cold, on 2 busy cores: module downloads and a large Go build


class DeployToolError(RuntimeError):
    """helm, moncheck or promcheck could not be built or found."""


@cache
def _helm_built() -> list[Path]:
    return built_paths(REPO / "scripts" / "build-helm.sh", 2, BUILD_TIMEOUT, DeployToolError)


@cache
def _promcheck_built() -> list[Path]:
    return built_paths(REPO / "scripts" / "build-promcheck.sh", 1, BUILD_TIMEOUT, DeployToolError)


def _binary(env: str, built: Any, index: int) -> str:
    explicit = os.environ.get(env)
    path = Path(explicit) if explicit else built()[index]
    if not os.access(path, os.X_OK):
        raise DeployToolError(f"{env}={path} is not an executable file")
    return str(path)


def helm() -> str:
    return _binary("CRONSOURCE_HELM", _helm_built, 0)


def moncheck() -> str:
    return _binary("CRONSOURCE_MONCHECK", _helm_built, 1)


def promcheck() -> str:
    return _binary("CRONSOURCE_PROMCHECK", _promcheck_built, 0)


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    # HELM_* homes in a throwaway place: no repository config or cache of the machine's user.
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/cronsource-helm/cache"}
    env |= {"HELM_CONFIG_HOME": "/tmp/cronsource-helm/config"}
    env |= {"HELM_DATA_HOME": "/tmp/cronsource-helm/data"}
    return subprocess.run(
        [helm(), *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def template(release: str, namespace: str, *sets: str) -> str:
    """`helm template RELEASE deploy/helm/cronsource -n NAMESPACE --set ...`: the YAML."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    done = run_helm(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def parse_exprs(exprs: list[str]) -> list[dict[str, Any]]:
    """Each expression through Prometheus's PromQL parser: {"expr", "error"?, "metrics"}."""
    done = subprocess.run(
        [promcheck(), "exprs"],
        input=json.dumps(exprs),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results: list[dict[str, Any]] = json.loads(done.stdout)
    assert [r["expr"] for r in results] == exprs
    return results


#: CronWorkflows that give every counter family of `run` samples: fires every second, and a
#: Forbid one whose 3 s runs make it skip.
BUSY = """\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: every-second, namespace: metrics}
spec:
  schedules: ["@every 1s"]
  workflowSpec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}
---
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: forbid, namespace: metrics}
spec:
  schedules: ["@every 1s"]
  concurrencyPolicy: Forbid
  workflowSpec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}
"""

_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


def exported_names(text: str) -> set[str]:
    """Every sample name a Prometheus text exposition has or declares: the samples, and for
    a family without samples yet the names its type gives it (a counter's _total, ...)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        names |= {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
    return names


def scrape_run(store: str, workdir: Path, *flags: str) -> str:
    """/metrics of a real `cronsource run --http-port 0` on `store` once its CronWorkflows
    have fired and skipped a few times."""
    manifests = workdir / "busy.yaml"
    manifests.write_text(BUSY)
    argv = [CLI, "--store", store, "run", str(manifests), "--http-port", "0", *flags]
    argv += ["--workflows-dir", str(workdir / "workflows"), "--local-run-duration", "3s"]
    run = RunProcess(argv)
    try:
        run.wait_for_probes()
        deadline = time.monotonic() + 60
        while True:
            code, _, text = run.get("/metrics")
            assert code == 200, text
            if "cronsource_skipped_ticks_total{" in text and "runs_completed_total{" in text:
                return text
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
    finally:
        assert run.stop() == 0, run.stderr[-3000:]
