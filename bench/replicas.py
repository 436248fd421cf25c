"""A burst on K replicas sharing one PostgreSQL: `python -m bench.replicas --crons N
--replicas 1,2,3 [--mode warm|cold] [--store URL]`.

Does a burst get faster with more `cronsource run` replicas, or do they serialise on the event
store? eventsourcing's PostgreSQL recorder takes `LOCK TABLE ... IN EXCLUSIVE MODE` on the
events table in every transaction that inserts (so that notification ids commit in order and a
reader never passes a gap that fills later): two replicas' commits cannot overlap.

For each K, as bench/burst.py does for one: a throwaway database with N CronWorkflows
(`0 * * * *`) created as of H - 30 min and projected (set-up, not timed). Then K processes,
each the scheduler of `cronsource run --role scheduler` (adapters/runtime/loop.py `SchedulerLoop`
with `AdvisoryLockShards`, on a virtual clock), rebalance until the K of them hold all 64
shards. `warm` (default): each runs its turns before H as `cronsource run` does (loads at
H - 30 s, decides in advance at H - 2 s); `cold`: none. All K start `schedule_once(H)` at one
barrier; `seconds` runs from the barrier to the last replica's last commit, `per_second` =
fires / seconds. While they run, this process samples `pg_stat_activity` every 2 ms:
`lock_wait_share` is the share of samples in which at least one replica waited for the
events table's lock. `commit_busy` is the sum of every replica's time inside commits (waiting
for the lock included) over `seconds`: above 1, the replicas' commits waited for each other.

Beside it, `--log-baseline` measures what partitioning the log would buy on the same server:
K writer threads insert N event-sized rows (307 bytes, 500 per transaction, `unnest` arrays as
our recorder sends them), each transaction taking `LOCK TABLE ... IN EXCLUSIVE MODE` as
eventsourcing's does, (a) all into one table, (b) each into a table of its own (a log per
shard, each with its own sequence).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from bench.common import (
    FIRED_TOPIC,
    BenchError,
    count_topic,
    create_crons,
    emit,
    next_top_of_hour,
    pg_connect,
    progress,
    r,
    throwaway_store,
    utcnow,
)

SHARDS = 64  # adapters/infrastructure/shards.py SHARDS

SHARDS_SETTLE_TIMEOUT = 60.0


def worker(
    url: str,
    instant: datetime,
    mode: str,
    index: int,
    owned: Any,
    settled: Any,
    go: Any,
    out: Any,
) -> None:
    """One replica's scheduler: rebalance, warm (if asked), wait at the barrier, burst."""
    from cronsource.adapters.bootstrap import bootstrap
    from cronsource.adapters.clock import VirtualClock
    from cronsource.adapters.infrastructure.shards import AdvisoryLockShards
    from cronsource.adapters.infrastructure.store.config import StoreConfig
    from cronsource.adapters.runtime.collector import pace_collector
    from cronsource.adapters.runtime.loop import SchedulerLoop

    pace_collector()  # each replica a process, as `cronsource run` sets it up
    config = StoreConfig.parse(url)
    engine = bootstrap(config, create_tables=False)
    shards = AdvisoryLockShards(config.pg_conninfo, want_projector=False, schema=config.pg_schema)
    clock = VirtualClock(instant - timedelta(seconds=30))
    loop = SchedulerLoop(engine, shards, role="scheduler", clock=clock)
    while not settled.is_set():  # until the parent sees the K replicas hold all shards
        shards.rebalance()
        owned[index] = len(shards.owned)
        time.sleep(0.1)
    go.wait()
    if mode == "warm":
        loop.turn()
        while loop.last_warmed:
            loop.turn()
        clock.set(instant - timedelta(seconds=2))
        loop.turn()
    clock.set(instant)
    svc = engine.service
    real_append = svc.append_batch
    busy = [0.0]

    def append(staged: Any, at: Any, decided_by: str | None = None) -> Any:
        t0 = time.perf_counter()
        try:
            return real_append(staged, at, decided_by)
        finally:
            busy[0] += time.perf_counter() - t0

    svc.append_batch = append  # type: ignore[method-assign]
    go.wait()  # all replicas warm: the burst starts now
    start = time.time()
    fires = loop.schedule_once(instant)
    end = time.time()
    out.put({"start": start, "end": end, "fires": fires, "busy": busy[0]})
    shards.release()
    engine.close()


