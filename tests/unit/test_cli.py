"""The command line as a user drives it: admission errors, apply/list/get, commands, history."""

import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cronsource.adapters.entrypoints.cli import cli

GOOD = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "hello", "namespace": "default"},
    "spec": {
        "schedules": ["*/5 * * * *"],
        "timezone": "Europe/Dublin",
        "workflowSpec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    },
}


def manifest(**spec_changes):
    m = json.loads(json.dumps(GOOD))
    for k, v in spec_changes.items():
        if v is None:
            m["spec"].pop(k, None)
        else:
            m["spec"][k] = v
    return m


@pytest.fixture
def run(tmp_path):
    store = f"sqlite:///{tmp_path / 'cs.db'}"

    def invoke(*args, input=None):
        return CliRunner().invoke(cli, ["--store", store, *args], input=input)

    invoke.store_path = tmp_path / "cs.db"
    invoke.tmp = tmp_path
    return invoke


def write(tmp, name, docs):
    p = tmp / name
    p.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else docs)
    return str(p)


def stored_events(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as c:
        tables = [r[0] for r in c.execute("select name from sqlite_master where type='table'")]
        return sum(
            c.execute(f"select count(*) from {t}").fetchone()[0]
            for t in tables
            if t.endswith("events")
        )


BAD = [
    pytest.param(
        {**GOOD, "metadata": {"name": "a" * 53}}, "metadata.name", "a" * 53, id="name over 52"
    ),
    pytest.param(
        manifest(timezone="Mars/Olympus"), "spec.timezone", "Mars/Olympus", id="unknown timezone"
    ),
    pytest.param(manifest(schedules=["0 0 L * *"]), "spec.schedules[0]", "0 0 L * *", id="L"),
    pytest.param(manifest(schedules=["0 0 1W * *"]), "spec.schedules[0]", "1W", id="W"),
    pytest.param(manifest(schedules=["0 0 * * 1#2"]), "spec.schedules[0]", "1#2", id="hash"),
    pytest.param(
        manifest(schedules=["0 */5 * * * *"]),
        "spec.schedules[0]",
        "0 */5 * * * *",
        id="seconds field",
    ),
    pytest.param(manifest(schedules=["@reboot"]), "spec.schedules[0]", "@reboot", id="reboot"),
    pytest.param(
        manifest(schedules=["61 * * * *"]), "spec.schedules[0]", "61", id="minute out of range"
    ),
    pytest.param(
        manifest(concurrencyPolicy="Sometimes"), "spec.concurrencyPolicy", "Sometimes", id="policy"
    ),
    pytest.param(
        manifest(startingDeadlineSeconds=-5),
        "spec.startingDeadlineSeconds",
        "-5",
        id="negative deadline",
    ),
    pytest.param(manifest(schedules=None), "spec.schedules", "", id="no schedule"),
    pytest.param(
        manifest(scheduel="* * * * *"), "spec.scheduel", "unknown field", id="unknown spec field"
    ),
    pytest.param(["not", "a", "mapping"], "<document>", "mapping", id="not a mapping"),
]


@pytest.mark.parametrize(("doc", "path", "value"), BAD)
def test_lint_names_the_field_and_value_and_exits_1(run, doc, path, value):
    f = write(run.tmp, "bad.yaml", yaml.safe_dump(doc))
    res = run("lint", f)
    assert res.exit_code == 1
    assert f"{path}:" in res.output and value in res.output


@pytest.mark.parametrize(("doc", "path", "value"), BAD)
def test_apply_of_bad_input_stores_nothing(run, doc, path, value):
    good = write(run.tmp, "good.yaml", [GOOD])
    bad = write(run.tmp, "bad.yaml", yaml.safe_dump(doc))
    res = run("apply", "-f", good, "-f", bad)
    assert res.exit_code == 1 and path in res.output
    assert stored_events(run.store_path) == 0


@pytest.mark.parametrize("tz", ["CET", "Europe/Dublin", "Etc/GMT-1", ""])
def test_valid_time_zones_are_admitted(run, tz):
    assert run("lint", write(run.tmp, "ok.yaml", [manifest(timezone=tz)])).exit_code == 0


def test_simulate_exits_2_on_an_invalid_manifest(tmp_path):
    sc = {
        "start": "2026-01-01T00:00:00Z",
        "end": "2026-01-02T00:00:00Z",
        "cronWorkflows": [manifest(timezone="Mars/Olympus")],
    }
    f = write(tmp_path, "sc.yaml", yaml.safe_dump(sc))
    res = CliRunner().invoke(cli, ["simulate", f, "-o", "json"])
    assert res.exit_code == 2 and "cronWorkflows[0].spec.timezone" in res.output


def test_apply_list_get_show_argo_shaped_objects(run):
    f = write(run.tmp, "m.yaml", [GOOD, {**GOOD, "metadata": {"name": "other"}}])
    assert "hello created" in run("apply", "-f", f).output
    assert "hello unchanged" in run("apply", "-f", f).output
    listed = json.loads(run("list", "-o", "json").stdout)
    assert listed["kind"] == "CronWorkflowList"
    assert [c["metadata"]["name"] for c in listed["items"]] == ["hello", "other"]
    got = json.loads(run("get", "hello", "-o", "json").stdout)
    assert got["kind"] == "CronWorkflow" and got["spec"]["schedules"] == ["*/5 * * * *"]
    assert set(got["status"]) >= {
        "active",
        "lastScheduledTime",
        "conditions",
        "succeeded",
        "failed",
        "phase",
    }
    assert yaml.safe_load(run("get", "hello", "-o", "yaml").stdout)["metadata"]["name"] == "hello"
    assert run("get", "nope").exit_code == 1


def test_suspend_resume_delete_are_in_the_history(run):
    run("apply", "-f", write(run.tmp, "m.yaml", [GOOD]))
    assert run("suspend", "hello").exit_code == 0
    assert json.loads(run("get", "hello", "-o", "json").stdout)["spec"]["suspend"] is True
    assert run("resume", "hello").exit_code == 0
    assert run("delete", "hello").exit_code == 0
    events = json.loads(run("history", "hello", "-o", "json").output)
    assert [e["type"] for e in events] == [
        "CronWorkflowCreated",
        "Suspended",
        "Resumed",
        "CronWorkflowDeleted",
    ]
    assert run("get", "hello").exit_code == 1


def test_trigger_with_the_same_request_id_runs_once(run):
    run("apply", "-f", write(run.tmp, "m.yaml", [GOOD]))
    first = run("trigger", "hello", "--request-id", "r1")
    again = run("trigger", "hello", "--request-id", "r1")
    # No `cronsource run` holds this store: the run is queued until one does.
    assert "queued" in first.stdout and "already" in again.stdout
    fired = json.loads(run("history", "hello", "--type", "ScheduleFired", "-o", "json").output)
    assert len(fired) == 1 and fired[0]["trigger"] == "manual"


def test_backfill_dry_run_lists_ticks_and_stores_nothing(run):
    run("apply", "-f", write(run.tmp, "m.yaml", [GOOD]))
    res = run(
        "backfill",
        "hello",
        "--start",
        "2026-05-04T10:00:00Z",
        "--end",
        "2026-05-04T10:30:00Z",
        "--dry-run",
        "-o",
        "json",
    )
    ticks = json.loads(res.stdout)["items"]
    assert [t["scheduledTime"] for t in ticks][:2] == [
        "2026-05-04T10:00:00Z",
        "2026-05-04T10:05:00Z",
    ]
    assert len(ticks) == 7
    assert json.loads(run("history", "hello", "--type", "ScheduleFired", "-o", "json").output) == []
    res = run(
        "backfill",
        "hello",
        "--start",
        "2026-05-04T10:00:00Z",
        "--end",
        "2026-05-04T10:30:00Z",
        "-o",
        "json",
    )
    assert json.loads(res.stdout)["fired"] == 7
    again = run(
        "backfill",
        "hello",
        "--start",
        "2026-05-04T10:00:00Z",
        "--end",
        "2026-05-04T10:30:00Z",
        "-o",
        "json",
    )
    assert json.loads(again.stdout)["count"] == 0


def test_next_prints_local_and_utc_times(run):
    run(
        "apply",
        "-f",
        write(run.tmp, "m.yaml", [manifest(schedules=["30 2 * * *"], timezone="America/New_York")]),
    )
    times = json.loads(run("next", "hello", "-c", "3", "-o", "json").output)
    assert len(times) == 3
    assert all(t["local"][11:16] in ("02:30", "03:00") and t["utc"].endswith("Z") for t in times)


def test_next_of_a_long_every_stops_at_the_calendars_end(run):
    """`@every 876000h` (100 years, the longest taken) asked for 1,000 times: the times
    before year 9999, not `error: OverflowError: date value out of range`."""
    run("apply", "-f", write(run.tmp, "m.yaml", [manifest(schedules=["@every 876000h"])]))
    res = run("next", "hello", "-c", "1000", "-o", "json")
    assert res.exit_code == 0, res.output
    times = json.loads(res.output)
    assert 70 < len(times) < 80
    assert times[-1]["utc"] < "9999-12-31"


def test_next_of_a_suspended_cronworkflow_says_none_of_its_times_runs(run):
    """`list` shows no next run for a suspended CronWorkflow and `get` a null
    nextScheduledTime; `next` listed its times with "in 6h" and nothing else."""
    run("apply", "-f", write(run.tmp, "m.yaml", [manifest()]))
    assert "is held" not in run("next", "hello").output
    run("suspend", "hello")
    res = run("next", "hello", "-c", "2")
    assert res.exit_code == 0
    assert "note: default/hello is held (Suspended): none of these runs until it is resumed" in (
        res.stderr
    )


def test_bad_store_url_is_a_clear_error(tmp_path):
    res = CliRunner().invoke(cli, ["--store", "mysql://x", "list"])
    assert res.exit_code == 1 and "mysql://x" in res.output


def test_an_empty_namespace_is_unset_as_kubectl_reads_it(run):
    """`metadata.namespace: ""` was refused ("must not be empty"); kubectl reads it as unset:
    `-n`'s namespace, else default."""
    doc = {**GOOD, "metadata": {"name": "blank", "namespace": ""}}
    assert run("lint", write(run.tmp, "m.yaml", [doc])).exit_code == 0
    assert run("-n", "team-a", "apply", "-f", write(run.tmp, "m.yaml", [doc])).exit_code == 0
    assert run("-n", "team-a", "get", "blank").exit_code == 0
    other = {**GOOD, "metadata": {"name": "plain", "namespace": ""}}
    assert run("apply", "-f", write(run.tmp, "o.yaml", [other])).exit_code == 0
    assert run("get", "plain").exit_code == 0


def test_namespace_flag_applies_to_manifests_without_one(run):
    doc = {**GOOD, "metadata": {"name": "nsless"}}
    assert run("-n", "team-a", "apply", "-f", write(run.tmp, "m.yaml", [doc])).exit_code == 0
    assert run("-n", "team-a", "get", "nsless").exit_code == 0
    assert run("get", "nsless").exit_code == 1
