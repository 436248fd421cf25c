"""The command line and the local target under hostile input (issue 15, the smaller items):
one clear line and a non-zero exit, never a traceback or a hang; the local target stays in
its directory; `simulate` is bounded; temp files a `kill -9` left are cleaned at start. The
CLI as a process (a corrupt database, SIGINT): tests/integration/test_cli_hostile.py; `run .`:
tests/e2e/test_cli_hostile.py."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cronsource.adapters.application.inputs import event_filter
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.infrastructure.localtarget import (
    STALE_TEMP_SECONDS,
    LocalTarget,
    OutsideDirectory,
)
from cronsource.domain.manifest import parse_manifest
from cronsource.projections.dispatch import Creation

T = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)

GOOD = (
    "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata:\n  name: hello\n"
    "spec:\n  schedule: '0 * * * *'\n  workflowSpec:\n    entrypoint: main\n"
    "    templates: [{name: main, container: {image: busybox}}]\n"
)


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(b"\xff\xfe" + GOOD.encode("utf-16-le"), "UTF-16", id="utf-16"),
        pytest.param(GOOD.encode("latin-1") + b"\xe9\xff", "not UTF-8", id="latin-1 bytes"),
        pytest.param(
            ("a: " + "[" * 2000 + "]" * 2000).encode(), "deeper than|nesting depth", id="2000 deep"
        ),
        pytest.param(
            GOOD.replace("hello", "hello\\n").encode(), "DNS-1123", id="name with newline"
        ),
        pytest.param((GOOD + "metadata:\n  name: other\n").encode(), "duplicate key", id="dup key"),
        pytest.param(
            GOOD.replace("'0 * * * *'", "'@every 1h 2m'").encode(),
            r"spec\.schedule: expected one duration after @every",
            id="@every with two durations",  # was `spec.schedules[0].every takes ...:  `
        ),
        pytest.param(
            GOOD.replace(
                "name: hello",
                "name: hello\n  annotations: {cronsource.io/simulate-run-duration: abc}",
            ).encode(),
            "cronsource.io/simulate-run-duration: invalid duration 'abc'",
            id="run duration annotation",
        ),
    ],
)
def test_lint_and_apply_refuse_with_one_line_and_no_traceback(
    tmp_path: Path, content: bytes, message: str
) -> None:
    f = str(tmp_path / "f.yaml")
    (tmp_path / "f.yaml").write_bytes(content)
    for command in (["lint", f], ["apply", "-f", f]):
        r = CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path}/c.db", *command])
        assert r.exit_code == 1, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        assert re.search(message, r.output) and "Traceback" not in r.output, r.output


def test_yes_where_a_string_is_expected_stays_the_string_yes(tmp_path: Path) -> None:
    """YAML 1.1 made `enabled: yes` the boolean true, which a label (a string) refused and
    a workflowSpec stored as true; by the core schema it is the text "yes"."""
    text = GOOD.replace("  name: hello\n", "  name: hello\n  labels: {enabled: yes}\n")
    text += "    arguments: {parameters: [{name: p, value: on}]}\n"
    (tmp_path / "y.yaml").write_text(text)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    r = CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / "y.yaml")])
    assert r.exit_code == 0, r.output
    got = json.loads(CliRunner().invoke(cli, [*store, "get", "hello", "-o", "json"]).stdout)
    assert got["metadata"]["labels"] == {"enabled": "yes"}
    assert got["spec"]["workflowSpec"]["arguments"]["parameters"][0]["value"] == "on"


def test_a_file_over_3_mib_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(GOOD.encode() + b"#" * (4 * 1024 * 1024))
    r = CliRunner().invoke(cli, ["lint", str(tmp_path / "big.yaml")])
    assert r.exit_code == 1 and "3 MiB" in r.output


def test_backfill_from_year_one_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    assert CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / "a.yaml")]).exit_code == 0
    r = CliRunner().invoke(
        cli,
        [
            *store,
            "backfill",
            "hello",
            "--start",
            "0001-01-01T00:00:00Z",
            "--end",
            "2026-01-01T00:00:00Z",
        ],
    )
    assert r.exit_code == 1 and "between 1970-01-01 and 2199-12-31" in r.output, r.output
    assert not isinstance(r.exception, OverflowError)


@pytest.mark.parametrize("request_id", ["", "a" * 254])
def test_trigger_refuses_a_request_id_the_http_api_refuses(tmp_path: Path, request_id: str) -> None:
    """An empty id made each retry a new run (a random id), the very thing it prevents."""
    (tmp_path / "a.yaml").write_text(GOOD)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    assert CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / "a.yaml")]).exit_code == 0
    r = CliRunner().invoke(cli, [*store, "trigger", "hello", "--request-id", request_id])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: --request-id: {request_id!r}: string should have"), r.output
    history = CliRunner().invoke(cli, [*store, "history", "hello", "-o", "json"])
    assert "ManualTriggered" not in history.output and "ScheduleFired" not in history.output


def test_backfill_max_ticks_is_bounded_by_what_finds_its_ticks_in_seconds(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    assert CliRunner().invoke(cli, [*store, "apply", "-f", str(tmp_path / "a.yaml")]).exit_code == 0
    span = ["--start", "1970-01-01T00:00:00Z", "--end", "2199-12-31T00:00:00Z", "--dry-run"]
    r = CliRunner().invoke(cli, [*store, "backfill", "hello", *span, "--max-ticks", "10000000"])
    assert r.exit_code == 2 and "--max-ticks" in r.output and "100000" in r.output, r.output


def test_apply_n_refuses_a_file_of_another_namespace_and_applies_nothing(tmp_path: Path) -> None:
    """As `kubectl apply -n other -f` does: it was applied in the file's namespace, silently."""
    (tmp_path / "a.yaml").write_text(
        GOOD.replace("name: hello\n", "name: hello\n  namespace: team\n")
    )
    (tmp_path / "b.yaml").write_text(GOOD.replace("hello", "plain"))  # names no namespace
    store = ["--store", f"sqlite:///{tmp_path}/c.db"]
    files = ["-f", str(tmp_path / "b.yaml"), "-f", str(tmp_path / "a.yaml")]
    r = CliRunner().invoke(cli, [*store, "-n", "other", "apply", *files])
    assert r.exit_code == 1, r.output
    assert "the namespace from the provided object 'team' (hello) does not match" in r.output
    listed = CliRunner().invoke(cli, [*store, "get", "-A"])
    assert "does not exist" in listed.output, listed.output  # not even the store was made
    ok = CliRunner().invoke(cli, [*store, "-n", "team", "apply", "-f", str(tmp_path / "a.yaml")])
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_what_get_prints_for_several_applies_again_as_kubectl_applies_a_list(
    tmp_path: Path, output: str
) -> None:
    (tmp_path / "a.yaml").write_text(GOOD + "---\n" + GOOD.replace("hello", "other"))
    first, second = (["--store", f"sqlite:///{tmp_path}/{n}.db"] for n in ("one", "two"))
    assert CliRunner().invoke(cli, [*first, "apply", "-f", str(tmp_path / "a.yaml")]).exit_code == 0
    listed = CliRunner().invoke(cli, [*first, "get", "-o", output])
    assert "CronWorkflowList" in listed.stdout
    dump = tmp_path / f"all.{output}"
    dump.write_text(listed.stdout)
    lint = CliRunner().invoke(cli, ["lint", str(dump)])
    assert lint.exit_code == 0 and "2 CronWorkflow(s) valid" in lint.output, lint.output
    again = CliRunner().invoke(cli, [*second, "apply", "-f", str(dump)])
    assert again.exit_code == 0, again.output
    assert "hello created" in again.output and "other created" in again.output


