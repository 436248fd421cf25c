"""SQL storage of the read model (status, audit log, due index) on SQLite or PostgreSQL.

Each write stores the view rows and the tracking position in one transaction. If the process
dies before the commit, neither is stored and the projection processes the event again; if it
dies after, the position says so and the event is not applied twice. One module serves both
databases: the SQL is the common subset (upserts with ON CONFLICT), only placeholders differ.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Tracking

from projections.readmodel import AuditRow, StatusRow

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS cronsource_tracking (
        projection TEXT NOT NULL, application_name TEXT NOT NULL,
        notification_id BIGINT NOT NULL, PRIMARY KEY (projection, application_name))""",
    """CREATE TABLE IF NOT EXISTS cronsource_status (
        cron_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
        deleted INTEGER NOT NULL, next_due DOUBLE PRECISION, version INTEGER NOT NULL,
        status TEXT NOT NULL, spec TEXT NOT NULL, metadata TEXT NOT NULL,
        active INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS cronsource_status_due ON cronsource_status (next_due)",
    "CREATE INDEX IF NOT EXISTS cronsource_status_name ON cronsource_status (namespace, name)",
    """CREATE TABLE IF NOT EXISTS cronsource_audit (
        notification_id BIGINT PRIMARY KEY, cron_id TEXT NOT NULL, namespace TEXT NOT NULL,
        name TEXT NOT NULL, version INTEGER NOT NULL, type TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL, scheduled_time DOUBLE PRECISION, reason TEXT,
        workflow TEXT, detail TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS cronsource_audit_cron ON cronsource_audit (namespace, name, at)",
]
#: Created after `_upgrade`, which may first have to add the column they index.
_INDEXES = [
    # The run watcher asks for the few CronWorkflows with runs active among all of them.
    "CREATE INDEX IF NOT EXISTS cronsource_status_active ON cronsource_status (active)"
    " WHERE active > 0",
    # Which fire made this Workflow (the run watcher, for a Workflow file that is missing).
    "CREATE INDEX IF NOT EXISTS cronsource_audit_workflow"
    " ON cronsource_audit (namespace, workflow)",
]


