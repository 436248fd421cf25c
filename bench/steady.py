"""Fire skew at steady load: `python -m bench.steady --crons N --minutes M --store URL`.

Set-up, not timed: a throwaway store (bench/common.py) holding N CronWorkflows with hourly
schedules at random minutes (`M * * * *`, seeded; `--schedule` gives one schedule to all),
created as of now, with the projections (status, audit, due index, dispatcher position) caught
up: the state a replica restarts into.

Timed: the real `cronsource run` is started as a separate process on that store (local target,
no manifests to apply). `startup_seconds` runs from the spawn until it prints that its first
turn is done ("cronsource ready", adapters/entrypoints/cli/run.py: projections caught up, what was
due decided, the next minute's aggregates loaded). For M minutes after that, this process watches
the event log: each ScheduleFired is timestamped when it first becomes visible (a poll every 20 ms),
so skew = visible - scheduled is an upper bound of commit time minus scheduled time. Ticks that
came due while the set-up ran (before the replica was ready) fire at start-up, late by design;
they are counted as `backlog_fires`, not in the skew. Also samples
the scheduler's peak RSS (VmHWM). Prints one JSON object on its last line.

`--replicas K` starts K `cronsource run` processes on the store instead of one (PostgreSQL: they
split the CronWorkflows by advisory-lock shards, one of them projects); start-up runs until the
last is ready and RSS is the largest.

Exactly once is counted, not assumed, with one replica as with K: a second fire of one tick is a
`duplicate`, and a tick due after the replicas were ready and by the end of the M minutes with
no fire seen `GRACE` seconds after the end is a `miss`. A p99 over the fires seen says nothing
of the fires that never came; the misses do. Any duplicate or miss makes the exit code 1.
"""

from __future__ import annotations

import argparse
import random
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import (
    BenchError,
    create_crons,
    emit,
    percentile,
    progress,
    r,
    rss_mb,
    throwaway_store,
)
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.domain.schedule import compile_schedule

FIRED = "cronsource:ScheduleFired/v1"
#: How long after the measured minutes a fire due by their end may still become visible
#: before its tick counts as missed (a turn, the commit, the 20 ms poll, with room to spare).
GRACE = 10.0


