"""The installed CLI in a pipe and in scripts (issue 25, item 2), as a process:

- a reader that closes stdout (`| head -1`) ends every command quietly with exit 0, and a
  command that changes things still changes all of them;
- `-o json|yaml|name` on every command that prints an object;
- one time rule on every flag: RFC 3339, or a date alone, midnight in the CronWorkflow's
  time zone (UTC where no CronWorkflow is named); a date and time without an offset is
  refused;
- kubectl's `No resources found in NS namespace.` and exit 0 for a selection of nothing,
  while a name that does not exist stays an error;
- `--help` offers only the flags a command uses, and says the time rule.

The rule itself: tests/unit/test_timestamps.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_cli_first_hour import EXE, ROOT, cs, manifest, one_error_line

#: Linux's default pipe buffer; every output below is larger, so the writer is
#: still writing when `head` has gone.
PIPE_BUFFER = 64 * 1024


def _write(path: Path, docs: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A store with 500 hourly CronWorkflows (label team=bulk) in Europe/Berlin and one
    every-minute CronWorkflow with three days of backfilled runs: outputs far larger than a
    pipe's buffer."""
    d = tmp_path_factory.mktemp("big")
    store = f"sqlite:///{d / 'cs.db'}"
    bulk = [manifest(f"bulk-{i}") for i in range(500)]
    for doc in bulk:
        doc["metadata"]["labels"] = {"team": "bulk"}  # type: ignore[index]
    assert cs("apply", "-f", _write(d / "bulk.yaml", bulk), store=store).returncode == 0
    minutely = manifest("minutely", schedules=["* * * * *"], concurrencyPolicy="Allow")
    assert cs("apply", "-f", _write(d / "m.yaml", [minutely]), store=store).returncode == 0
    r = cs(
        "backfill",
        "minutely",
        "--start",
        "2026-11-01T00:00:00Z",
        "--end",
        "2026-11-03T23:59:00Z",
        store=store,
    )
    assert r.returncode == 0, r.stderr
    scenario = d / "day.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "start": "2026-03-07",
                "end": "2026-03-08",
                "cronWorkflows": [manifest("sim", schedules=["* * * * *"])],
            }
        )
    )
    yield store, d


def _into_head(store: str, *args: str) -> tuple[int, bytes, str, int]:
    """`cronsource ARGS | head -1` as a shell runs it: (the command's exit, what head
    printed, the command's stderr, how many bytes it prints when read in full)."""
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    cmd = [str(EXE), "--store", store, *args]
    producer = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env
    )
    head = subprocess.Popen(["head", "-1"], stdin=producer.stdout, stdout=subprocess.PIPE)
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.close()  # head holds the only read end, as in a shell pipeline
    first, _ = head.communicate(timeout=120)
    err = producer.stderr.read().decode()
    code = producer.wait(timeout=120)
    full = subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env, timeout=120)
    return code, first, err, len(full.stdout)


PIPED = [
    pytest.param(["history", "minutely"], id="history"),
    pytest.param(["history", "minutely", "-o", "name"], id="history-o-name"),
    pytest.param(["history", "-o", "json"], id="history-o-json"),
    pytest.param(["history", "-o", "yaml"], id="history-o-yaml"),
    pytest.param(["list", "-A", "-o", "wide"], id="list-wide"),
    pytest.param(["list", "-o", "json"], id="list-o-json"),
    pytest.param(["get", "-o", "yaml"], id="get-o-yaml"),
    pytest.param(["next", "minutely", "-c", "1000", "-o", "json"], id="next"),
    pytest.param(
        [
            "backfill",
            "bulk-0",
            "--start",
            "2026-01-01",
            "--end",
            "2026-11-01",
            "--dry-run",
            "--max-ticks",
            "100000",
        ],
        id="backfill-dry-run",
    ),
    pytest.param(["export", "--before", "2199-01-01T00:00:00Z", "-o", "-"], id="export"),
    pytest.param(["simulate", "{dir}/day.yaml", "-o", "json"], id="simulate"),
    pytest.param(["suspend", "-l", "team=bulk", "-o", "json"], id="suspend-o-json"),
    pytest.param(["resume", "-l", "team=bulk", "-o", "yaml"], id="resume-o-yaml"),
]


