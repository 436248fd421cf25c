"""Which server (or file) the event store is, now: the loop drops its cached copies when it changes.

The version check keeps a writer from saving on top of a log that lost its tail, but a writer
that keeps deciding from copies ahead of the log has every save refused. The pool hides the
moment it matters: with pre-ping it silently replaces a connection to a dead primary by one to
the promoted standby. So the runtime asks here, now and then, what it is talking to, and drops
every cached copy when the answer changes:

- PostgreSQL: the cluster's system identifier (changes with a restore into a new cluster), the
  timeline of the WAL it writes (changes when a standby is promoted), and the postmaster's
  start time (changes with any restart, including a crash whose recovery may itself have lost
  commits that were acknowledged with `synchronous_commit = off`);
- SQLite: the database file's device and inode (a restored or replaced file);
- memory: nothing can replace it.
"""

from __future__ import annotations

import os
from typing import Any

from cronsource.adapters.runtime.engine import Engine

_PG_IDENTITY = (
    "SELECT (SELECT system_identifier FROM pg_control_system())::text AS system,"
    " substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS timeline,"
    " pg_postmaster_start_time()::text AS started"
)


def store_identity(engine: Engine) -> str:
    """A short text naming the store now; equal texts mean the same log."""
    config = engine.config
    if config.kind == "postgresql":
        datastore: Any = getattr(engine.service.recorder, "datastore")  # noqa: B009
        with datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(_PG_IDENTITY)
            row = curs.fetchone()
        return f"system {row['system']}, timeline {int(row['timeline'], 16)}, up {row['started']}"
    if config.kind == "sqlite":
        try:
            st = os.stat(config.sqlite_path)
        except OSError as e:
            return f"missing ({e.strerror})"
        return f"file {config.sqlite_path} (device {st.st_dev}, inode {st.st_ino})"
    return "memory"
