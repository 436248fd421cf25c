"""Connections to the read model's database, and how statements and transactions run on them.

SQLite (`SqliteDatabase`): one connection shared by every thread, taken in turns under a lock.
A `:memory:` database exists only on the connection that made it, so it has to be shared;
a file store is the embedded, one-process store, whose writers serialise on BEGIN IMMEDIATE
anyway and whose indexed reads take well under a millisecond, so one code path for both.

PostgreSQL (`PostgresDatabase`): a pool of connections (psycopg_pool), so reads from
several threads (the HTTP server's worker threads, the scheduler, the projector) run at once
on connections of their own: nothing in this process serialises them. A connection that
broke (the server restarted) fails the statement it was taken for; a read then has the pool
drop every dead idle one and is tried once more (adapters/infrastructure/pgpool.py), and a
transaction fails, for the caller's supervisor to retry the turn. (The pool's check on every
checkout would find them first, at the cost of one more round trip per read on the
scheduler's and the API's hot paths, and of its backoff.) While the server is down, a caller
waits up to POOL_TIMEOUT for a connection, then gets PoolTimeout (an `OperationalError`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from cronsource.adapters.infrastructure.pgpool import broken_connection, drop_dead
from cronsource.adapters.infrastructure.readside.dialect import POSTGRESQL, SQLITE, Dialect

#: Connections one process keeps at most for the read model on PostgreSQL: reads beyond that
#: many at once wait their turn. The event store's pool allows 5 + 10 overflow; the HTTP
#: server's worker threads rarely have more than a few reads in flight at once.
POOL_SIZE = 10
#: Seconds a caller waits for a pooled connection (as the event store's do, store/config.py):
#: a loop step waiting longer while the store is down delays SIGTERM by as much.
POOL_TIMEOUT = 3.0


class Database(Protocol):
    """Statements with `?` placeholders on one database, in its dialect."""

    dialect: Dialect

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read-only statement."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """A connection inside one transaction: committed at the end, rolled back on error.
        Statements on it take the dialect's placeholders (`dialect.sql`)."""
        ...

    def separate_connection(self) -> Any:
        """A connection of its own, for long read-only checks (the store integrity check of
        /readyz) that must not hold up other reads; close it after."""
        ...

    def close(self) -> None:
        """Close the connections; the next statement opens them again."""
        ...


class SqliteDatabase:
    dialect = SQLITE

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # The read model is re-derivable from the log: losing its last commits to a power
        # cut only means projecting them again, so it need not fsync every commit.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    def _shared(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return list(self._shared().execute(sql, tuple(args)).fetchall())

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._lock:
            conn = self._shared()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def separate_connection(self) -> Any:
        return self._connect()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class PostgresDatabase:
    dialect = POSTGRESQL

    def __init__(self, url: str, schema: str | None = None, size: int = POOL_SIZE) -> None:
        self.url = url
        self.schema = schema
        self.size = size
        self._pool: Any = None  # psycopg_pool.ConnectionPool, made at first use
        self._making = threading.Lock()  # only while the pool is made or closed

    def _configure(self, conn: Any) -> None:
        if self.schema:
            conn.execute(f'SET search_path TO "{self.schema}"')

    def _connections(self) -> Any:
        pool = self._pool
        if pool is not None:
            return pool
        from psycopg_pool import ConnectionPool

        with self._making:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self.size,
                    kwargs={"autocommit": True},
                    configure=self._configure,
                    timeout=POOL_TIMEOUT,
                    name="cronsource-readmodel",
                    open=True,
                )
            return self._pool

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """A read, tried once more on a fresh connection when its connection broke (the
        server restarted: adapters/infrastructure/pgpool.py)."""
        statement, values = self.dialect.sql(sql), tuple(args)
        try:
            with self._connections().connection() as conn:
                return list(conn.execute(statement, values).fetchall())
        except Exception as e:
            if not broken_connection(e):
                raise
            drop_dead(self._connections())
        with self._connections().connection() as conn:
            return list(conn.execute(statement, values).fetchall())

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """Not tried again (the caller's block is not ours to repeat), but a broken
        connection has the pool drop the other dead ones, so the retried turn gets a
        fresh one."""
        pool = self._connections()
        try:
            with pool.connection() as conn, conn.transaction():
                yield conn
        except Exception as e:
            if broken_connection(e):
                drop_dead(pool)
            raise

    def separate_connection(self) -> Any:
        import psycopg

        conn = psycopg.connect(self.url, autocommit=True)
        self._configure(conn)
        return conn

    def close(self) -> None:
        with self._making:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