@pytest.mark.parametrize("args", PIPED)
def test_a_reader_that_leaves_ends_the_command_quietly_with_exit_0(
    big: tuple[str, Path], args: list[str]
) -> None:
    store, d = big
    args = [a.replace("{dir}", str(d)) for a in args]
    code, first, err, size = _into_head(store, *args)
    assert size > PIPE_BUFFER, f"the output ({size} bytes) must outgrow the pipe buffer"
    assert first.strip(), "head printed the first line"
    assert "error" not in err.lower() and "Traceback" not in err and "Broken pipe" not in err, err
    assert code == 0, err
    # Nor does it claim to have done what its reader never took (`exported 1125 event(s)`).
    assert "exported" not in err, err


def test_a_write_command_whose_reader_left_still_does_all_of_its_work(
    big: tuple[str, Path],
) -> None:
    """`suspend -l ... -o name | head -1`: head leaves after the first of 500 names, and
    all 500 are suspended anyway (before: a BrokenPipeError stopped it after the first)."""
    store, _ = big
    code, first, err, _ = _into_head(store, "suspend", "-l", "team=bulk", "-o", "name")
    assert code == 0 and first == b"cronworkflow.argoproj.io/bulk-0\n", err
    items = json.loads(cs("list", "-l", "team=bulk", "-o", "json", store=store).stdout)["items"]
    assert len(items) == 500 and all(i["spec"]["suspend"] is True for i in items)
    code, _, err, _ = _into_head(store, "resume", "-l", "team=bulk", "-o", "name")
    items = json.loads(cs("list", "-l", "team=bulk", "-o", "json", store=store).stdout)["items"]
    assert code == 0 and all(i["spec"]["suspend"] is False for i in items), err


# ------------------------------------------------------------------------- -o everywhere


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cs.db'}"


def _json(r: subprocess.CompletedProcess[str]) -> Any:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _yaml(r: subprocess.CompletedProcess[str]) -> Any:
    assert r.returncode == 0, r.stderr
    return yaml.safe_load(r.stdout)


def test_every_command_that_prints_an_object_takes_o_json_yaml_name(
    tmp_path: Path, store: str
) -> None:
    one = _write(tmp_path / "one.yaml", [manifest("hello")])
    two = _write(tmp_path / "two.yaml", [manifest("a"), manifest("b")])

    applied = _json(cs("apply", "-f", one, "-o", "json", store=store))
    assert applied["kind"] == "CronWorkflow" and applied["metadata"]["name"] == "hello"
    assert "created" not in json.dumps(applied)  # the object, not the message
    listed = _yaml(cs("apply", "-f", two, "-o", "yaml", store=store))
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == [
        "a",
        "b",
    ]
    assert cs("apply", "-f", one, "-o", "name", store=store).stdout == (
        "cronworkflow.argoproj.io/hello\n"
    )

    suspended = _json(cs("suspend", "hello", "-o", "json", store=store))
    assert suspended["metadata"]["name"] == "hello" and suspended["spec"]["suspend"] is True
    resumed = _yaml(cs("resume", "hello", "-o", "yaml", store=store))
    assert resumed["spec"]["suspend"] is False
    several = _json(cs("suspend", "a", "b", "-o", "json", store=store))
    assert several["kind"] == "List" and len(several["items"]) == 2
    selected = _json(cs("resume", "-l", "team=a", "-o", "json", store=store))
    assert selected["kind"] == "List" and [i["metadata"]["name"] for i in selected["items"]] == [
        "a"
    ]
    assert cs("resume", "b", "-o", "name", store=store).stdout == "cronworkflow.argoproj.io/b\n"

    triggered = _json(cs("trigger", "hello", "--request-id", "r1", "-o", "json", store=store))
    assert triggered["requestId"] == "r1" and triggered["triggered"] is True
    again = _yaml(cs("trigger", "hello", "--request-id", "r1", "-o", "yaml", store=store))
    assert again == {**triggered, "triggered": False}
    named = cs("trigger", "hello", "--request-id", "r2", "-o", "name", store=store).stdout
    assert named.startswith("workflow.argoproj.io/hello-") and named.count("\n") == 1

    span = ["--start", "2026-11-28T00:00:00Z", "--end", "2026-11-28T02:00:00Z"]
    plan = _json(cs("backfill", "hello", *span, "--dry-run", "-o", "json", store=store))
    assert plan["dryRun"] is True and len(plan["items"]) == 3
    done = _yaml(cs("backfill", "hello", *span, "-o", "yaml", store=store))
    assert done["dryRun"] is False and done["fired"] == 3
    cancelled = _json(cs("backfill", "hello", "--cancel", "-o", "json", store=store))
    assert cancelled == {"namespace": "default", "name": "hello", "cancelled": 0, "dryRun": False}

    deleted = _json(cs("delete", "b", "-o", "json", store=store))
    assert deleted["metadata"]["name"] == "b" and deleted["kind"] == "CronWorkflow"
    assert cs("delete", "a", "-o", "name", store=store).stdout == "cronworkflow.argoproj.io/a\n"

    # The reads had -o already; they still do.
    assert _json(cs("get", "hello", "-o", "json", store=store))["metadata"]["name"] == "hello"
    assert _yaml(cs("list", "-o", "yaml", store=store))["kind"] == "CronWorkflowList"
    assert _json(cs("history", "hello", "-o", "json", store=store))
    assert _json(cs("why", "hello", "--at", "2026-11-28T01:00:00Z", "-o", "json", store=store))
    assert len(_json(cs("next", "hello", "-c", "2", "-o", "json", store=store))) == 2
    assert "version" in _json(cs("version", "-o", "json", store=store))