LEAP_DAY = """\
start: 2026-03-02T00:00:00Z
end: {end}
cronWorkflows:
- apiVersion: argoproj.io/v1alpha1
  kind: CronWorkflow
  metadata: {{name: leap}}
  spec:
    schedule: "{schedule}"
    workflowSpec: {{entrypoint: main, templates: [{{name: main, container: {{image: x}}}}]}}
"""


def test_simulate_bounds_its_work_not_its_span(tmp_path: Path) -> None:
    """Eight years of a leap-day schedule are two ticks and run; a year-2199 end (a typo for
    2029) on `* * * * *` holds 90 million ticks and is refused at once, naming the bound."""
    (tmp_path / "s.yaml").write_text("start: 2026-01-01T00:00:00Z\nend: 20260-01-01T00:00:00Z\n")
    r = CliRunner().invoke(cli, ["--store", "memory:", "simulate", str(tmp_path / "s.yaml")])
    assert r.exit_code == 2, r.output
    leap = LEAP_DAY.format(end="2034-03-04T00:00:00Z", schedule="0 0 29 2 *")
    (tmp_path / "leap.yaml").write_text(leap)
    r = CliRunner().invoke(
        cli, ["--store", "memory:", "simulate", str(tmp_path / "leap.yaml"), "-o", "json"]
    )
    assert r.exit_code == 0, r.output
    runs = json.loads(r.output)["workflows"]
    assert [w["scheduledTime"] for w in runs] == ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]
    typo = LEAP_DAY.format(end="2199-03-04T00:00:00Z", schedule="* * * * *")
    (tmp_path / "typo.yaml").write_text(typo)
    t0 = time.monotonic()
    r = CliRunner().invoke(cli, ["--store", "memory:", "simulate", str(tmp_path / "typo.yaml")])
    assert r.exit_code == 2 and "more than 1,000,000 ticks" in r.output, r.output
    assert "by 2199-03-04T00:00:00Z;" in r.output  # as every time is shown, not +00:00
    assert time.monotonic() - t0 < 10  # counted, not run


