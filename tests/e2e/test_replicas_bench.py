"""Smoke of the replica benchmarks on the PostgreSQL test server at a tiny N: `bench.replicas`
splits one burst over 1 and 2 scheduler processes (all 64 shards held, every CronWorkflow fired
exactly once), and `bench.steady --replicas 2` runs two `cronsource run` processes on one store
without a duplicate. No timing is asserted (the figures are in docs/scaling.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.common import last_json_line

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


def bench(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return last_json_line(proc.stdout)


def test_a_burst_on_two_replicas_fires_each_cronworkflow_once(pg_url: str) -> None:
    res = bench("bench.replicas", "--crons", "60", "--replicas", "1,2", "--store", pg_url)
    assert res["name"] == "replicas" and res["n"] == 60
    one, two = res["by_replicas"]
    assert one["shards"] == [64] and sorted(two["shards"]) == [32, 32]
    for row in (one, two):
        assert row["fires"] == 60 and row["duplicates"] == 0 and row["misses"] == 0
    assert sum(two["each_fires"]) == 60 and min(two["each_fires"]) > 0


def test_steady_on_two_replicas_reports_no_duplicate(pg_url: str) -> None:
    res = bench(
        "bench.steady", "--crons", "20", "--minutes", "0.1", "--replicas", "2", "--store", pg_url
    )
    assert res["replicas"] == 2 and res["duplicates"] == 0 and res["exit_code"] == 0
