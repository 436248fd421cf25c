"""Simulation speed: `python -m bench.simulate [--days D] [--store URL]`.

What is timed: `adapters.simulate.simulate` (what `cronsource simulate` runs: the real runtime,
adapters/runtime/, turned on a virtual clock, with the simulated target) over D days (default 7)
of two scenarios:

- `1x* * * * *`: one CronWorkflow firing every minute (10,080 ticks a week): the cost of one
  instant of the runtime (its turns, projections, the run watcher) per tick;
- `100x0 * * * *`: 100 CronWorkflows all firing at the top of every hour (16,800 ticks a week):
  the same turns, amortised over a burst of 100 decided and committed together.

Runs last 10 s (each is created, completes and is reported, as in a real day). Each runs on
the default store of `simulate` (a throwaway SQLite file on /dev/shm) and on `memory:`, or on
the `--store` given (as `cronsource --store URL simulate`: a scratch schema on PostgreSQL).
`per_second` is simulated ticks (Workflows created by schedule) per wall-clock second, set-up
and start-up included. The headline (`per_second`, `n`, `seconds`) is the first case on the
first store. Progress on stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import emit, machine_note, manifest, progress, r, self_peak_rss_mb
from cronsource.adapters.entrypoints.simulate import load_scenario, simulate

START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday; no DST change in UTC
CASES: list[tuple[int, str]] = [(1, "* * * * *"), (100, "0 * * * *")]


def scenario(crons: int, schedule: str, days: float) -> dict[str, Any]:
    end = START + timedelta(days=days)
    return {
        "start": START.isoformat(),
        "end": end.isoformat(),
        "runDuration": "10s",
        "cronWorkflows": [manifest(f"sim-{i:03d}", schedule) for i in range(crons)],
    }


def run_case(crons: int, schedule: str, days: float, store: str | None) -> dict[str, Any]:
    sc = load_scenario(scenario(crons, schedule, days))
    t0 = time.perf_counter()
    result = simulate(sc, store)
    seconds = time.perf_counter() - t0
    ticks = sum(1 for w in result["workflows"] if w["trigger"] == "schedule")
    return {
        "crons": crons,
        "schedule": schedule,
        "store": store or "default",
        "days": days,
        "ticks": ticks,
        "seconds": r(seconds, 3),
        "per_second": r(ticks / seconds if seconds else float("nan")),
        "rejected_writes": result["rejectedWrites"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.simulate", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--days", type=float, default=7.0, help="simulated span (default 7 days)")
    ap.add_argument(
        "--store",
        action="append",
        help="store(s) to simulate on (default: the default store and memory:)",
    )
    a = ap.parse_args(argv)
    if not 0 < a.days <= 31:
        ap.error("--days must be in (0, 31]")
    stores: list[str | None] = list(a.store) if a.store else [None, "memory:"]
    cases: list[dict[str, Any]] = []
    with progress() as bar:
        task = bar.add_task("simulate", total=len(CASES) * len(stores))
        for store in stores:
            for crons, schedule in CASES:
                bar.update(task, description=f"{crons}x{schedule} on {store or 'default'}")
                cases.append(run_case(crons, schedule, a.days, store))
                bar.advance(task)
    head = cases[0]
    emit(
        {
            "name": "simulate",
            "n": head["ticks"],
            "store": head["store"],
            "seconds": head["seconds"],
            "per_second": head["per_second"],
            "days": a.days,
            "cases": cases,
            "peak_rss_mb": r(self_peak_rss_mb()),
            "machine": machine_note(),
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
