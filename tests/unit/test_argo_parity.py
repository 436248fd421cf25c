"""Behaviours where cronsource follows Argo v4.0.5 (issue 10), driven through the real
entrypoints: the command line, `simulate` and the domain service.

Each test names the Argo source it follows; it failed before the change it pins.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cronsource.adapters.entrypoints.cli import cli

TEMPLATES = [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}]

GOOD: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "hello", "namespace": "default"},
    "spec": {
        "schedules": ["* * * * *"],
        "workflowSpec": {"entrypoint": "main", "templates": TEMPLATES},
    },
}


def manifest(spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    m = copy.deepcopy(GOOD)
    m["metadata"].update(meta)
    m["spec"].update(spec or {})
    return m


@pytest.fixture
def run(tmp_path: Path) -> Any:
    store = f"sqlite:///{tmp_path / 'cs.db'}"

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--store", store, *args])

    invoke.tmp = tmp_path  # type: ignore[attr-defined]
    return invoke


def write(tmp: Path, name: str, docs: Any) -> str:
    p = tmp / name
    p.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else docs)
    return str(p)


def simulate(tmp: Path, scenario: dict[str, Any]) -> Any:
    f = write(tmp, "sc.yaml", yaml.safe_dump(scenario))
    return CliRunner().invoke(cli, ["simulate", f, "-o", "json"])


# ------------------------------------------------------------------ 1. names with a uid

UID = "3b0e2f4e-9a43-4c1a-8f55-0d6f7d3f1b2a"


@pytest.mark.parametrize(
    "command",
    [
        ["next", "hello"],
        ["suspend", "hello"],
        ["resume", "hello"],
        ["trigger", "hello"],
        ["backfill", "hello", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:05:00Z"],
        ["delete", "hello"],
    ],
)
def test_a_manifest_with_a_uid_is_addressed_by_name(run: Any, command: list[str]) -> None:
    assert run("apply", "-f", write(run.tmp, "m.yaml", [manifest(uid=UID)])).exit_code == 0
    res = run(*command)
    assert res.exit_code == 0, res.output
    assert "not found" not in res.output


def test_applying_without_the_uid_updates_the_object_created_with_it(run: Any) -> None:
    run("apply", "-f", write(run.tmp, "a.yaml", [manifest(uid=UID)]))
    res = run("apply", "-f", write(run.tmp, "b.yaml", [manifest({"schedules": ["*/5 * * * *"]})]))
    assert "hello updated" in res.output
    listed = json.loads(run("list", "-o", "json").stdout)["items"]
    assert [c["spec"]["schedules"] for c in listed] == [["*/5 * * * *"]]


def test_simulate_suspends_a_cronworkflow_that_carries_a_uid(tmp_path: Path) -> None:
    res = simulate(
        tmp_path,
        {
            "start": "2026-05-04T06:00:30Z",
            "end": "2026-05-04T06:05:00Z",
            "cronWorkflows": [manifest(uid=UID)],
            "actions": [{"at": "2026-05-04T06:02:30Z", "suspend": "hello"}],
        },
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    fired = [e["scheduledTime"] for e in out["events"] if e["type"] == "ScheduleFired"]
    assert fired == ["2026-05-04T06:01:00Z", "2026-05-04T06:02:00Z"]


# ------------------------------------------------------------------ 4. stopStrategy


def _svc_and_cron(t0: Any, **spec: Any) -> Any:
    from cronsource.domain.manifest import parse_manifest
    from cronsource.domain.service import CronService

    svc = CronService(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    m = manifest(spec)
    cron_id, _ = svc.apply(parse_manifest(m), t0)
    return svc, cron_id


def _events(svc: Any, cron_id: Any) -> list[tuple[str, Any]]:
    from cronsource.domain.service import event_type

    return [(event_type(e), e) for e in svc.events.get(cron_id)]


def _t(hhmmss: str) -> Any:
    from datetime import UTC, datetime

    h, m, s = (int(x) for x in hhmmss.split(":"))
    return datetime(2026, 5, 4, h, m, s, tzinfo=UTC)


def test_a_stop_strategy_already_true_starts_nothing() -> None:
    # operator.go run(): checkStopingCondition before enforceRuntimePolicy and submit.
    svc, cron_id = _svc_and_cron(
        _t("10:00:30"), stopStrategy={"expression": "cronworkflow.failed == 0"}
    )
    svc.tick([cron_id], _t("10:01:00"))
    svc.tick([cron_id], _t("10:02:00"))
    kinds = [k for k, _ in _events(svc, cron_id)]
    assert "ScheduleFired" not in kinds
    assert kinds == ["CronWorkflowCreated", "Stopped", "ScheduleSkipped"]
    assert svc.load(cron_id).stopped and svc.load(cron_id).next_due() is None


def test_a_stop_strategy_that_fails_to_evaluate_skips_the_tick_and_never_stops() -> None:
    from cronsource.projections.readmodel import status_of

    # `cronworkflow.labels.team` is nil: nil > 1 fails to evaluate (expr-lang, as Argo).
    svc, cron_id = _svc_and_cron(
        _t("10:00:30"), stopStrategy={"expression": "cronworkflow.labels.team > 1"}
    )
    svc.tick([cron_id], _t("10:01:00"))
    svc.tick([cron_id], _t("10:02:00"))
    evs = _events(svc, cron_id)
    skips = [e for k, e in evs if k == "ScheduleSkipped"]
    assert [s.reason for s in skips] == ["SpecError", "SpecError"]
    assert "stopping condition" in skips[0].message
    assert not any(k in ("Stopped", "SpecRejected", "ScheduleFired") for k, _ in evs)
    agg = svc.load(cron_id)
    assert agg.next_due() == _t("10:03:00")
    cond = status_of(agg)["conditions"]
    assert cond[0]["type"] == "SpecError" and "stopping condition" in cond[0]["message"]


def test_a_run_completing_with_a_failing_stop_strategy_does_not_stop() -> None:
    svc, cron_id = _svc_and_cron(
        _t("10:00:30"),
        stopStrategy={"expression": "cronworkflow.failed >= 1 && cronworkflow.labels.x > 1"},
    )
    svc.tick([cron_id], _t("10:01:00"))
    name = next(e.workflow_name for k, e in _events(svc, cron_id) if k == "ScheduleFired")
    svc.run_completed(cron_id, name, "Failed", _t("10:01:20"), _t("10:01:20"))
    agg = svc.load(cron_id)
    assert not agg.stopped and not agg.spec_error and agg.next_due() == _t("10:02:00")


# ------------------------------------------------------------------ 5. labels and finalizers


def test_a_stopped_cronworkflow_carries_argos_completed_label() -> None:
    from cronsource.adapters.infrastructure.kube.status import status_patch
    from cronsource.projections.readmodel import LABEL_COMPLETED, status_row

    # e2e cron_test.go asserts cronWf.Labels[common.LabelKeyCronWorkflowCompleted] == "true"
    assert LABEL_COMPLETED == "cronworkflows.argoproj.io/completed"
    svc, cron_id = _svc_and_cron(
        _t("10:00:30"), stopStrategy={"expression": "cronworkflow.failed == 0"}
    )
    before = status_row(svc.load(cron_id))
    assert LABEL_COMPLETED not in before.metadata["labels"]
    assert "labels" not in status_patch(before, {"resourceVersion": "7"})["metadata"]
    svc.tick([cron_id], _t("10:01:00"))
    row = status_row(svc.load(cron_id))
    assert row.metadata["labels"][LABEL_COMPLETED] == "true"
    patch = status_patch(row, {"resourceVersion": "8", "labels": {"team": "a"}})
    assert patch["metadata"]["labels"] == {LABEL_COMPLETED: "true"}  # no other label sent
    svc.resume(cron_id, _t("10:01:30"))
    resumed = status_row(svc.load(cron_id))
    shown = {"resourceVersion": "9", "labels": {LABEL_COMPLETED: "true"}}
    assert status_patch(resumed, shown)["metadata"]["labels"] == {LABEL_COMPLETED: None}


def test_children_keep_finalizers_and_get_the_labels_argo_propagates() -> None:
    from cronsource.projections.dispatch import build_workflow

    svc, cron_id = _svc_and_cron(_t("10:00:30"))
    m = manifest(
        {
            "workflowMetadata": {
                "labels": {"app": "x"},
                "annotations": {"note": "n"},
                "finalizers": ["example.com/keep"],
            }
        },
        labels={
            "workflows.argoproj.io/creator": "system-serviceaccount-argo-argo-server",
            "workflows.argoproj.io/creator-email": "a.at.example.com",
            "workflows.argoproj.io/creator-preferred-username": "alice",
            "workflows.argoproj.io/controller-instanceid": "cronsource",
            "team": "not-propagated",
        },
    )
    from cronsource.domain.manifest import parse_manifest

    svc.apply(parse_manifest(m), _t("10:00:40"))
    wf = build_workflow(svc.load(cron_id), "hello-1777888860", _t("10:01:00"))
    meta = wf["metadata"]
    assert meta["finalizers"] == ["example.com/keep"]
    assert meta["labels"] == {
        "workflows.argoproj.io/creator": "system-serviceaccount-argo-argo-server",
        "workflows.argoproj.io/creator-email": "a.at.example.com",
        "workflows.argoproj.io/creator-preferred-username": "alice",
        # not the instance id: the child goes to Argo's workflow controller (operator guide)
        "workflows.argoproj.io/cron-workflow": "hello",
        "app": "x",
    }
    assert meta["annotations"] == {
        "workflows.argoproj.io/scheduled-time": "2026-05-04T10:01:00Z",
        "note": "n",
    }


# ------------------------------------------------------------------ 6. nulls and robfig syntax


@pytest.mark.parametrize(
    ("meta", "spec"),
    [
        ({"labels": None}, {}),  # e2e TestBasicAllow writes `labels:` with nothing after it
        ({"annotations": None}, {"timezone": None}),
        ({}, {"suspend": None, "concurrencyPolicy": None, "startingDeadlineSeconds": None}),
        ({}, {"concurrencyPolicy": ""}),  # validate.go: "" is a valid concurrencyPolicy
        ({}, {"workflowMetadata": None, "when": None, "stopStrategy": None}),
    ],
)
def test_explicit_nulls_read_as_unset(run: Any, meta: dict[str, Any], spec: dict[str, Any]) -> None:
    m = manifest(spec, **meta)
    res = run("lint", write(run.tmp, "m.yaml", [m]))
    assert res.exit_code == 0, res.output
    assert run("apply", "-f", write(run.tmp, "m.yaml", [m])).exit_code == 0
    got = json.loads(run("get", "hello", "-o", "json").stdout)
    assert got["spec"]["suspend"] is False and got["spec"]["concurrencyPolicy"] == "Allow"
    assert got["spec"].get("timezone", "") == "" and got["metadata"]["labels"] == {}


def test_a_cron_tz_prefix_is_the_schedules_own_zone(run: Any) -> None:
    m = manifest({"schedules": ["CRON_TZ=Asia/Tokyo 0 9 * * *"]})
    assert run("apply", "-f", write(run.tmp, "m.yaml", [m])).exit_code == 0
    times = json.loads(run("next", "hello", "-o", "json", "-c", "2").output)
    assert len(times) == 2
    assert all(t["utc"].endswith("T00:00:00Z") for t in times)  # 09:00 in Tokyo
    # Shown in its zone, as its times are (it said UTC, and 00:00+00:00 as "local").
    assert all(t["local"].endswith("T09:00:00+09:00") for t in times)
    assert "Timezone:                Asia/Tokyo" in run("get", "hello").stdout


def test_a_cron_tz_prefix_with_spec_timezone_is_refused(run: Any) -> None:
    # Argo's controller parses "CRON_TZ=<timezone> CRON_TZ=Asia/Tokyo 0 9 * * *": robfig
    # refuses the second prefix, so the CronWorkflow would never be scheduled.
    m = manifest({"schedules": ["CRON_TZ=Asia/Tokyo 0 9 * * *"], "timezone": "UTC"})
    res = run("lint", write(run.tmp, "m.yaml", [m]))
    assert res.exit_code == 1 and "spec.schedules" in res.output and "Traceback" not in res.output


def test_every_with_a_fraction_of_a_second_ticks_as_robfig_does() -> None:
    from datetime import timedelta

    from cronsource.domain.schedule import compile_schedule

    t0 = _t("10:00:00")
    for expr, step in [("@every 1500ms", 1), ("@every 500ms", 1), ("@every 2.9s", 2)]:
        ticks = list(
            compile_schedule([expr], anchor=t0).ticks_between(t0, t0 + timedelta(seconds=4))
        )
        assert ticks == [t0 + timedelta(seconds=step * k) for k in range(1, 4 // step + 1)], expr


# ------------------------------------------------------------------ 3. now() after the tick

#: The `when` of Argo's examples/cron-when.yaml (v4.0.5), verbatim.
CRON_WHEN = (
    "{{= cronworkflow.lastScheduledTime == nil || "
    "(now() - cronworkflow.lastScheduledTime).Seconds() > 360 }}"
)


def test_argos_cron_when_example_runs_every_six_minutes(tmp_path: Path) -> None:
    res = simulate(
        tmp_path,
        {
            "start": "2026-05-04T06:00:30Z",
            "end": "2026-05-04T06:20:00Z",
            "cronWorkflows": [manifest({"when": CRON_WHEN, "concurrencyPolicy": "Allow"})],
        },
    )
    assert res.exit_code == 0, res.output
    fired = [
        e["scheduledTime"][11:16]
        for e in json.loads(res.output)["events"]
        if e["type"] == "ScheduleFired"
    ]
    assert fired == ["06:01", "06:07", "06:13", "06:19"]


# ------------------------------------------------------------------ 2. workflowSpec


def _ws(**changes: Any) -> dict[str, Any]:
    ws: dict[str, Any] = {"entrypoint": "main", "templates": copy.deepcopy(TEMPLATES)}
    ws.update(changes)
    return {k: v for k, v in ws.items() if v is not None}


# (workflowSpec or None for absent, what Argo's message says); messages from validate.go
# ValidateWorkflow/ValidateWorkflowTemplateRefFields/validateWorkflowFieldNames/
# validateArguments and sigs.k8s.io/json's strict decoding.
BAD_WORKFLOW_SPECS = [
    pytest.param(None, "cannot validate Workflow: spec.entrypoint is required", id="absent"),
    pytest.param({}, "cannot validate Workflow: spec.entrypoint is required", id="empty"),
    pytest.param(_ws(foo=1), 'unknown field "spec.workflowSpec.foo"', id="unknown field"),
    pytest.param(
        _ws(templates=[{"name": "main", "containr": {}}]),
        'unknown field "spec.workflowSpec.templates[0].containr"',
        id="unknown template field",
    ),
    pytest.param(
        _ws(entrypoint=None),
        "cannot validate Workflow: spec.entrypoint is required",
        id="no entrypoint",
    ),
    pytest.param(
        _ws(templates=[{"name": "bad template name", "container": {"image": "x"}}]),
        "spec.templates[0].name: 'bad template name' is invalid: name must consist of "
        "alpha-numeric characters or '-'",
        id="bad template name",
    ),
    pytest.param(
        _ws(templates=TEMPLATES * 2), "spec.templates[1].name 'main' is not unique", id="dup"
    ),
    pytest.param(
        _ws(workflowTemplateRef={"name": "wt"}),
        "Templates is invalid field in spec if workflow referred WorkflowTemplate reference",
        id="templates with workflowTemplateRef",
    ),
    pytest.param(
        _ws(arguments={"parameters": {"a": "b"}}),
        "cannot unmarshal object into Go struct field spec.workflowSpec.arguments.parameters",
        id="parameters as a map",
    ),
    pytest.param(
        _ws(arguments={"parameters": [{"name": "x"}]}),
        "spec.arguments.x.value or spec.arguments.x.valueFrom is required",
        id="parameter without value",
    ),
    pytest.param(
        _ws(arguments={"parameters": [{"name": "a b", "value": "1"}]}),
        "spec.arguments.parameters[0].name: 'a b' is invalid",
        id="bad parameter name",
    ),
    pytest.param(_ws(parallelism="2"), "of type integer", id="wrong type"),
]


@pytest.mark.parametrize(("ws", "message"), BAD_WORKFLOW_SPECS)
def test_lint_and_apply_refuse_what_argo_refuses_in_workflow_spec(
    run: Any, ws: dict[str, Any] | None, message: str
) -> None:
    m = manifest()
    if ws is None:
        del m["spec"]["workflowSpec"]
    else:
        m["spec"]["workflowSpec"] = ws
    f = write(run.tmp, "m.yaml", [m])
    res = run("lint", f)
    assert res.exit_code == 1 and message in res.output, res.output
    assert "spec.workflowSpec" in res.output and "Traceback" not in res.output
    assert run("apply", "-f", f).exit_code == 1
    assert run("get", "hello").exit_code == 1  # nothing stored


@pytest.mark.parametrize(
    "ws",
    [
        pytest.param({"workflowTemplateRef": {"name": "wt"}}, id="workflowTemplateRef alone"),
        pytest.param(
            _ws(arguments={"parameters": [{"name": "n", "value": 3}]}), id="numeric value"
        ),
        pytest.param(_ws(templates=[{"name": "main", "plugin": {"any": {"x": 1}}}]), id="plugin"),
    ],
)
def test_workflow_specs_argo_accepts_are_accepted(run: Any, ws: dict[str, Any]) -> None:
    m = manifest()
    m["spec"]["workflowSpec"] = ws
    res = run("lint", write(run.tmp, "m.yaml", [m]))
    assert res.exit_code == 0, res.output


def test_an_invalid_workflow_spec_from_the_cluster_is_rejected_and_fires_nothing() -> None:
    # What the Kubernetes watcher does with an object edited by kubectl
    # (adapters/runtime/kube/watch.py).
    from cronsource.domain.manifest import ManifestError, parse_manifest

    svc, cron_id = _svc_and_cron(_t("10:00:30"))
    bad = manifest()
    bad["spec"]["workflowSpec"] = _ws(entrypoint=None)
    with pytest.raises(ManifestError) as e:
        parse_manifest(bad)
    svc.reject_spec(cron_id, 2, str(e.value), _t("10:00:40"))
    svc.tick([cron_id], _t("10:05:00"))
    kinds = [k for k, _ in _events(svc, cron_id)]
    assert "ScheduleFired" not in kinds and "SpecRejected" in kinds
    assert "cannot validate Workflow: spec.entrypoint is required" in svc.load(cron_id).spec_error


def test_a_stored_spec_from_before_these_checks_still_loads() -> None:
    # Streams written by an older cronsource must stay readable.
    from cronsource.domain.cronworkflow import CronWorkflow
    from cronsource.domain.manifest import parse_manifest

    agg = CronWorkflow.from_manifest(parse_manifest(manifest()), _t("10:00:00"))
    agg.spec = {**agg.spec, "workflowSpec": {"foo": 1}}
    assert agg.spec_model.workflow_spec == {"foo": 1}


# ------------------------------------------------------------------ 8. other kinds in a file

WORKFLOW_TEMPLATE = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "WorkflowTemplate",
    "metadata": {"name": "wt"},
    "spec": {"entrypoint": "main", "templates": TEMPLATES},
}


def test_lint_and_apply_take_the_cronworkflows_of_a_file_and_ignore_other_kinds(run: Any) -> None:
    # cmd/argo/lint/lint.go lintData: objects of kinds not being linted are skipped.
    f = write(run.tmp, "m.yaml", [WORKFLOW_TEMPLATE, manifest()])
    res = run("lint", f)
    assert res.exit_code == 0 and "1 CronWorkflow(s) valid" in res.output, res.output
    assert "hello created" in run("apply", "-f", f).output
    listed = json.loads(run("list", "-o", "json").stdout)["items"]
    assert [c["metadata"]["name"] for c in listed] == ["hello"]


def test_a_file_without_any_cronworkflow_is_an_error(run: Any) -> None:
    # lint.go: "found nothing to lint in the specified paths, failing..."
    res = run("lint", write(run.tmp, "m.yaml", [WORKFLOW_TEMPLATE]))
    assert res.exit_code == 1 and "found no CronWorkflow" in res.output


# ------------------------------------------------------------------ 7. when: tags and functions


def _variables(**extra: Any) -> dict[str, object]:
    from cronsource.domain.expressions import NOW_VARIABLE, cronworkflow_variables

    return {
        **cronworkflow_variables(
            name="hello",
            namespace="default",
            labels={"team": "a"},
            annotations={},
            failed=1,
            succeeded=2,
            last_scheduled_time=None,
        ),
        NOW_VARIABLE: _t("09:30:00"),
        **extra,
    }


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        # Simple tags are substituted first (util/template simple_template.go).
        ("'{{cronworkflow.namespace}}' == 'default'", True),
        ("'{{ cronworkflow.name }}' == 'other'", False),
        # Expression tags render to their JSON text, then the text is evaluated.
        ("{{= cronworkflow.failed < 3 }} && {{= cronworkflow.succeeded == 2 }}", True),
        ("{{= cronworkflow.lastScheduledTime == nil }}", True),
        # Argo's environment: sprig, matches (RE2), asInt, time methods.
        ("{{= sprig.trim('  x ') == 'x' }}", True),
        ("{{= sprig.upper(cronworkflow.name) == 'HELLO' }}", True),
        ("{{= cronworkflow.name matches '^h[a-z]+$' }}", True),
        ("{{= cronworkflow.name not matches '^x' }}", True),
        ("{{= asInt('3') > cronworkflow.failed }}", True),
        ("{{= now().Hour() == 9 && now().Minute() == 30 && now().Weekday() == 1 }}", True),
    ],
)
def test_when_substitutes_tags_and_offers_argos_functions(when: str, expected: bool) -> None:
    from cronsource.domain.whentemplate import evaluate_when, validate_when

    validate_when(when)
    assert evaluate_when(when, _variables()) is expected


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ("{{cronworkflow.failed}} > 1", "failed to resolve {{cronworkflow.failed}} to string"),
        ("'{{cronworkflow.nmae}}' == 'x'", "failed to resolve {{cronworkflow.nmae}}"),
        ("{{= cronworkflow.failed > 1", "cannot find end tag"),
    ],
)
def test_when_tags_argo_cannot_substitute_are_refused_at_lint(
    run: Any, when: str, message: str
) -> None:
    res = run("lint", write(run.tmp, "m.yaml", [manifest({"when": when})]))
    assert res.exit_code == 1 and "spec.when" in res.output and message in res.output, res.output


def test_a_when_with_a_simple_tag_fires_in_simulate(tmp_path: Path) -> None:
    res = simulate(
        tmp_path,
        {
            "start": "2026-05-04T06:00:30Z",
            "end": "2026-05-04T06:02:30Z",
            "cronWorkflows": [manifest({"when": "'{{cronworkflow.namespace}}' == 'default'"})],
        },
    )
    assert res.exit_code == 0, res.output
    kinds = [e["type"] for e in json.loads(res.output)["events"]]
    assert kinds.count("ScheduleFired") == 2


@pytest.mark.parametrize(
    ("spec", "zones", "local"),
    [
        ({"schedules": ["0 9 * * *"]}, ["UTC"], "UTC"),
        (
            {"schedules": ["0 9 * * *"], "timezone": "Europe/Berlin"},
            ["Europe/Berlin"],
            "Europe/Berlin",
        ),
        ({"schedules": ["CRON_TZ=Asia/Tokyo 0 9 * * *"]}, ["Asia/Tokyo"], "Asia/Tokyo"),
        # Two zones: both are named, and local times are shown in UTC.
        (
            {"schedules": ["CRON_TZ=Asia/Tokyo 0 9 * * *", "0 9 * * *"]},
            ["Asia/Tokyo", "UTC"],
            "UTC",
        ),
    ],
)
def test_the_zones_a_cronworkflow_is_shown_in(
    spec: dict[str, Any], zones: list[str], local: str
) -> None:
    from cronsource.domain.schedule import local_zone, spec_zones

    assert (spec_zones(spec), local_zone(spec)) == (zones, local)
