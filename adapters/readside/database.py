"""Connections to the read model's database, and how statements and transactions run on them.

SQLite: one connection shared by every thread (a `:memory:` database exists only on the
connection that made it), so a lock takes turns on it; writers use BEGIN IMMEDIATE.
PostgreSQL: a connection per thread; a closed one (the server restarted) is replaced on next
use, and the caller's failed statement is retried by its supervisor.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from adapters.readside.dialect import POSTGRESQL, SQLITE, Dialect


class Database:
    """Statements with `?` placeholders on one database, in this dialect."""

    def __init__(self, connect: Callable[[], Any], dialect: Dialect, shared: bool) -> None:
        self._connect = connect
        self.dialect = dialect
        self._local = threading.local()
        self._shared = shared
        self._shared_conn: Any = None
        self._lock = threading.RLock()

    @classmethod
    def sqlite(cls, path: str) -> Database:
        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            # The read model is re-derivable from the log: losing its last commits to a power
            # cut only means projecting them again, so it need not fsync every commit.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            return conn

        return cls(connect, SQLITE, shared=True)

    @classmethod
    def postgres(cls, url: str, schema: str | None = None) -> Database:
        import psycopg

        def connect() -> Any:
            conn = psycopg.connect(url, autocommit=True)
            if schema:
                conn.execute(f'SET search_path TO "{schema}"')
            return conn

        return cls(connect, POSTGRESQL, shared=False)

    def _conn(self) -> Any:
        if self._shared:
            if self._shared_conn is None:
                self._shared_conn = self._connect()
            return self._shared_conn
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read-only statement."""
        with self._lock:
            cur = self._conn().execute(self.dialect.sql(sql), tuple(args))
            return list(cur.fetchall())

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A connection inside one transaction: committed at the end, rolled back on error.
        Statements on it take this dialect's placeholders (`dialect.sql`)."""
        conn = self._conn()
        if self.dialect.is_sqlite:
            with self._lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        else:
            with conn.transaction():
                yield conn

    def separate_connection(self) -> Any:
        """A connection of its own, for long read-only checks that must not hold the
        shared connection's lock (the store integrity check of /readyz); close it after."""
        return self._connect()

    def close(self) -> None:
        if self._shared_conn is not None:
            self._shared_conn.close()
            self._shared_conn = None
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
