"""Can the store take writes right now? A cheap answer for readiness and for recovery.

Reads keep working through the faults that stop a scheduler: a full disk, a read-only file
system or database, a standby promoted out from under us, a revoked privilege. With the
SQLite disk full, /readyz once said ready for 62 s while every write failed, because it only
read. A worker's own failure says so too (adapters/runtime/supervisor.py), but only once it
has something to write; this probe asks the store directly, whether or not anything is due:

- SQLite: a small file is written, synced and removed beside the database (a full disk,
  a read-only mount or a directory without write permission fail it), and the database file
  itself must be writable;
- PostgreSQL: a short connection of its own (the URL's conninfo) asks whether the server is
  in recovery, whether sessions are read-only, and whether we may insert into the event table.

The answer is kept for PROBE_SECONDS, so that the five workers backing off at once, and the
kubelet's probes, cost one check a second between them.
"""

from __future__ import annotations

import os
import threading

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.infrastructure.store.conninfo import with_defaults

#: Seconds an answer is reused.
PROBE_SECONDS = 1.0
#: Bytes the SQLite probe writes: a few of SQLite's 4 KiB pages, about what one small commit
#: appends to the write-ahead log.
PROBE_BYTES = 64 * 1024
#: Seconds the PostgreSQL probe waits for a connection, unless the URL says otherwise.
CONNECT_SECONDS = 2


class WriteProbe:
    """`check()`: None if the store takes writes, else why not (one line)."""

    def __init__(self, config: StoreConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._answer: tuple[float, str | None] | None = None

    def check(self, *, fresh: bool = False) -> str | None:
        """`fresh`: ask the store now, whatever the age of the kept answer (a worker's write
        failed since it was taken)."""
        with self._lock:
            now = self.clock.monotonic()
            kept = self._answer is not None and 0 <= now - self._answer[0] < PROBE_SECONDS
            if kept and not fresh:
                assert self._answer is not None
                return self._answer[1]
            answer = self._ask()
            self._answer = (self.clock.monotonic(), answer)
            return answer

    def _ask(self) -> str | None:
        if self.config.kind == "sqlite":
            return _sqlite(self.config.sqlite_path)
        if self.config.kind == "postgresql":
            return _postgres(self.config)
        return None


def _sqlite(path: str) -> str | None:
    directory = os.path.dirname(os.path.abspath(path))
    scratch = os.path.join(directory, f".{os.path.basename(path)}.write-probe")
    try:
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # A write to a nearly full disk may be short instead of failing.
            written = os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(scratch)
    except OSError as e:
        return f"cannot write in {directory}: {e.strerror or e}"
    if written < PROBE_BYTES:
        return f"cannot write in {directory}: no space left on device"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return f"cannot write {path}: permission denied"
    return None


def _postgres(config: StoreConfig) -> str | None:
    import psycopg  # PostgreSQL's only (store/conninfo.py)

    table = f'"{config.pg_schema or "public"}".cronsource_events'
    try:
        with psycopg.connect(
            with_defaults(config.pg_conninfo, connect_timeout=CONNECT_SECONDS), autocommit=True
        ) as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(), current_setting('transaction_read_only'),"
                " has_table_privilege(%s, 'INSERT')",
                (table,),
            ).fetchone()
    except psycopg.Error as e:
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        return f"the store does not answer: {first.strip()}"
    if row is None:
        return "the store answered nothing"
    in_recovery, read_only, may_insert = row
    if in_recovery:
        return "the server is a standby (in recovery): it takes no writes"
    if read_only == "on":
        return "sessions are read-only (default_transaction_read_only)"
    if not may_insert:
        return f"permission denied: INSERT on {table}"
    return None
