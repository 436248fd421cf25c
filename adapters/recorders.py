"""The event store's recorders, as eventsourcing ships them plus what the log's truth and a
burst need.

The library's version check is a unique key on (stream, version): it refuses a writer that is
behind, never one that is ahead. After a failover to an asynchronous standby the promoted log
has lost its last commits, and a replica still holding a copy at version 12 of a stream the
log now ends at 8 would write 13 on top of the hole: a stream nobody can replay again
(`OriginatorVersionError: (9, 8)`), for every reader, for good. So every append here checks
what Kubernetes' `resourceVersion` precondition checks: the stream's last version in the log
is the one the writer read (`StaleAppend` otherwise, an IntegrityError like any stale save,
so the writer reloads and decides again). Duplicates are still refused by the key.

And for a burst of 10,000 fires, which loaded each aggregate with its own query and wrote each
batch as an array of a composite type (whose client-side encoding cost more than the server's
insert), they add:

- `select_events_many(ids)`: the events of many streams in one query;
- on PostgreSQL, the insert sends four plain arrays (`unnest(uuid[], bigint[], text[],
  bytea[])`) instead of one array of a composite type, and checks the last versions in the
  same statement.

The library retries a failed insert up to 10 times, each waiting for a connection: a decision
made before an outage was committed 44 s later as an on-time fire. Here an insert is tried
once; the caller decides again on what the store holds then (domain/service.py).

They are wired in through eventsourcing's own `APPLICATION_RECORDER_TOPIC` (adapters/store.py),
and for `memory:` through `MemoryFactory` (its `PERSISTENCE_MODULE`).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    StoredEvent,
)
from eventsourcing.popo import POPOAggregateRecorder, POPOApplicationRecorder, POPOFactory
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from eventsourcing.postgres import PostgresFactory as LibraryPostgresFactory
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteAggregateRecorder,
    SQLiteApplicationRecorder,
    SQLiteFactory,
)
from eventsourcing.utils import retry
from psycopg.sql import SQL, Identifier

#: Streams per query: bounds the statement's parameter and the rows held at once.
MANY_CHUNK = 1000
#: (stream, first version) pairs per SQLite check query: two host parameters each, well
#: below SQLite's default limit of 32,766.
CHECK_CHUNK = 400


#: Versions missing inside a stream: (stream, the version before the hole, the one after it).
#: A hole can only come from a writer of an older cronsource (before every append checked the
#: last version) saving on top of a log that had lost its tail; `cronsource check` reports
#: them and `--repair` records the missing versions as lost (adapters/loggaps.py).
_GAPS = (
    "SELECT originator_id, prev, v FROM (SELECT originator_id, originator_version AS v,"
    " lag(originator_version, 1, 0) OVER (PARTITION BY originator_id"
    " ORDER BY originator_version) AS prev FROM {table}) g WHERE v - prev > 1"
    " ORDER BY originator_id, v"
)


class StaleAppend(IntegrityError):
    """A save whose stream in the log does not end where the writer's copy did: the log is
    ahead of the copy (another writer saved first) or behind it (the log lost its tail). Either
    way the writer reloads and decides again; nothing of the save was written.

    `stale` maps each such stream to (the save's first version, the log's last version), and
    `streams` names them, so the writer drops exactly those cached copies."""

    def __init__(self, stale: Mapping[UUID, tuple[int, int | None]]) -> None:
        parts = [
            f"stream {oid}: the log ends at version {last or 0}, the save starts at {first}"
            for oid, (first, last) in list(stale.items())[:3]
        ]
        more = f" (and {len(stale) - 3} more)" if len(stale) > 3 else ""
        super().__init__("stale append: " + "; ".join(parts) + more)
        self.stale = dict(stale)
        self.streams = frozenset(stale)


class CommitTooLate(OperationalError):
    """A save that could not be committed by its deadline (`commit_within`): it was not written,
    and its decisions are to be made again on the time it is now."""


_deadline = threading.local()


@contextmanager
def commit_within(seconds: float | None) -> Iterator[None]:
    """Saves of this thread inside the block commit within `seconds` from now, or not at all
    (CommitTooLate): a store that is slow, locked or reconnecting cannot turn a decision made
    on time into a fire committed late as if it were on time. None: no deadline. (Counted on
    this process's monotonic clock, which the store's timeouts count in too.)"""
    previous = getattr(_deadline, "value", None)
    _deadline.value = None if seconds is None else time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline.value = previous


def _seconds_left() -> float | None:
    """Seconds before this thread's commit deadline; CommitTooLate once it has passed."""
    deadline: float | None = getattr(_deadline, "value", None)
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise CommitTooLate(f"the commit deadline passed {-left:.1f}s ago; nothing was written")
    return left


