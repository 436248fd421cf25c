"""PostgreSQL: the event store's recorder, the snapshots' recorder, and the factory eventsourcing
builds them with (see the package's docstring)."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    StoredEvent,
)
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from eventsourcing.postgres import PostgresFactory as LibraryPostgresFactory
from eventsourcing.utils import Environment, EnvType
from psycopg.rows import dict_row
from psycopg.sql import SQL, Identifier
from psycopg_pool import PoolTimeout

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.infrastructure.pgpool import broken_connection, drop_dead
from cronsource.adapters.infrastructure.store.config import CONNINFO
from cronsource.adapters.infrastructure.store.recorders.common import (
    _GAPS,
    _NO_LIMIT,
    MANY_CHUNK,
    CommitTooLate,
    StaleAppend,
    _columns,
    _deadline_errors,
    _seconds_left,
    _unwrapped,
    first_versions,
)

_PG_INSERT_ONCE = _unwrapped(PostgresApplicationRecorder.insert_events)
#: Reads are tried twice (one fresh connection after a broken one), not the library's ten
#: times: a loop step that reads must give up within seconds while the store is down, so
#: that SIGTERM stops a replica promptly and the supervisor's backoff takes over.
_READ_WAIT = 0.2


def _read_twice(read: Callable[..., Any]) -> Callable[..., Any]:
    """`read` tried once more, after _READ_WAIT, when its connection broke (the server
    restarted), on a fresh connection: the pool first drops every dead idle one
    (adapters/infrastructure/pgpool.py). Not when the pool gave no connection within its
    wait: the store does not answer, and a second wait doubled a step's time, which kept a
    replica told to stop while the store was down past its grace."""

    @functools.wraps(read)
    def tried(recorder: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return read(recorder, *args, **kwargs)
        except (InterfaceError, OperationalError) as e:
            if isinstance(e.__cause__, PoolTimeout):
                raise
            if broken_connection(e):
                drop_dead(recorder.datastore.pool)
        SYSTEM_CLOCK.wait(_READ_WAIT)
        return read(recorder, *args, **kwargs)

    return tried


_select_events = _read_twice(_unwrapped(PostgresApplicationRecorder.select_events))
_select_notifications = _read_twice(_unwrapped(PostgresApplicationRecorder.select_notifications))
_max_notification_id = _read_twice(_unwrapped(PostgresApplicationRecorder.max_notification_id))


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
        # order given, so notification ids follow the versions within a stream. The arrays
        # go as binary parameters (%b): psycopg quotes a text array element by element with a
        # regular expression, 9 of a batch's 10 ms for 500 events.
        self._insert_arrays = SQL(
            "WITH new AS (SELECT * FROM unnest(%b::{id_type}[], %b::bigint[], %b::text[],"
            " %b::bytea[]) WITH ORDINALITY AS n(originator_id, originator_version, topic,"
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
            "SELECT * FROM unnest(%b::{id_type}[], %b::bigint[], %b::text[], %b::bytea[])"
        ).format(table=table, id_type=id_type)
        self._last_versions = SQL(
            "SELECT originator_id, max(originator_version) AS v FROM {table}"
            " WHERE originator_id = ANY(%s) GROUP BY originator_id"
        ).format(table=table)
        self._select_many = SQL(
            "SELECT e.originator_id, e.originator_version, e.topic, e.state FROM {table} e"
            " JOIN unnest(%b::{id_type}[], %b::bigint[]) AS w(oid, gt)"
            " ON e.originator_id = w.oid AND e.originator_version > w.gt"
            " ORDER BY e.originator_id, e.originator_version"
        ).format(table=table, id_type=id_type)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert once, checking each stream's last version (StaleAppend) and this thread's
        commit deadline (CommitTooLate); tried again only on a fresh connection when its own
        broke, within the same deadline (see the package docstring)."""
        _seconds_left()
        for last in (False, True):
            try:
                with _deadline_errors():
                    return cast(
                        Sequence[int] | None, _PG_INSERT_ONCE(self, stored_events, **kwargs)
                    )
            except _NothingInserted:
                raise StaleAppend(self._stale(stored_events)) from None
            except (InterfaceError, OperationalError) as e:
                # Its connection broke (the server restarted): once more on a fresh one.
                # Safe: an append that did commit before the break is refused as stale.
                if last or isinstance(e, CommitTooLate) or not broken_connection(e):
                    raise
                drop_dead(self.datastore.pool)
                _seconds_left()  # past its deadline now: CommitTooLate, not a late fire
        raise AssertionError("unreachable")

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
            " JOIN unnest(%b::{id_type}[], %b::bigint[]) AS w(oid, upto)"
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


class PostgresFactory(LibraryPostgresFactory):
    """eventsourcing's PostgreSQL persistence, with our snapshot recorder (the event store's
    recorder comes through APPLICATION_RECORDER_TOPIC, adapters/infrastructure/store/config.py)."""

    aggregate_recorder_class = PostgresSnapshotRecorder


# The event store's PostgreSQL connections, made from the store URL's whole conninfo.
#
# eventsourcing's `PostgresFactory` is configured from discrete settings (POSTGRES_HOST,
# POSTGRES_PORT, POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DBNAME) and hands exactly those to
# its connection pool: one host, no `sslmode`, no `target_session_attrs`, no `application_name`.
# With it the event store connected without TLS to a URL that asked for it, and could not follow a
# multi-host URL to the primary. This factory is the library's own (with our snapshot recorder,
# adapters/infrastructure/store/recorders/), selected through its own PERSISTENCE_MODULE topic
# (adapters/infrastructure/store/config.py); it builds everything as the library does (pool sizes,
# timeouts, schema, recorders) and then points the still unopened pool at the libpq conninfo from
# the environment (`CONNINFO`), so every parameter of the URL reaches every event-store connection.
# tests/integration/test_store_url.py checks it against a real server (pg_stat_activity,
# sslmode, a dead first host).

#: Settings the library insists on before it builds its pool. Their values never reach a
#: connection: the pool's conninfo and arguments are replaced below.
_REQUIRED = ("POSTGRES_DBNAME", "POSTGRES_HOST", "POSTGRES_USER", "POSTGRES_PASSWORD")


class ConninfoFactory(PostgresFactory):
    """`PostgresFactory` whose pool connects with the conninfo under `CONNINFO`."""

    def __init__(self, env: Environment | EnvType | None):
        given = env if isinstance(env, Environment) else Environment(env=env)
        conninfo = given.get(CONNINFO)
        if not conninfo:
            raise OSError(f"the libpq conninfo is not in the environment under {CONNINFO!r}")
        # A copy: the application's own environment keeps no placeholder.
        completed = Environment(given.name, {**{key: "" for key in _REQUIRED}, **given})
        super().__init__(completed)
        pool = self.datastore.pool
        # The pool is not open yet (the library opens it at first use), so no connection was
        # made with the discrete settings. psycopg merges the arguments into the conninfo with
        # the arguments winning: only the row factory the library's recorders need is left.
        pool.conninfo = conninfo
        pool.kwargs = {"row_factory": dict_row}