def test_a_repeated_real_backfill_does_not_call_itself_a_dry_run(
    store: str, tmp_path: Path
) -> None:
    cs("apply", "-f", _write(tmp_path / "m.yaml", [manifest("hello")]), store=store)
    span = ["--start", "2026-11-28T00:00:00Z", "--end", "2026-11-28T02:00:00Z"]
    assert cs("backfill", "hello", *span, store=store).returncode == 0
    again = cs("backfill", "hello", *span, store=store)
    assert again.returncode == 0 and "already fired 3" in again.stdout
    assert "dry run" not in again.stdout + again.stderr
    assert (
        json.loads(cs("backfill", "hello", *span, "-o", "json", store=store).stdout)["dryRun"]
        is False
    )


# ---------------------------------------------------------------------------- one time rule


def _first_tick(store: str, name: str, start: str, end: str | None = None) -> str:
    plan = _json(
        cs(
            "backfill",
            name,
            "--start",
            start,
            "--end",
            end or start,
            "--dry-run",
            "-o",
            "json",
            store=store,
        )
    )
    return str(plan["items"][0]["scheduledTime"])


def test_a_date_alone_is_midnight_in_the_cronworkflows_time_zone(
    store: str, tmp_path: Path
) -> None:
    docs = [manifest("berlin"), manifest("utc", timezone="")]
    cs("apply", "-f", _write(tmp_path / "m.yaml", docs), store=store)
    # Europe/Berlin is UTC+1 in November: its midnight is 23:00 UTC the day before.
    assert _first_tick(store, "berlin", "2026-11-28") == "2026-11-27T23:00:00Z"
    assert _first_tick(store, "berlin", "2026-11-28T00:00:00+01:00") == "2026-11-27T23:00:00Z"
    assert _first_tick(store, "utc", "2026-11-28") == "2026-11-28T00:00:00Z"
    # ... and in summer time UTC+2.
    assert _first_tick(store, "berlin", "2026-07-01") == "2026-06-30T22:00:00Z"
    # The same rule on `why` and `history`.
    why = _json(cs("why", "berlin", "--at", "2026-11-28", "-o", "json", store=store))
    assert why["at"] == "2026-11-27T23:00:00Z"
    assert _json(cs("why", "utc", "--at", "2026-11-28", "-o", "json", store=store))["at"] == (
        "2026-11-28T00:00:00Z"
    )
    r = cs("history", "berlin", "--since", "2026-11-28", "--until", "2026-11-29", store=store)
    assert r.returncode == 0, r.stderr
    # Where no CronWorkflow is named, a date is midnight UTC, and the command says the instant.
    r = cs("export", "--before", "2026-11-28", "-o", str(tmp_path / "x.jsonl"), store=store)
    assert r.returncode == 0 and "before 2026-11-28T00:00:00Z" in r.stderr, r.stderr


