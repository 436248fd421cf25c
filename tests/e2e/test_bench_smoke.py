"""CI smoke of the benchmarks (bench/): each command runs at a tiny N, on SQLite and on
PostgreSQL, and its last stdout line is one JSON object with the keys of docs/design.md section 8
and sane values. Timing targets are NOT asserted here (see docs/performance.md).

`bench.peers` is smoked with `--ours-only`: our side of the comparison, end to end, without
APScheduler (an optional extra), so this file never needs the peer's packages. The peer's
side itself is exercised only by running `python -m bench.peers` by hand or `bench.report`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(300)


def bench(module: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, f"{module} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"{module} printed nothing on stdout"
    result = json.loads(lines[-1])
    assert isinstance(result, dict)
    return result


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL for one benchmark: a new SQLite file, or the PostgreSQL test server
    (the benchmark makes, and drops, a database of its own there)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'bench.db'}"
    return str(request.getfixturevalue("pg_url"))


def kind(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def positive(*values: Any) -> bool:
    return all(isinstance(v, int | float) and v > 0 for v in values)


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_burst(store: str, mode: str) -> None:
    res = bench("bench.burst", "--crons", "20", "--store", store, "--mode", mode)
    assert res["name"] == "burst"
    assert res["n"] == 20 and res["fires"] == 20 and res["store"] == kind(store)
    assert res["duplicates"] == 0 and res["misses"] == 0
    assert positive(res["seconds"], res["per_second"], res["baseline_per_second"], res["ratio"])
    assert res["ratio"] == pytest.approx(
        res["per_second"] / res["baseline_per_second"], rel=0.01, abs=0.001
    )
    assert 0 < res["p50_ms"] <= res["p99_ms"] <= res["seconds"] * 1000 + 1
    assert 300 <= res["event_bytes"] <= 2000
    assert positive(res["peak_rss_mb"])
    if store.startswith("sqlite"):
        assert not Path(store.removeprefix("sqlite:///")).exists(), "the store is throwaway"


def test_burst_refuses_an_existing_store(tmp_path: Path) -> None:
    db = tmp_path / "in-use.db"
    db.write_bytes(b"")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.burst", "--crons", "5", "--store", f"sqlite:///{db}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "exists" in proc.stderr
    assert db.exists()


def test_project(store: str) -> None:
    res = bench("bench.project", "--events", "100", "--store", store, "--rate", "500")
    assert res["name"] == "project"
    assert res["n"] == 100 and res["store"] == kind(store)
    assert positive(res["seconds"], res["per_second"])
    assert res["workflows_created"] == 75  # one per ScheduleFired: 100 events - 25 Created
    assert res["lag_events"] == 100 and res["unprojected"] == 0 and res["projector_exit"] == 0
    assert positive(res["files_baseline_seconds"], res["files_baseline_us"])
    assert 0 <= res["p50_ms"] <= res["p99_ms"] < 120_000
    assert positive(res["peak_rss_mb"], res["projector_rss_mb"])


def test_project_with_the_dispatcher_in_a_process_of_its_own(store: str) -> None:
    res = bench(
        "bench.project", "--events", "100", "--store", store, "--lag-events", "0",
        "--dispatcher", "process",
    )  # fmt: skip
    assert res["dispatcher"] == "process"
    # Every fire's Workflow, written by the other process, before the figure was taken.
    assert res["workflows_created"] == 75
    assert 0 < res["readmodel_seconds"] <= res["seconds"]
    assert 0 < res["dispatch_seconds"] <= res["seconds"]


def test_steady(store: str) -> None:
    res = bench("bench.steady", "--crons", "20", "--minutes", "0.1", "--store", store)
    assert res["name"] == "steady"
    assert res["n"] == 20 and res["store"] == kind(store)
    assert res["exit_code"] == 0
    assert positive(res["peak_rss_mb"])
    assert res["startup_seconds"] > 0
    for key in ("p50_ms", "p99_ms"):
        assert key in res
    # Exactly once counted with one replica: every tick due in the measured span fired once.
    assert res["replicas"] == 1 and res["duplicates"] == 0 and res["misses"] == 0
    assert res["fires"] == res["due_ticks"]


def test_peers_ours_only(store: str) -> None:
    """OUR SIDE ONLY (`--ours-only`): APScheduler is an optional extra, not needed here."""
    res = bench("bench.peers", "--crons", "20", "--store", store, "--ours-only")
    assert res["name"] == "peers" and res["ours_only"] is True
    assert res["n"] == 20 and res["store"] == kind(store)
    assert res["duplicates"] == 0 and res["misses"] == 0
    assert positive(res["seconds"], res["per_second"])
    assert 0 < res["p50_ms"] <= res["p99_ms"]
    assert res["baseline_per_second"] is None and res["ratio"] is None and res["peer"] is None
    assert res["ours"]["fires"] == 20


def test_simulate() -> None:
    """Issue 20's cases at a hundredth of their spans on the default store: every tick fired
    by schedule, none refused; the leap-day case is not scaled (eight years, two ticks)."""
    res = bench("bench.simulate", "--scale", "0.01")
    assert res["name"] == "simulate" and res["store"] == "default"
    cases = {c["case"]: c for c in res["cases"]}
    assert set(cases) == {"minutely", "every-second", "fleet", "leap-day"}
    # 100.8 minutes of `* * * * *`; 36 s of `@every 1s`; 100.8 minutes of 200 x `*/5`.
    assert 100 <= cases["minutely"]["ticks"] <= 101, cases["minutely"]
    assert 35 <= cases["every-second"]["ticks"] <= 37, cases["every-second"]
    assert cases["fleet"]["ticks"] in (200 * 20, 200 * 21), cases["fleet"]
    assert cases["leap-day"]["ticks"] == 2 and cases["leap-day"]["target_met"] is True
    for case in cases.values():
        assert positive(case["seconds"], case["per_second"]) and case["rejected_writes"] == 0
    assert res["n"] == cases["minutely"]["ticks"] and res["per_second"] > 0


@pytest.mark.postgres
def test_report_writes_the_document(pg_url: str, tmp_path: Path) -> None:
    from bench.report import BEGIN, END

    out = tmp_path / "performance.md"
    out.write_text(f"# Performance\n\nintro\n\n{BEGIN}\nSTALE-FIGURES\n{END}\n\nanalysis kept\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.report",
            "--size",
            "tiny",
            "--only",
            "burst-sqlite-cold,burst-pg-cold",
            "--store",
            pg_url,
            "--out",
            str(out),
            "--plot",
            str(tmp_path / "skew.png"),
            "--log",
            str(tmp_path / "report.log"),
            # Not the repository's bench/results: a tiny run there replaces the figures the
            # document shows (it did, once, for burst-pg-cold and burst-sqlite-cold).
            "--results",
            str(tmp_path / "results"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert text.startswith("# Performance\n\nintro\n") and text.endswith("analysis kept\n")
    assert "STALE-FIGURES" not in text
    assert "python -m bench.burst --crons 200 --store $PG" in text
    assert "| burst, cold | sqlite | 200 |" in text


def test_history(store: str, tmp_path: Path) -> None:
    """bench.history --quick: every part ran and reported its ratio; the streams were written
    to their sizes with snapshots, and the retention bounded the log."""
    res = bench("bench.history", "--quick", "--runs", "1", "--store", store)
    assert res["name"] == "history" and res["store"] == kind(store) and res["quick"] is True
    small, big = res["commands"]
    assert (small["size"], big["size"]) == (10, 1000) and res["n"] == 1000
    assert small["events"] == 10 and small["tail_events"] == 10
    # Written to just before the next snapshot: the longest tail a load replays.
    assert 1097 <= big["events"] <= 1099 and 95 <= big["tail_events"] <= 99
    assert big["snapshots_rows"] == 10 and big["events_rows"] >= big["events"]
    for c in ("suspend", "get", "why", "history"):
        assert positive(small[f"{c}_ms"], big[f"{c}_ms"], big[f"{c}_inprocess_ms"])
        assert res[f"ratio_{c}"] == pytest.approx(big[f"{c}_ms"] / small[f"{c}_ms"], rel=0.01)
        assert positive(res[f"ratio_{c}_inprocess"])
    assert 200 <= res["disk_bytes_per_event"] <= 2000 and 2.98 <= res["events_per_run"] <= 3
    startup = {s["store"]: s for s in res["startup"]}
    assert set(startup) == {"empty", "fresh", "history"}
    assert startup["history"]["crons"] == 10 and startup["history"]["events"] > 3000
    assert positive(*(s["ready_seconds"] for s in startup.values()), res["ratio_startup"])
    year = res["year"]
    assert len(year["samples"]) == 12 and year["removed"] > 0
    assert year["samples"][-1]["events"] < year["samples"][2]["events"] * 1.5
    sim = res["simulate"]
    assert sim["ticks"] == 144 and sim["rejected_writes"] == 0
    assert positive(sim["first_tenth_ms_per_tick"], sim["last_tenth_ms_per_tick"])
    assert positive(sim["first_tenth_cpu_ms_per_tick"], sim["last_tenth_cpu_ms_per_tick"])
    assert sim["ratio"] == pytest.approx(
        sim["last_tenth_cpu_ms_per_tick"] / sim["first_tenth_cpu_ms_per_tick"], rel=0.01
    )
    assert set(res["targets"]) == {"commands", "startup", "year_rows", "simulate"}
    assert res["pass"] == all(res["targets"].values())
    assert not list(tmp_path.glob("bench-*")), "the stores (and their lock files) are throwaway"
