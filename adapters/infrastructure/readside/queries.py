"""Every read of the read model: status, the due index, the audit log, and what the HTTP API
and the decision log ask of them (the status page's and the metrics' reads are in
observations.py, which this class extends).

Read-only statements over the documented tables (docs/operations.md), with `?` placeholders
(the database rewrites them for its dialect). Aggregates (counts, timeline cells) are
computed by the database, so a long history travels as a few rows, not as every event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronsource.adapters.infrastructure.readside.database import Database
from cronsource.adapters.infrastructure.readside.observations import (
    Observations,
)
from cronsource.adapters.infrastructure.readside.rows import (
    AUDIT_COLUMNS,
    STATUS_COLUMNS,
    audit_from_row,
    dt,
    skip_last,
    status_from_row,
)
from cronsource.projections.readmodel import AuditRow, StatusRow


@dataclass(frozen=True)
class EventFilter:
    """One page of the audit log: rows after position `after` that match every field set."""

    namespace: str | None = None
    name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    types: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    after: int = 0
    limit: int = 100
    #: The newest `limit` rows that match instead of the first (still returned oldest first).
    newest: bool = False


class Queries(Observations):
    """The read queries over one read-model database: what commands, the scheduler and the
    audit ask; what the status page and the metrics ask is in `Observations`."""

    def __init__(self, db: Database) -> None:
        self.db = db

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
        """Log position of the ScheduleFired that made this Workflow, or of the RunRecovered
        that recorded it after the log had lost its fire (None: not projected)."""
        rows = self._query(
            "SELECT MIN(notification_id) FROM cronsource_audit WHERE namespace = ?"
            " AND workflow = ? AND type IN ('ScheduleFired', 'RunRecovered')",
            (namespace, workflow),
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def fired_ticks(
        self, cron_id: str, start: datetime, end: datetime
    ) -> tuple[set[datetime], int]:
        """Scheduled times in [start, end] that fired (or whose run was recovered) for this
        stream, manual runs left out, and the stream version the status view has projected
        (events after it are not in the audit yet): what a backfill must not fire again.

        The version is read first. Read after the audit rows, a projection committed between
        the two reads gave a version past rows the audit read had not seen, the caller's read
        of the stream after that version skipped them too, and a backfill queued ticks that
        had fired (they fired again when the queue drained). Read first, the audit holds at
        least what the version covers; a projection in between only repeats a tick."""
        version = self._query("SELECT version FROM cronsource_status WHERE cron_id = ?", (cron_id,))
        rows = self._query(
            "SELECT scheduled_time, detail FROM cronsource_audit WHERE cron_id = ?"
            " AND type IN ('ScheduleFired', 'RunRecovered')"
            " AND scheduled_time >= ? AND scheduled_time <= ?",
            (cron_id, start.timestamp(), end.timestamp()),
        )
        ticks = {
            t
            for r in rows
            if json.loads(r[1]).get("trigger") != "manual" and (t := dt(r[0])) is not None
        }
        return ticks, int(version[0][0]) if version else 0

    def longest_deadline(self) -> int:
        """The longest startingDeadlineSeconds of the live CronWorkflows (0: none sets one),
        in one aggregate: retention asks it at every pass, and a decode of every status row
        each minute was a second's CPU at 100,000 CronWorkflows. PostgreSQL reads the text as
        `json`, not `jsonb`, which refuses a string holding NUL anywhere in the spec."""
        field = (
            "json_extract(spec, '$.startingDeadlineSeconds')"
            if self.is_sqlite
            else "spec::json->>'startingDeadlineSeconds'"
        )
        rows = self._query(
            f"SELECT MAX(CAST({field} AS BIGINT)) FROM cronsource_status WHERE deleted = 0"  # noqa: S608
        )
        return int(rows[0][0] or 0) if rows else 0

    def kept_from(self) -> datetime | None:
        """The oldest instant the audit keeps since retention removed anything (None: it
        never did)."""
        rows = self._query("SELECT kept_from FROM cronsource_retention WHERE name = 'log'")
        return dt(rows[0][0]) if rows else None

    def recorded_workflows(self, namespace: str, workflows: Sequence[str]) -> set[str]:
        """Which of these Workflows the log records (a fire, or a recovery): the others exist
        without an event (adapters/runtime/recovery.py)."""
        found: set[str] = set()
        names = list(workflows)
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                "SELECT DISTINCT workflow FROM cronsource_audit WHERE namespace = ?"  # noqa: S608
                f" AND workflow IN ({marks}) AND type IN ('ScheduleFired', 'RunRecovered')",
                (namespace, *chunk),
            )
            found.update(r[0] for r in rows)
        return found

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
    ) -> list[StatusRow]:
        """The CronWorkflows of a namespace (None: every one), by namespace and name."""
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

    def audit_head(self) -> int:
        """The position of the newest audit row (0: none)."""
        rows = self._query("SELECT MAX(notification_id) FROM cronsource_audit")
        return int(rows[0][0] or 0) if rows else 0

    def audit_namespaces(self) -> list[str]:
        """Every namespace that ever held a CronWorkflow, sorted (a scan of the whole audit:
        for error messages; `has_namespace` answers whether one did). The CronWorkflows'
        own rows (deleted ones too) count as well: retention removes the audit rows of its
        window, and with them a namespace whose CronWorkflows were all older."""
        rows = self._query(
            "SELECT namespace FROM cronsource_status UNION SELECT namespace FROM cronsource_audit"
        )
        return sorted(r[0] for r in rows)

    #: Index searches (the status table's key, cronsource_audit_cron), whatever the size of
    #: the audit.
    HAS_NAMESPACE = (
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM cronsource_status WHERE namespace = ?)"
        " OR EXISTS (SELECT 1 FROM cronsource_audit WHERE namespace = ?)"
    )

    def has_namespace(self, namespace: str) -> bool:
        """Whether this namespace ever held a CronWorkflow: its status rows (kept for deleted
        ones) or its audit rows (retention may have removed all of those: `history` then
        denied a namespace `get` showed)."""
        return bool(self._query(self.HAS_NAMESPACE, (namespace, namespace)))

    # ------------------------------------------------------------------ HTTP API

    def status(self, namespace: str, name: str) -> StatusRow | None:
        """The live CronWorkflow of that name as the read model shows it, or None."""
        rows = self._query(
            f"SELECT {STATUS_COLUMNS} FROM cronsource_status"
            " WHERE namespace = ? AND name = ? AND deleted = 0",
            (namespace, name),
        )
        return status_from_row(rows[0]) if rows else None

    def ever_existed(self, namespace: str, name: str) -> bool:
        """Whether a CronWorkflow of this name ever existed here: its status row (kept when
        deleted) or its audit rows, which retention may have removed all of."""
        rows = self._query(
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM cronsource_status WHERE namespace = ?"
            " AND name = ?) OR EXISTS (SELECT 1 FROM cronsource_audit WHERE namespace = ?"
            " AND name = ?)",
            (namespace, name, namespace, name),
        )
        return bool(rows)

    def events(self, f: EventFilter) -> list[AuditRow]:
        """One page of the audit log in log order, after position `f.after`."""
        sql = f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE notification_id > ?"
        args: list[Any] = [f.after]
        for column, value in (("namespace", f.namespace), ("name", f.name)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        if f.since is not None:
            sql += " AND at >= ?"
            args.append(f.since.timestamp())
        if f.until is not None:
            sql += " AND at <= ?"
            args.append(f.until.timestamp())
        for column, values in (("type", f.types), ("reason", f.reasons)):
            if values:
                sql += f" AND {column} IN (" + ", ".join("?" for _ in values) + ")"
                args.extend(values)
        sql += f" ORDER BY notification_id{' DESC' if f.newest else ''} LIMIT ?"
        args.append(f.limit)
        rows = [audit_from_row(r) for r in self._query(sql, args)]
        return rows[::-1] if f.newest else rows

    def decisions_at(self, namespace: str, name: str, t: datetime) -> list[AuditRow]:
        """The decisions recorded for the tick at `t`: a ScheduleFired for exactly `t`, or a
        ScheduleSkipped whose range of ticks covers `t`, in log order (a skipped tick may
        be backfilled later, so both can appear), and a RunNotStarted or SubmissionFailed for
        exactly `t` (the fire's Workflow was not created in time, or its creates failed).

        A decision is always recorded at or after its tick, so `at >= t` bounds the scan to
        the decisions made since then that started at or before `t`.
        """
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE namespace = ? AND name = ?"
            " AND type IN ('ScheduleFired', 'ScheduleSkipped', 'RunNotStarted',"
            " 'SubmissionFailed')"
            " AND scheduled_time <= ? AND at >= ? ORDER BY notification_id",
            (namespace, name, t.timestamp() + 0.0005, t.timestamp() - 0.0005),
        )
        out = []
        for row in map(audit_from_row, rows):
            assert row.scheduled_time is not None
            if row.type in ("ScheduleFired", "RunNotStarted", "SubmissionFailed"):
                if abs((row.scheduled_time - t).total_seconds()) < 0.001:
                    out.append(row)
            elif row.scheduled_time <= t <= skip_last(row):
                out.append(row)
        return out
