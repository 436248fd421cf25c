"""Helpers shared by the benchmarks: throwaway stores, manifests, percentiles, RSS, JSON output.

Every benchmark run works in a store of its own and removes it afterwards:

- a PostgreSQL URL names a server (and a database to connect to): the run creates a fresh
  database `cronsource_bench_<label>_<hex>` on that server and drops it at the end; where the
  role may not create databases, a fresh schema in the named database instead;
- a SQLite URL names a file that must not exist yet; it is created and deleted again;
- no URL: a SQLite file in a temporary directory.

`CRONSOURCE_BENCH_KEEP=1` (or `--keep`) leaves the store in place for inspection.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from cronsource.adapters.bootstrap import migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig, split_schema
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.manifest import parse_manifest

NAMESPACE = "bench"
#: The topic of a fire in the log (domain/cronworkflow.py).
FIRED_TOPIC = "cronsource:ScheduleFired/v1"
#: Transactions of the plain-insert baseline, the same as the scheduler's batch.
BASELINE_BATCH = 500


class BenchError(RuntimeError):
    """A benchmark that cannot run as asked (store in use, setup overran its deadline)."""


# ---------------------------------------------------------------------- output


def console() -> Console:
    """Progress goes to stderr, so stdout ends with the one JSON line."""
    return Console(stderr=True)


def progress() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(),
        transient=False,
    )


def emit(result: dict[str, Any]) -> None:
    """The benchmark's result: one JSON object, the last line of stdout."""
    sys.stdout.flush()
    print(json.dumps(result, default=str), flush=True)


def last_json_line(stdout: str) -> dict[str, Any]:
    """The result of a benchmark run as a subprocess (its last non-empty stdout line)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ValueError("benchmark printed nothing")
    data = json.loads(lines[-1])
    if not isinstance(data, dict):
        raise ValueError(f"last line is not a JSON object: {lines[-1]!r}")
    return data


def r(x: float | None, digits: int = 1) -> float | None:
    """Round for the JSON (None and NaN stay null)."""
    if x is None or x != x:
        return None
    return round(x, digits)


# ---------------------------------------------------------------------- statistics and memory


def percentile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 1]; NaN for no data."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of a process, in MiB; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def self_peak_rss_mb() -> float:
    """Peak RSS of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------- manifests


def manifest(name: str, schedule: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedules": [schedule],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


def create_crons(
    service: Any,
    n: int,
    schedule: str | Sequence[str],
    at: datetime,
    *,
    prefix: str = "burst",
    batch: int = 500,
    advance: Callable[[int], None] | None = None,
) -> list[UUID]:
    """Create N CronWorkflows as of `at` (set-up, not timed); `schedule` is one for all or
    one per CronWorkflow.

    The aggregates and their Created events are exactly what `cronsource apply` makes
    (`CronWorkflow.from_manifest` of an admitted manifest); they are saved `batch` per
    transaction instead of one by one, only to keep the set-up of large N short.
    """
    ids: list[UUID] = []
    for i in range(0, n, batch):
        aggs = [
            CronWorkflow.from_manifest(
                parse_manifest(
                    manifest(
                        f"{prefix}-{j:06d}", schedule if isinstance(schedule, str) else schedule[j]
                    )
                ),
                at,
            )
            for j in range(i, min(n, i + batch))
        ]
        service.save(*aggs)
        ids += [a.id for a in aggs]
        if advance:
            advance(len(aggs))
    return ids


def next_top_of_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


# ---------------------------------------------------------------------- throwaway stores


@dataclass
class Throwaway:
    """A store made for one run: `config` for cronsource, `pg_url` for plain psycopg."""

    config: StoreConfig
    workdir: Path
    kind: str
    pg_url: str = ""  # libpq conninfo of the fresh database (PostgreSQL only)
    pg_schema: str = ""  # the fresh schema, when no database could be created

    @property
    def url(self) -> str:
        return self.config.url


def _pg_with_db(url: str, dbname: str) -> str:
    """`url` naming another database; its libpq parameters (sslmode ...) stay, its schema goes."""
    parts = urlsplit(split_schema(url)[0])
    return urlunsplit(parts._replace(path="/" + dbname))


@contextlib.contextmanager
def throwaway_store(
    url: str | None, label: str, *, keep: bool = False, migrate_schema: bool = True
) -> Iterator[Throwaway]:
    """A fresh, migrated store for one benchmark run, removed afterwards (see module doc)."""
    keep = keep or bool(os.environ.get("CRONSOURCE_BENCH_KEEP"))
    workdir = Path(tempfile.mkdtemp(prefix=f"cronsource-{label}-"))
    cleanup: list[Callable[[], None]] = []
    made: Throwaway | None = None
    try:
        if url is None or url.startswith("sqlite:"):
            if url is None:
                path = workdir / f"{label}.db"
            else:
                path = Path(StoreConfig.parse(url).sqlite_path)
                if path.exists():
                    raise BenchError(
                        f"--store {url}: {path} exists; a benchmark needs a store of its own"
                        " (give a path that does not exist; it is deleted afterwards)"
                    )
                path.parent.mkdir(parents=True, exist_ok=True)
            config = StoreConfig.parse(f"sqlite:///{path.resolve()}")
            cleanup.append(lambda: _remove_sqlite(path))
            t = Throwaway(config, workdir, "sqlite")
        elif url.startswith(("postgresql:", "postgres:")):
            t = _fresh_postgres(url, label, workdir, cleanup)
        else:
            raise BenchError(f"--store {url}: benchmarks need sqlite:///PATH or postgresql://")
        made = t
        if migrate_schema:
            migrate(t.config)
        yield t
    finally:
        if not keep:
            for undo in reversed(cleanup):
                with contextlib.suppress(Exception):
                    undo()
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            where = made.url if made is not None else "(none)"
            print(f"kept: store {where}, work directory {workdir}", file=sys.stderr)


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", ".projector-lock"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()


def _fresh_postgres(
    url: str, label: str, workdir: Path, cleanup: list[Callable[[], None]]
) -> Throwaway:
    import psycopg
    from psycopg import errors, sql

    base = StoreConfig.parse(url)
    name = f"cronsource_bench_{label}_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(base.pg_conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except errors.InsufficientPrivilege:
        # No CREATEDB: a fresh schema in the named database instead.
        with psycopg.connect(base.pg_conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))

        def drop_schema() -> None:
            with psycopg.connect(base.pg_conninfo, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))

        cleanup.append(drop_schema)
        return Throwaway(base.with_schema(name), workdir, "postgresql", base.pg_conninfo, name)
    fresh = _pg_with_db(url, name)

    def drop_database() -> None:
        with psycopg.connect(base.pg_conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    cleanup.append(drop_database)
    return Throwaway(StoreConfig.parse(fresh), workdir, "postgresql", fresh)


def pg_connect(t: Throwaway) -> Any:
    """A plain autocommit psycopg connection to the run's database (and schema)."""
    import psycopg
    from psycopg import sql

    conn = psycopg.connect(t.pg_url, autocommit=True)
    if t.pg_schema:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(t.pg_schema)))
    return conn