def lock_sampler(t: Any, stop: threading.Event, samples: list[int]) -> None:
    """1 per sample where some backend of this database waits for a relation lock."""
    with pg_connect(t) as conn:
        while not stop.is_set():
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND wait_event = 'relation'"
            ).fetchone()
            samples.append(1 if row and row[0] else 0)
            time.sleep(0.002)


def one(store: str, n: int, replicas: int, mode: str, bar: Any) -> dict[str, Any]:
    from cronsource.adapters.bootstrap import bootstrap

    with throwaway_store(store, "replicas") as t:
        if t.kind != "postgresql":
            raise BenchError("--store: replicas share a PostgreSQL server (postgresql://...)")
        engine = bootstrap(t.config, create_tables=False)
        instant = next_top_of_hour(utcnow())
        task = bar.add_task(f"K={replicas}: create CronWorkflows", total=n)
        create_crons(
            engine.service,
            n,
            "0 * * * *",
            instant - timedelta(minutes=30),
            advance=lambda k: bar.advance(task, k),
        )
        engine.projector.catch_up(instant - timedelta(minutes=30))
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        owned, settled = ctx.Array("i", replicas), ctx.Event()
        go = ctx.Barrier(replicas + 1)
        procs = [
            ctx.Process(target=worker, args=(t.url, instant, mode, i, owned, settled, go, out))
            for i in range(replicas)
        ]
        for p in procs:
            p.start()
        try:
            task = bar.add_task(f"K={replicas}: replicas take the shards", total=SHARDS)
            deadline = time.monotonic() + SHARDS_SETTLE_TIMEOUT
            # All held and shared out evenly: a replica that has just joined may hold a few
            # while another still sheds the rest ([2, 62] is not a settled split).
            while not (sum(owned[:]) == SHARDS and max(owned[:]) - min(owned[:]) <= 1):
                bar.update(task, completed=sum(owned[:]))
                if time.monotonic() > deadline or not all(p.is_alive() for p in procs):
                    raise BenchError(f"K={replicas}: the replicas hold {owned[:]} shards")
                time.sleep(0.1)
            settled.set()
            bar.update(task, completed=SHARDS)
            go.wait(timeout=60)  # rebalanced: warm up
            task = bar.add_task(f"K={replicas}: burst ({mode})", total=None)
            go.wait(timeout=300)  # warm: burst
            stop, samples = threading.Event(), list[int]()
            sampler = threading.Thread(target=lock_sampler, args=(t, stop, samples))
            sampler.start()
            got = [out.get(timeout=600) for _ in procs]
            stop.set()
            sampler.join()
            bar.update(task, total=1, completed=1)
        finally:
            for p in procs:
                p.join(30)
                if p.is_alive():
                    p.kill()
        counts = count_topic(engine.service, FIRED_TOPIC)
        engine.close()
    start, end = min(g["start"] for g in got), max(g["end"] for g in got)
    fires = sum(g["fires"] for g in got)
    seconds = end - start
    return {
        "replicas": replicas,
        "shards": list(owned[:]),
        "fires": fires,
        "seconds": r(seconds, 3),
        "per_second": r(fires / seconds if seconds else float("nan")),
        "each_seconds": [r(g["end"] - g["start"], 3) for g in got],
        "each_fires": [g["fires"] for g in got],
        "commit_busy": r(sum(g["busy"] for g in got) / seconds if seconds else None, 2),
        "lock_wait_share": r(sum(samples) / len(samples) if samples else None, 2),
        "duplicates": sum(c - 1 for c in counts.values() if c > 1),
        "misses": n - len(counts),
    }


