"""Projection throughput and lag: `python -m bench.project --events N --store URL`.

Set-up, not timed: a throwaway store (bench/common.py); N/4 CronWorkflows (`* * * * *`,
virtual times a year ahead) created, then ticked minute after minute (batches of 500) until
the log holds N events (Created and ScheduleFired, the mix of a scheduler at work).

Throughput (`seconds`, `per_second`): a fresh engine, built as `cronsource run` builds it
(`bootstrap` with the local target in a temporary directory), projects the N events as
`cronsource run` does: `Engine.catch_up` (status + audit + due index) on this thread and, on a
thread of its own beside it (runtime.DispatchWorker), the dispatcher writing one Workflow
manifest per ScheduleFired. Its follower caches start empty, as after a restart.
`readmodel_seconds` and `dispatch_seconds` are when each finished, after the start.
`--dispatcher process` runs the dispatcher in a process of its own instead (built and
connected before the start, started by a line on its stdin, done when it says so), to
measure what the thread costs the projections it shares the GIL with.

Files baseline (`files_baseline_seconds`, `files_baseline_us` a file): as many files as the
dispatcher wrote, of their mean size, created by a plain loop beside them in the same run
(`files_baseline`), right after the throughput. Creating a file costs 10-500 us on the disks
this runs on, varying with the directory and the disk's other work, from one minute to the
next; the dispatcher is bound by it on a slow disk, so the throughput is read beside it (a
sign of the disk's state in that run, not a bound: it is taken a few seconds later).

Baseline (`baseline_seconds`, `baseline_per_second`, `ratio_baseline` = per_second /
baseline_per_second; `ratio_readmodel` likewise for the read model alone): the rows the
projection left in its tables (every audit row, the final status row of each CronWorkflow,
which is also the due index, and the tracking position) are read back, already encoded, and
written again by a plain driver loop (on PostgreSQL psycopg's COPY for the audit rows and
`executemany` for the status upserts; sqlite3's `executemany` on SQLite)
into empty tables of the same schema and indexes (`readside.schema.create_tables` in a scratch
schema of the same database, or a scratch SQLite file beside the store): in log order,
`BASELINE_BATCH` events per transaction, each with its audit rows, the status upserts of the
CronWorkflows whose last event it holds, and the position. No event is read or decoded and
no JSON is encoded: it is what storing the projection's result costs on this database, in the
same run, so the ratio holds across machines.

Lag (`p50_ms`, `p99_ms`): with the projections caught up, a projector runs in a separate
process and this process appends more events in timed waves (`--rate` events/s, a wave every
`--wave-ms`; each wave one `CronService.commit_batch` transaction). A wave's commit time is taken
when its append returns (its notification ids come back with it); a thread here polls the two
tracking positions every 5 ms, and an event counts as projected at the first poll that sees
both the read model and the dispatcher past it. Lag = projected - committed, per event; the
poll adds at most 5 ms, taking the commit time at the append's return removes at most the return
trip. The projector is, by default (`--projector loop`), the projection part of `cronsource
run`: `SchedulerLoop(role="projector")` woken by the same `Waker` (LISTEN/NOTIFY on
PostgreSQL; on SQLite the loop polls every 0.5 s, which bounds the lag from below) but without
the run watcher, whose file scan of every active run is not a projection cost. `--projector
cli` runs `cronsource run --role projector` itself (watcher included) instead.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from bench.common import (
    BASELINE_BATCH,
    BenchError,
    Throwaway,
    create_crons,
    emit,
    percentile,
    pg_connect,
    progress,
    r,
    rss_mb,
    self_peak_rss_mb,
    throwaway_store,
    utcnow,
)
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.infrastructure.readside import schema, writer
from cronsource.adapters.infrastructure.readside.database import (
    PostgresDatabase,
    SqliteDatabase,
)
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.collector import pace_collector
from cronsource.adapters.runtime.decision_cache import DecisionCache
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.settings import BATCH
from cronsource.adapters.runtime.waker import Waker

#: The local target's run duration: long, so no run ends (and writes events) during the bench.
RUN_DURATION = timedelta(days=1)
POLL_SECONDS = 0.005
SETTLE_SECONDS = 1.0


class Positions:
    """Reads the two projection positions from a connection of its own."""

    def __init__(self, config: StoreConfig, app_name: str) -> None:
        self.view = config.read_model()
        self.app = app_name

    def both(self) -> tuple[int, int]:
        rm = self.view.max_tracking_id(self.app, "readmodel") or 0
        dp = self.view.max_tracking_id(self.app, "dispatch") or 0
        return rm, dp

    def close(self) -> None:
        self.view.close()


class Writer:
    """Ticks CronWorkflows minute after minute on a virtual clock, remembering its versions
    (as the scheduler does), and reports each committed batch's notification ids."""

    def __init__(self, engine: Engine, ids: list[UUID], start: datetime) -> None:
        self.engine = engine
        self.ids = ids
        self.start = start
        self.cursor = 0  # how many (cron, minute) ticks were made
        self.versions: dict[UUID, int] = {}
        self.cache = DecisionCache(
            engine.service.load_many, engine.service.fast_forward
        )  # as the scheduler keeps them
        self.commits: list[tuple[float, list[int]]] = []
        svc = engine.service
        real_save, real_append = svc.save, svc.append_batch

        def save(*objs: Any, **kw: Any) -> Any:
            recordings = real_save(*objs, **kw)
            self.commits.append((time.perf_counter(), [rec.notification.id for rec in recordings]))
            return recordings

        def append(staged: Any, at: Any, decided_by: str | None = None) -> Any:
            appended = real_append(staged, at, decided_by)  # a batch's save (`commit_batch`)
            self.commits.append((time.perf_counter(), list(staged.ids or ())))
            return appended

        svc.save = save  # type: ignore[method-assign]
        svc.append_batch = append  # type: ignore[method-assign]

    def tick(self, events: int) -> int:
        """Append `events` ScheduleFired (one per CronWorkflow tick), one transaction per
        minute of virtual time covered; returns how many were committed."""
        done = 0
        while done < events:
            minute, offset = divmod(self.cursor, len(self.ids))
            k = min(events - done, len(self.ids) - offset)
            chunk = self.ids[offset : offset + k]
            at = self.start + timedelta(minutes=minute + 1)
            svc = self.engine.service
            aggs = svc.decide_batch(chunk, at, self.cache.take(self.versions, chunk))
            report = svc.commit_batch(aggs, at)
            if not report.rejected:
                self.cache.keep(aggs)
            self.versions.update(report.versions)
            self.cursor += k
            done += report.fires
            if report.fires < k:
                raise BenchError(f"expected {k} fires at {at}, got {report.fires}")
        return done


