"""SQLite: the event store's recorder, the snapshots' recorder, and their factory."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import (
    Notification,
    StoredEvent,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteAggregateRecorder,
    SQLiteApplicationRecorder,
    SQLiteDatastore,
    SQLiteFactory,
)

from cronsource.adapters.infrastructure.store.recorders.common import (
    _GAPS,
    _NO_LIMIT,
    CHECK_CHUNK,
    StaleAppend,
    _deadline_errors,
    _seconds_left,
    first_versions,
)


class ReadingDatastore(SQLiteDatastore):
    """eventsourcing's datastore, with one connection per thread for single-statement reads.

    Each read through the library's pool takes a connection out and puts it back, under its
    reader-writer interlock: about 20 us of Python a read, on reads of 10 us. A simulated
    minutely tick makes some twenty (the log's head alone nine times): reading here took
    12-15 % off its CPU (bench.simulate --case minutely --scale 0.1, against the pool).
    A file in WAL mode needs no interlock for a read: each SELECT in autocommit sees the
    last commit, from this process or another, as the pool's connections do. A database in
    memory lives in its connections, so it keeps the pool's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def reader(self) -> sqlite3.Connection | None:
        """This thread's read connection; None for a database in memory, or once closed."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None or self.pool.is_sqlite_memory_mode:
            return conn
        conn = sqlite3.connect(
            self.pool.db_name,
            uri=True,
            check_same_thread=False,  # closed by `close`, from another thread
            isolation_level=None,
            timeout=self.pool.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
        )
        conn.row_factory = sqlite3.Row
        with self._lock:
            if self._closed:
                conn.close()
                return None
            self._readers.append(conn)
        self._local.conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            self._closed, readers = True, self._readers[:]
            self._readers.clear()
        for conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        super().close()


class _SingleStatementReads(SQLiteAggregateRecorder):
    """The reads every turn makes (a stream's events after a version, the log's head, the
    events after a position), each as one statement: a single SELECT is a consistent read on
    its own (WAL), where the library wraps each in BEGIN ... ROLLBACK, two more statements
    and a third of the time of a short read; on this thread's own connection (ReadingDatastore)."""

    def _fetch(self, statement: str, params: Sequence[Any]) -> list[Any]:
        store = self.datastore
        reader = store.reader() if isinstance(store, ReadingDatastore) else None
        if reader is not None:
            return reader.execute(statement, params).fetchall()
        with store.get_connection(commit=False) as conn, conn.cursor() as c:
            c.execute(statement, params)
            return c.fetchall()

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        statement = self.select_events_statement
        params: list[Any] = [
            originator_id.hex if isinstance(originator_id, UUID) else originator_id
        ]
        if gt is not None:
            statement += "AND originator_version>? "
            params.append(gt)
        if lte is not None:
            statement += "AND originator_version<=? "
            params.append(lte)
        statement += "ORDER BY originator_version " + ("DESC " if desc else "ASC ")
        if limit is not None:
            statement += "LIMIT ? "
            params.append(limit)
        convert = self.convert_originator_id
        return [
            StoredEvent(
                originator_id=convert(row["originator_id"]),
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=row["state"],
            )
            for row in self._fetch(statement, params)
        ]


class SqliteRecorder(_SingleStatementReads, SQLiteApplicationRecorder):
    def max_notification_id(self) -> int:
        return int(self._fetch(self.select_max_notification_id_statement, ())[0][0] or 0)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        if start is None or stop is not None or topics or not inclusive_of_start:
            return super().select_notifications(
                start, limit, stop, topics, inclusive_of_start=inclusive_of_start
            )
        convert = self.convert_originator_id
        rows = self._fetch(
            f"SELECT rowid, * FROM {self.events_table_name}"  # noqa: S608
            " WHERE rowid>=? ORDER BY rowid LIMIT ?",
            (start, limit),
        )
        return [
            Notification(
                id=row["rowid"],
                originator_id=convert(row["originator_id"]),
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=row["state"],
            )
            for row in rows
        ]

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert, then check each stream's last version before the new ones inside the same
        transaction: the insert holds SQLite's write lock, so nobody appends in between, and a
        stale save rolls back whole (StaleAppend)."""
        left = _seconds_left()
        with _deadline_errors(), self.datastore.get_connection(commit=True) as conn:
            if left is not None:
                # The wait for another process's write lock, bounded by the commit deadline.
                conn.cursor().execute(f"PRAGMA busy_timeout = {max(1, int(left * 1000))}")
            try:
                with conn.transaction(commit=True) as c:
                    ids = self._insert_events(c, stored_events, **kwargs)
                    stale = self._stale(c, stored_events)
                    if stale:
                        raise StaleAppend(stale)
                    return ids
            finally:
                if left is not None:
                    seconds = self.datastore.pool.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT
                    conn.cursor().execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def _stale(
        self, c: Any, stored_events: Sequence[StoredEvent]
    ) -> dict[UUID, tuple[int, int | None]]:
        firsts = list(first_versions(stored_events).items())
        stale: dict[UUID, tuple[int, int | None]] = {}
        for i in range(0, len(firsts), CHECK_CHUNK):
            chunk = firsts[i : i + CHECK_CHUNK]
            values = ",".join("(?, ?)" for _ in chunk)
            c.execute(
                f"WITH firsts(oid, v) AS (VALUES {values}) "  # noqa: S608
                f"SELECT oid, v, (SELECT max(originator_version) FROM {self.events_table_name} e"
                " WHERE e.originator_id = f.oid AND e.originator_version < f.v) AS last"
                " FROM firsts f",
                [x for oid, v in chunk for x in (oid.hex, v)],
            )
            for row in c.fetchall():
                if (row["last"] or 0) != row["v"] - 1:
                    oid = cast(UUID, self.convert_originator_id(row["oid"]))
                    stale[oid] = (row["v"], row["last"])
        return stale

    def remove_covered(
        self, snapshots_table: str, after: int, upto: int, keep: Sequence[int], limit: int
    ) -> tuple[int, int, set[UUID]]:
        """As PostgresRecorder.remove_covered (the notification id is SQLite's rowid)."""
        t = self.events_table_name
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"SELECT max(rowid) AS last FROM (SELECT rowid FROM {t}"  # noqa: S608
                " WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?)",
                (after, upto, limit),
            )
            row = c.fetchone()
            last = int(row["last"]) if row is not None and row["last"] is not None else upto
            # The ids to keep may be many (an active run's fire each): a temporary table,
            # not one host parameter each.
            c.execute("CREATE TEMP TABLE IF NOT EXISTS retention_keep (n INTEGER PRIMARY KEY)")
            c.execute("DELETE FROM retention_keep")
            c.executemany("INSERT INTO retention_keep (n) VALUES (?)", [(n,) for n in keep])
            c.execute(
                f"DELETE FROM {t} WHERE rowid > ? AND rowid <= ?"  # noqa: S608
                " AND rowid NOT IN (SELECT n FROM retention_keep)"
                f" AND originator_version <= (SELECT s.originator_version FROM"
                f" {snapshots_table} s WHERE s.originator_id = {t}.originator_id"
                " ORDER BY s.originator_version DESC LIMIT 1 OFFSET 1)"
                f" AND originator_version < (SELECT max(x.originator_version) FROM {t} x"
                f" WHERE x.originator_id = {t}.originator_id)",
                (after, last),
            )
            c.execute("SELECT changes() AS n")
            removed = int(c.fetchone()["n"])
            c.execute(
                f"SELECT DISTINCT originator_id FROM {t} e WHERE rowid > ? AND rowid <= ?"  # noqa: S608
                " AND rowid NOT IN (SELECT n FROM retention_keep)"
                " AND originator_version > COALESCE((SELECT s.originator_version FROM"
                f" {snapshots_table} s WHERE s.originator_id = e.originator_id"
                " ORDER BY s.originator_version DESC LIMIT 1 OFFSET 1), 0)"
                f" AND originator_version < (SELECT max(x.originator_version) FROM {t} x"
                " WHERE x.originator_id = e.originator_id)",
                (after, last),
            )
            uncovered = {
                cast(UUID, self.convert_originator_id(r["originator_id"])) for r in c.fetchall()
            }
            c.execute(
                f"DELETE FROM {snapshots_table} WHERE originator_version < (SELECT"  # noqa: S608
                f" x.originator_version FROM {snapshots_table} x WHERE x.originator_id ="
                f" {snapshots_table}.originator_id ORDER BY x.originator_version DESC"
                " LIMIT 1 OFFSET 1) AND originator_version < (SELECT"
                f" min(e.originator_version) FROM {t} e WHERE e.originator_id ="
                f" {snapshots_table}.originator_id) - 1"
            )
        return max(removed, 0), last, uncovered

    def gaps(self) -> list[tuple[UUID, int, int]]:
        """Holes inside streams: (stream, version before, version after); a full scan."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(_GAPS.format(table=self.events_table_name))
            return [
                (cast(UUID, self.convert_originator_id(r["originator_id"])), r["prev"], r["v"])
                for r in c.fetchall()
            ]

    def insert_into_gaps(self, stored_events: Sequence[StoredEvent]) -> None:
        """Insert events at versions a stream is missing, without the last-version check."""
        with self.datastore.transaction(commit=True) as c:
            self._insert_events(c, stored_events)

    def select_events_many(
        self, originator_ids: Sequence[UUID], after: Mapping[UUID, int] | None = None
    ) -> dict[UUID, list[StoredEvent]]:
        """The events of these streams after the version `after` gives for each (all of
        them for a stream it does not name), in version order, by stream."""
        out: dict[UUID, list[StoredEvent]] = defaultdict(list)
        pairs = [(i.hex, (after or {}).get(i, 0)) for i in originator_ids]
        with self.datastore.transaction(commit=False) as c:
            for i in range(0, len(pairs), CHECK_CHUNK):
                chunk = pairs[i : i + CHECK_CHUNK]
                values = ",".join("(?, ?)" for _ in chunk)
                c.execute(
                    f"WITH w(oid, gt) AS (VALUES {values}) "  # noqa: S608
                    "SELECT e.originator_id, e.originator_version, e.topic, e.state"
                    f" FROM w JOIN {self.events_table_name} e ON e.originator_id = w.oid"
                    " AND e.originator_version > w.gt"
                    " ORDER BY e.originator_id, e.originator_version",
                    [x for pair in chunk for x in pair],
                )
                for row in c.fetchall():
                    # Our stream ids are all uuid5, which the recorder converts back to UUID.
                    oid = cast(UUID, self.convert_originator_id(row["originator_id"]))
                    out[oid].append(
                        StoredEvent(oid, row["originator_version"], row["topic"], row["state"])
                    )
        return out


class SqliteSnapshotRecorder(_SingleStatementReads):
    def select_latest_many(self, upto: Mapping[UUID, int | None]) -> dict[UUID, StoredEvent]:
        """The latest snapshot of each stream at or below its version (None: any)."""
        pairs = [(i.hex, v if v is not None else _NO_LIMIT) for i, v in upto.items()]
        out: dict[UUID, StoredEvent] = {}
        with self.datastore.transaction(commit=False) as c:
            for i in range(0, len(pairs), CHECK_CHUNK):
                chunk = pairs[i : i + CHECK_CHUNK]
                values = ",".join("(?, ?)" for _ in chunk)
                c.execute(
                    f"WITH w(oid, upto) AS (VALUES {values}) "  # noqa: S608
                    "SELECT s.originator_id, s.originator_version, s.topic, s.state"
                    f" FROM w JOIN {self.events_table_name} s ON s.originator_id = w.oid"
                    " AND s.originator_version = (SELECT max(originator_version)"
                    f" FROM {self.events_table_name} x WHERE x.originator_id = w.oid"
                    " AND x.originator_version <= w.upto)",
                    [x for pair in chunk for x in pair],
                )
                for row in c.fetchall():
                    oid = cast(UUID, self.convert_originator_id(row["originator_id"]))
                    out[oid] = StoredEvent(
                        oid, row["originator_version"], row["topic"], row["state"]
                    )
        return out


class SqliteFactory(SQLiteFactory):
    """eventsourcing's SQLite persistence, with our snapshot recorder and its datastore with
    a read connection per thread (ReadingDatastore)."""

    aggregate_recorder_class = SqliteSnapshotRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        given = self.datastore
        self.datastore = ReadingDatastore(
            db_name=given.pool.db_name,
            lock_timeout=given.pool.lock_timeout,
            single_row_tracking=given.single_row_tracking,
            originator_id_type=given.originator_id_type,
        )
        given.close()  # never used: it opened no connection