def log_baseline(store: str, n: int, writers: int) -> dict[str, Any]:
    """Rows/s of K locking writers into one table and into K tables (see module doc)."""
    import os
    import uuid

    rows = [(uuid.uuid4(), 1, "cronsource:ScheduleFired/v1", os.urandom(307)) for _ in range(n)]
    out: dict[str, Any] = {"writers": writers}
    with throwaway_store(store, "logbase", migrate_schema=False) as t:
        for layout in ("one_table", "table_per_writer"):
            tables = [f"log_{layout}_{k}" for k in range(writers if layout != "one_table" else 1)]
            with pg_connect(t) as conn:
                for name in tables:
                    conn.execute(
                        f"CREATE TABLE {name} (originator_id uuid NOT NULL, originator_version"
                        " bigint NOT NULL, topic text, state bytea, notification_id bigserial,"
                        " PRIMARY KEY (originator_id, originator_version))"
                    )
                    conn.execute(f"CREATE UNIQUE INDEX ON {name} (notification_id)")
            share = [rows[k::writers] for k in range(writers)]

            def write(k: int, tables: list[str] = tables, share: list[Any] = share) -> None:
                table = tables[k % len(tables)]
                with pg_connect(t) as conn:
                    conn.autocommit = False
                    mine = share[k]
                    for i in range(0, len(mine), 500):
                        part = mine[i : i + 500]
                        with conn.transaction():
                            conn.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
                            conn.execute(
                                f"INSERT INTO {table} (originator_id, originator_version,"
                                " topic, state) SELECT * FROM unnest(%s::uuid[], %s::bigint[],"
                                " %s::text[], %s::bytea[])",
                                (
                                    [x[0] for x in part],
                                    [x[1] for x in part],
                                    [x[2] for x in part],
                                    [x[3] for x in part],
                                ),
                            )

            threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
            t0 = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            out[f"{layout}_per_second"] = r(n / (time.perf_counter() - t0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.replicas", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--crons", type=int, default=10_000, help="N CronWorkflows (default 10000)")
    ap.add_argument("--replicas", default="1,2,3", help="K values, comma-separated (1,2,3)")
    ap.add_argument("--mode", choices=["warm", "cold"], default="warm")
    ap.add_argument("--repeat", type=int, default=1, help="runs per K; medians")
    ap.add_argument("--store", required=True, help="postgresql://server/db")
    ap.add_argument(
        "--log-baseline", action="store_true", help="also: locking writers, one log or K logs"
    )
    a = ap.parse_args(argv)
    try:
        ks = [int(k) for k in a.replicas.split(",")]
    except ValueError:
        ap.error(f"--replicas: not a list of numbers: {a.replicas!r}")
    if a.crons < 1 or min(ks) < 1 or a.repeat < 1:
        ap.error("--crons, --replicas and --repeat must be at least 1")
    rows = []
    try:
        with progress() as bar:
            for k in ks:
                each = [one(a.store, a.crons, k, a.mode, bar) for _ in range(a.repeat)]
                med = {
                    key: statistics.median(x[key] for x in each)
                    for key in ("seconds", "per_second", "commit_busy", "lock_wait_share")
                    if all(x[key] is not None for x in each)
                }
                rows.append(
                    each[0]
                    | med
                    | {
                        "duplicates": sum(x["duplicates"] for x in each),
                        "misses": sum(x["misses"] for x in each),
                        "each_run": each,
                    }
                )
    except BenchError as e:
        print(f"bench.replicas: {e}", file=sys.stderr)
        return 2
    one_k = next((x for x in rows if x["replicas"] == 1), rows[0])
    baselines = [log_baseline(a.store, a.crons, k) for k in ks] if a.log_baseline else []
    emit(
        {
            "name": "replicas",
            "n": a.crons,
            "mode": a.mode,
            "store": "postgresql",
            "per_second": one_k["per_second"],
            "by_replicas": rows,
            "speedup": {
                str(x["replicas"]): r(x["per_second"] / one_k["per_second"], 2) for x in rows
            },
            "duplicates": sum(x["duplicates"] for x in rows),
            "misses": sum(x["misses"] for x in rows),
            "log_baseline": baselines,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