# ---------------------------------------------------------------------- local target


def _workflow(namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": namespace, "annotations": {}},
    }


def test_the_local_target_refuses_a_namespace_directory_symlinked_outside(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root = tmp_path / "workflows"
    root.mkdir()
    (root / "evil").symlink_to(outside)
    target = LocalTarget(root)
    at = datetime(2026, 5, 4, tzinfo=UTC)
    errors = target.create_many(
        [
            Creation(_workflow("evil", "w-1"), "id", "schedule"),
            Creation(_workflow("ok", "w-2"), "id", "schedule"),
        ],
        at,
    )
    assert isinstance(errors[0], OutsideDirectory) and errors[1] is None
    assert list(outside.iterdir()) == []
    assert (root / "ok" / "w-2.json").exists()


def test_stale_temp_files_are_removed_at_start_and_fresh_ones_kept(tmp_path: Path) -> None:
    ns = tmp_path / "default"
    ns.mkdir()
    stale, fresh = ns / ".tmp-dead", ns / ".tmp-live"
    stale.write_text("half")
    fresh.write_text("half")
    old = time.time() - STALE_TEMP_SECONDS - 10
    os.utime(stale, (old, old))
    target = LocalTarget(tmp_path)
    assert target.removed_temps == 1 and not stale.exists() and fresh.exists()


@pytest.mark.parametrize(
    "args, flag",
    [
        pytest.param(["--store", "", "get"], "--store", id="store"),
        pytest.param(["get", "-n", ""], "--namespace", id="get -n"),
        pytest.param(["-n", "", "apply", "-f", "-"], "--namespace", id="-n before apply"),
        pytest.param(
            ["simulate", "-f", "-", "--start", "2026-05-04", "--end", "2026-05-05", "-n", ""],
            "--namespace",
            id="simulate -n",
        ),
    ],
)
def test_an_empty_store_or_namespace_is_refused_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], flag: str
) -> None:
    """`-n "$UNSET_VAR"`: `get` said namespace '' had no CronWorkflows, `simulate` showed
    nothing with exit 0; `--store ''` used ./cronsource.db. Each is one line now, exit 1,
    and nothing is stored."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, args, input=GOOD)
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"error: {flag}: empty") and r.output.count("\n") == 1, r.output
    assert not (tmp_path / "cronsource.db").exists()


def test_a_note_with_a_newline_cannot_forge_a_row_of_history(tmp_path: Path) -> None:
    """A suspend note (HTTP and Python take one) holding a newline printed a line of its own
    in `history`, one that read as a fire that never happened; an escape sequence could
    rewrite the screen. Each is shown escaped, in its own row; `-o json` keeps the note as
    it was given."""
    store = f"sqlite:///{tmp_path}/c.db"
    forged = "ok\n999   ScheduleFired   2026-12-07T17:43:39Z   -   1   hello-1   trigger=schedule"
    engine = bootstrap(store, create_tables=True)
    try:
        cron_id, _ = engine.service.apply(parse_manifest(yaml.safe_load(GOOD)), T)
        engine.service.suspend(cron_id, T, by="api", note=forged + "\x1b[2J")
        engine.projector.catch_up(T)
    finally:
        engine.close()
    runner = CliRunner()
    table = runner.invoke(cli, ["--store", store, "history", "hello"]).output
    assert "ScheduleFired" not in table.replace("\\n999   ScheduleFired", ""), table
    (row,) = [line for line in table.splitlines() if "Suspended" in line]
    assert row.endswith(
        "ok\\n999   ScheduleFired   2026-12-07T17:43:39Z   -   1   hello-1"
        "   trigger=schedule\\x1b[2J"
    ), row
    as_json = json.loads(
        runner.invoke(cli, ["--store", store, "history", "hello", "-o", "json"]).output
    )
    notes = [e.get("note") for e in as_json if e["type"] == "Suspended"]
    assert notes == [forged + "\x1b[2J"]


@pytest.mark.parametrize(
    "command",
    [
        ["get", "-A"],
        ["list"],
        ["history", "-A"],
        ["why", "a", "--at", "2026-05-04"],
        ["next", "a"],
        ["calendars"],
        ["replicas"],
    ],
)
def test_a_read_at_a_mistyped_store_path_says_so_and_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    """`get -A` on a mistyped path printed 'No resources found', exit 0, and left an empty
    store there; export already refused."""
    typo = tmp_path / "typo.db"
    r = CliRunner().invoke(cli, ["--store", f"sqlite:///{typo}", *command])
    assert r.exit_code == 1, r.output
    assert r.output == (
        f"error: SQLite store {typo} does not exist (a mistyped path? `cronsource migrate`,"
        " `apply` or `run` creates it)\n"
    )
    assert not typo.exists()


def test_until_a_time_shown_takes_the_events_shown_at_it(tmp_path: Path) -> None:
    """history shows times to the second; an event stored at 10:00:00.52 is shown at
    10:00:00Z, and `--until 2026-05-04T10:00:00Z` (the time copied from the table) left it
    out. The HTTP `until` is read the same way."""
    store = f"sqlite:///{tmp_path}/c.db"
    at = T + timedelta(milliseconds=520)
    engine = bootstrap(store, create_tables=True)
    try:
        engine.service.apply(parse_manifest(yaml.safe_load(GOOD)), at)
        engine.projector.catch_up(at)
    finally:
        engine.close()
    shown = "2026-05-04T10:00:00Z"
    runner = CliRunner()
    table = runner.invoke(cli, ["--store", store, "history", "hello"]).output
    assert shown in table, table
    until = runner.invoke(cli, ["--store", store, "history", "hello", "--until", shown]).output
    assert "CronWorkflowCreated" in until, until
    before = runner.invoke(
        cli, ["--store", store, "history", "hello", "--until", "2026-05-04T09:59:59Z"]
    ).output
    assert "CronWorkflowCreated" not in before, before
    page = event_filter("default", "hello", None, shown, (), (), 0, 10)
    assert page.until == at.replace(microsecond=999999)