def _past_deadline() -> bool:
    """Whether this thread's commit deadline has passed (give or take the 50 ms a timeout
    set from it may fire early by rounding)."""
    deadline: float | None = getattr(_deadline, "value", None)
    return deadline is not None and time.monotonic() >= deadline - 0.05


@contextmanager
def _deadline_errors() -> Iterator[None]:
    """A store error once the deadline has passed is the deadline's doing (a statement or
    lock timeout, SQLite's busy timeout): say so, so that the caller decides again instead of
    backing off as from a broken store."""
    try:
        yield
    except OperationalError as e:
        if _past_deadline():
            raise CommitTooLate(f"not committed by its deadline ({e}); nothing was written") from e
        raise


def _columns(stored_events: Sequence[StoredEvent]) -> tuple[list[Any], ...]:
    """The events as four arrays (`unnest(uuid[], bigint[], text[], bytea[])`)."""
    return (
        [e.originator_id for e in stored_events],
        [e.originator_version for e in stored_events],
        [e.topic for e in stored_events],
        [e.state for e in stored_events],
    )


def first_versions(stored_events: Sequence[StoredEvent]) -> dict[UUID, int]:
    """The first new version of each stream in a save (a save holds consecutive versions)."""
    firsts: dict[UUID, int] = {}
    for e in stored_events:
        oid = cast(UUID, e.originator_id)
        if oid not in firsts or e.originator_version < firsts[oid]:
            firsts[oid] = e.originator_version
    return firsts


def _unwrapped(method: Callable[..., Any]) -> Callable[..., Any]:
    """The library method without its retry decorator (eventsourcing.utils.retry keeps the
    original as `__wrapped__`)."""
    return cast(Callable[..., Any], getattr(method, "__wrapped__", method))


_PG_INSERT_ONCE = _unwrapped(PostgresApplicationRecorder.insert_events)
#: Reads are tried twice (one fresh connection after a broken one), not the library's ten
#: times: a loop step that reads must give up within seconds while the store is down, so
#: that SIGTERM stops a replica promptly and the supervisor's backoff takes over.
_READ_ATTEMPTS = 2
_READ_WAIT = 0.2
_select_events = retry(
    (InterfaceError, OperationalError), max_attempts=_READ_ATTEMPTS, wait=_READ_WAIT
)(_unwrapped(PostgresApplicationRecorder.select_events))
_select_notifications = retry(
    (InterfaceError, OperationalError), max_attempts=_READ_ATTEMPTS, wait=_READ_WAIT
)(_unwrapped(PostgresApplicationRecorder.select_notifications))
_max_notification_id = retry(
    (InterfaceError, OperationalError), max_attempts=_READ_ATTEMPTS, wait=_READ_WAIT
)(_unwrapped(PostgresApplicationRecorder.max_notification_id))


class _NothingInserted(IntegrityError):
    """The checked insert wrote no row; `PostgresRecorder.insert_events` names the streams."""


