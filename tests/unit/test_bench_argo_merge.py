"""bench.argo's limit side and `python -m bench.report merge`, on synthetic runs: the limit
is the best plain client, and runs are merged by a command that refuses what would mix
commits or sizes (issue 24 item 2: no figure of docs/performance.md is assembled by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import argo, report
from bench.common import BenchError


def side_run(label: str, per_second: float, n: int = 100, **extra: Any) -> dict[str, Any]:
    return {
        "side": label,
        "n": n,
        "seconds": n / per_second,
        "per_second": per_second,
        "p50_ms": 10.0,
        "p99_ms": 20.0,
        "duplicates": 0,
        "misses": 0,
        "late": 0,
        "load": ["0 0 0", "0 0 0", "0 0 0"],
    } | extra


def limit_part(commit: str = "abc123", n: int = 100) -> dict[str, Any]:
    runs = {
        "limit-aiohttp-h1-c64-f64": [
            side_run("l1", 600.0, n, client="aiohttp:h1:64:64", protocol="HTTP/1.1"),
            side_run("l1", 700.0, n, client="aiohttp:h1:64:64", protocol="HTTP/1.1"),
        ],
        "limit-go-h2-c1-f256": [
            side_run("l2", 900.0, n, client="go:h2:1:256", protocol="HTTP/2.0"),
            side_run("l2", 1100.0, n, client="go:h2:1:256", protocol="HTTP/2.0"),
        ],
    }
    sides = argo.sides_of({"each_run": runs, "sides": {}})
    return argo.summary(runs, sides, n, 2, [], commit, "python -m bench.argo --sides limit", None)


def ours_part(commit: str = "abc123", n: int = 100) -> dict[str, Any]:
    runs = {"ours": [side_run("ours", 800.0, n)]}
    return argo.summary(
        runs, argo.sides_of({"each_run": runs}), n, 1, [], commit, "python -m bench.argo", None
    )


def test_the_limit_is_the_best_client_and_reports_the_spread() -> None:
    res = limit_part()
    assert res["limit_best"] == "limit-go-h2-c1-f256"
    assert res["limit_per_second"] == 1000.0  # the median of its two runs
    assert [v["per_second"] for v in res["limit_variants"]] == [650.0, 1000.0]
    assert res["limit_spread"]["over_variants"] == {"min": 650.0, "median": 825.0, "max": 1000.0}
    assert res["limit_spread"]["over_runs"]["min"] == 600.0
    assert res["limit_spread"]["over_runs"]["max"] == 1100.0
    assert res["sides"]["limit"]["variant"] == "limit-go-h2-c1-f256"


def test_merge_recomputes_the_ratio_against_the_best_client() -> None:
    merged = argo.merge([limit_part(), ours_part()])
    assert merged["per_second"] == 800.0
    assert merged["ratio_limit"] == 0.8
    assert merged["commit"] == "abc123"
    assert [m["sides"] for m in merged["merged_from"]] == [
        ["limit-aiohttp-h1-c64-f64", "limit-go-h2-c1-f256"],
        ["ours"],
    ]


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        (lambda: [limit_part("abc123"), ours_part("def456")], "different commits"),
        (lambda: [limit_part(n=100), ours_part(n=200)], "different N"),
        (lambda: [limit_part() | {"commit": ""}, ours_part()], "naming its commit"),
    ],
)
def test_merge_refuses_runs_that_are_not_one_commit_and_one_n(parts: Any, says: str) -> None:
    with pytest.raises(BenchError, match=says):
        argo.merge(parts())


def test_report_merge_writes_a_kept_result_the_document_shows(tmp_path: Path) -> None:
    files = []
    for k, part in enumerate([limit_part(), ours_part()]):
        f = tmp_path / f"run{k}.out"
        f.write_text("progress\n" + json.dumps(part) + "\n")
        files.append(str(f))
    results = tmp_path / "results"
    assert report.main(["merge", "--key", "argo-100", "--results", str(results), *files]) == 0
    record = json.loads((results / "argo-100.json").read_text())
    assert record["merged"] and record["commit"] == "abc123"
    assert "python -m bench.report merge" in record["source"]
    run = report.Run("argo-100", "t", "bench.argo", ["--crons", "100"], "postgresql")
    report.load_saved(run, results)
    assert run.results and not run.errors
    text = "\n".join(report.argo_section({"argo-100": run}))
    assert "at commit `abc123`" in text
    assert "plain client `go:h2:1:256` (HTTP/2.0)" in text
    assert "best of 2 plain clients (`limit-go-h2-c1-f256`)" in text


def test_report_merge_refuses_another_n_than_its_key(tmp_path: Path) -> None:
    f = tmp_path / "run.out"
    f.write_text(json.dumps(limit_part()) + "\n")
    assert report.main(["merge", "--key", "argo-5", "--results", str(tmp_path), str(f)]) == 2
    assert not (tmp_path / "argo-5.json").exists()


def test_kept_argo_figures_without_a_commit_are_not_shown(tmp_path: Path) -> None:
    part = limit_part()
    del part["commit"]
    record = {"key": "argo-100", "command": "python -m bench.argo --crons 100 --store $PG"}
    (tmp_path / "argo-100.json").write_text(json.dumps(record | {"results": [part]}))
    run = report.Run("argo-100", "t", "bench.argo", ["--crons", "100"], "postgresql")
    report.load_saved(run, tmp_path)
    assert not run.results
    assert run.errors == [report.NO_COMMIT]


def test_fault_sides_are_reported_apart_with_what_was_injected_and_survive_a_merge() -> None:
    runs = {
        "ours": [side_run("ours", 800.0)],
        "ours-5xx": [side_run("ours-5xx", 300.0, faults={"injected_5xx": 2, "proxied": 150})],
        "ours-kill": [side_run("ours-kill", 50.0, misses=1, faults={"seen": 25})],
    }
    sides = argo.sides_of({"each_run": runs})
    assert [s.kind for s in sides] == ["ours", "ours", "ours"]
    res = argo.summary(runs, sides, 100, 1, [], "abc123", "python -m bench.argo", None)
    # The headline is the side without faults; the fault sides are under `faults`.
    assert res["per_second"] == 800.0
    assert set(res["faults"]) == {"ours-5xx", "ours-kill"}
    assert res["faults"]["ours-5xx"]["injected"] == [{"injected_5xx": 2, "proxied": 150}]
    assert res["faults"]["ours-kill"]["misses"] == 1
    merged = argo.merge([res, limit_part()])
    assert merged["faults"]["ours-kill"]["per_second"] == 50.0


def test_the_bench_fails_when_a_fault_side_misses_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = {"ours-kill": [side_run("ours-kill", 50.0, misses=1)]}
    res = argo.summary(
        runs, argo.sides_of({"each_run": runs}), 100, 1, [], "abc123", "python -m bench.argo", None
    )
    monkeypatch.setattr(argo, "run", lambda a, argv: res)
    monkeypatch.setattr(argo, "emit", lambda result: None)
    assert argo.main(["--sides", "ours-kill"]) == 1
    res["faults"]["ours-kill"]["misses"] = 0
    assert argo.main(["--sides", "ours-kill"]) == 0


def test_an_unknown_side_names_the_fault_sides_too() -> None:
    import argparse

    a = argparse.Namespace(
        sides="ours-flood", tuning=None, argo_workflow_workers=0, limit_variants=""
    )
    with pytest.raises(BenchError, match="ours-kill"):
        argo.run(a)


def test_the_report_shows_the_fault_runs_apart_from_the_targets_at_n() -> None:
    runs = {
        "ours-5xx": [side_run("ours-5xx", 300.0, faults={"injected_5xx": 9, "proxied": 1200})],
        "ours-kill": [
            side_run("ours-kill", 50.0, misses=1, faults={"killed_after_ms": 400.0, "seen": 25})
        ],
    }
    res = argo.summary(
        runs, argo.sides_of({"each_run": runs}), 100, 1, [], "abc123", "python -m bench.argo", None
    )
    faulted = report.Run("argofaults-100", "t", "bench.argo", ["--crons", "100"], "postgresql")
    faulted.results = [res]
    at_n = report.Run("argo-100", "t", "bench.argo", ["--crons", "100"], "postgresql")
    at_n.results = [ours_part() | limit_part()]
    lines = report.argo_section({"argo-100": at_n, "argofaults-100": faulted})
    text = "\n".join(lines)
    # One targets table, of the run at N; the fault runs in a section of their own.
    assert text.count("| target |") == 1
    assert "| N=100 | verdict |" in text
    assert "9 x 500 of 1200 requests" in text
    assert "killed 400 ms after H, 25 seen" in text
    kill_row = next(line for line in lines if line.startswith("| two replicas"))
    assert "0/1" in kill_row and "**not met**" in kill_row
