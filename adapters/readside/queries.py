"""Every read of the read model: status, the due index, the audit log.

Read-only statements over the documented tables (docs/operations.md), with `?` placeholders
(the database rewrites them for its dialect).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from adapters.readside.database import Database
from adapters.readside.rows import (
    AUDIT_COLUMNS,
    STATUS_COLUMNS,
    audit_from_row,
    dt,
    status_from_row,
)
from projections.readmodel import AuditRow


class Queries:
    """The read queries over one read-model database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def is_sqlite(self) -> bool:
        return self.db.dialect.is_sqlite

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.db.fetch(sql, args)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """A read-only query with `?` placeholders, for read-side adapters (API, metrics)."""
        return self.db.fetch(sql, args)

    # ------------------------------------------------------------------ due index

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
        return dt(rows[0][0]) if rows and rows[0][0] is not None else None

    def next_due(self) -> datetime | None:
        rows = self._query("SELECT MIN(next_due) FROM cronsource_status WHERE deleted = 0")
        return dt(rows[0][0]) if rows and rows[0][0] is not None else None

    # ------------------------------------------------------------------ status

    def statuses(
        self, namespace: str | None = None, *, include_deleted: bool = False
    ) -> list[dict[str, Any]]:
        sql = f"SELECT {STATUS_COLUMNS} FROM cronsource_status WHERE 1 = 1"
        args: list[Any] = []
        if namespace is not None:
            sql += " AND namespace = ?"
            args.append(namespace)
        if not include_deleted:
            sql += " AND deleted = 0"
        sql += " ORDER BY namespace, name"
        return [status_from_row(r) for r in self._query(sql, args)]

    # ------------------------------------------------------------------ audit

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
        sql = f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE notification_id > ?"
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
