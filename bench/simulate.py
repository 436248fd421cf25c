"""Simulation speed: `python -m bench.simulate [--scale F] [--case NAME] [--store URL]`.

What is timed: `simulate` (what `cronsource simulate` runs: the real runtime, adapters/runtime/,
turned on a virtual clock, with the simulated target) over the cases of issue 20's target:

- `minutely`: one CronWorkflow `* * * * *` for a week (10,080 ticks): the cost of the runtime's
  instants (its turns, projections, the dispatcher, the run watcher) per tick;
- `every-second`: one CronWorkflow `@every 1s` for an hour (3,600 ticks, ten runs at once);
- `fleet`: 200 CronWorkflows `*/5 * * * *` for a week (403,200 ticks), the same turns
  amortised over bursts of 200 decided and committed together (target: under 2 minutes);
- `leap-day`: one CronWorkflow `0 0 29 2 *` over eight years: two ticks; the bound of a
  simulation is on its work, not on its span.

Runs last 10 s (each is created, completes and is reported, as in a real day). Each case runs
on simulate's default store (a throwaway SQLite file on /dev/shm), or on each `--store` given
(`memory:`, or `postgresql://...` for a scratch schema, as `cronsource --store URL simulate`).
`--kube-events` also computes the Kubernetes Events (`simulate --kube-events`), to measure what
they cost against a run without (5-8% more CPU per tick: why they are asked for, not default).
`per_second` is simulated ticks (Workflows created by schedule) per wall-clock second, set-up
and start-up included; `cpu_seconds` is this process's CPU time (the whole simulation runs in
it), steadier than the wall time on a shared machine. `--scale` multiplies every span (0.01:
a smoke run). The headline (`per_second`, `n`, `seconds`) is the first case on the first store.
Progress on stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import emit, machine_note, manifest, progress, r, self_peak_rss_mb
from cronsource.adapters.entrypoints.simulate import load_scenario, simulate

START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday; no DST change in UTC
#: Issue 20's target for one CronWorkflow, ticks per wall-clock second on the default store.
TARGET_PER_SECOND = 5000.0
#: Issue 20's target for the fleet, seconds on the default store.
TARGET_FLEET_SECONDS = 120.0


@dataclass(frozen=True)
class Case:
    name: str
    crons: int
    schedule: str
    span: timedelta


CASES = [
    Case("minutely", 1, "* * * * *", timedelta(days=7)),
    Case("every-second", 1, "@every 1s", timedelta(hours=1)),
    Case("fleet", 200, "*/5 * * * *", timedelta(days=7)),
    Case("leap-day", 1, "0 0 29 2 *", timedelta(days=8 * 365 + 2)),
]


def scenario(case: Case, span: timedelta) -> dict[str, Any]:
    return {
        "start": START.isoformat(),
        "end": (START + span).isoformat(),
        "runDuration": "10s",
        "cronWorkflows": [manifest(f"sim-{i:03d}", case.schedule) for i in range(case.crons)],
    }


def run_case(
    case: Case, scale: float, store: str | None, kube_events: bool = False
) -> dict[str, Any]:
    # The leap-day case is about the span itself: it is not scaled.
    span = case.span if case.name == "leap-day" else case.span * scale
    sc = load_scenario(scenario(case, span))
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(sc, store, kube_events=kube_events)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    ticks = sum(1 for w in result["workflows"] if w["trigger"] == "schedule")
    out: dict[str, Any] = {
        "case": case.name,
        "crons": case.crons,
        "schedule": case.schedule,
        "store": store or "default",
        "days": r(span.total_seconds() / 86400, 4),
        "ticks": ticks,
        "seconds": r(seconds, 3),
        "cpu_seconds": r(cpu, 3),
        "per_second": r(ticks / seconds if seconds else float("nan")),
        "per_cpu_second": r(ticks / cpu if cpu else float("nan")),
        "rejected_writes": result["rejectedWrites"],
        "kube_events": len(result["kubeEvents"]) if kube_events else None,
    }
    if case.name == "fleet":
        out["target_met"] = seconds < TARGET_FLEET_SECONDS * scale
    elif case.name == "leap-day":
        out["target_met"] = ticks == 2
    else:
        out["target_met"] = ticks / seconds >= TARGET_PER_SECOND if seconds else False
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.simulate", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--scale", type=float, default=1.0, help="multiply every span (default 1; 0.01: smoke)"
    )
    ap.add_argument(
        "--case",
        action="append",
        choices=[c.name for c in CASES],
        help="case(s) to run (default: all)",
    )
    ap.add_argument(
        "--store",
        action="append",
        help="store(s) to simulate on (default: simulate's default store)",
    )
    ap.add_argument(
        "--kube-events",
        action="store_true",
        help="also compute the Kubernetes Events (what `simulate --kube-events` costs)",
    )
    a = ap.parse_args(argv)
    if not 0 < a.scale <= 4:
        ap.error("--scale must be in (0, 4]")
    stores: list[str | None] = list(a.store) if a.store else [None]
    chosen = [c for c in CASES if a.case is None or c.name in a.case]
    cases: list[dict[str, Any]] = []
    with progress() as bar:
        task = bar.add_task("simulate", total=len(chosen) * len(stores))
        for store in stores:
            for case in chosen:
                bar.update(task, description=f"{case.name} on {store or 'default'}")
                cases.append(run_case(case, a.scale, store, a.kube_events))
                bar.advance(task)
    head = cases[0]
    emit(
        {
            "name": "simulate",
            "n": head["ticks"],
            "store": head["store"],
            "seconds": head["seconds"],
            "per_second": head["per_second"],
            "scale": a.scale,
            "cases": cases,
            "peak_rss_mb": r(self_peak_rss_mb()),
            "machine": machine_note(),
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