class PostgresRecorder(PostgresApplicationRecorder):
    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        table = SQL("{schema}.{table}").format(
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
        )
        id_type = Identifier(self.datastore.originator_id_type)
        # One statement: the new rows, each stream's first new version, and the insert only
        # if every stream's last version in the log is the one before it. The table lock the
        # library takes first (EXCLUSIVE: inserts queue, reads go on) keeps anyone from
        # appending between the check and the insert. WITH ORDINALITY keeps the rows in the
        # order given, so notification ids follow the versions within a stream.
        self._insert_arrays = SQL(
            "WITH new AS (SELECT * FROM unnest(%s::{id_type}[], %s::bigint[], %s::text[],"
            " %s::bytea[]) WITH ORDINALITY AS n(originator_id, originator_version, topic,"
            " state, ord)), "
            "firsts AS (SELECT originator_id, min(originator_version) AS v FROM new"
            " GROUP BY originator_id), "
            "stale AS (SELECT 1 FROM firsts f WHERE f.v - 1 <> COALESCE((SELECT"
            " max(e.originator_version) FROM {table} e WHERE e.originator_id ="
            " f.originator_id), 0) LIMIT 1) "
            "INSERT INTO {table} (originator_id, originator_version, topic, state) "
            "SELECT originator_id, originator_version, topic, state FROM new"
            " WHERE NOT EXISTS (SELECT 1 FROM stale) ORDER BY ord "
            "RETURNING notification_id"
        ).format(table=table, id_type=id_type)
        self._insert_plain = SQL(
            "INSERT INTO {table} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(%s::{id_type}[], %s::bigint[], %s::text[], %s::bytea[])"
        ).format(table=table, id_type=id_type)
        self._last_versions = SQL(
            "SELECT originator_id, max(originator_version) AS v FROM {table}"
            " WHERE originator_id = ANY(%s) GROUP BY originator_id"
        ).format(table=table)
        self._select_many = SQL(
            "SELECT e.originator_id, e.originator_version, e.topic, e.state FROM {table} e"
            " JOIN unnest(%s::{id_type}[], %s::bigint[]) AS w(oid, gt)"
            " ON e.originator_id = w.oid AND e.originator_version > w.gt"
            " ORDER BY e.originator_id, e.originator_version"
        ).format(table=table, id_type=id_type)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert once, checking each stream's last version (StaleAppend) and this thread's
        commit deadline (CommitTooLate); never retried here (see the module docstring)."""
        _seconds_left()
        try:
            with _deadline_errors():
                return cast(Sequence[int] | None, _PG_INSERT_ONCE(self, stored_events, **kwargs))
        except _NothingInserted:
            raise StaleAppend(self._stale(stored_events)) from None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        return cast(
            Sequence[StoredEvent],
            _select_events(self, originator_id, gt=gt, lte=lte, desc=desc, limit=limit),
        )

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        return cast(
            Sequence[Notification],
            _select_notifications(
                self, start, limit, stop, topics, inclusive_of_start=inclusive_of_start
            ),
        )

    def max_notification_id(self) -> int | None:
        return cast(int | None, _max_notification_id(self))

    def _insert_stored_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        left = _seconds_left()
        if left is not None:
            # Bounds the wait for the table lock and the insert itself; the commit that
            # follows is the server's own, short, work.
            ms = max(1, int(left * 1000))
            curs.execute(SQL("SET LOCAL statement_timeout = {0}").format(ms))
            curs.execute(SQL("SET LOCAL lock_timeout = {0}").format(ms))
        self._lock_table(curs)
        self._notify_channel(curs)
        curs.execute(self._insert_arrays, _columns(stored_events), prepare=True)

    def _fetch_ids_after_insert_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        if ids is not None and len(ids) < len(stored_events):
            # The statement inserted nothing: a stream's last version was not the one the
            # save follows (the transaction commits no row; its NOTIFY is a harmless wake-up).
            raise _NothingInserted

        return ids

    def _stale(self, stored_events: Sequence[StoredEvent]) -> dict[UUID, tuple[int, int | None]]:
        """Which streams did not end where the save began (a query on the failure path only:
        the log may have moved since, so this names what it holds now)."""
        firsts = first_versions(stored_events)
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._last_versions, (list(firsts),))
            last = {row["originator_id"]: row["v"] for row in curs.fetchall()}
        return {
            oid: (v, last.get(oid)) for oid, v in firsts.items() if (last.get(oid) or 0) != v - 1
        }

    def gaps(self) -> list[tuple[UUID, int, int]]:
        """Holes inside streams: (stream, version before, version after); a full scan."""
        table = f'"{self.datastore.schema}"."{self.events_table_name}"'
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(_GAPS.format(table=table))
            return [(r["originator_id"], r["prev"], r["v"]) for r in curs.fetchall()]

    def insert_into_gaps(self, stored_events: Sequence[StoredEvent]) -> None:
        """Insert events at versions a stream is missing, without the last-version check
        (which refuses exactly that); the key still refuses a version that exists."""
        with self.datastore.transaction(commit=True) as curs:
            self._lock_table(curs)
            self._notify_channel(curs)
            curs.execute(self._insert_plain, _columns(stored_events))

    def remove_covered(
        self, snapshots_table: str, after: int, upto: int, keep: Sequence[int], limit: int
    ) -> tuple[int, int, set[UUID]]:
        """Retention (adapters/runtime/retention.py): delete up to `limit` events with
        notification id in (`after`, `upto`] that the stream's second latest snapshot covers
        (so a load can fall back to it when the latest cannot be read), that are not their
        stream's last event (the last version is what every append checks) and not in `keep`.
        One short transaction: it holds the table's row locks, and appends (which lock the
        table) wait for it, so batches stay small. Returns (events removed, the last
        notification id looked at, the streams with events in the range that no snapshot
        covers yet: snapshot them and look again)."""
        table = SQL("{schema}.{table}").format(
            schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name)
        )
        snaps = SQL("{schema}.{table}").format(
            schema=Identifier(self.datastore.schema), table=Identifier(snapshots_table)
        )
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL(
                    "SELECT max(notification_id) AS last FROM (SELECT notification_id FROM"
                    " {table} WHERE notification_id > %s AND notification_id <= %s"
                    " ORDER BY notification_id LIMIT %s) w"
                ).format(table=table),
                (after, upto, limit),
            )
            row = curs.fetchone()
            last = int(row["last"]) if row and row["last"] is not None else upto
            curs.execute(
                SQL(
                    "DELETE FROM {table} e WHERE e.notification_id > %s"
                    " AND e.notification_id <= %s AND NOT (e.notification_id = ANY(%s))"
                    " AND e.originator_version <= (SELECT s.originator_version FROM {snaps} s"
                    " WHERE s.originator_id = e.originator_id"
                    " ORDER BY s.originator_version DESC OFFSET 1 LIMIT 1)"
                    " AND e.originator_version < (SELECT max(x.originator_version) FROM"
                    " {table} x WHERE x.originator_id = e.originator_id)"
                ).format(table=table, snaps=snaps),
                (after, last, list(keep)),
            )
            removed = curs.rowcount
            curs.execute(
                SQL(
                    "SELECT DISTINCT e.originator_id FROM {table} e WHERE e.notification_id > %s"
                    " AND e.notification_id <= %s AND NOT (e.notification_id = ANY(%s))"
                    " AND e.originator_version > COALESCE((SELECT s.originator_version FROM"
                    " {snaps} s WHERE s.originator_id = e.originator_id"
                    " ORDER BY s.originator_version DESC OFFSET 1 LIMIT 1), 0)"
                    " AND e.originator_version < (SELECT max(x.originator_version) FROM"
                    " {table} x WHERE x.originator_id = e.originator_id)"
                ).format(table=table, snaps=snaps),
                (after, last, list(keep)),
            )
            uncovered = {row["originator_id"] for row in curs.fetchall()}
            # The two latest snapshots of each stream stay (the older is what a load falls
            # back to when the latest cannot be read: domain/service.py ForgivingSnapshots);
            # older ones below the oldest event kept serve no load now.
            curs.execute(
                SQL(
                    "DELETE FROM {snaps} s WHERE s.originator_version < (SELECT"
                    " t.originator_version FROM {snaps} t WHERE t.originator_id ="
                    " s.originator_id ORDER BY t.originator_version DESC OFFSET 1 LIMIT 1)"
                    " AND s.originator_version < (SELECT min(e.originator_version) FROM"
                    " {table} e WHERE e.originator_id = s.originator_id) - 1"
                ).format(table=table, snaps=snaps)
            )
        return max(removed, 0), last, uncovered

    def select_events_many(
        self, originator_ids: Sequence[UUID], after: Mapping[UUID, int] | None = None
    ) -> dict[UUID, list[StoredEvent]]:
        """The events of these streams after the version `after` gives for each (all of
        them for a stream it does not name), in version order, by stream."""
        out: dict[UUID, list[StoredEvent]] = defaultdict(list)
        ids = list(originator_ids)
        gts = [(after or {}).get(i, 0) for i in ids]
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            for i in range(0, len(ids), MANY_CHUNK):
                curs.execute(
                    self._select_many,
                    (ids[i : i + MANY_CHUNK], gts[i : i + MANY_CHUNK]),
                    prepare=True,
                )
                for row in curs.fetchall():
                    oid = row["originator_id"]
                    out[oid].append(
                        StoredEvent(
                            oid, row["originator_version"], row["topic"], bytes(row["state"])
                        )
                    )
        return out


class SqliteRecorder(SQLiteApplicationRecorder):
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


class MemoryRecorder(POPOApplicationRecorder):
    """`memory:`: the library's in-process recorder with the same last-version check. It
    carries its snapshots (`snapshots`), so that replicas sharing it share them too."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots = MemorySnapshotRecorder()

    def _assert_uniqueness(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._assert_uniqueness(stored_events, **kwargs)
        stale: dict[UUID, tuple[int, int | None]] = {}
        for oid, first in first_versions(stored_events).items():
            versions = self._stored_events_index[str(oid)]
            last = max((v for v in versions if v < first), default=None)
            if (last or 0) != first - 1:
                stale[oid] = (first, last)
        if stale:
            raise StaleAppend(stale)

    def select_events_many(
        self, originator_ids: Sequence[UUID], after: Mapping[UUID, int] | None = None
    ) -> dict[UUID, list[StoredEvent]]:
        """The events of these streams after the version `after` gives for each."""
        out = {}
        for oid in originator_ids:
            events = self.select_events(oid, gt=(after or {}).get(oid))
            if events:
                out[oid] = list(events)
        return out

    def gaps(self) -> list[tuple[UUID, int, int]]:
        """Holes inside streams (none can arise in one process's memory, but say so)."""
        out = []
        with self._database_lock:
            for key, versions in self._stored_events_index.items():
                prev = 0
                for v in sorted(versions):
                    if v - prev > 1:
                        out.append((UUID(key), prev, v))
                    prev = v
        return out


# ---------------------------------------------------------------------------- snapshots
#
# Snapshots live in the library's aggregate recorders (table `<app>_snapshots`), with one
# addition: the latest snapshot of many streams in one query, so that a batch load (the
# scheduler's warm-up, the projections' prefetch) reads a snapshot and the events after it
# per stream instead of whole streams.

_NO_LIMIT = 2**62  # "any version" for the per-stream upper bound of a snapshot


class PostgresSnapshotRecorder(PostgresAggregateRecorder):
    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        table = SQL("{schema}.{table}").format(
            schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name)
        )
        id_type = Identifier(self.datastore.originator_id_type)
        self._latest_many = SQL(
            "SELECT DISTINCT ON (s.originator_id) s.originator_id, s.originator_version,"
            " s.topic, s.state FROM {table} s"
            " JOIN unnest(%s::{id_type}[], %s::bigint[]) AS w(oid, upto)"
            " ON s.originator_id = w.oid AND s.originator_version <= w.upto"
            " ORDER BY s.originator_id, s.originator_version DESC"
        ).format(table=table, id_type=id_type)

    def select_latest_many(self, upto: Mapping[UUID, int | None]) -> dict[UUID, StoredEvent]:
        """The latest snapshot of each stream at or below its version (None: any)."""
        ids = list(upto)
        limits = [v if v is not None else _NO_LIMIT for v in upto.values()]
        out: dict[UUID, StoredEvent] = {}
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            for i in range(0, len(ids), MANY_CHUNK):
                curs.execute(
                    self._latest_many,
                    (ids[i : i + MANY_CHUNK], limits[i : i + MANY_CHUNK]),
                    prepare=True,
                )
                for row in curs.fetchall():
                    oid = row["originator_id"]
                    out[oid] = StoredEvent(
                        oid, row["originator_version"], row["topic"], bytes(row["state"])
                    )
        return out


