"""The burst end to end, ours beside APScheduler 4: `python -m bench.peers --crons N --store URL`.

N schedules are all due at one real instant D; each side is timed from D until every run has
started, and counts its duplicates (a schedule that started more than once) and misses (one
that had not started when the side finished or timed out). Each side runs in a process of its
own (this module with `--side`), one after the other, each in a fresh database on the server
of `--store` (bench/common.py), so neither sees the other's tables or leftovers.

Ours: the code `cronsource run` runs, in one process: `bootstrap` with the local target, a
`SchedulerLoop(role="all")` with the run watcher, woken by its `Waker`, the shard ownership
of `cronsource run` (advisory locks on PostgreSQL). N CronWorkflows `0 * * * *` are created
and projected first (not timed). The loop's clock is the wall clock plus a fixed offset that
puts the top of the hour at D, so the loop sleeps until D by itself, then decides, commits,
projects and dispatches as it always does. A run has started when its Workflow manifest
exists on the local target: its time is the file's ctime (set by the link that publishes it).
`--mode hot` times the second burst instead (the clock jumps to one hour later once the first
burst is done), which is what a long-running scheduler sees every hour.

APScheduler 4 (newest 4.x pre-release; see /work/shared/bench-peers.md): an `AsyncScheduler`
on a `SQLAlchemyDataStore` (SQLAlchemy + asyncpg, pool 20 + 20) with the local event broker
(one process is its best), `max_concurrent_jobs=1000`, the task configured with
`max_running_jobs=None`, on uvloop. N schedules with a `CronTrigger` firing at D (daily) are
added before the scheduler starts (not timed; D is far enough ahead for the adds to finish,
`--peer-margin`); a run has started when the job function is entered (it notes the time).

Result: `seconds`, `per_second`, `p50_ms`, `p99_ms` (start delay after D) are ours;
`baseline_per_second` is APScheduler's starts/s and `ratio` = ours / APScheduler; the
`peer_*` keys hold the rest of its figures. `--ours-only` runs our side alone (no extra
packages needed; `ratio` is then null). APScheduler needs PostgreSQL, and the packages
`apscheduler==4.0.0a6 sqlalchemy asyncpg uvloop sniffio "anyio<4.14"`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import (
    FIRED_TOPIC,
    BenchError,
    console,
    count_topic,
    create_crons,
    emit,
    last_json_line,
    next_top_of_hour,
    percentile,
    progress,
    r,
    self_peak_rss_mb,
    throwaway_store,
)

#: Seconds between the end of our set-up and D.
LEAD = 2.0
PEER_TASK = "cronsource_bench_peer_job"


def _delays(starts: list[float], due: float) -> dict[str, Any]:
    delays = [(s - due) * 1000 for s in starts]
    last = max(delays) / 1000 if delays else float("nan")
    return {
        "seconds": r(last, 3),
        "per_second": r(len(starts) / last) if delays and last > 0 else None,
        "p50_ms": r(percentile(delays, 0.5)),
        "p99_ms": r(percentile(delays, 0.99)),
        "first_ms": r(min(delays)) if delays else None,
    }


# ---------------------------------------------------------------------- our side


def run_ours(url: str, n: int, workdir: Path, timeout: float, mode: str) -> dict[str, Any]:
    from cronsource.adapters.bootstrap import bootstrap
    from cronsource.adapters.clock import SystemClock
    from cronsource.adapters.infrastructure.localtarget import LocalTarget
    from cronsource.adapters.infrastructure.shards import AdvisoryLockShards, Ownership, SoleOwner
    from cronsource.adapters.infrastructure.store.config import StoreConfig
    from cronsource.adapters.runtime.collector import pace_collector
    from cronsource.adapters.runtime.loop import SchedulerLoop
    from cronsource.adapters.runtime.runwatcher import RunWatcher
    from cronsource.adapters.runtime.waker import Waker

    pace_collector()  # as `cronsource run` does
    config = StoreConfig.parse(url)
    wfdir = workdir / "workflows"
    target = LocalTarget(wfdir, timedelta(days=1))  # runs never end during the bench
    engine = bootstrap(config, target=target, create_tables=False)
    instant = next_top_of_hour(datetime.now(UTC))
    offset = [timedelta(days=1)]  # until set-up is done: far from any due time

    class ShiftedClock(SystemClock):
        def now(self) -> datetime:
            return datetime.now(UTC) + offset[0]

    clock = ShiftedClock()

    with progress() as bar:
        task = bar.add_task("ours: create CronWorkflows", total=n)
        create_crons(
            engine.service,
            n,
            "0 * * * *",
            instant - timedelta(minutes=30),
            prefix="peer",
            advance=lambda k: bar.advance(task, k),
        )
        engine.projector.catch_up(instant - timedelta(minutes=30))
        ownership: Ownership = (
            AdvisoryLockShards(config.pg_conninfo, schema=config.pg_schema)
            if config.kind == "postgresql"
            else SoleOwner()
        )
        loop = SchedulerLoop(
            engine, ownership, role="all", watcher=RunWatcher(engine, target), clock=clock
        )
        waker = Waker(engine)
        bursts = [instant] if mode == "cold" else [instant, instant + timedelta(hours=1)]
        result: dict[str, Any] = {}
        runner: threading.Thread | None = None
        for k, due_virtual in enumerate(bursts):
            due = math.ceil(time.time()) + LEAD
            offset[0] = due_virtual - datetime.fromtimestamp(due, UTC)
            if runner is None:
                runner = threading.Thread(target=loop.run, args=(waker,), daemon=True)
                runner.start()
            else:
                waker.event.set()
            timed = k == len(bursts) - 1
            label = "ours: burst" if timed else "ours: first burst (not timed)"
            task = bar.add_task(label, total=n)
            starts = _wait_for_files(wfdir, due_virtual, n, due + timeout, bar, task)
            if timed:
                result = _delays(list(starts.values()), due)
                result["misses"] = n - len(starts)
        loop.stop_event.set()
        waker.event.set()
        if runner is not None:
            runner.join(timeout=120)
        waker.stop()
    fired = count_topic(engine.service, FIRED_TOPIC)
    result["duplicates"] = sum(c - len(bursts) for c in fired.values() if c > len(bursts))
    result["fires"] = sum(fired.values())
    result["rejected_writes"] = engine.rejected_writes
    result["failures"] = {
        s.name: s.failures for s in (loop.supervise_projections, loop.supervise_scheduler)
    }
    engine.close()
    return result


def _wait_for_files(
    wfdir: Path, scheduled: datetime, n: int, deadline: float, bar: Any, task: Any
) -> dict[str, float]:
    """Workflow name -> ctime, for the runs of this scheduled time, once all n exist (or at
    the deadline).

    While it waits, it only lists names: it runs in the process under test, and a `stat` of
    each new file as it appeared took the GIL from the loop for 5,000 of them. A file's ctime
    is the file system's record of its publication (the link, then the unlink of its temp
    name a moment after), so it is read once, at the end, with the same result."""
    suffix = f"-{int(scheduled.timestamp())}.json"
    ns = wfdir / "bench"
    names: set[str] = set()
    while time.time() < deadline:
        if ns.is_dir():
            with os.scandir(ns) as it:
                names = {e.name for e in it if e.name.endswith(suffix)}
        bar.update(task, completed=len(names))
        if len(names) >= n:
            break
        # The times are the files' ctimes, so polling more often would not make them more
        # exact; it would only take the GIL from the loop under test.
        time.sleep(0.2)
    found: dict[str, float] = {}
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            found[name] = (ns / name).stat().st_ctime
    return found


# ---------------------------------------------------------------------- APScheduler's side

_STARTS: list[tuple[int, float]] = []


async def peer_job(i: int) -> None:
    """The trivial job: note when it started."""
    _STARTS.append((i, time.time()))


def run_peer(url: str, n: int, timeout: float, margin: float | None) -> dict[str, Any]:
    import anyio

    return anyio.run(_run_peer, url, n, timeout, margin, backend_options={"use_uvloop": True})


async def _run_peer(url: str, n: int, timeout: float, margin: float | None) -> dict[str, Any]:
    import anyio
    from apscheduler import AsyncScheduler
    from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
    from apscheduler.triggers.cron import CronTrigger
    from sqlalchemy.ext.asyncio import create_async_engine

    from cronsource.adapters.infrastructure.store.config import StoreConfig, split_schema

    config = StoreConfig.parse(url)
    aurl = split_schema(url)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    engine = create_async_engine(aurl, pool_size=20, max_overflow=20)
    store = SQLAlchemyDataStore(engine, schema=config.pg_schema or None)
    margin = margin if margin is not None else 5.0 + 0.006 * n
    result: dict[str, Any] = {"version": _version("apscheduler")}
    with progress() as bar:
        async with AsyncScheduler(store, max_concurrent_jobs=1000) as scheduler:
            await scheduler.configure_task(PEER_TASK, func=peer_job, max_running_jobs=None)
            due = math.ceil(time.time() + margin)
            at = datetime.fromtimestamp(due, UTC)
            task = bar.add_task("APScheduler: add schedules", total=n)
            t0 = time.time()
            for i in range(n):
                trigger = CronTrigger(
                    hour=at.hour, minute=at.minute, second=at.second, timezone="UTC"
                )
                await scheduler.add_schedule(PEER_TASK, trigger, id=f"peer-{i:06d}", args=[i])
                bar.advance(task)
            result["setup_seconds"] = r(time.time() - t0, 2)
            if time.time() > due - 0.5:
                raise BenchError(
                    f"adding {n} schedules took {time.time() - t0:.1f}s, past the due instant;"
                    " give a larger --peer-margin"
                )
            await scheduler.start_in_background()
            task = bar.add_task("APScheduler: burst", total=n)
            while time.time() < due + timeout:
                seen = len({i for i, _ in _STARTS})
                bar.update(task, completed=seen)
                if seen >= n:
                    break
                await anyio.sleep(0.02)
            await scheduler.stop()
            await scheduler.wait_until_stopped()
    await engine.dispose()
    per: dict[int, list[float]] = {}
    for i, t in _STARTS:
        per.setdefault(i, []).append(t)
    result.update(_delays([min(ts) for ts in per.values()], due))
    result["duplicates"] = sum(len(ts) - 1 for ts in per.values())
    result["misses"] = n - len(per)
    return result


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


# ---------------------------------------------------------------------- orchestration


def side(name: str, url: str, a: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Run one side in a process of its own; its result is its last JSON line."""
    cmd = [
        sys.executable,
        "-m",
        "bench.peers",
        "--side",
        name,
        "--store",
        url,
        "--crons",
        str(a.crons),
        "--timeout",
        str(a.timeout),
        "--mode",
        a.mode,
        "--workdir",
        str(workdir),
    ]
    if a.peer_margin is not None:
        cmd += ["--peer-margin", str(a.peer_margin)]
    proc = subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        data = last_json_line(proc.stdout)
    except ValueError as e:
        raise BenchError(f"the {name} side failed (exit {proc.returncode}): {e}") from None
    if "error" in data:
        raise BenchError(f"the {name} side failed: {data['error']}")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--crons", type=int, default=2000, help="N schedules due at one instant")
    ap.add_argument("--store", default=None, help="postgresql://server/db (sqlite only ours)")
    ap.add_argument("--ours-only", action="store_true", help="run our side alone (no peer)")
    ap.add_argument("--mode", choices=["cold", "hot"], default="cold", help="our burst")
    ap.add_argument("--timeout", type=float, default=600, help="seconds after D to give up")
    ap.add_argument("--peer-margin", type=float, default=None, help="seconds to add schedules")
    ap.add_argument("--keep", action="store_true", help="keep the stores (and print where)")
    ap.add_argument("--side", choices=["ours", "peer"], help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.crons < 1:
        ap.error("--crons must be at least 1")
    if a.side:
        try:
            if a.side == "ours":
                data = run_ours(a.store, a.crons, Path(a.workdir), a.timeout, a.mode)
            else:
                data = run_peer(a.store, a.crons, a.timeout, a.peer_margin)
        except BenchError as e:
            emit({"error": str(e)})
            return 2
        data["peak_rss_mb"] = r(self_peak_rss_mb())
        emit(data)
        return 0
    store_kind = "sqlite" if a.store is None or a.store.startswith("sqlite:") else "postgresql"
    if not a.ours_only and store_kind != "postgresql":
        ap.error("APScheduler's side needs a PostgreSQL --store (or give --ours-only)")
    if not a.ours_only:
        try:
            import apscheduler  # noqa: F401
        except ImportError:
            ap.error(
                "APScheduler is not installed: pip install apscheduler==4.0.0a6 sqlalchemy"
                ' asyncpg uvloop sniffio "anyio<4.14" (or give --ours-only)'
            )
    out = console()
    try:
        with throwaway_store(a.store, "peers_ours", keep=a.keep) as t:
            out.print(f"[bold]ours[/]: {a.crons} CronWorkflows due at one instant ({a.mode})")
            ours = side("ours", t.url, a, t.workdir)
        peer: dict[str, Any] | None = None
        if not a.ours_only:
            with throwaway_store(a.store, "peers_aps", keep=a.keep, migrate_schema=False) as t:
                out.print(f"[bold]APScheduler[/]: {a.crons} schedules due at one instant")
                peer = side("peer", t.url, a, t.workdir)
    except BenchError as e:
        print(f"bench.peers: {e}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "name": "peers",
        "n": a.crons,
        "store": store_kind,
        "mode": a.mode,
        "seconds": ours["seconds"],
        "per_second": ours["per_second"],
        "baseline_per_second": peer["per_second"] if peer else None,
        "ratio": (
            r(ours["per_second"] / peer["per_second"], 2)
            if peer and ours["per_second"] and peer["per_second"]
            else None
        ),
        "p50_ms": ours["p50_ms"],
        "p99_ms": ours["p99_ms"],
        "duplicates": ours["duplicates"],
        "misses": ours["misses"],
        "peak_rss_mb": ours["peak_rss_mb"],
        "ours_only": a.ours_only,
        "ours": ours,
        "peer": peer,
    }
    if peer:
        for k in ("seconds", "p50_ms", "p99_ms", "duplicates", "misses", "peak_rss_mb"):
            result[f"peer_{k}"] = peer[k]
        result["peer_version"] = peer.get("version")
    emit(result)
    bad = ours["misses"] or ours["duplicates"] or (peer and (peer["misses"] or peer["duplicates"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
