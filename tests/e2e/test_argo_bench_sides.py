"""Smoke of bench/argo.py at N=5: every side (the plain loop, Argo's real controller at its
defaults and tuned, `cronsource run --kube` on PostgreSQL) runs on a fresh test kube-apiserver,
and the last stdout line is the JSON object issue 11 names, with no duplicate and no miss on
our side. No timing is asserted (the figures are in docs/performance.md).

Needs the test API server and Argo's controller (tests/kube/apiserver.py, tests/argo/peer.py):
one that cannot be built or started fails this test, it never skips it. Each side waits for a
whole minute (cron's resolution), so the test takes about four minutes, nearly all of them
waiting: it is not `solo` (tests/conftest.py), and runs beside the other tests, with a lead
long enough for a set-up slowed by them. The limit side's own checks, which time its start,
are solo: tests/e2e/test_argo_bench.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import last_json_line

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.k8s, pytest.mark.postgres, pytest.mark.timeout(900)]

KEYS = {
    "name",
    "n",
    "per_second",
    "p50_ms",
    "p99_ms",
    "duplicates",
    "misses",
    "peer_per_second",
    "ratio",
    "peer_tuned_per_second",
    "ratio_tuned",
    "limit_per_second",
    "ratio_limit",
    "peer_version",
}


def test_argo_bench_fires_every_side_once_and_reports_the_issue_keys(pg_url: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.argo",
            "--crons",
            "5",
            "--lead",
            "30",
            "--limit-variants",
            "aiohttp:h1:4:4,go:h2:1:4",
            "--store",
            pg_url,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = last_json_line(proc.stdout)
    assert KEYS <= set(result), KEYS - set(result)
    assert result["name"] == "argo" and result["n"] == 5
    assert result["duplicates"] == 0 and result["misses"] == 0
    assert result["peer_version"].startswith("v4.0.5")
    sides = ("ours", "argo", "argo-tuned", "limit-aiohttp-h1-c4-f4", "limit-go-h2-c1-f4")
    assert set(result["each_run"]) == set(sides)
    for side in sides:
        (run,) = result["each_run"][side]
        assert run["workflows"] == 5, (side, run)
        assert run["scheduled_times"] == [run["instant"].replace("+00:00", "Z")], (side, run)
    for key, a, b in (
        ("ratio", "per_second", "peer_per_second"),
        ("ratio_tuned", "per_second", "peer_tuned_per_second"),
        ("ratio_limit", "per_second", "limit_per_second"),
    ):
        assert result[a] > 0 and result[b] > 0
        assert result[key] == pytest.approx(result[a] / result[b], rel=0.05), result["sides"]
    assert "--qps 500" in result["peer_tuning"]