def setup(t: Throwaway, n: int, bar: Any) -> tuple[Engine, Writer, int]:
    """The N events of the log, and the writer that made them (for the lag waves)."""
    engine = bootstrap(t.config, create_tables=False)
    crons = max(1, n // 4)
    start = (utcnow() + timedelta(days=365)).replace(second=0, microsecond=0)
    task = bar.add_task("create CronWorkflows", total=crons)
    ids = create_crons(
        engine.service,
        crons,
        "* * * * *",
        start,
        prefix="proj",
        advance=lambda k: bar.advance(task, k),
    )
    writer = Writer(engine, ids, start)
    task = bar.add_task("append fires", total=n - crons)
    left = n - crons
    while left > 0:
        k = writer.tick(min(BATCH, left))
        left -= k
        bar.advance(task, k)
    head = engine.service.recorder.max_notification_id() or 0
    return engine, writer, head


def start_dispatcher(t: Throwaway, wfdir: Path) -> subprocess.Popen[str]:
    """The dispatcher in a process of its own (`--dispatcher process`), built and ready but
    waiting for a line on its stdin to start; it prints `dispatched` when caught up."""
    cmd = [sys.executable, "-m", "bench.project", "--serve-dispatcher", t.config.url, str(wfdir)]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise BenchError(f"the dispatcher exited before it was ready (exit {proc.wait()})")
    return proc


def serve_dispatcher(url: str, wfdir: str) -> int:
    """The dispatcher alone, as a process of its own would run it: built as `cronsource run`
    builds it, started by a line on stdin, `dispatched` on stdout when caught up."""
    engine = bootstrap(
        StoreConfig.parse(url), target=LocalTarget(wfdir, RUN_DURATION), create_tables=False
    )
    pace_collector()
    print("ready", flush=True)
    if not sys.stdin.readline():  # the benchmark ended without starting it: nothing to do
        engine.close()
        return 1
    engine.projector.dispatch(utcnow())
    print("dispatched", flush=True)
    engine.close()
    return 0


def throughput(
    t: Throwaway,
    head: int,
    wfdir: Path,
    bar: Any,
    profile: str | None = None,
    dispatcher_kind: str = "thread",
) -> dict[str, Any]:
    engine = bootstrap(t.config, target=LocalTarget(wfdir, RUN_DURATION), create_tables=False)
    pace_collector()  # as `cronsource run` does
    positions = Positions(t.config, engine.service.name)
    task = bar.add_task("project (status+audit, dispatch)", total=2 * head)
    split: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            rm, dp = positions.both()
            bar.update(task, completed=rm + dp)

    poller = threading.Thread(target=watch, daemon=True)
    profiler = cProfile.Profile() if profile else None
    if dispatcher_kind == "process":
        proc = start_dispatcher(t, wfdir)

        def dispatch() -> None:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            if proc.stdout.readline().strip() != "dispatched":
                split["failed"] = time.perf_counter()
            split["dispatch"] = time.perf_counter()
            proc.wait()

        dispatcher = threading.Thread(target=dispatch, daemon=True)
    else:
        # As `cronsource run` projects: the dispatcher on a thread of its own
        # (DispatchWorker) beside the read model's projection.
        dispatcher = threading.Thread(
            target=engine.projector.dispatch, args=(utcnow(),), daemon=True
        )
    start = time.perf_counter()
    poller.start()
    if profiler is not None:
        profiler.enable()
    dispatcher.start()
    done = engine.projector.catch_up(utcnow(), dispatch=False)
    split["readmodel"] = time.perf_counter()
    dispatcher.join()
    split.setdefault("dispatch", time.perf_counter())
    if "failed" in split:
        raise BenchError("the dispatcher process stopped before it caught up")
    seconds = max(split["dispatch"], split["readmodel"]) - start
    if profiler is not None and profile is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    stop.set()
    poller.join()
    rm, dp = positions.both()
    bar.update(task, completed=rm + dp)
    positions.close()
    engine.close()
    if rm < head or dp < head or done < head:
        raise BenchError(f"catch_up stopped short: readmodel {rm}, dispatch {dp} of {head}")
    rm_s = split.get("readmodel", start + seconds) - start
    return {
        "seconds": seconds,
        "workflows": sum(1 for _ in wfdir.rglob("*.json")),
        "readmodel_seconds": rm_s,
        "dispatch_seconds": split["dispatch"] - start,
    }


_STATUS, _AUDIT = writer.STATUS_COLUMNS, writer.AUDIT_COLUMNS
_TRACK = (
    "INSERT INTO cronsource_tracking (projection, application_name, notification_id)"
    " VALUES ('readmodel', ?, ?) ON CONFLICT (projection, application_name)"
    " DO UPDATE SET notification_id = excluded.notification_id"
)


def baseline_batches(
    status: list[tuple[Any, ...]], audit: list[tuple[Any, ...]], batch: int = BASELINE_BATCH
) -> list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]]:
    """The baseline's transactions: (status rows, audit rows, position) per `batch` audit
    rows in log order, each CronWorkflow's final status row in the batch of its last event,
    so every final row is written exactly once."""
    audit = sorted(audit, key=lambda a: a[0])
    last = {a[1]: k // batch for k, a in enumerate(audit)}
    by_batch: dict[int, list[tuple[Any, ...]]] = {}
    for st in status:
        by_batch.setdefault(last.get(st[0], 0), []).append(st)
    return [
        (by_batch.get(i // batch, []), audit[i : i + batch], int(audit[i : i + batch][-1][0]))
        for i in range(0, len(audit), batch)
    ]


def files_baseline(wfdir: Path) -> tuple[int, float]:
    """What the file system charges for the dispatcher's files, in the same run: as many
    files as it wrote, of their mean size, created by a plain loop (`os.open` with O_CREAT |
    O_EXCL, `write`, `close`, one `os.sync()`) in a new directory beside them. Returns the
    count and the seconds. Creating a file costs 10-500 us on the disks this runs on, and
    the cost moves with the directory and the disk's other work, so the throughput figure
    is read beside this one."""
    sizes = [p.stat().st_size for p in wfdir.rglob("*.json")]
    if not sizes:
        return 0, 0.0
    data = b"x" * (sum(sizes) // len(sizes))
    where = wfdir.parent / "files-baseline"
    where.mkdir()
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    start = time.perf_counter()
    for k in range(len(sizes)):
        fd = os.open(where / f"{k}.json", flags, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    os.sync()
    return len(sizes), time.perf_counter() - start


def baseline(t: Throwaway, app_name: str) -> float:
    """Seconds the plain driver loop takes to write the projection's rows (module docstring)."""
    view = t.config.read_model()
    try:
        status = [tuple(row) for row in view.db.fetch(f"SELECT {_STATUS} FROM cronsource_status")]
        audit = [tuple(row) for row in view.db.fetch(f"SELECT {_AUDIT} FROM cronsource_audit")]
    finally:
        view.close()
    batches = baseline_batches(status, audit)
    if t.kind == "postgresql":
        return _baseline_pg(t, app_name, batches)
    return _baseline_sqlite(t, app_name, batches)


def _baseline_pg(
    t: Throwaway, app_name: str, batches: list[tuple[list[Any], list[Any], int]]
) -> float:
    from psycopg import sql

    scratch = f"bench_baseline_{uuid4().hex[:8]}"
    with pg_connect(t) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(scratch)))
        try:
            url = t.pg_url
            db = PostgresDatabase(url, scratch)
            try:
                schema.create_tables(db)
            finally:
                db.close()
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(scratch)))
            conn.autocommit = False
            upsert, track = (q.replace("?", "%s") for q in (writer.UPSERT_STATUS, _TRACK))
            copy_audit = f"COPY cronsource_audit ({_AUDIT}) FROM STDIN"
            t0 = time.perf_counter()
            for status, audit, position in batches:
                with conn.transaction(), conn.cursor() as cur:
                    with cur.copy(copy_audit) as copy:
                        for row in audit:
                            copy.write_row(row)
                    if status:
                        cur.executemany(upsert, status)
                    cur.execute(track, (app_name, position))
            seconds = time.perf_counter() - t0
            conn.autocommit = True
        finally:
            conn.autocommit = True
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(scratch)))
    return seconds


