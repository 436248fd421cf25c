"""Two real `cronsource run` processes on one PostgreSQL, each named by POD_NAME (as the
downward API sets it): every scheduled decision records the replica that decided it
(`decidedBy`), each replica logs its own decisions with that name, every log line names its
replica, the rebalance logs the shards taken, and `cronsource replicas` lists both.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from tests.faults.harness import (
    Replica,
    all_events,
    cron_manifest,
    cronsource_bin,
    migrate,
    wait_for,
    write_manifests,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

NAMES = ("pod-a", "pod-b")
CRONS = 16


def json_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def test_two_replicas_name_their_decisions_and_log_lines(pg_url: str, tmp_path: Path) -> None:
    replicas: list[Replica] = []
    url = pg_url
    try:
        migrate(url)
        manifest = write_manifests(
            tmp_path / "crons.yaml",
            [cron_manifest(f"rv-{i}", "@every 1s") for i in range(CRONS)],
        )
        for name in NAMES:
            r = Replica(
                name,
                url,
                manifest,
                tmp_path / "workflows",
                tmp_path,
                env={"POD_NAME": name},
            )
            replicas.append(r)
            r.start()
        for r in replicas:
            r.wait_running()

        def both_listed() -> list[dict[str, Any]] | None:
            out = subprocess.run(
                [cronsource_bin(), "--store", url, "replicas", "-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            listed = json.loads(out.stdout)
            shards = {r["replica"]: r["shards"] for r in listed}
            turned = all(r["lastTurn"] for r in listed)
            whole = set(shards) == set(NAMES) and sum(shards.values()) == 64
            return listed if whole and turned else None

        listed = wait_for("both replicas to share the shards and turn", both_listed, 60, 0.5)
        assert [r["projector"] for r in listed].count(True) == 1

        def deciders() -> set[str] | None:
            engine = bootstrap(url)
            try:
                by = {
                    ev.decided_by
                    for _, ev in all_events(engine)
                    if type(ev).__name__ == "ScheduleFired" and ev.trigger == "schedule"
                }
            finally:
                engine.close()
            return by if set(NAMES) <= by else None

        by = wait_for("fires decided by both replicas", deciders, 60, 0.5)
        time.sleep(1)
    finally:
        for r in replicas:
            if r.running():
                r.terminate()
            r.cleanup()
    assert by == set(NAMES)  # every scheduled fire names one of the two replicas
    for r in replicas:
        lines = json_lines(r.log())
        assert lines, r.tail()
        # Every structured line names the replica that wrote it.
        assert {line.get("replica") for line in lines} == {r.name}, r.tail()
        decisions = [ln for ln in lines if ln.get("event") == "ScheduleFired"]
        assert decisions, f"{r.name} logged none of its own decisions:\n{r.tail()}"
        assert {ln["decidedBy"] for ln in decisions} == {r.name}
        took = [ln for ln in lines if ln["msg"].startswith(f"shards: replica {r.name} took")]
        assert took and "shardsTaken" in took[0], r.tail()