class SqliteSnapshotRecorder(SQLiteAggregateRecorder):
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


class MemorySnapshotRecorder(POPOAggregateRecorder):
    def select_latest_many(self, upto: Mapping[UUID, int | None]) -> dict[UUID, StoredEvent]:
        """The latest snapshot of each stream at or below its version (None: any)."""
        out = {}
        for oid, v in upto.items():
            latest = self.select_events(oid, lte=v, desc=True, limit=1)
            if latest:
                out[oid] = latest[0]
        return out


class PostgresFactory(LibraryPostgresFactory):
    """eventsourcing's PostgreSQL persistence, with our snapshot recorder (the event store's
    recorder comes through APPLICATION_RECORDER_TOPIC, adapters/store.py)."""

    aggregate_recorder_class = PostgresSnapshotRecorder


class SqliteFactory(SQLiteFactory):
    """eventsourcing's SQLite persistence, with our snapshot recorder."""

    aggregate_recorder_class = SqliteSnapshotRecorder


class MemoryFactory(POPOFactory):
    """eventsourcing's in-process persistence with `MemoryRecorder` as the event store and
    `MemorySnapshotRecorder` for snapshots."""

    def application_recorder(self) -> MemoryRecorder:
        self._recorder = MemoryRecorder()
        return self._recorder

    def aggregate_recorder(self, purpose: str = "events") -> MemorySnapshotRecorder:
        recorder = getattr(self, "_recorder", None)
        return recorder.snapshots if recorder is not None else MemorySnapshotRecorder()