def _ts(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def _dt(x: float | None) -> datetime | None:
    return None if x is None else datetime.fromtimestamp(x, UTC)


#: Columns of cronsource_audit in the order `audit_from_row` reads them.
AUDIT_COLUMNS = (
    "notification_id, cron_id, namespace, name, version, type, at, scheduled_time, reason,"
    " workflow, detail"
)
#: Columns of cronsource_status in the order `SqlReadModel.status_from_row` reads them.
STATUS_COLUMNS = "cron_id, namespace, name, deleted, next_due, version, status, spec, metadata"


def audit_from_row(r: Sequence[Any]) -> AuditRow:
    """An AuditRow from a row selected with AUDIT_COLUMNS."""
    return AuditRow(
        notification_id=int(r[0]),
        cron_id=r[1],
        namespace=r[2],
        name=r[3],
        version=int(r[4]),
        type=r[5],
        at=_dt(r[6]),  # type: ignore[arg-type]
        scheduled_time=_dt(r[7]),
        reason=r[8],
        workflow=r[9],
        detail=json.loads(r[10]),
    )


class SqlReadModel:
    """The read model tables. `projection` names whose tracking row the writes advance."""

    def __init__(
        self, connect: Any, placeholder: str, projection: str = "readmodel", shared: bool = False
    ) -> None:
        self._connect = connect
        self._ph = placeholder
        self._local = threading.local()
        self._shared = (
            shared  # SQLite: one connection for all threads (":memory:" is per connection)
        )
        self._shared_conn: Any = None
        self._lock = threading.RLock()
        self.projection = projection

    @classmethod
    def sqlite(cls, path: str) -> SqlReadModel:
        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            # The read model is re-derivable from the log: losing its last commits to a power
            # cut only means projecting them again, so it need not fsync every commit.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            return conn

        return cls(connect, "?", shared=True)

    @classmethod
    def postgres(cls, url: str, schema: str | None = None) -> SqlReadModel:
        import psycopg

        def connect() -> Any:
            conn = psycopg.connect(url, autocommit=True)
            if schema:
                conn.execute(f'SET search_path TO "{schema}"')
            return conn

        return cls(connect, "%s")

    # ------------------------------------------------------------------ plumbing

    def _conn(self) -> Any:
        if self._shared:
            if self._shared_conn is None:
                self._shared_conn = self._connect()
            return self._shared_conn
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            # A closed connection (PostgreSQL restarted) is replaced on next use; the caller's
            # failed statement is retried by its supervisor.
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self._ph) if self._ph != "?" else sql

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        conn = self._conn()
        if self._ph == "?":
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

    @property
    def is_sqlite(self) -> bool:
        return self._ph == "?"

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """A read-only query with `?` placeholders, for read-side adapters (API, metrics)."""
        return self._query(sql, args)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            cur = self._conn().execute(self._sql(sql), tuple(args))
            return list(cur.fetchall())

    def close(self) -> None:
        if self._shared_conn is not None:
            self._shared_conn.close()
            self._shared_conn = None
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def create_tables(self) -> None:
        with self._transaction() as conn:
            for stmt in _SCHEMA:
                conn.execute(stmt)
            self._upgrade(conn)
            for stmt in _INDEXES:
                conn.execute(stmt)

    def _upgrade(self, conn: Any) -> None:
        """Bring tables made by an older version up to date (`cronsource migrate`)."""
        if self.is_sqlite:
            columns = {r[1] for r in conn.execute("PRAGMA table_info(cronsource_status)")}
        else:
            columns = {
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND table_name = 'cronsource_status'"
                )
            }
        if "active" in columns:
            return
        conn.execute("ALTER TABLE cronsource_status ADD COLUMN active INTEGER NOT NULL DEFAULT 0")
        rows = conn.execute("SELECT cron_id, status FROM cronsource_status").fetchall()
        counts = [(len(json.loads(st).get("active") or []), cid) for cid, st in rows]
        conn.cursor().executemany(
            self._sql("UPDATE cronsource_status SET active = ? WHERE cron_id = ?"),
            [c for c in counts if c[0]],
        )

    def drop_tables(self) -> None:
        with self._transaction() as conn:
            for t in ("cronsource_tracking", "cronsource_status", "cronsource_audit"):
                conn.execute(f"DROP TABLE IF EXISTS {t}")

    # ------------------------------------------------------------------ tracking

    def max_tracking_id(self, application_name: str, projection: str | None = None) -> int | None:
        rows = self._query(
            "SELECT notification_id FROM cronsource_tracking"
            " WHERE projection = ? AND application_name = ?",
            (projection or self.projection, application_name),
        )
        return int(rows[0][0]) if rows else None

    def _advance(self, conn: Any, projection: str, tracking: Tracking) -> bool:
        """Move the position to this event; False if it was already processed.

        One conditional upsert, so two processes projecting at once cannot both pass a
        check: the second waits on the row lock, then finds the position moved and skips.
        """
        row = conn.execute(
            self._sql(
                "INSERT INTO cronsource_tracking (projection, application_name, notification_id)"
                " VALUES (?, ?, ?) ON CONFLICT (projection, application_name)"
                " DO UPDATE SET notification_id = excluded.notification_id"
                " WHERE cronsource_tracking.notification_id < excluded.notification_id"
                " RETURNING notification_id"
            ),
            (projection, tracking.application_name, tracking.notification_id),
        ).fetchone()
        return row is not None

    def track(self, projection: str, tracking: Tracking) -> bool:
        """Record a position for a projection with no rows of its own (the dispatcher)."""
        with self._transaction() as conn:
            return self._advance(conn, projection, tracking)

    # ------------------------------------------------------------------ writes

    def _lock_position(self, conn: Any, projection: str, application_name: str) -> int:
        """The position, locked for this transaction (SQLite's BEGIN IMMEDIATE already
        serialises writers; PostgreSQL needs the row lock), so two projectors take turns."""
        conn.execute(
            self._sql(
                "INSERT INTO cronsource_tracking (projection, application_name, notification_id)"
                " VALUES (?, ?, 0) ON CONFLICT (projection, application_name) DO NOTHING"
            ),
            (projection, application_name),
        )
        lock = "" if self._ph == "?" else " FOR UPDATE"
        row = conn.execute(
            self._sql(
                "SELECT notification_id FROM cronsource_tracking"
                " WHERE projection = ? AND application_name = ?" + lock
            ),
            (projection, application_name),
        ).fetchone()
        return int(row[0])

    def write(self, tracking: Tracking, status: StatusRow | None, audit: AuditRow) -> None:
        self.write_batch([(tracking, status, audit)])

    def write_batch(self, items: Sequence[tuple[Tracking, StatusRow | None, AuditRow]]) -> int:
        """Apply events (in log order) and move the position to the last, in one transaction.
        Events at or below the stored position were applied before and are skipped, so a
        replay after a crash, or a second projector, changes nothing. Returns rows applied.
        A status may be None where a later event of the batch carries that CronWorkflow's."""
        if not items:
            return 0
        app = items[0][0].application_name
        with self._transaction() as conn:
            current = self._lock_position(conn, self.projection, app)
            fresh = [i for i in items if i[0].notification_id > current]
            if not fresh:
                return 0
            latest: dict[str, StatusRow] = {}
            for _, status, _ in fresh:
                if status is not None:
                    latest[status.cron_id] = status
            cur = conn.cursor()
            cur.executemany(
                self._sql(
                    "INSERT INTO cronsource_status (cron_id, namespace, name, deleted, next_due,"
                    " version, status, spec, metadata, active)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (cron_id) DO UPDATE SET deleted = excluded.deleted,"
                    " next_due = excluded.next_due, version = excluded.version,"
                    " status = excluded.status, spec = excluded.spec,"
                    " metadata = excluded.metadata, active = excluded.active"
                ),
                [
                    (
                        st.cron_id,
                        st.namespace,
                        st.name,
                        int(st.deleted),
                        _ts(st.next_due),
                        st.version,
                        json.dumps(st.status),
                        json.dumps(st.spec),
                        json.dumps(st.metadata),
                        len(st.status.get("active") or []),
                    )
                    for st in latest.values()
                ],
            )
            cur.executemany(
                self._sql(
                    "INSERT INTO cronsource_audit (notification_id, cron_id, namespace, name,"
                    " version, type, at, scheduled_time, reason, workflow, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                [
                    (
                        a.notification_id,
                        a.cron_id,
                        a.namespace,
                        a.name,
                        a.version,
                        a.type,
                        _ts(a.at),
                        _ts(a.scheduled_time),
                        a.reason,
                        a.workflow,
                        json.dumps(a.detail),
                    )
                    for _, _, a in fresh
                ],
            )
            conn.execute(
                self._sql(
                    "UPDATE cronsource_tracking SET notification_id = ?"
                    " WHERE projection = ? AND application_name = ?"
                ),
                (fresh[-1][0].notification_id, self.projection, app),
            )
            return len(fresh)

    # ------------------------------------------------------------------ queries

    def cron_ids(self, namespace: str, name: str) -> list[str]:
        """Every stream the status view knows under this namespace and name (any uid)."""
        rows = self._query(
            "SELECT cron_id FROM cronsource_status WHERE namespace = ? AND name = ?",
            (namespace, name),
        )
        return [r[0] for r in rows]

    def due(self, until: datetime, limit: int = 100_000) -> list[str]:
        """Ids of live CronWorkflows due at or before `until`, soonest first."""
        rows = self._query(
            "SELECT cron_id FROM cronsource_status WHERE deleted = 0 AND next_due IS NOT NULL"
            " AND next_due <= ? ORDER BY next_due LIMIT ?",
            (until.timestamp(), limit),
        )
        return [r[0] for r in rows]

    def due_versions(
        self, until: datetime, limit: int = 100_000, after: datetime | None = None
    ) -> list[tuple[str, int]]:
        """Like `due`, with the aggregate version each due time was computed at; with
        `after`, only those due strictly after it."""
        since, args = ("", ()) if after is None else (" AND next_due > ?", (after.timestamp(),))
        rows = self._query(
            "SELECT cron_id, version FROM cronsource_status WHERE deleted = 0"
            f" AND next_due IS NOT NULL AND next_due <= ?{since} ORDER BY next_due LIMIT ?",
            (until.timestamp(), *args, limit),
        )
        return [(r[0], int(r[1])) for r in rows]

    def fired_position(self, namespace: str, workflow: str) -> int | None:
        """Log position of the ScheduleFired that made this Workflow (None: not projected)."""
        rows = self._query(
            "SELECT MIN(notification_id) FROM cronsource_audit"
            " WHERE namespace = ? AND workflow = ? AND type = 'ScheduleFired'",
            (namespace, workflow),
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def active_runs(self) -> list[tuple[str, str, str]]:
        """(cron id, namespace, workflow) of every run the status view shows as active."""
        out = []
        for r in self._query(
            "SELECT cron_id, namespace, status FROM cronsource_status"
            " WHERE deleted = 0 AND active > 0"
        ):
            for ref in json.loads(r[2]).get("active") or []:
                out.append((r[0], r[1], ref["name"]))
        return out

    def next_due_after(self, t: datetime) -> datetime | None:
        """The earliest due time strictly after `t` (the next instant to prepare for)."""
        rows = self._query(
            "SELECT MIN(next_due) FROM cronsource_status WHERE deleted = 0 AND next_due > ?",
            (t.timestamp(),),
        )
        return _dt(rows[0][0]) if rows and rows[0][0] is not None else None

    def next_due(self) -> datetime | None:
        rows = self._query("SELECT MIN(next_due) FROM cronsource_status WHERE deleted = 0")
        return _dt(rows[0][0]) if rows and rows[0][0] is not None else None

    def status_from_row(self, r: Sequence[Any]) -> dict[str, Any]:
        return {
            "id": r[0],
            "namespace": r[1],
            "name": r[2],
            "deleted": bool(r[3]),
            "nextDue": _dt(r[4]),
            "version": r[5],
            "status": json.loads(r[6]),
            "spec": json.loads(r[7]),
            "metadata": json.loads(r[8]),
        }

    def statuses(
        self, namespace: str | None = None, *, include_deleted: bool = False
    ) -> list[dict[str, Any]]:
        sql = (
            "SELECT cron_id, namespace, name, deleted, next_due, version, status, spec, metadata"
            " FROM cronsource_status WHERE 1 = 1"
        )
        args: list[Any] = []
        if namespace is not None:
            sql += " AND namespace = ?"
            args.append(namespace)
        if not include_deleted:
            sql += " AND deleted = 0"
        sql += " ORDER BY namespace, name"
        return [self.status_from_row(r) for r in self._query(sql, args)]

    def audit(
        self,
        namespace: str | None = None,
        name: str | None = None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] = (),
        after_position: int = 0,
        limit: int | None = None,
    ) -> list[AuditRow]:
        sql = (
            "SELECT notification_id, cron_id, namespace, name, version, type, at,"
            " scheduled_time, reason, workflow, detail FROM cronsource_audit"
            " WHERE notification_id > ?"
        )
        args: list[Any] = [after_position]
        if namespace is not None:
            sql += " AND namespace = ?"
            args.append(namespace)
        if name is not None:
            sql += " AND name = ?"
            args.append(name)
        if since is not None:
            sql += " AND at >= ?"
            args.append(since.timestamp())
        if until is not None:
            sql += " AND at <= ?"
            args.append(until.timestamp())
        if types:
            sql += " AND type IN (" + ", ".join("?" for _ in types) + ")"
            args.extend(types)
        sql += " ORDER BY notification_id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [audit_from_row(r) for r in self._query(sql, args)]
