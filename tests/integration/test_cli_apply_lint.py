"""`apply`, `run PATHS` and `lint` through the installed `cronsource` entry point, as a user
types them (issue 21, items 4 to 6): apply is kubectl's three-way apply, lint and apply name
every bad file, and names Argo does not define in `when`/`stopStrategy` are warned about."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.cli import NOTHING_RUNS
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.domain.manifest import parse_manifest
from tests.integration.test_cli_first_hour import cs
from tests.unit.test_cli import stored_events


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A store no `cronsource run` holds: every apply ends with the line NOTHING_RUNS
    (tests/e2e/test_cli_nothing_runs.py)."""
    return f"sqlite:///{tmp_path / 'cs.db'}"


#: Argo's examples/cron-workflow.yaml names `suspend: false`, as many real files do.
ARGO_EXAMPLE = """\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: hello-world
spec:
  schedules:
    - "* * * * *"
  timezone: "America/Los_Angeles"
  startingDeadlineSeconds: 0
  concurrencyPolicy: "Replace"
  successfulJobsHistoryLimit: 4
  failedJobsHistoryLimit: 4
  suspend: false
  workflowSpec:
    entrypoint: whalesay
    templates:
      - name: whalesay
        container:
          image: busybox
          command: [echo, hello]
"""


def cron(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name},
        "spec": {
            "schedules": ["0 * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def get(name: str, store: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cs("get", name, "-o", "json", store=store).stdout)
    return out


def history(name: str, store: str) -> list[str]:
    events = json.loads(cs("history", name, "-o", "json", store=store).stdout)
    return [e["type"] for e in events]


# ---------------------------------------------------------------------- item 4: three-way


def test_reapplying_argos_example_after_a_suspend_keeps_it_suspended(store, tmp_path):
    f = tmp_path / "cron-workflow.yaml"
    f.write_text(ARGO_EXAMPLE)
    assert cs("apply", "-f", str(f), store=store).returncode == 0
    assert cs("suspend", "hello-world", store=store).returncode == 0

    again = cs("apply", "-f", str(f), store=store)

    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "cronworkflow.argoproj.io/hello-world unchanged"
    assert again.stderr.splitlines() == [
        "warning: default/hello-world: spec.suspend kept at true, set since the last apply by"
        " another writer (the file still says false; --force-conflicts takes it)",
        NOTHING_RUNS,
    ]
    assert get("hello-world", store)["spec"]["suspend"] is True
    assert history("hello-world", store) == ["CronWorkflowCreated", "Suspended"]


def test_force_conflicts_and_its_alias_overwrite_take_the_files_values(store, tmp_path):
    f = tmp_path / "cron-workflow.yaml"
    f.write_text(ARGO_EXAMPLE)
    cs("apply", "-f", str(f), store=store)
    for flag in ("--force-conflicts", "--overwrite"):
        cs("suspend", "hello-world", store=store)
        forced = cs("apply", "-f", str(f), flag, store=store)
        assert forced.returncode == 0 and "hello-world updated" in forced.stdout, forced.stderr
        assert forced.stderr.splitlines() == [NOTHING_RUNS]
        assert get("hello-world", store)["spec"]["suspend"] is False
    resumed = json.loads(
        cs("history", "hello-world", "--type", "Resumed", "-o", "json", store=store).stdout
    )
    assert [e["by"] for e in resumed] == ["spec", "spec"]


def test_a_changed_file_value_wins_and_a_dropped_one_resets(store, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(cron("etl", startingDeadlineSeconds=60, suspend=False)))
    cs("apply", "-f", str(f), store=store)
    cs("suspend", "etl", store=store)
    # The file now says suspend: true itself, and drops the deadline it set.
    f.write_text(yaml.safe_dump(cron("etl", suspend=True)))

    r = cs("apply", "-f", str(f), store=store)

    assert r.returncode == 0 and r.stderr.splitlines() == [NOTHING_RUNS]
    assert "etl updated" in r.stdout
    got = get("etl", store)["spec"]
    assert got["suspend"] is True and "startingDeadlineSeconds" not in got


def test_a_merge_that_would_be_invalid_refuses_every_file_of_the_apply(store, tmp_path):
    d = tmp_path / "crons"
    d.mkdir()
    (d / "a.yaml").write_text(yaml.safe_dump(cron("a", timezone="Europe/Berlin")))
    (d / "b.yaml").write_text(yaml.safe_dump(cron("b")))
    assert cs("apply", "-f", str(d), store=store).returncode == 0
    # Another writer (an HTTP PUT, the Kubernetes watch: a two-way apply) sets a's timezone.
    engine = bootstrap(StoreConfig.parse(store))
    try:
        engine.service.apply(parse_manifest(cron("a", timezone="Asia/Tokyo")), datetime.now(UTC))
    finally:
        engine.close()
    # The file moves the zone into the schedule and drops `timezone`, which another writer
    # changed, so Asia/Tokyo stays and conflicts; b's change is valid on its own.
    (d / "a.yaml").write_text(yaml.safe_dump(cron("a", schedules=["CRON_TZ=UTC 0 * * * *"])))
    (d / "b.yaml").write_text(yaml.safe_dump(cron("b", concurrencyPolicy="Forbid")))

    r = cs("apply", "-f", str(d), store=store)

    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("error: default/a: spec.schedules: ")
    assert "--force-conflicts takes the file's values" in lines[0]
    assert lines[-1] == "error: nothing applied: 1 of 2 CronWorkflow(s) would not be valid"
    assert get("b", store)["spec"].get("concurrencyPolicy", "Allow") == "Allow"

    forced = cs("apply", "-f", str(d), "--force-conflicts", store=store)
    assert forced.returncode == 0, forced.stderr
    assert get("a", store)["spec"]["schedules"] == ["CRON_TZ=UTC 0 * * * *"]
    assert get("b", store)["spec"]["concurrencyPolicy"] == "Forbid"


def test_without_a_last_applied_record_apply_falls_back_to_two_way_and_says_so(store, tmp_path):
    # Created by a writer that is not an apply (the Kubernetes watch: a two-way apply), so
    # there is no record; a CronWorkflow stored before records were kept reads the same.
    engine = bootstrap(StoreConfig.parse(store))
    try:
        engine.service.apply(
            parse_manifest(cron("etl", startingDeadlineSeconds=300)), datetime.now(UTC)
        )
    finally:
        engine.close()
    f = tmp_path / "etl.yaml"
    f.write_text(yaml.safe_dump(cron("etl", startingDeadlineSeconds=60)))

    first = cs("apply", "-f", str(f), store=store)
    second = cs("apply", "-f", str(f), store=store)

    assert first.returncode == 0 and "etl updated" in first.stdout
    assert first.stderr.splitlines() == [
        "warning: default/etl: no last-applied record: applied two-way (the file's values"
        " replace the live ones); the next apply merges three-way",
        NOTHING_RUNS,
    ]
    assert get("etl", store)["spec"]["startingDeadlineSeconds"] == 60
    assert second.stderr.splitlines() == [NOTHING_RUNS] and "etl unchanged" in second.stdout


# ---------------------------------------------------------------------- item 5: every bad file


def _directory(tmp_path: Path, *, bad: bool) -> Path:
    d = tmp_path / "manifests"
    (d / "team").mkdir(parents=True)
    (d / "a.yaml").write_text(yaml.safe_dump(cron("a")))
    (d / "team" / "b.yml").write_text(yaml.safe_dump(cron("b")))
    (d / "c.json").write_text(json.dumps(cron("c")))
    (d / "others.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n"
        "apiVersion: argoproj.io/v1alpha1\nkind: WorkflowTemplate\nmetadata: {name: t}\n"
    )
    (d / "README.txt").write_text("not a manifest, and not read")
    if bad:
        (d / "bad.yaml").write_text(yaml.safe_dump(cron("bad", schedules=["61 * * * *"])))
        (d / "image.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
        (d / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
        (d / "broken.json").write_text('{"apiVersion": ')
    return d


def test_lint_reads_yaml_yml_and_json_and_counts_other_documents(tmp_path):
    r = cs("lint", str(_directory(tmp_path, bad=False)))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.strip() == "3 CronWorkflow(s) valid, 2 other documents skipped"


def test_lint_names_every_bad_file_in_one_line_each_and_exits_1_once(tmp_path):
    d = _directory(tmp_path, bad=True)

    r = cs("lint", str(d), str(tmp_path / "missing.yaml"))

    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert all(line.startswith("error: ") for line in lines), lines
    named = sorted(line.split(": ")[1] for line in lines)
    assert named == sorted(
        [
            f"{d}/bad.yaml",
            f"{d}/broken.json",
            f"{d}/gone.yaml",
            f"{d}/image.yaml",
            f"{tmp_path}/missing.yaml",
        ]
    )
    assert f"error: {d}/bad.yaml: spec.schedules[0]: value 61 out of range" in r.stderr
    assert f"error: {d}/gone.yaml: cannot read it: No such file or directory" in r.stderr
    assert f"error: {d}/image.yaml: " in r.stderr and "binary" in r.stderr
    assert f"error: {d}/broken.json: not valid JSON" in r.stderr
    assert r.stdout.strip() == (
        "3 CronWorkflow(s) valid, 2 other documents skipped, 5 files with errors"
    )


def test_a_directory_apply_with_a_bad_file_applies_none_and_says_so(store, tmp_path):
    d = _directory(tmp_path, bad=True)

    r = cs("apply", "-f", str(d), store=store)

    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == (
        "error: nothing applied: 4 of 8 file(s) have errors"
        " (3 valid CronWorkflow(s) not applied either)"
    )
    assert "2 other documents skipped (not CronWorkflows)" in r.stderr
    assert stored_events(tmp_path / "cs.db") == 0


# ---------------------------------------------------------------------- item 6: unknown names


def test_unknown_names_are_warned_at_lint_and_apply_and_strict_makes_them_errors(store, tmp_path):
    f = tmp_path / "typo.yaml"
    f.write_text(
        yaml.safe_dump(
            cron(
                "typo",
                when="{{= cronworkflow.faild < 3 }}",
                stopStrategy={
                    "expression": "cronworkflow.labels.team == 'x' && cronworkflow.sucess > 9"
                },
            )
        )
    )
    warnings = [
        f"warning: {f}: spec.when: cronworkflow.faild is not a variable Argo defines"
        " (nearest: cronworkflow.failed)",
        f"warning: {f}: spec.stopStrategy.expression: cronworkflow.sucess is not a variable"
        " Argo defines (nearest: cronworkflow.succeeded)",
    ]

    lint = cs("lint", str(f))
    assert lint.returncode == 0 and lint.stdout.strip() == "1 CronWorkflow(s) valid"
    assert lint.stderr.splitlines() == warnings

    strict = cs("lint", "--strict", str(f))
    assert strict.returncode == 1
    assert strict.stderr.splitlines() == [
        w.replace("warning: ", "error: ", 1) + " (--strict)" for w in warnings
    ]
    assert strict.stdout.strip() == "0 CronWorkflow(s) valid, 1 file with errors"

    applied = cs("apply", "-f", str(f), store=store)
    assert applied.returncode == 0 and "typo created" in applied.stdout
    assert applied.stderr.splitlines() == [*warnings, NOTHING_RUNS]
