"""Cost against age: `python -m bench.history [--store URL] [--quick]`.

Issue 20 asks that no cost grow with the age of the log. This benchmark measures four costs
against age, each as a ratio taken within one run (so a busy machine moves both sides alike):

1. **Commands on a long stream.** One CronWorkflow (`@every 1s`) whose stream holds 10, 10,000,
   100,000 or 1,000,000 events, each size in a store of its own. Timed: `suspend`, `get`,
   `why --at T` (a tick a few seconds before the stream's end) and `history --since T` (its
   last ~20 events; the CLI has no `--limit`, and `--since` is how a user asks for the recent
   ones), each as a user runs it (a subprocess of this venv's `cronsource`) and in-process
   through the same click command (`CliRunner`, no interpreter start-up or imports), the
   median of `--runs` runs, round-robin over the sizes so that load on the machine falls on
   all of them alike. A `suspend` is followed by an untimed `resume`, so every timed
   `suspend` does the same work. `ratio_<command>` = the largest size over the smallest (CLI);
   `ratio_<command>_inprocess` the same in-process. Target: at most 1.2 (CLI).
2. **`run` start-up.** The seconds `cronsource run` reports ("ready after N s", after its
   first turn: projections caught up, due ticks decided, the next minute's aggregates loaded)
   and the wall time from spawn to that line, median of `--runs`, on an empty store, on 1,000
   CronWorkflows just created and on 1,000 CronWorkflows with ~2,000 events each (all
   `* * * * *`, so the first turn loads every one). Each run is spawned between seconds 31
   and 48 of a minute: the tick at :00 is then more than the late tolerance old (a skip,
   decided the same way on every store) and the next one 12+ s away. Each run is stopped
   with SIGTERM, as a redeploy stops it (the stopping replica snapshots the copies it holds:
   `SchedulerLoop.snapshot_at_stop`). Target: `ratio_startup_same_crons`, history over the
   same 1,000 CronWorkflows fresh, at most 2: the count of CronWorkflows is the same on
   both sides, so the ratio is the cost of age alone. `ratio_startup` (over an empty store)
   is shown beside it: it measures the count, not the age. The first start of each store
   (`first_ready_seconds`) is the start after a crash: the history store's streams then
   end at the tails as written (0-99 events after their latest snapshots), which that start
   replays; `ratio_startup_after_crash` compares it with the fresh store's first start.
3. **The log over a simulated year at a fixed retention.** `cronsource simulate`'s runtime
   (adapters/simulate.py `Simulation`: the real `SchedulerLoop`, projections and dispatcher on
   a VirtualClock) with `Retention(--year-retain)` on its loop, as `run --retain` wires it,
   `--year-crons` CronWorkflows at `--year-schedule` for `--year-days`. Rows of the events
   table, the snapshots table and the audit are counted 12 times (every simulated month).
   Target: after the first two retention windows the events table grows by at most a tenth
   (`ratio_year_rows`: the largest count after then over the count then).
4. **`simulate`, first tenth against last tenth.** A `--sim-days` run of `* * * * *` on
   simulate's default store; the time per tick in the first tenth of the simulated span and
   in the last, as this process's CPU time (the target: the load of others on a shared
   machine changes over a run and moves the wall time of one tenth, not the other) and as
   wall time (`ratio_wall`). Target: `ratio_simulate` (last over first) at most 1.2.

Set-up (not timed) writes long histories FAST, as the runtime would have written them: the
domain code decides the ticks of each CronWorkflow in memory over virtual time (a fire, the
run's completion and the history limit's prune per tick), the events go to the store through
the recorder's own insert in batches of 20,000, a snapshot is stored whenever a stream's
version crosses a multiple of SNAPSHOT_INTERVAL (as `CronService.save` does), and the read
model is projected once by the real projection (`Engine.catch_up`); the dispatcher's position
is put at the head (those runs were dispatched and finished long ago). A long stream ends just
before its next snapshot (its tail after the latest snapshot is 97-99 events, the most a load
ever replays: the worst case); the 1,000 streams of the start-up store end at tails spread
over 0-99, as a fleet's do.

The store: `--store sqlite:///NEW.db` (each part gets `NEW-<part>.db` beside it, deleted
afterwards), `--store postgresql://server/db` (a throwaway database per part), or none (SQLite
files in a temporary directory). Parts 3 and 4 run where `cronsource simulate` runs (a
scratch file on /dev/shm, or a scratch schema of the PostgreSQL database given).

`--quick` is the CI smoke: tiny sizes, two runs, no waiting for the minute's window; its
ratios mean nothing. Progress on stderr; the last stdout line is one JSON object, whose `pass`
says whether every target was met (nothing else asserts them). Exit 0 when it ran, 2 when it
could not.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from click.testing import CliRunner
from eventsourcing.persistence import Tracking
from rich.progress import Progress

from bench.common import (
    NAMESPACE,
    BenchError,
    Throwaway,
    create_crons,
    emit,
    machine_note,
    manifest,
    pg_connect,
    progress,
    r,
    self_peak_rss_mb,
    throwaway_store,
)
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.entrypoints.cli.store import parse_retain
from cronsource.adapters.entrypoints.simulate.orchestrator import Simulation, _scratch_store
from cronsource.adapters.entrypoints.simulate.scenario import load_scenario
from cronsource.adapters.entrypoints.simulate.target import SimTarget
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.retention import Retention
from cronsource.domain.cronworkflow import CronWorkflow, CronWorkflowSnapshot, workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import SNAPSHOT_INTERVAL

#: Events stored per insert while writing a history (one transaction each).
CHUNK = 20_000
#: The commands timed on each stream; `suspend` is undone (untimed) after each run.
COMMANDS = ("suspend", "get", "why", "history")
#: The events one scheduled run adds to its stream.
RUN_EVENTS = ("ScheduleFired", "RunCompleted", "HistoryPruned")
#: The one CronWorkflow of the command stores.
STREAM_NAME = "age"
#: A year, as the simulated span of part 3.
YEAR = timedelta(days=365)
#: Samples of the table sizes over the simulated span (a month each over a year).
SAMPLES = 12


@dataclass(frozen=True)
class Plan:
    """What one run measures (the defaults, or `--quick`'s tiny sizes)."""

    sizes: tuple[int, ...]
    runs: int
    fleet: int
    fleet_events: int
    year_crons: int
    year_schedule: str
    year_days: float
    year_retain: str
    sim_days: float
    window: bool  # wait for seconds 31-48 of a minute before each start-up
    quick: bool = False


FULL = Plan((10, 10_000, 100_000, 1_000_000), 5, 1000, 2000, 10, "0 * * * *", 365, "30d", 7, True)
QUICK = Plan((10, 1000), 2, 10, 300, 2, "0 * * * *", 6, "1d", 0.1, False, quick=True)


# ---------------------------------------------------------------------- writing a history


def target_length(n: int) -> int:
    """The length a stream of nominally `n` events is written to: `n` below one snapshot
    interval, else up to just before the snapshot after `n` (a tail of 97-99 events after the
    latest snapshot: the most any load replays)."""
    if n < SNAPSHOT_INTERVAL:
        return n
    return (n // SNAPSHOT_INTERVAL + 1) * SNAPSHOT_INTERVAL - 3


def ticks_for(length: int) -> int:
    """Ticks of fire + completion (+ the prune of the history limit from the 4th on) that
    bring a new stream (its Created event) to `length` events."""
    # 1 + 2k for k <= 3 ticks; 3 more per tick after that (the default history limit of
    # 3 succeeded runs prunes one at every completion from the 4th on).
    return max(1, math.ceil((length - 1) / 2)) if length <= 7 else math.ceil((length + 2) / 3)


@dataclass
class Written:
    """What `write_history` wrote: events and snapshots, and when the streams' ticks ended."""

    events: int = 0
    snapshots: int = 0
    last_tick: dict[UUID, datetime] = field(default_factory=dict)


def write_history(
    engine: Engine,
    aggs: Sequence[CronWorkflow],
    lengths: dict[UUID, int],
    start: datetime,
    step: timedelta,
    run_for: timedelta,
    advance: Callable[[int], None] = lambda _: None,
) -> Written:
    """Decide every `step` from `start` the ticks of `aggs` (new, unsaved aggregates created at
    `start`) in memory, each fired, its run completed after `run_for`, until each stream is
    `lengths[id]` events long or more; store the events in batches through the recorder, and a
    snapshot of an aggregate whenever one of its saves would have crossed a multiple of
    SNAPSHOT_INTERVAL (what `CronService.save` does), from the aggregate as it was then."""
    svc = engine.service
    assert svc.snapshots is not None
    done = Written()
    events: list[Any] = []
    snapshots: list[CronWorkflowSnapshot] = []

    def flush() -> None:
        if events:
            svc.events.put(events)
            done.events += len(events)
            advance(len(events))
            events.clear()
        if snapshots:
            assert svc.snapshots is not None
            svc.snapshots.put(snapshots)
            done.snapshots += len(snapshots)
            snapshots.clear()

    def saved(agg: CronWorkflow, before: int) -> None:
        # One save of the runtime (the fire; the completion with its prune): a snapshot
        # when it crossed a multiple of the interval, of the state right after it.
        if agg.version // SNAPSHOT_INTERVAL > before // SNAPSHOT_INTERVAL:
            snapshots.append(CronWorkflowSnapshot.take(agg))

    for agg in aggs:
        saved(agg, 0)
        events.extend(agg.collect_events())
    live = [a for a in aggs if a.version < lengths[a.id]]
    t = start
    while live:
        t += step
        still = []
        for agg in live:
            before = agg.version
            fires = agg.tick(t)
            saved(agg, before)
            for fire in fires:
                before = agg.version
                done_at = t + run_for
                agg.run_completed(
                    workflow_name(agg.name, fire.scheduled_time), "Succeeded", done_at, done_at
                )
                saved(agg, before)
            if fires:
                done.last_tick[agg.id] = t
            events.extend(agg.collect_events())
            if agg.version < lengths[agg.id]:
                still.append(agg)
        live = still
        if len(events) >= CHUNK:
            flush()
    flush()
    return done


def project(engine: Engine, at: datetime, bar: Progress, label: str) -> float:
    """Project the read model (status, audit, due index) up to the head of the log with the
    real projection, and put the dispatcher's position at the head: the state of a store
    whose `run` has followed the log all along. Returns the seconds it took."""
    svc = engine.service
    head = svc.recorder.max_notification_id() or 0
    task = bar.add_task(f"{label}: project the read model", total=head)
    t0 = time.perf_counter()
    while (engine.view.max_tracking_id(svc.name, "readmodel") or 0) < head:
        engine.projector.catch_up(at, batch=5000, budget=1.0, dispatch=False)
        bar.update(task, completed=engine.view.max_tracking_id(svc.name, "readmodel") or 0)
    engine.view.track("dispatch", Tracking(svc.name, head))
    return time.perf_counter() - t0


def tail_of(engine: Engine, cron_id: UUID, version: int) -> int:
    """Events a load of this stream replays: after its latest snapshot (all, without one)."""
    assert engine.service.snapshots is not None
    latest = list(engine.service.snapshots.get(cron_id, desc=True, limit=1))
    return version - (latest[0].originator_version if latest else 0)


# ---------------------------------------------------------------------- part 1: commands


@dataclass
class StreamStore:
    """One store holding one CronWorkflow of (nominally) `size` events."""

    size: int
    store: Throwaway
    url: str  # what the CLI is given
    events: int = 0
    tail: int = 0
    why_at: str = ""
    since: str = ""
    setup_seconds: float = 0.0
    project_seconds: float = 0.0
    sizes: dict[str, Any] = field(default_factory=dict)
    cli_ms: dict[str, list[float]] = field(default_factory=dict)
    inprocess_ms: dict[str, list[float]] = field(default_factory=dict)

    def args(self, command: str) -> list[str]:
        if command == "why":
            return ["why", STREAM_NAME, "--at", self.why_at]
        if command == "history":
            return ["history", STREAM_NAME, "--since", self.since]
        return [command, STREAM_NAME]


def cli_url(t: Throwaway) -> str:
    """The store URL a `cronsource` process is given (with the scratch schema, if any)."""
    if t.pg_schema:
        return f"{t.url}{'&' if '?' in t.url else '?'}schema={t.pg_schema}"
    return t.url


def rfc(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_stream(t: Throwaway, size: int, bar: Progress) -> StreamStore:
    """The store of one size: an `@every 1s` CronWorkflow whose history ends about now."""
    s = StreamStore(size, t, cli_url(t))
    engine = bootstrap(t.config, create_tables=False)
    try:
        length = target_length(size)
        step = timedelta(seconds=1)
        now = datetime.now(UTC).replace(microsecond=0)
        start = now - step * (ticks_for(length) + 5)
        agg = CronWorkflow.from_manifest(parse_manifest(manifest(STREAM_NAME, "@every 1s")), start)
        task = bar.add_task(f"{size:,} events: write", total=length)
        t0 = time.perf_counter()
        written = write_history(
            engine,
            [agg],
            {agg.id: length},
            start,
            step,
            timedelta(milliseconds=500),
            lambda k: bar.advance(task, k),
        )
        last = written.last_tick[agg.id]
        if last > now:
            raise BenchError(f"the history of {size} events runs past now ({last})")
        s.project_seconds = project(engine, last + step, bar, f"{size:,} events")
        s.setup_seconds = time.perf_counter() - t0
        s.events = agg.version
        s.tail = tail_of(engine, agg.id, agg.version)
        # A tick that fired a few seconds before the end (`why` on a recent tick, as a user
        # asks about the run that did not happen this morning), and the last ~20 events.
        s.why_at = rfc(last - 3 * step)
        s.since = rfc(last - 6 * step)
        s.sizes = table_sizes(t, engine)
    finally:
        engine.close()
    return s


def cronsource_exe() -> str:
    """This venv's `cronsource` (the console script of the checkout being measured)."""
    exe = Path(sys.executable).parent / "cronsource"
    if not exe.exists():
        raise BenchError(f"{exe} not found: install the checkout (pip install -e .)")
    return str(exe)


def time_cli(exe: str, url: str, args: list[str]) -> float:
    """Milliseconds of one `cronsource --store URL -n bench ARGS` as a user runs it."""
    cmd = [exe, "--store", url, "-n", NAMESPACE, *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    ms = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(cmd[1:])}` exited {proc.returncode}: {proc.stderr[-2000:]}")
    return ms


def time_inprocess(runner: CliRunner, url: str, args: list[str]) -> float:
    """Milliseconds of the same click command called in this process: the work of the
    command (engine, store, projection settle) without interpreter start-up and imports."""
    t0 = time.perf_counter()
    res = runner.invoke(cli, ["--store", url, "-n", NAMESPACE, *args])
    ms = (time.perf_counter() - t0) * 1000
    if res.exit_code != 0:
        raise BenchError(f"in-process `{' '.join(args)}` exited {res.exit_code}: {res.output}")
    return ms


def measure_commands(streams: list[StreamStore], runs: int, bar: Progress) -> float:
    """Every command on every stream, `runs` times, round-robin; returns the median
    milliseconds of `cronsource version` (interpreter start-up and imports, no store)."""
    exe = cronsource_exe()
    runner = CliRunner()
    version_ms = []
    task = bar.add_task("commands (CLI and in-process)", total=runs * len(streams) * len(COMMANDS))
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([exe, "version"], capture_output=True, check=True)
        version_ms.append((time.perf_counter() - t0) * 1000)
        for s in streams:
            for command in COMMANDS:
                args = s.args(command)
                s.cli_ms.setdefault(command, []).append(time_cli(exe, s.url, args))
                if command == "suspend":
                    time_inprocess(runner, s.url, ["resume", STREAM_NAME])
                s.inprocess_ms.setdefault(command, []).append(time_inprocess(runner, s.url, args))
                if command == "suspend":
                    time_inprocess(runner, s.url, ["resume", STREAM_NAME])
                bar.advance(task)
    return statistics.median(version_ms)


# ---------------------------------------------------------------------- sizes of the tables


def table_sizes(t: Throwaway, engine: Engine) -> dict[str, Any]:
    """Rows and bytes of the event log, the snapshots and the audit (bytes: the table with
    its indexes, as the store keeps it: SQLite's dbstat, PostgreSQL's relation sizes)."""
    svc = engine.service
    assert svc.snapshots is not None
    events = str(svc.recorder.events_table_name)  # type: ignore[attr-defined]
    snaps = str(svc.snapshots.recorder.events_table_name)  # type: ignore[attr-defined]
    tables = {"events": events, "snapshots": snaps, "audit": "cronsource_audit"}
    out: dict[str, Any] = {}
    if t.kind == "postgresql":
        with pg_connect(t) as conn:
            for key, table in tables.items():
                row = conn.execute(
                    f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}"  # noqa: S608
                ).fetchone()
                out[f"{key}_rows"], out[f"{key}_bytes"] = int(row[0]), int(row[1])
        return out
    with contextlib.closing(sqlite3.connect(t.config.sqlite_path)) as conn:
        for key, table in tables.items():
            out[f"{key}_rows"] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608
            names = [table] + [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                    (table,),
                )
            ]
            marks = ",".join("?" for _ in names)
            out[f"{key}_bytes"] = conn.execute(
                f"SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ({marks})",  # noqa: S608
                names,
            ).fetchone()[0]
    return out


def by_type(t: Throwaway, engine: Engine) -> dict[str, tuple[int, float]]:
    """Each event type's count and average stored size (bytes of state), and the snapshots'."""
    svc = engine.service
    assert svc.snapshots is not None
    out: dict[str, tuple[int, float]] = {}
    for table in (svc.recorder.events_table_name, svc.snapshots.recorder.events_table_name):  # type: ignore[attr-defined]
        q = f"SELECT topic, count(*), avg(length(state)) FROM {table} GROUP BY topic"  # noqa: S608
        if t.kind == "postgresql":
            with pg_connect(t) as conn:
                rows = conn.execute(q.replace("length(state)", "octet_length(state)")).fetchall()
        else:
            with contextlib.closing(sqlite3.connect(t.config.sqlite_path)) as conn:
                rows = conn.execute(q).fetchall()
        for topic, n, avg in rows:
            out[str(topic).split(":", 1)[-1].split("/", 1)[0]] = (int(n), round(float(avg), 1))
    return out


# ---------------------------------------------------------------------- part 2: start-up


@dataclass
class StartupStore:
    label: str
    store: Throwaway
    url: str
    crons: int = 0
    events: int = 0
    mean_tail: float = 0.0
    setup_seconds: float = 0.0
    reported: list[float] = field(default_factory=list)  # "ready after N s"
    wall: list[float] = field(default_factory=list)  # spawn to that line


def build_fleet(t: Throwaway, label: str, n: int, length: int, bar: Progress) -> StartupStore:
    """`n` CronWorkflows `* * * * *`: just created (`length` 1) or with a history of about
    `length` events each, tails after their latest snapshots spread over 0-99."""
    s = StartupStore(label, t, cli_url(t), crons=n)
    engine = bootstrap(t.config, create_tables=False)
    try:
        t0 = time.perf_counter()
        if n == 0:
            pass
        elif length <= 1:
            now = datetime.now(UTC)
            task = bar.add_task(f"{label}: create", total=n)
            create_crons(
                engine.service,
                n,
                "* * * * *",
                now,
                prefix="fleet",
                advance=lambda k: bar.advance(task, k),
            )
            project(engine, now, bar, label)
            s.events = n
        else:
            lengths = [length + (i % SNAPSHOT_INTERVAL) for i in range(n)]
            step = timedelta(minutes=1)
            now = datetime.now(UTC).replace(second=0, microsecond=0)
            start = now - step * (ticks_for(max(lengths)) + 2)
            aggs = [
                CronWorkflow.from_manifest(
                    parse_manifest(manifest(f"fleet-{i:06d}", "* * * * *")), start
                )
                for i in range(n)
            ]
            task = bar.add_task(f"{label}: write", total=sum(lengths))
            written = write_history(
                engine,
                aggs,
                {a.id: k for a, k in zip(aggs, lengths, strict=True)},
                start,
                step,
                timedelta(seconds=10),
                lambda k: bar.advance(task, k),
            )
            project(engine, now, bar, label)
            s.events = written.events
            s.mean_tail = statistics.fmean(tail_of(engine, a.id, a.version) for a in aggs)
        s.setup_seconds = time.perf_counter() - t0
    finally:
        engine.close()
    return s


READY = re.compile(r"cronsource ready after ([0-9.]+)s")


def start_once(exe: str, s: StartupStore, workdir: Path, window: bool) -> None:
    """Spawn `cronsource run`, wait for its ready line, stop it with SIGTERM."""
    if window:
        # Between seconds 31 and 48 of a minute: the tick at :00 is past the late tolerance
        # (30 s; a skip on every store alike) and the next is 12+ s away (warmed, not due).
        while not 31 <= datetime.now(UTC).second <= 48:
            time.sleep(0.2)
    log = workdir / f"run-{s.label}.log"
    wf_dir = workdir / f"workflows-{s.label}"
    with open(log, "w") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [exe, "--store", s.url, "run", "--workflows-dir", str(wf_dir)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 600
        while True:
            m = READY.search(log.read_text(errors="replace"))
            if m:
                s.wall.append(time.perf_counter() - t0)
                s.reported.append(float(m.group(1)))
                break
            if proc.poll() is not None:
                raise BenchError(f"cronsource run exited {proc.returncode}:\n{log.read_text()}")
            if time.monotonic() > deadline:
                raise BenchError(f"cronsource run not ready after 600 s:\n{log.read_text()}")
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------- parts 3 and 4: simulate


class PrunedGone(SimTarget):
    """The simulated target, forgetting a Workflow once the history limit deleted it: a year
    of runs would otherwise be kept in memory (a name is never created again: it is derived
    from its tick). What the runtime does is unchanged."""

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        super().delete(namespace, name, at)
        wf = self.workflows.get((namespace, name))
        if wf is not None and wf.phase != "Running" and (namespace, name) not in self.unreported:
            del self.workflows[(namespace, name)]
            self.metadata.pop((namespace, name), None)


@contextlib.contextmanager
def simulation(
    scenario: dict[str, Any], store: str | None, target: SimTarget
) -> Iterator[tuple[Simulation, list[tuple[datetime, float, float]]]]:
    """A `Simulation` as `cronsource simulate` builds it (its scratch store on its default
    store or on the PostgreSQL given), with `marks`: (virtual instant, perf_counter,
    process_time) at every instant it reaches (its `stop` hook)."""
    sc = load_scenario(scenario)
    marks: list[tuple[datetime, float, float]] = []
    with _scratch_store(StoreConfig.parse(store or "sqlite:///sim.db")) as config:
        engine = bootstrap(config, target=target, create_tables=True)
        try:
            box: list[Simulation] = []

            def mark() -> bool:
                marks.append((box[0].clock.now(), time.perf_counter(), time.process_time()))
                return False

            box.append(Simulation(sc, engine, target, mark))
            yield box[0], marks
        finally:
            engine.close()


def sim_scenario(crons: int, schedule: str, start: datetime, days: float) -> dict[str, Any]:
    return {
        "start": start.isoformat(),
        "end": (start + timedelta(days=days)).isoformat(),
        "runDuration": "10s",
        "cronWorkflows": [manifest(f"sim-{i:03d}", schedule) for i in range(crons)],
    }


def count_rows(engine: Engine) -> dict[str, int]:
    """Rows of the events table, the snapshots table and the audit, now."""
    svc = engine.service
    assert svc.snapshots is not None
    tables = {
        "events": str(svc.recorder.events_table_name),  # type: ignore[attr-defined]
        "snapshots": str(svc.snapshots.recorder.events_table_name),  # type: ignore[attr-defined]
    }
    datastore: Any = svc.recorder.datastore  # type: ignore[attr-defined]
    out: dict[str, int] = {}
    for key, table in tables.items():
        if engine.config.kind == "postgresql":
            table = f'"{datastore.schema}"."{table}"'
        with datastore.transaction(commit=False) as c:
            c.execute(f"SELECT count(*) AS n FROM {table}")  # noqa: S608
            out[key] = int(c.fetchone()["n"])
    out["audit"] = int(engine.view.db.fetch("SELECT count(*) FROM cronsource_audit")[0][0])
    return out


def year_at_retention(plan: Plan, store: str | None, bar: Progress) -> dict[str, Any]:
    """Part 3: the table sizes every simulated month of a year run at a fixed retention."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    span = timedelta(days=plan.year_days)
    retain = parse_retain(plan.year_retain)
    scenario = sim_scenario(plan.year_crons, plan.year_schedule, start, plan.year_days)
    target = PrunedGone(timedelta(seconds=10), "Succeeded")
    samples: list[dict[str, Any]] = []
    with simulation(scenario, store, target) as (sim, _marks):
        loop = sim.loops[0]
        retention = Retention(sim.engine, retain)
        loop.retention = retention  # as `run --retain` wires it (adapters/cli.py)
        task = bar.add_task("simulated year at a fixed retention", total=SAMPLES)
        nxt = [start + span * (k + 1) / SAMPLES for k in range(SAMPLES)]
        engine = sim.engine
        t0 = time.perf_counter()

        def sample() -> bool:
            now = sim.clock.now()
            while nxt and now >= nxt[0]:
                nxt.pop(0)
                rows = count_rows(engine)
                samples.append({"day": round((now - start).total_seconds() / 86400, 1), **rows})
                bar.advance(task)
            return False

        sim.stop = sample
        sim.run()
        seconds = time.perf_counter() - t0
        if nxt:  # the end itself
            samples.append({"day": round(span.total_seconds() / 86400, 1), **count_rows(engine)})
        left = len(target.workflows)
        removed = retention.removed
    # Steady from two retention windows on (the first fills it; removal lags a window by up
    # to two snapshot intervals of each stream, which the second covers).
    steady_from = next(
        (i for i, smp in enumerate(samples) if smp["day"] >= 2 * retain.total_seconds() / 86400),
        None,
    )
    ratio = None
    if steady_from is not None and samples[steady_from]["events"]:
        later = [smp["events"] for smp in samples[steady_from:]]
        ratio = max(later) / samples[steady_from]["events"]
    return {
        "crons": plan.year_crons,
        "schedule": plan.year_schedule,
        "days": plan.year_days,
        "retain": plan.year_retain,
        "seconds": r(seconds, 1),
        "removed": removed,
        "workflows_left": left,
        "samples": samples,
        "steady_from_day": samples[steady_from]["day"] if steady_from is not None else None,
        "ratio_rows": r(ratio, 3),
    }


def simulate_tenths(plan: Plan, store: str | None, bar: Progress) -> dict[str, Any]:
    """Part 4: the cost of a tick over the first tenth of a run against the last tenth.

    Both as wall time and as this process's CPU time: on a shared machine the load of others
    changes over a run of a minute, which moves the wall time of one tenth and not of the
    other; the CPU time (the whole simulation runs in this process, on SQLite) does not move
    with it, so the target is taken on it."""
    start = datetime(2026, 3, 2, tzinfo=UTC)
    span = timedelta(days=plan.sim_days)
    scenario = sim_scenario(1, "* * * * *", start, plan.sim_days)
    target = SimTarget(timedelta(seconds=10), "Succeeded")
    task = bar.add_task(f"simulate {plan.sim_days:g} days of * * * * *", total=None)
    with simulation(scenario, store, target) as (sim, marks):
        t0 = time.perf_counter()
        sim.run()
        end = (time.perf_counter(), time.process_time())
    bar.update(task, total=1, completed=1)
    ticks = sorted(
        w.scheduled_time
        for w in target.workflows.values()
        if w.trigger == "schedule" and w.scheduled_time is not None
    )

    def spent(a: datetime, b: datetime, k: int) -> float:
        """Seconds (k=1: wall, 2: CPU) from the first instant at or after `a` to the first
        at or after `b` (the end of the run when there is none)."""
        clock = [(v, (wall, cpu)[k - 1]) for v, wall, cpu in marks]
        first = next((x for v, x in clock if v >= a), end[k - 1])
        after = next((x for v, x in clock if v >= b), end[k - 1])
        return after - first

    tenth = span / 10
    head = (start, start + tenth)
    tail = (start + span - tenth, start + span + timedelta(microseconds=1))
    n_head = sum(1 for t in ticks if head[0] <= t < head[1])
    n_tail = sum(1 for t in ticks if tail[0] <= t < tail[1])

    def per_tick(span_: tuple[datetime, datetime], n: int, k: int) -> float:
        return spent(*span_, k) / n * 1000 if n else float("nan")

    wall_head, wall_tail = per_tick(head, n_head, 1), per_tick(tail, n_tail, 1)
    cpu_head, cpu_tail = per_tick(head, n_head, 2), per_tick(tail, n_tail, 2)
    seconds = end[0] - t0
    return {
        "days": plan.sim_days,
        "ticks": len(ticks),
        "seconds": r(seconds, 2),
        "per_second": r(len(ticks) / seconds if seconds else float("nan")),
        "first_tenth_ticks": n_head,
        "last_tenth_ticks": n_tail,
        "first_tenth_ms_per_tick": r(wall_head, 3),
        "last_tenth_ms_per_tick": r(wall_tail, 3),
        "first_tenth_cpu_ms_per_tick": r(cpu_head, 3),
        "last_tenth_cpu_ms_per_tick": r(cpu_tail, 3),
        "ratio": r(cpu_tail / cpu_head if cpu_head else float("nan"), 3),
        "ratio_wall": r(wall_tail / wall_head if wall_head else float("nan"), 3),
        "rejected_writes": sim.engine.rejected_writes,
    }


# ---------------------------------------------------------------------- the run


def part_url(url: str | None, part: str) -> str | None:
    """The store URL of one part: `NEW-<part>.db` beside a SQLite path; the server as given."""
    if url is None or not url.startswith("sqlite:"):
        return url
    path = Path(StoreConfig.parse(url).sqlite_path)
    name = f"{path.stem}-{part}{path.suffix or '.db'}"
    return f"sqlite:///{path.with_name(name).resolve()}"


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run(plan: Plan, url: str | None, keep: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "history", "n": max(plan.sizes)}
    t_all = time.perf_counter()
    with contextlib.ExitStack() as stack, progress() as bar:
        # Part 1: commands on streams of each size, each in its own store.
        streams = []
        for size in plan.sizes:
            t = stack.enter_context(
                throwaway_store(part_url(url, f"stream{size}"), f"history{size}", keep=keep)
            )
            streams.append(build_stream(t, size, bar))
        out["store"] = streams[0].store.kind
        version_ms = measure_commands(streams, plan.runs, bar)
        biggest = streams[-1]
        engine = bootstrap(biggest.store.config, create_tables=False)
        try:
            per_type = by_type(biggest.store, engine)
        finally:
            engine.close()
        small, big = streams[0], streams[-1]
        out["commands"] = [
            {
                "size": s.size,
                "events": s.events,
                "tail_events": s.tail,
                "setup_seconds": r(s.setup_seconds, 1),
                "project_seconds": r(s.project_seconds, 1),
                **{f"{c}_ms": r(median(s.cli_ms[c])) for c in COMMANDS},
                **{f"{c}_inprocess_ms": r(median(s.inprocess_ms[c])) for c in COMMANDS},
                **s.sizes,
            }
            for s in streams
        ]
        out["version_ms"] = r(version_ms)
        for c in COMMANDS:
            out[f"ratio_{c}"] = r(ratio(median(big.cli_ms[c]), median(small.cli_ms[c])), 3)
            out[f"ratio_{c}_inprocess"] = r(
                ratio(median(big.inprocess_ms[c]), median(small.inprocess_ms[c])), 3
            )
        out["setup_seconds_largest"] = r(big.setup_seconds, 1)
        out["stored_bytes"] = {k: size for k, (_, size) in per_type.items()}
        rows = big.sizes
        out["disk_bytes_per_event"] = r(rows["events_bytes"] / rows["events_rows"], 1)
        out["disk_bytes_per_snapshot"] = r(rows["snapshots_bytes"] / rows["snapshots_rows"], 1)
        out["audit_bytes_per_event"] = r(rows["audit_bytes"] / rows["audit_rows"], 1)
        # What one run of a schedule adds: its fire, its completion and the prune of the
        # history limit (counted in the store, over the largest stream).
        fired = per_type["ScheduleFired"][0]
        run_events = sum(per_type.get(k, (0, 0))[0] for k in RUN_EVENTS)
        out["events_per_run"] = r(run_events / fired, 3)

        # Part 2: start-up of `cronsource run`.
        fleets = []
        for label, n, length in (
            ("empty", 0, 0),
            ("fresh", plan.fleet, 1),
            ("history", plan.fleet, plan.fleet_events),
        ):
            t = stack.enter_context(
                throwaway_store(part_url(url, f"startup-{label}"), f"startup{label}", keep=keep)
            )
            fleets.append(build_fleet(t, label, n, length, bar))
        exe = cronsource_exe()
        task = bar.add_task("run start-up", total=plan.runs * len(fleets))
        for _ in range(plan.runs):
            for s in fleets:
                start_once(exe, s, s.store.workdir, plan.window and s.crons > 0)
                bar.advance(task)
        empty, fresh, hist = fleets
        out["startup"] = [
            {
                "store": s.label,
                "crons": s.crons,
                "events": s.events,
                "mean_tail_events": r(s.mean_tail, 1),
                "setup_seconds": r(s.setup_seconds, 1),
                "ready_seconds": r(median(s.reported), 3),
                "first_ready_seconds": r(s.reported[0], 3) if s.reported else None,
                "spawn_to_ready_seconds": r(median(s.wall), 3),
            }
            for s in fleets
        ]
        out["ratio_startup"] = r(ratio(median(hist.reported), median(empty.reported)), 3)
        out["ratio_startup_same_crons"] = r(ratio(median(hist.reported), median(fresh.reported)), 3)
        out["ratio_startup_after_crash"] = r(
            ratio(hist.reported[0], fresh.reported[0]) if fresh.reported else None, 3
        )
        out["ratio_startup_spawn_to_ready"] = r(ratio(median(hist.wall), median(empty.wall)), 3)

    # Parts 3 and 4 run on simulate's own scratch stores.
    sim_store = url if url is not None and not url.startswith("sqlite:") else None
    with progress() as bar:
        year = year_at_retention(plan, sim_store, bar)
        tenths = simulate_tenths(plan, sim_store, bar)
    out["year"] = year
    out["ratio_year_rows"] = year["ratio_rows"]
    out["simulate"] = tenths
    out["ratio_simulate"] = tenths["ratio"]
    targets = {
        "commands": all((out[f"ratio_{c}"] or math.inf) <= 1.2 for c in COMMANDS),
        "startup": (out["ratio_startup_same_crons"] or math.inf) <= 2.0,
        "year_rows": (out["ratio_year_rows"] or math.inf) <= 1.1,
        "simulate": (out["ratio_simulate"] or math.inf) <= 1.2,
    }
    out["targets"] = targets
    out["pass"] = all(targets.values())
    out["seconds"] = r(time.perf_counter() - t_all, 1)
    out["runs"] = plan.runs
    out["quick"] = plan.quick
    out["peak_rss_mb"] = r(self_peak_rss_mb())
    out["machine"] = machine_note()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.history", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--store", default=None, help="sqlite:///NEW.db or postgresql://server/db")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: the CI smoke")
    ap.add_argument("--runs", type=int, default=None, help="runs per figure (median)")
    ap.add_argument("--sizes", default=None, help="stream sizes, comma-separated")
    ap.add_argument("--fleet", type=int, default=None, help="CronWorkflows of the start-up store")
    ap.add_argument("--year-crons", type=int, default=None)
    ap.add_argument("--year-schedule", default=None)
    ap.add_argument("--year-days", type=float, default=None)
    ap.add_argument("--year-retain", default=None)
    ap.add_argument("--sim-days", type=float, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the stores (and print where)")
    a = ap.parse_args(argv)
    plan = QUICK if a.quick else FULL
    changes: dict[str, Any] = {}
    if a.runs is not None:
        changes["runs"] = a.runs
    if a.sizes:
        changes["sizes"] = tuple(sorted(int(x) for x in a.sizes.split(",")))
    for key in ("fleet", "year_crons", "year_schedule", "year_days", "year_retain", "sim_days"):
        if getattr(a, key) is not None:
            changes[key] = getattr(a, key)
    if changes:
        import dataclasses

        plan = dataclasses.replace(plan, **changes)
    if plan.runs < 1 or len(plan.sizes) < 2 or min(plan.sizes) < 2:
        ap.error("--runs must be >= 1 and --sizes needs two sizes of at least 2 events")
    try:
        result = run(plan, a.store, a.keep)
    except BenchError as e:
        print(f"bench.history: {e}", file=sys.stderr)
        return 2
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
