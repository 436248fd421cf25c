"""Smoke of bench/kube_create.py at a tiny N against the session's test API server: it runs,
every Workflow is created, and its last stdout line is one JSON object with the keys of
docs/design.md section 8. No timing is asserted (the figures are in docs/operator-guide.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.common import last_json_line

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.k8s


def test_kube_create_bench_reports_ours_and_the_plain_loop(
    kube_apiserver: Any, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.kube_create",
            "--workflows",
            "40",
            "--rounds",
            "1",
            "--in-flight",
            "8",
            "--kubeconfig",
            str(kube_apiserver.kubeconfig),
            "--store",
            f"sqlite:///{tmp_path / 'bench.db'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json_line(proc.stdout)
    assert result["name"] == "kube_create" and result["n"] == 40
    assert result["per_second"] > 0 and result["baseline_per_second"] > 0
    assert result["ratio"] == pytest.approx(
        result["per_second"] / result["baseline_per_second"], rel=0.05
    )
    assert result["in_flight"] == 8 and len(result["each_round"]) == 1