def test_a_time_without_an_offset_is_refused_on_every_flag(store: str, tmp_path: Path) -> None:
    cs("apply", "-f", _write(tmp_path / "m.yaml", [manifest("hello")]), store=store)
    for args in (
        ["backfill", "hello", "--start", "2026-11-28T10:00", "--end", "2026-11-29T00:00:00Z"],
        ["why", "hello", "--at", "2026-11-28T10:00:00"],
        ["history", "hello", "--since", "2026-11-28 10:00"],
        ["export", "--before", "2026-11-28T10:00", "-o", "-"],
    ):
        line = one_error_line(cs(*args, store=store))
        assert "needs a time zone offset" in line and "a date alone" in line, (args, line)
    line = one_error_line(cs("why", "hello", "--at", "2026-02-30", store=store))
    assert "'2026-02-30' is not a date" in line


def test_a_scenario_takes_a_date_alone_as_midnight_utc(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "start": "2026-03-07",
                "end": "2026-03-07T03:00:00Z",
                "cronWorkflows": [manifest("hourly", timezone="")],
            }
        )
    )
    result = _json(cs("simulate", str(path), "-o", "json"))
    fired = [e["scheduledTime"] for e in result["events"] if e["type"] == "ScheduleFired"]
    assert fired[:3] == ["2026-03-07T01:00:00Z", "2026-03-07T02:00:00Z", "2026-03-07T03:00:00Z"]
    path.write_text(yaml.safe_dump({"start": "2026-03-07T00:00", "end": "2026-03-08"}))
    assert "needs a time zone offset" in one_error_line(cs("simulate", str(path)))


def test_export_to_a_file_it_cannot_create_says_so_in_one_line(store: str, tmp_path: Path) -> None:
    cs("apply", "-f", _write(tmp_path / "m.yaml", [manifest("hello")]), store=store)
    for name in ("x.jsonl", "x.jsonl.gz"):
        path = tmp_path / "missing" / name
        r = cs("export", "--before", "2199-01-01T00:00:00Z", "-o", str(path), store=store)
        assert r.returncode == 1, r.stderr
        line = one_error_line(r)
        assert line == f"error: --output-file {path}: No such file or directory", line
        assert not path.parent.exists()


def test_help_says_the_time_rule() -> None:
    for command, flag in (("backfill", "--start"), ("why", "--at"), ("history", "--since")):
        text = " ".join(cs(command, "-h").stdout.split())
        assert f"{flag} TEXT" in text
        assert "a date alone (2026-05-04): midnight that day in the CronWorkflow's time zone" in (
            text
        ), (command, text)
    text = " ".join(cs("export", "-h").stdout.split())
    assert "midnight that day UTC" in text


# ------------------------------------------------------------------ No resources found


def test_a_selection_of_nothing_is_no_resources_found_and_exit_0(
    store: str, tmp_path: Path
) -> None:
    cs("apply", "-f", _write(tmp_path / "m.yaml", [manifest("hello")]), store=store)
    for command in ("list", "get", "suspend", "resume", "delete", "trigger"):
        r = cs(command, "-l", "team=nobody", store=store)
        assert r.returncode == 0 and r.stdout == "", (command, r.stdout, r.stderr)
        lines = [line for line in r.stderr.splitlines() if not line.startswith("warning:")]
        assert lines == ["No resources found in default namespace."], (command, r.stderr)
        r = cs(command, "-l", "team=nobody", "-A", store=store)
        assert r.returncode == 0 and "No resources found\n" in r.stderr, (command, r.stderr)
    # A script reading JSON gets an empty list, not nothing.
    empty = _json(cs("suspend", "-l", "team=nobody", "-o", "json", store=store))
    assert empty["kind"] == "List" and empty["items"] == []
    assert _json(cs("list", "-l", "team=nobody", "-o", "json", store=store))["items"] == []
    # A name that does not exist stays an error, as `kubectl get pod nosuch`.
    for command in ("get", "suspend", "resume", "delete", "trigger"):
        line = one_error_line(cs(command, "nosuch", store=store))
        assert "cronworkflow default/nosuch not found" in line, (command, line)


# -------------------------------------------------------------------------------- --help


def test_commands_offer_only_the_flags_they_use(tmp_path: Path) -> None:
    lint = cs("lint", "-h").stdout
    assert "--store" not in lint and "--namespace" not in lint and "--strict" in lint
    migrate = cs("migrate", "-h").stdout
    assert "--store" in migrate and "--namespace" not in migrate
    # Still accepted where a script passes them to every command, as the group takes them.
    f = _write(tmp_path / "m.yaml", [manifest("hello")])
    assert cs("lint", f, "-n", "team-a", "--store", "memory:").returncode == 0
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    assert cs("migrate", "-n", "team-a", store=store).returncode == 0
