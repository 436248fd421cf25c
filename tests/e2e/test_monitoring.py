"""The alert rules and the Grafana dashboard of deploy/helm/cronsource/files, checked by
Prometheus's own code (tests/promql: model/rulefmt, what `promtool check rules` runs, and the
PromQL parser) and against the metric names a real `cronsource run` on PostgreSQL exports
(every family, the per-CronWorkflow ones included), so that a renamed metric breaks the build
rather than an alert that silently never fires."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploytools import (
    CLI,
    DASHBOARD,
    RULE_FILE,
    exported_names,
    parse_exprs,
    promcheck,
    scrape_run,
)
from tests.pgserver import drop_database, fresh_database

#: Grafana's own variables, as it substitutes them before the query reaches Prometheus.
GRAFANA_BUILTINS = {"__rate_interval": "2m", "__interval": "30s", "__range": "6h"}


pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, pg_server_url: str) -> Iterator[set[str]]:
    """Sample names of a real scrape: PostgreSQL (the replica and lease families exist only
    there) and the per-CronWorkflow counters switched on."""
    url = fresh_database(pg_server_url)
    try:
        done = subprocess.run([CLI, "--store", url, "migrate"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        text = scrape_run(url, tmp_path_factory.mktemp("scrape"), "--per-cronworkflow-metrics")
    finally:
        drop_database(url)
    names = exported_names(text)
    # The scrape is what it should be: these come from adapters/metrics.py and probes.py.
    assert {
        "cronsource_fires_total",
        "cronsource_replicas",
        "cronsource_last_turn_age_seconds",
        "cronsource_cronworkflow_fires_total",
    } <= names
    yield names


def rule_groups() -> list[dict[str, Any]]:
    rule = yaml.safe_load(RULE_FILE.read_text())
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def check_rules(groups: Any, where: Path) -> subprocess.CompletedProcess[str]:
    """`promcheck rules` (what `promtool check rules` does) on a rule file of these groups,
    written as YAML text the way the file carries them."""
    where.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return subprocess.run(
        [promcheck(), "rules", str(where)], capture_output=True, text=True, timeout=60
    )


def test_the_prometheusrule_passes_prometheus_rule_validation(tmp_path: Path) -> None:
    groups = rule_groups()
    done = check_rules(groups, tmp_path / "rules.yaml")
    n = sum(len(g["rules"]) for g in groups)
    assert done.returncode == 0, done.stderr
    assert f"SUCCESS: {n} rules found" in done.stdout
    # The alerts the operator guide promises are there.
    alerts = {r["alert"] for g in groups for r in g["rules"]}
    assert {
        "CronsourceOverdue",
        "CronsourceShardsUnowned",
        "CronsourceNoProjector",
        "CronsourceProjectionLag",
        "CronsourceFiresLate",
        "CronsourceDispatchErrors",
        "CronsourceWorkerFailing",
    } <= alerts


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda r: r.update(expr="max(cronsource_due_overdue > 0"), "could not parse expression"),
        (lambda r: r.update(expresion=r.pop("expr")), "field expresion not found"),
        (lambda r: r.update(annotations={"summary": "{{ $labels.pod"}), 'annotation "summary"'),
        (lambda r: r.update(record="cronsource:overdue"), "only one of 'record' and 'alert'"),
        (lambda r: r.update({"for": "soon"}), "soon"),
    ],
)
def test_the_rule_check_fails_on_a_broken_rule(tmp_path: Path, break_it: Any, message: str) -> None:
    groups = rule_groups()
    break_it(groups[0]["rules"][1])
    done = check_rules(groups, tmp_path / "rules.yaml")
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_a_duplicate_rule_fails_as_promtool_s_lint_says(tmp_path: Path) -> None:
    groups = rule_groups()
    groups[0]["rules"].append(dict(groups[0]["rules"][1]))
    done = check_rules(groups, tmp_path / "rules.yaml")
    assert done.returncode == 1 and "1 duplicate rule(s) found" in done.stderr, done.stderr


def test_every_rule_names_only_metrics_that_run_exports(exported: set[str]) -> None:
    exprs = [r["expr"] for g in rule_groups() for r in g["rules"]]
    for result in parse_exprs(exprs):
        assert "error" not in result, result
        assert result["metrics"], result  # every alert reads a metric of ours
        assert set(result["metrics"]) <= exported, result


def dashboard_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out += panel.get("panels", [])
    return out


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana's variable syntax ($name, ${name}, ${name:fmt}, [[name]]) replaced by a value."""

    def value(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        assert name in variables, f"{expr}: ${name} is not a variable of the dashboard"
        return variables[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", value, expr)


def test_the_dashboard_s_queries_parse_and_name_only_exported_metrics(
    exported: set[str],
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = dict(GRAFANA_BUILTINS)
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            found = re.fullmatch(r"label_values\((\w+), *(\w+)\)", query)
            assert found and found[1] in exported, query
            variables[var["name"]] = var.get("allValue") or ".*"
        elif var["type"] == "datasource":
            assert var["query"] == "prometheus"
            variables[var["name"]] = "prometheus"
    exprs = []
    for panel in dashboard_panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids), panel["title"]
        exprs += [substitute(t["expr"], variables) for t in panel["targets"]]
    results = parse_exprs(exprs)
    for result in results:
        assert "error" not in result, result
        assert result["metrics"] and set(result["metrics"]) <= exported, result
    # What the dashboard is for (issue 25): fires and skips by reason, skew, projection lag,
    # replicas, errors; and the opt-in per-CronWorkflow counters.
    shown = {m for r in results for m in r["metrics"]}
    assert {
        "cronsource_fires_total",
        "cronsource_skipped_ticks_total",
        "cronsource_fire_skew_seconds_bucket",
        "cronsource_projection_lag_events",
        "cronsource_replicas",
        "cronsource_shards_owned",
        "cronsource_dispatch_errors_total",
        "cronsource_worker_failures_total",
        "cronsource_cronworkflow_fires_total",
        "cronsource_cronworkflow_skipped_ticks_total",
    } <= shown
    assert any("by (reason)" in e and "skipped_ticks" in e for e in exprs)


def test_the_dashboard_layout_is_one_grafana_can_load() -> None:
    """What Grafana needs of a dashboard JSON to import it as is: a uid, unique panel ids,
    each panel on the 24-column grid, and no two panels on the same cells."""
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "cronsource" and dashboard["schemaVersion"] >= 36
    panels = dashboard_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids)
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]
