"""`cronsource check` finds streams with holes, and `--repair` makes them replay again.

No cronsource of today can write a hole (every append checks the last version); one written by
an older version after a failover is made here the way it happened: a version deleted from the
middle of a stream, under the later ones. Through the installed CLI, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronsource.adapters.bootstrap import bootstrap
from tests.faults.harness import cronsource_bin

MANIFEST = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "CronWorkflow",
    "metadata": {"name": "holey", "namespace": "default"},
    "spec": {
        "schedules": ["*/5 * * * *"],
        "workflowSpec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    },
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/cs.db"
    url: str = request.getfixturevalue("pg_url")
    return url


def cli(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cronsource_bin(), "--store", store, *args], capture_output=True, text=True, timeout=120
    )


def punch_hole(store: str, version: int) -> None:
    """Delete one version from the middle of the stream, as a lost tail written over did."""
    engine = bootstrap(store)
    try:
        recorder: Any = engine.service.recorder
        [status] = engine.view.statuses()
        key: Any = status.cron_id
        mark = "%s"
        if engine.config.kind == "sqlite":
            key, mark = key.replace("-", ""), "?"
        with recorder.datastore.transaction(commit=True) as curs:
            curs.execute(
                f"DELETE FROM {recorder.events_table_name}"  # noqa: S608
                f" WHERE originator_id = {mark} AND originator_version = {mark}",
                (key, version),
            )
    finally:
        engine.close()


def test_check_names_the_hole_and_repair_makes_the_stream_readable(
    store: str, tmp_path: Path
) -> None:
    assert cli(store, "migrate").returncode == 0
    path = tmp_path / "holey.yaml"
    path.write_text(yaml.safe_dump(MANIFEST))
    assert cli(store, "apply", "-f", str(path)).returncode == 0
    for _ in range(3):  # versions 2, 3, 4
        assert cli(store, "suspend", "holey").returncode == 0
        assert cli(store, "resume", "holey").returncode == 0
    assert cli(store, "check").stdout.strip() == "no stream in the log has missing versions"

    punch_hole(store, 3)

    found = cli(store, "check")
    assert found.returncode == 1
    assert "default/holey: version 3 missing" in found.stdout
    assert "1 hole(s) in 1 stream(s)" in found.stderr and "--repair" in found.stderr
    migrated = cli(store, "migrate")
    assert migrated.returncode == 0 and "1 hole(s) in 1 stream(s)" in migrated.stderr

    repaired = cli(store, "check", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "recorded 1 missing version(s) as lost" in repaired.stdout
    assert cli(store, "check").returncode == 0

    # The stream replays again: a command on it works, and the audit says what was lost.
    assert cli(store, "suspend", "holey").returncode == 0
    history = cli(store, "history", "holey", "-o", "json")
    assert history.returncode == 0, history.stderr
    events = json.loads(history.stdout)
    lost = [e for e in events if e["type"] == "VersionsLost"]
    assert [e["version"] for e in lost] == [3]
    got = json.loads(cli(store, "get", "holey", "-o", "json").stdout)
    assert got["spec"]["suspend"] is True
    assert got["metadata"]["resourceVersion"] == str(events[-1]["version"])


def test_the_store_tools_refuse_a_sqlite_store_that_does_not_exist(tmp_path: Path) -> None:
    """`check` at a mistyped path created an empty store there and called it healthy;
    `export` exported nothing from it; `version --store` said "migrated"."""
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    for args in (["check"], ["export", "--before", "2030-01-01", "-o", str(tmp_path / "x")]):
        done = subprocess.run(
            [cronsource_bin(), "--store", url, *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1, done
        assert done.stderr.strip() == (
            f"error: SQLite store {tmp_path / 'typo.db'} does not exist (a mistyped path?"
            " `cronsource migrate`, `apply` or `run` creates it)"
        )
    version = subprocess.run(
        [cronsource_bin(), "--store", url, "version", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "does not exist" in json.loads(version.stdout)["store"]["status"]
    assert not (tmp_path / "typo.db").exists()