def _baseline_sqlite(
    t: Throwaway, app_name: str, batches: list[tuple[list[Any], list[Any], int]]
) -> float:
    path = t.workdir / "baseline.db"
    db = SqliteDatabase(str(path))
    try:
        schema.create_tables(db)
        conn = db.separate_connection()
    finally:
        db.close()
    try:
        t0 = time.perf_counter()
        for status, audit, position in batches:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(writer.INSERT_AUDIT, audit)
            conn.executemany(writer.UPSERT_STATUS, status)
            conn.execute(_TRACK, (app_name, position))
            conn.execute("COMMIT")
        return time.perf_counter() - t0
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)


def start_projector(t: Throwaway, wfdir: Path, kind: str) -> subprocess.Popen[str]:
    if kind == "cli":
        exe = Path(sys.executable).parent / "cronsource"
        cmd = [
            str(exe),
            "--store",
            t.config.url,
            "run",
            "--role",
            "projector",
            "--workflows-dir",
            str(wfdir),
            "--local-run-duration",
            f"{int(RUN_DURATION.total_seconds())}s",
        ]
        ready = "cronsource running"
    else:
        cmd = [sys.executable, "-m", "bench.project", "--serve-projector", t.config.url, str(wfdir)]
        ready = "projector ready"
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        if ready in line:
            break
        if time.monotonic() > deadline:
            break
    else:
        raise BenchError(f"projector exited before it was ready (exit {proc.wait()})")
    # Keep draining its stderr so it never blocks on a full pipe.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    # Its LISTEN connection is opened by a thread of its own: give it time to be listening,
    # so that the first waves do not measure its start-up.
    time.sleep(SETTLE_SECONDS)
    return proc


