"""A burst: `python -m bench.burst --crons N --store URL`.

N CronWorkflows (`0 * * * *` by default) are all due at one instant, the next top of the hour
H. Set-up, not timed: a throwaway store (bench/common.py), the N CronWorkflows created as of
H - 30 min, and the projections caught up so the due index knows them.

Timed: `SchedulerLoop.schedule_once(H)` of adapters/runtime/, the code `cronsource run` runs
each turn: read the due index, then `CronService.decide_batch`, `append_batch` in batches of 500,
each batch one transaction, the next decided while the previous one commits. The clock is
virtual (the loop's `clock` is H), so the instant is the moment the call starts; `seconds` is
the wall time until it returned with every ScheduleFired committed.
Each fire's latency is the time its batch's commit returned, minus the instant (`p50_ms`,
`p99_ms`).

`--mode` picks which copy the scheduler decides on; all three are real situations:
- `cold` (default): the first burst after the CronWorkflows were applied, or after a restart:
  every aggregate is loaded from the store (eventsourcing's aggregate cache is not filled by
  saves while fast-forwarding is on, so a process that has just applied them is no warmer);
- `warm`: a scheduler restarted before the instant: it loads nothing at start, but its loop's
  turns before the instant (untimed, at H - 30 s, until one warms nothing) load what is due
  within `WARM_AHEAD` (adapters/runtime/), as `cronsource run` does, and its turn at H - 2 s
  decides the instant in advance (`prepare_once`), to be committed when it comes;
- `hot`: the steady state of a long-running scheduler: a first burst at H fires, the
  projections catch up, and the timed burst is the next one at H + 1 h, decided (by the turn
  at H + 1 h - 2 s, as in `warm`) on the copies the scheduler itself saved last.

Baseline, in the same run and database: the very rows the burst stored (every ScheduleFired
event: id, version, topic, state bytes) inserted again by a plain driver loop into a scratch
table shaped like the event table, 500 rows per transaction (psycopg `executemany` on
PostgreSQL, sqlite3 on SQLite). `ratio` = per_second / baseline_per_second.
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from datetime import timedelta
from typing import Any

from bench.common import (
    FIRED_TOPIC,
    BenchError,
    Throwaway,
    baseline_insert,
    count_topic,
    create_crons,
    emit,
    next_top_of_hour,
    percentile,
    progress,
    r,
    self_peak_rss_mb,
    stored_rows,
    throwaway_store,
    utcnow,
)
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.collector import pace_collector
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.settings import BATCH


def timed_ticks(engine: Engine, marks: list[tuple[float, int]], advance: Any = None) -> None:
    """Record (time the batch's commit returned, fires in it) for every batch of the loop."""
    svc = engine.service
    real_append = svc.append_batch

    def append(staged: Any, at: Any, decided_by: str | None = None) -> Any:
        report, finish = real_append(staged, at, decided_by)
        marks.append((time.perf_counter(), report.fires))
        if advance is not None:
            advance(report.fires)
        return report, finish

    svc.append_batch = append  # type: ignore[method-assign]


def run(
    t: Throwaway,
    n: int,
    schedule: str,
    mode: str,
    do_baseline: bool = True,
    profile: str | None = None,
) -> dict[str, Any]:
    pace_collector()  # as `cronsource run` does
    engine = bootstrap(t.config, create_tables=False)
    instant = next_top_of_hour(utcnow())
    created_at = instant - timedelta(minutes=30)
    with progress() as bar:
        task = bar.add_task("create CronWorkflows", total=n)
        create_crons(
            engine.service,
            n,
            schedule,
            created_at,
            advance=lambda k: bar.advance(task, k),
        )
        task = bar.add_task("project (due index)", total=None)
        engine.projector.catch_up(created_at)
        bar.update(task, total=1, completed=1)
        clock = VirtualClock(instant)
        loop = SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=clock)
        if mode == "hot":
            task = bar.add_task("first burst (not timed)", total=n)
            loop.schedule_once(instant)
            engine.projector.catch_up(instant)
            bar.update(task, completed=n)
            instant = instant + timedelta(hours=1)
        else:  # a scheduler that has loaded nothing yet, as after a start
            engine.close()
            engine = bootstrap(t.config, create_tables=False)
            loop = SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=clock)
            if mode == "warm":
                task = bar.add_task("turns 30 s before the instant (not timed)", total=None)
                clock.set(instant - timedelta(seconds=30))
                loop.turn()
                while loop.last_warmed:
                    loop.turn()
                bar.update(task, total=1, completed=1)
        if mode in ("warm", "hot"):
            # The loop's last turn before the instant, which decides it in advance.
            task = bar.add_task("turn 2 s before the instant (not timed)", total=None)
            clock.set(instant - timedelta(seconds=2))
            loop.turn()
            bar.update(task, total=1, completed=1)
        clock.set(instant)
        expected = count_topic(engine.service, FIRED_TOPIC)
        marks: list[tuple[float, int]] = []
        task = bar.add_task(f"burst ({mode})", total=n)
        timed_ticks(engine, marks, lambda k: bar.advance(task, k))
        profiler = cProfile.Profile() if profile else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        fires = loop.schedule_once(instant)
        seconds = time.perf_counter() - start
        if profiler is not None and profile is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        per_fire_ms: list[float] = []
        for at, k in marks:
            per_fire_ms += [(at - start) * 1000] * k
        counts = count_topic(engine.service, FIRED_TOPIC)
        new = {cid: c - expected.get(cid, 0) for cid, c in counts.items()}
        duplicates = sum(c - 1 for c in new.values() if c > 1)
        misses = n - sum(1 for c in new.values() if c >= 1)
        baseline_s = None
        rows = stored_rows(t, engine.service, FIRED_TOPIC)
        event_bytes = sum(len(row[3]) for row in rows) / len(rows) if rows else 0
        if do_baseline:
            task = bar.add_task("baseline (plain inserts)", total=None)
            sample = rows[-n:]
            baseline_s = baseline_insert(t, sample)
            bar.update(task, total=1, completed=1)
    engine.close()
    per_second = fires / seconds if seconds else float("nan")
    baseline_per_second = (n / baseline_s) if baseline_s else None
    return {
        "name": "burst",
        "n": n,
        "store": t.kind,
        "mode": mode,
        "fires": fires,
        "seconds": r(seconds, 3),
        "per_second": r(per_second),
        "baseline_seconds": r(baseline_s, 3),
        "baseline_per_second": r(baseline_per_second),
        "ratio": r(per_second / baseline_per_second, 3) if baseline_per_second else None,
        "p50_ms": r(percentile(per_fire_ms, 0.5)),
        "p99_ms": r(percentile(per_fire_ms, 0.99)),
        "batches": len(marks),
        "batch_size": BATCH,
        "event_bytes": r(event_bytes),
        "duplicates": duplicates,
        "misses": misses,
        "rejected_writes": engine.rejected_writes,
        "peak_rss_mb": r(self_peak_rss_mb()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__.split("\n\n")[0])
    ap.add_argument("--crons", type=int, default=10_000, help="N CronWorkflows (default 10000)")
    ap.add_argument("--store", default=None, help="sqlite:///NEW.db or postgresql://server/db")
    ap.add_argument("--schedule", default="0 * * * *", help="the one schedule (hourly)")
    ap.add_argument("--mode", choices=["cold", "warm", "hot"], default="cold")
    ap.add_argument("--no-baseline", action="store_true", help="skip the plain-insert baseline")
    ap.add_argument("--keep", action="store_true", help="keep the store (and print where)")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the timed part into FILE")
    a = ap.parse_args(argv)
    if a.crons < 1:
        ap.error("--crons must be at least 1")
    try:
        with throwaway_store(a.store, "burst", keep=a.keep) as t:
            result = run(t, a.crons, a.schedule, a.mode, not a.no_baseline, a.profile)
    except BenchError as e:
        print(f"bench.burst: {e}", file=sys.stderr)
        return 2
    emit(result)
    return 0 if result["misses"] == 0 and result["duplicates"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
