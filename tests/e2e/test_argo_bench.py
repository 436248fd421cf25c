"""Smoke of bench/argo.py's limit side: the plain clients, each on a fresh test kube-apiserver,
and the one-line refusal of a bad variant. Solo (tests/conftest.py): a variant's start is
timed. Every side together, at N=5: tests/e2e/test_argo_bench_sides.py.

Needs the test API server and Argo's benchclient (tests/kube/apiserver.py): one that cannot be
built or started fails these tests, it never skips them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import last_json_line

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.k8s, pytest.mark.postgres, pytest.mark.timeout(900)]


def bench_limit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.argo", "--sides", "limit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


# one of each kind of plain client: aiohttp (fewer connections than requests in flight),
# httpx over HTTP/2, client-go over HTTP/2 and over HTTP/1.1
VARIANTS = "aiohttp:h1:2:4,httpx:h2:1:8,go:h2:1:8,go:h1:4:4"
LABELS = {
    "limit-aiohttp-h1-c2-f4": "HTTP/1.1",
    "limit-httpx-h2-c1-f8": "HTTP/2",
    "limit-go-h2-c1-f8": "HTTP/2.0",
    "limit-go-h1-c4-f4": "HTTP/1.1",
}


@pytest.mark.timeout(600)
def test_the_limit_side_is_the_best_of_its_plain_clients() -> None:
    """Each variant creates all N Workflows on its own fresh server at H (no scheduler, so no
    whole-minute wait); HTTP/2 is what the server negotiated where it was asked for; the limit
    keys are the best variant's and the spread spans the variants (issue 24 item 2)."""
    proc = bench_limit("--crons", "20", "--limit-variants", VARIANTS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = last_json_line(proc.stdout)
    assert result["commit"] and result["commit"] != "unknown"
    assert result["command"].endswith(f"--limit-variants {VARIANTS}")
    assert result["errors"] == []
    variants = {v["label"]: v for v in result["limit_variants"]}
    assert set(variants) == set(LABELS)
    for label, protocol in LABELS.items():
        (run,) = result["each_run"][label]
        assert run["workflows"] == 20 and run["duplicates"] == 0 and run["misses"] == 0, run
        assert run["protocol"] == protocol, run
        assert run["late_start_ms"] < 1000, run
        assert run["requests_after_h"] == {"POST workflows": 20}, run
        assert variants[label]["per_second"] == run["per_second"] > 0
    best = max(variants.values(), key=lambda v: v["per_second"])
    assert result["limit_best"] == best["label"]
    assert result["limit_per_second"] == best["per_second"]
    assert result["sides"]["limit"]["variant"] == best["label"]
    spread = result["limit_spread"]["over_variants"]
    assert spread["max"] == best["per_second"]
    assert spread["min"] == min(v["per_second"] for v in variants.values())
    assert result["ratio_limit"] is None  # our side did not run


def test_a_bad_limit_variant_is_one_line_and_runs_nothing() -> None:
    proc = bench_limit("--crons", "5", "--limit-variants", "aiohttp:h2:1:4")
    assert proc.returncode == 2
    assert "--limit-variants: 'aiohttp:h2:1:4' is not CLIENT:PROTOCOL" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