def serve_projector(url: str, wfdir: str) -> int:
    """The projection part of `cronsource run`, in a process of its own (see the docstring)."""
    from cronsource.adapters.infrastructure.shards import AdvisoryLockShards, Ownership, SoleOwner

    config = StoreConfig.parse(url)
    engine = bootstrap(config, target=LocalTarget(wfdir, RUN_DURATION), create_tables=False)
    ownership: Ownership = (
        AdvisoryLockShards(config.pg_conninfo, want_projector=True, schema=config.pg_schema)
        if config.kind == "postgresql"
        else SoleOwner()
    )
    loop = SchedulerLoop(engine, ownership, role="projector", watcher=None)
    pace_collector()  # as `cronsource run` does
    waker = Waker(engine)
    loop.install_signal_handlers(waker)
    loop.turn()
    print("projector ready", file=sys.stderr, flush=True)
    try:
        loop.run(waker)
    finally:
        waker.stop()
        engine.close()
    return 0


def lag(
    t: Throwaway,
    writer: Writer,
    wfdir: Path,
    events: int,
    rate: float,
    wave_ms: float,
    projector: str,
    bar: Any,
) -> dict[str, Any]:
    proc = start_projector(t, wfdir, projector)
    positions = Positions(t.config, writer.engine.service.name)
    seen: list[tuple[float, int]] = []  # (time, min position) whenever it moved
    stop = threading.Event()

    def poll() -> None:
        last = -1
        while not stop.is_set():
            rm, dp = positions.both()
            pos = min(rm, dp)
            if pos != last:
                seen.append((time.perf_counter(), pos))
                last = pos
            time.sleep(POLL_SECONDS)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    writer.commits.clear()
    per_wave = max(1, round(rate * wave_ms / 1000))
    task = bar.add_task(f"lag: {rate:g} events/s in waves of {per_wave}", total=events)
    begin = time.perf_counter()
    sent = 0
    wave = 0
    try:
        while sent < events:
            due = begin + wave * wave_ms / 1000
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            k = writer.tick(min(per_wave, events - sent))
            sent += k
            wave += 1
            bar.advance(task, k)
        appended_s = time.perf_counter() - begin
        last_id = max(max(ids) for _, ids in writer.commits if ids)
        deadline = time.monotonic() + 120
        while (not seen or seen[-1][1] < last_id) and time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"projector exited (code {proc.returncode})")
            time.sleep(0.05)
    finally:
        stop.set()
        poller.join()
        projector_rss = rss_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        positions.close()
    lags = _lags(writer.commits, seen)
    unprojected = sum(len(ids) for _, ids in writer.commits) - len(lags)
    return {
        "lag_events": sent,
        "offered_per_second": rate,
        "appended_per_second": sent / appended_s if appended_s else None,
        "lags_ms": lags,
        "unprojected": unprojected,
        "projector_rss_mb": projector_rss,
        "projector_exit": proc.returncode,
    }