# ---------------------------------------------------------------------- the log


def events_table(service: Any) -> str:
    return str(service.recorder.events_table_name)


def stored_rows(t: Throwaway, service: Any, topic: str) -> list[tuple[Any, int, str, bytes]]:
    """(originator_id, originator_version, topic, state) of every stored event of a topic."""
    table = events_table(service)
    q = (
        f"SELECT originator_id, originator_version, topic, state FROM {table}"
        " WHERE topic = {ph} ORDER BY originator_id, originator_version"
    )
    if t.kind == "postgresql":
        with pg_connect(t) as conn:
            rows = conn.execute(q.replace("{ph}", "%s"), (topic,)).fetchall()
        return [(a, int(b), c, bytes(d)) for a, b, c, d in rows]
    with contextlib.closing(sqlite3.connect(t.config.sqlite_path)) as conn:
        rows = conn.execute(q.replace("{ph}", "?"), (topic,)).fetchall()
    return [(a, int(b), c, bytes(d)) for a, b, c, d in rows]


def count_topic(service: Any, topic: str, batch: int = 10_000) -> dict[UUID, int]:
    """How many events of `topic` each stream has in the log (to count duplicates/misses)."""
    counts: dict[UUID, int] = {}
    start = 1
    while True:
        notes = service.recorder.select_notifications(start=start, limit=batch, topics=[topic])
        for n in notes:
            counts[n.originator_id] = counts.get(n.originator_id, 0) + 1
        if len(notes) < batch:
            return counts
        start = notes[-1].id + 1


# ---------------------------------------------------------------------- the plain baseline


def baseline_insert(
    t: Throwaway,
    rows: Sequence[tuple[Any, int, str, bytes]],
    batch: int = BASELINE_BATCH,
) -> float:
    """Insert `rows` into a scratch table shaped like the event table, in the same database,
    `batch` rows per transaction, with a plain driver loop (psycopg `executemany`, sqlite3
    `executemany`); returns the seconds it took. The scratch table is dropped afterwards."""
    if t.kind == "postgresql":
        with pg_connect(t) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_baseline")
            conn.execute(
                "CREATE TABLE bench_baseline (originator_id uuid NOT NULL,"
                " originator_version bigint NOT NULL, topic text, state bytea,"
                " notification_id bigserial,"
                " PRIMARY KEY (originator_id, originator_version))"
            )
            conn.execute("CREATE UNIQUE INDEX ON bench_baseline (notification_id)")
            conn.autocommit = False
            t0 = time.perf_counter()
            for i in range(0, len(rows), batch):
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO bench_baseline"
                        " (originator_id, originator_version, topic, state)"
                        " VALUES (%s, %s, %s, %s)",
                        rows[i : i + batch],
                    )
            seconds = time.perf_counter() - t0
            conn.autocommit = True
            conn.execute("DROP TABLE bench_baseline")
        return seconds
    with contextlib.closing(
        sqlite3.connect(t.config.sqlite_path, isolation_level=None, timeout=30)
    ) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_baseline")
        conn.execute(
            "CREATE TABLE bench_baseline (originator_id TEXT, originator_version INTEGER,"
            " topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
        )
        t0 = time.perf_counter()
        for i in range(0, len(rows), batch):
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO bench_baseline VALUES (?, ?, ?, ?)",
                [(str(a), b, c, d) for a, b, c, d in rows[i : i + batch]],
            )
            conn.execute("COMMIT")
        seconds = time.perf_counter() - t0
        conn.execute("DROP TABLE bench_baseline")
    return seconds


def git_commit() -> str:
    """The commit the benchmark ran at (`-dirty` when the work tree had changes), so that a
    figure names the code it measured; "unknown" outside a git checkout. The benchmarks'
    own outputs (bench/results/, docs/) are not changes of the code: `bench.report` writes
    them between its runs, and a run after another is still of the same code."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        dirty = git(
            "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results", ":!docs"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def machine_note() -> str:
    """CPU model and count, memory: the context every figure needs."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().splitlines()[0].split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    return f"{os.cpu_count()} x {cpu}{mem}, Python {sys.version.split()[0]}"


def utcnow() -> datetime:
    return datetime.now(UTC)