def schedules(n: int, schedule: str | None, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [schedule or f"{rng.randrange(60)} * * * *" for _ in range(n)]


def wait_ready(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> float:
    """Seconds from now until the replica prints that it is ready."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if "cronsource ready" in log.read_text(errors="replace"):
            return time.monotonic() - start
        if proc.poll() is not None:
            raise BenchError(f"cronsource run exited with {proc.returncode}:\n{log.read_text()}")
        time.sleep(0.01)
    raise BenchError(f"cronsource run not ready after {timeout:.0f} s")


def run(
    store: str | None,
    n: int,
    minutes: float,
    schedule: str | None,
    seed: int,
    replicas: int = 1,
) -> dict[str, Any]:
    with throwaway_store(store, "steady") as t, progress() as bar:
        wf_dir = t.workdir / "workflows"
        engine = bootstrap(t.config, target=LocalTarget(wf_dir), create_tables=False)
        app = engine.service
        created_at = datetime.now(UTC)
        task = bar.add_task("create CronWorkflows", total=n)
        planned = schedules(n, schedule, seed)
        ids = create_crons(
            app,
            n,
            planned,
            created_at,
            prefix="steady",
            advance=lambda k: bar.advance(task, k),
        )
        task = bar.add_task("project (not timed)", total=None)
        engine.projector.catch_up(created_at)
        bar.update(task, total=1, completed=1)
        seen = app.recorder.max_notification_id() or 0

        exe = Path(sys.executable).parent / "cronsource"
        procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        for k in range(replicas):
            log = t.workdir / f"run-{k}.log"
            with open(log, "w") as err:
                procs.append(
                    (
                        subprocess.Popen(
                            [str(exe), "--store", t.url, "run", "--workflows-dir", str(wf_dir)],
                            stdout=subprocess.DEVNULL,
                            stderr=err,
                        ),
                        log,
                    )
                )
        try:
            task = bar.add_task("start-up", total=None)
            startup = max(wait_ready(proc, log, timeout=600) for proc, log in procs)
            ready_at = datetime.now(UTC)
            bar.update(task, total=1, completed=1)
            skews: list[float] = []
            ticks: set[tuple[str, datetime]] = set()
            duplicates = 0
            backlog = 0
            peak = 0.0
            deadline = time.monotonic() + minutes * 60
            ends_at = datetime.now(UTC) + timedelta(minutes=minutes)
            task = bar.add_task("steady load (s)", total=round(minutes * 60))
            while time.monotonic() < deadline + GRACE and all(p.poll() is None for p, _ in procs):
                notes = app.recorder.select_notifications(start=seen + 1, limit=5000)
                now = datetime.now(UTC)
                for note in notes:
                    seen = note.id
                    if note.topic == FIRED:
                        ev: Any = app.mapper.to_domain_event(note)
                        tick = (str(note.originator_id), ev.scheduled_time)
                        if tick in ticks:
                            duplicates += 1
                            continue
                        ticks.add(tick)
                        if ev.scheduled_time < ready_at:
                            backlog += 1  # came due during the set-up: late by design
                        elif ev.scheduled_time <= ends_at:
                            skews.append((now - ev.scheduled_time).total_seconds() * 1000)
                peak = max([peak] + [rss_mb(p.pid) for p, _ in procs])
                left = max(0.0, deadline - time.monotonic())
                bar.update(task, completed=round(minutes * 60 - left))
                time.sleep(0.02)
        finally:
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            code = max(proc.wait(timeout=120) for proc, _ in procs)
            engine.close()
    due = due_ticks(ids, planned, ready_at, ends_at)
    misses = len(due - ticks)
    return {
        "name": "steady",
        "n": n,
        "store": t.kind,
        "minutes": minutes,
        "schedule": schedule or "M * * * * (M random)",
        "fires": len(skews),
        "backlog_fires": backlog,
        "p50_ms": r(percentile(skews, 0.5)),
        "p99_ms": r(percentile(skews, 0.99)),
        "max_ms": round(max(skews), 1) if skews else None,
        "mean_ms": round(statistics.fmean(skews), 1) if skews else None,
        "peak_rss_mb": round(peak, 1),
        "startup_seconds": round(startup, 2),
        "exit_code": code,
        "replicas": replicas,
        "due_ticks": len(due),
        "duplicates": duplicates,
        "misses": misses,
    }


def due_ticks(
    ids: list[Any], planned: list[str], after: datetime, until: datetime
) -> set[tuple[str, datetime]]:
    """Every (CronWorkflow, tick) due in (after, until]: what exactly once must fire."""
    due: set[tuple[str, datetime]] = set()
    for cron_id, expression in zip(ids, planned, strict=True):
        for tick in compile_schedule([expression]).ticks_between(after, until):
            due.add((str(cron_id), tick))
    return due


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.steady", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--crons", type=int, default=1000, help="N CronWorkflows")
    ap.add_argument("--minutes", type=float, default=3, help="M minutes of wall clock")
    ap.add_argument("--store", default=None, help="sqlite:///NEW.db or postgresql://server/db")
    ap.add_argument("--schedule", default=None, help="one schedule for all (default: M * * * *)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replicas", type=int, default=1, help="cronsource run processes (1)")
    a = ap.parse_args(argv)
    if a.crons < 1 or a.replicas < 1:
        ap.error("--crons and --replicas must be at least 1")
    try:
        result = run(a.store, a.crons, a.minutes, a.schedule, a.seed, a.replicas)
    except BenchError as e:
        print(f"bench.steady: {e}", file=sys.stderr)
        return 2
    emit(result)
    clean = not result["duplicates"] and not result["misses"]
    return 0 if result["exit_code"] == 0 and clean else 1


if __name__ == "__main__":
    sys.exit(main())