def _lags(commits: list[tuple[float, list[int]]], seen: list[tuple[float, int]]) -> list[float]:
    """Per event: first time the position reached its id, minus its commit time (ms)."""
    out: list[float] = []
    j = 0
    for committed, ids in sorted(commits, key=lambda c: max(c[1]) if c[1] else 0):
        for nid in sorted(ids):
            while j < len(seen) and seen[j][1] < nid:
                j += 1
            if j == len(seen):
                return out
            out.append(max(0.0, seen[j][0] - committed) * 1000)
    return out


def run(
    t: Throwaway,
    n: int,
    lag_events: int,
    rate: float,
    wave_ms: float,
    projector: str,
    profile: str | None = None,
    progress_factory: Callable[[], Any] = progress,
    dispatcher: str = "thread",
) -> dict[str, Any]:
    wfdir = t.workdir / "workflows"
    with progress_factory() as bar:
        engine, writer, head = setup(t, n, bar)
        tp = throughput(t, head, wfdir, bar, profile, dispatcher)
        task = bar.add_task("baseline (plain batch upserts of the same rows)", total=None)
        baseline_s = baseline(t, engine.service.name)
        files, files_s = files_baseline(wfdir)
        bar.update(task, total=1, completed=1)
        lg = (
            lag(t, writer, wfdir, lag_events, rate, wave_ms, projector, bar)
            if lag_events > 0
            else None
        )
    engine.close()
    result: dict[str, Any] = {
        "name": "project",
        "n": head,
        "store": t.kind,
        "seconds": r(tp["seconds"], 3),
        "per_second": r(head / tp["seconds"]),
        "readmodel_seconds": r(tp["readmodel_seconds"], 3),
        "dispatch_seconds": r(tp["dispatch_seconds"], 3),
        "dispatcher": dispatcher,
        "workflows_created": tp["workflows"],
        "baseline_seconds": r(baseline_s, 3),
        "baseline_per_second": r(head / baseline_s),
        "ratio_baseline": r(baseline_s / tp["seconds"], 3),
        "ratio_readmodel": r(baseline_s / tp["readmodel_seconds"], 3),
        "files_baseline_seconds": r(files_s, 3),
        "files_baseline_us": r(files_s / files * 1e6, 1) if files else None,
        "peak_rss_mb": r(self_peak_rss_mb()),
    }
    if lg is not None:
        lags = lg.pop("lags_ms")
        result.update(
            {
                "p50_ms": r(percentile(lags, 0.5)),
                "p99_ms": r(percentile(lags, 0.99)),
                "max_lag_ms": r(max(lags)) if lags else None,
                "projector": projector,
                "lag_events": lg["lag_events"],
                "offered_per_second": lg["offered_per_second"],
                "appended_per_second": r(lg["appended_per_second"]),
                "unprojected": lg["unprojected"],
                "projector_rss_mb": r(lg["projector_rss_mb"]),
                "projector_exit": lg["projector_exit"],
            }
        )
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.project", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--events", type=int, default=10_000, help="N events in the log")
    ap.add_argument("--store", default=None, help="sqlite:///NEW.db or postgresql://server/db")
    ap.add_argument(
        "--lag-events", type=int, default=None, help="events appended for the lag (default N)"
    )
    ap.add_argument("--rate", type=float, default=1000, help="offered load, events/s (lag)")
    ap.add_argument("--wave-ms", type=float, default=100, help="one wave every this many ms")
    ap.add_argument("--projector", choices=["loop", "cli"], default="loop")
    ap.add_argument("--keep", action="store_true", help="keep the store (and print where)")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the catch-up into FILE")
    ap.add_argument(
        "--dispatcher",
        choices=["thread", "process"],
        default="thread",
        help="throughput: the dispatcher on a thread beside the read model, as `cronsource"
        " run` has it, or in a process of its own",
    )
    ap.add_argument("--serve-projector", nargs=2, metavar=("URL", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--serve-dispatcher", nargs=2, metavar=("URL", "DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve_projector:
        return serve_projector(*a.serve_projector)
    if a.serve_dispatcher:
        return serve_dispatcher(*a.serve_dispatcher)
    if a.events < 4:
        ap.error("--events must be at least 4")
    lag_events = a.events if a.lag_events is None else a.lag_events
    try:
        with throwaway_store(a.store, "project", keep=a.keep) as t:
            result = run(
                t,
                a.events,
                lag_events,
                a.rate,
                a.wave_ms,
                a.projector,
                a.profile,
                dispatcher=a.dispatcher,
            )
    except BenchError as e:
        print(f"bench.project: {e}", file=sys.stderr)
        return 2
    emit(result)
    ok = result.get("unprojected", 0) == 0 and result.get("projector_exit", 0) == 0
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
