"""Every read of the read model: status, the due index, the audit log, and what the HTTP API,
the status page, the metrics and the decision log ask of them.

Read-only statements over the documented tables (docs/operations.md), with `?` placeholders
(the database rewrites them for its dialect). Aggregates (counts, timeline cells) are
computed by the database, so a long history travels as a few rows, not as every event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.readside.database import Database
from adapters.readside.rows import (
    AUDIT_COLUMNS,
    STATUS_COLUMNS,
    audit_from_row,
    dt,
    skip_last,
    status_from_row,
)
from projections.readmodel import AuditRow, StatusRow


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


@dataclass(frozen=True)
class Window:
    """Timeline inputs: (namespace, name, cell, count) of fires and of failed runs, and the
    skipped ranges and refused submissions as audit rows."""

    fired: list[tuple[str, str, int, int]]
    failed: list[tuple[str, str, int, int]]
    events: list[AuditRow]


@dataclass(frozen=True)
class TailRow:
    """An audit row as the metrics' tail counts it (times as stored: Unix seconds)."""

    position: int
    namespace: str
    type: str
    reason: str | None
    at: float
    scheduled_time: float | None
    detail: dict[str, Any]
    name: str = ""


class Queries:
    """The read queries over one read-model database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def is_sqlite(self) -> bool:
        return self.db.dialect.is_sqlite

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
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
        (events after it are not in the audit yet): what a backfill must not fire again."""
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
        version = self._query("SELECT version FROM cronsource_status WHERE cron_id = ?", (cron_id,))
        return ticks, int(version[0][0]) if version else 0

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
        for error messages; `has_namespace` answers whether one did)."""
        rows = self._query("SELECT DISTINCT namespace FROM cronsource_audit")
        return sorted(r[0] for r in rows)

    #: An index search (cronsource_audit_cron), whatever the size of the audit.
    HAS_NAMESPACE = "SELECT 1 FROM cronsource_audit WHERE namespace = ? LIMIT 1"

    def has_namespace(self, namespace: str) -> bool:
        """Whether this namespace ever held a CronWorkflow."""
        return bool(self._query(self.HAS_NAMESPACE, (namespace,)))

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
        rows = self._query(
            "SELECT 1 FROM cronsource_audit WHERE namespace = ? AND name = ? LIMIT 1",
            (namespace, name),
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
        sql += " ORDER BY notification_id LIMIT ?"
        args.append(f.limit)
        return [audit_from_row(r) for r in self._query(sql, args)]

    def decisions_at(self, namespace: str, name: str, t: datetime) -> list[AuditRow]:
        """The decisions recorded for the tick at `t`: a ScheduleFired for exactly `t`, or a
        ScheduleSkipped whose range of ticks covers `t`, in log order (a skipped tick may
        be backfilled later, so both can appear), and a RunNotStarted for exactly `t` (the
        fire's Workflow was not created in time).

        A decision is always recorded at or after its tick, so `at >= t` bounds the scan to
        the decisions made since then that started at or before `t`.
        """
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE namespace = ? AND name = ?"
            " AND type IN ('ScheduleFired', 'ScheduleSkipped', 'RunNotStarted')"
            " AND scheduled_time <= ? AND at >= ? ORDER BY notification_id",
            (namespace, name, t.timestamp() + 0.0005, t.timestamp() - 0.0005),
        )
        out = []
        for row in map(audit_from_row, rows):
            assert row.scheduled_time is not None
            if row.type in ("ScheduleFired", "RunNotStarted"):
                if abs((row.scheduled_time - t).total_seconds()) < 0.001:
                    out.append(row)
            elif row.scheduled_time <= t <= skip_last(row):
                out.append(row)
        return out

    def window(
        self,
        namespace: str | None,
        name: str | None,
        since: datetime,
        until: datetime,
        step: timedelta,
    ) -> Window:
        """What a timeline of [since, until) in cells of `step` needs. Fires and failed runs
        are counted per cell by the database (an every-minute CronWorkflow has 10,080 fires
        a week: they never travel as rows); skipped ranges, refused submissions and runs not
        started, which are few, come as rows."""
        where, scope = "", []
        for column, value in (("namespace", namespace), ("name", name)):
            if value is not None:
                where += f" AND f.{column} = ?"
                scope.append(value)
        s, u, w = since.timestamp(), until.timestamp(), step.total_seconds()
        cell = self.db.dialect.cell("f.scheduled_time")
        fired = self._query(
            f"SELECT f.namespace, f.name, {cell}, COUNT(*)"
            " FROM cronsource_audit f WHERE f.type = 'ScheduleFired'"
            f" AND f.scheduled_time >= ? AND f.scheduled_time < ?{where}"
            " GROUP BY 1, 2, 3",
            [s, w, s, u, *scope],
        )
        phase = self.db.dialect.json_field("r.detail", "phase")
        failed = self._query(
            f"SELECT f.namespace, f.name, {cell}, COUNT(*)"
            " FROM cronsource_audit f JOIN cronsource_audit r"
            " ON r.namespace = f.namespace AND r.name = f.name AND r.workflow = f.workflow"
            " AND r.type = 'RunCompleted'"
            f" WHERE f.type = 'ScheduleFired' AND {phase} IN ('Failed', 'Error')"
            f" AND f.scheduled_time >= ? AND f.scheduled_time < ?{where}"
            " GROUP BY 1, 2, 3",
            [s, w, s, u, *scope],
        )
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit f WHERE"
            " ((f.type = 'ScheduleSkipped' AND f.scheduled_time < ? AND f.at >= ?)"
            " OR (f.type IN ('SubmissionFailed', 'RunNotStarted')"
            " AND f.scheduled_time >= ? AND f.scheduled_time < ?))"
            f"{where} ORDER BY notification_id",
            [u, s, s, u, *scope],
        )
        return Window(
            fired=[(r[0], r[1], int(r[2]), int(r[3])) for r in fired],
            failed=[(r[0], r[1], int(r[2]), int(r[3])) for r in failed],
            events=[audit_from_row(r) for r in rows],
        )

    # ------------------------------------------------------------------ status page

    def overdue(self, cutoff: datetime, limit: int) -> tuple[int, list[tuple[str, str, datetime]]]:
        """How many live CronWorkflows were due before `cutoff` and are not decided, and the
        `limit` longest overdue of them as (namespace, name, due time)."""
        live = "FROM cronsource_status WHERE deleted = 0 AND next_due IS NOT NULL AND next_due < ?"
        count = int(self._query(f"SELECT COUNT(*) {live}", (cutoff.timestamp(),))[0][0])
        rows = self._query(
            f"SELECT namespace, name, next_due {live} ORDER BY next_due LIMIT ?",
            (cutoff.timestamp(), limit),
        )
        listed = []
        for r in rows:
            due = dt(r[2])
            assert due is not None  # selected with next_due IS NOT NULL
            listed.append((r[0], r[1], due))
        return count, listed

    def latest_decisions(self, limit: int) -> list[AuditRow]:
        """The newest `limit` fires and skips, newest first, found from the end of the log
        (the primary key), so the question costs a few rows however long the log is."""
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit"
            " WHERE type IN ('ScheduleFired', 'ScheduleSkipped')"
            " ORDER BY notification_id DESC LIMIT ?",
            (limit,),
        )
        return [audit_from_row(r) for r in rows]

    def latest_fires(self, namespace: str, name: str, limit: int) -> list[AuditRow]:
        """The CronWorkflow's newest `limit` ScheduleFired rows, newest first."""
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE namespace = ? AND name = ?"
            " AND type = 'ScheduleFired' ORDER BY notification_id DESC LIMIT ?",
            (namespace, name, limit),
        )
        return [audit_from_row(r) for r in rows]

    def run_ends(self, namespace: str, name: str, workflows: Sequence[str]) -> list[AuditRow]:
        """What ended these Workflows of the CronWorkflow (RunCompleted, SubmissionFailed,
        RunNotStarted, RunVanished), in log order."""
        if not workflows:
            return []
        marks = ", ".join("?" for _ in workflows)
        rows = self._query(
            f"SELECT {AUDIT_COLUMNS} FROM cronsource_audit WHERE namespace = ? AND name = ?"
            " AND type IN ('RunCompleted', 'SubmissionFailed', 'RunNotStarted', 'RunVanished')"
            f" AND workflow IN ({marks}) ORDER BY notification_id",
            (namespace, name, *workflows),
        )
        return [audit_from_row(r) for r in rows]

    # ------------------------------------------------------------------ metrics

    def event_counts(
        self, head: int, types: Sequence[str]
    ) -> list[tuple[str, str, str | None, Any, Any, Any, int, int]]:
        """Audit rows up to position `head` of these types, counted by (namespace, type,
        reason, detail.trigger, detail.phase, detail.transient): (..., rows, ticks), where
        ticks counts each tick of a folded skip range (detail.count)."""
        j = self.db.dialect.json_field
        listed = ", ".join(f"'{t}'" for t in types)
        rows = self._query(
            f"SELECT namespace, type, reason, {j('detail', 'trigger')}, {j('detail', 'phase')},"
            f" {j('detail', 'transient')}, COUNT(*),"
            f" SUM(COALESCE(CAST({j('detail', 'count')} AS INTEGER), 1))"
            f" FROM cronsource_audit WHERE notification_id <= ? AND type IN ({listed})"
            " GROUP BY namespace, type, reason, 4, 5, 6",
            (head,),
        )
        return [(r[0], r[1], r[2], r[3], r[4], r[5], int(r[6]), int(r[7] or r[6])) for r in rows]

    def cronworkflow_counts(self, head: int) -> list[tuple[str, str, str, str | None, int, int]]:
        """Fires and skips up to position `head` per CronWorkflow: (namespace, name, type,
        reason, rows, ticks), ticks counting each tick of a folded skip range. Only for the
        opt-in per-CronWorkflow metrics: it groups by name, one row per CronWorkflow."""
        j = self.db.dialect.json_field
        rows = self._query(
            "SELECT namespace, name, type, reason, COUNT(*),"
            f" SUM(COALESCE(CAST({j('detail', 'count')} AS INTEGER), 1))"
            " FROM cronsource_audit WHERE notification_id <= ?"
            " AND type IN ('ScheduleFired', 'ScheduleSkipped')"
            " GROUP BY namespace, name, type, reason",
            (head,),
        )
        return [(r[0], r[1], r[2], r[3], int(r[4]), int(r[5] or r[4])) for r in rows]

    def fire_skew(
        self, head: int, buckets: Sequence[float]
    ) -> list[tuple[str, int, float, list[float]]]:
        """Per trigger (schedule, catchup), of the fires up to position `head`: how many, the
        sum of their skews (decision time minus scheduled time) and, per bucket bound, how
        many had a skew at or below it (cumulative)."""
        trigger = self.db.dialect.json_field("detail", "trigger")
        bucket_sql = ", ".join(
            f"SUM(CASE WHEN at - scheduled_time <= {b} THEN 1 ELSE 0 END)" for b in buckets
        )
        rows = self._query(
            f"SELECT {trigger}, COUNT(*), SUM(at - scheduled_time), {bucket_sql}"
            " FROM cronsource_audit WHERE notification_id <= ? AND type = 'ScheduleFired'"
            f" AND {trigger} IN ('schedule', 'catchup') GROUP BY 1",
            (head,),
        )
        return [(r[0], int(r[1]), float(r[2] or 0.0), [float(c or 0) for c in r[3:]]) for r in rows]

    def tail(self, after: int, types: Sequence[str], limit: int) -> list[TailRow]:
        """Audit rows of these types after position `after`, in log order, at most `limit`."""
        listed = ", ".join(f"'{t}'" for t in types)
        rows = self._query(
            "SELECT notification_id, namespace, type, reason, at, scheduled_time, detail, name"
            f" FROM cronsource_audit WHERE notification_id > ? AND type IN ({listed})"
            " ORDER BY notification_id LIMIT ?",
            (after, limit),
        )
        return [
            TailRow(int(r[0]), r[1], r[2], r[3], float(r[4]), r[5], json.loads(r[6]), r[7])
            for r in rows
        ]

    def due_counts(self, now: datetime) -> tuple[int, int]:
        """Live CronWorkflows in the due index, and how many of them are due at `now`."""
        row = self._query(
            "SELECT COUNT(*), SUM(CASE WHEN next_due <= ? THEN 1 ELSE 0 END)"
            " FROM cronsource_status WHERE deleted = 0 AND next_due IS NOT NULL",
            (now.timestamp(),),
        )[0]
        return int(row[0] or 0), int(row[1] or 0)

    def live_by_namespace(self) -> list[tuple[str, int]]:
        """Live CronWorkflows per namespace, by namespace."""
        rows = self._query(
            "SELECT namespace, COUNT(*) FROM cronsource_status WHERE deleted = 0"
            " GROUP BY namespace ORDER BY namespace"
        )
        return [(r[0], int(r[1])) for r in rows]

    # ------------------------------------------------------------------ PostgreSQL locks

    def advisory_locks(self, classes: Sequence[int]) -> list[tuple[int, int, int]]:
        """(class id, object id, backend pid) of the advisory locks of these classes granted
        on this database (adapters/shards.py takes them). PostgreSQL only."""
        marks = ", ".join("?" for _ in classes)
        rows = self._query(
            "SELECT classid::bigint, objid::bigint, pid FROM pg_locks"
            " WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            f" AND classid::bigint IN ({marks})",
            tuple(classes),
        )
        return [(int(r[0]), int(r[1]), int(r[2])) for r in rows]

    def lapsed_lease_pids(self) -> set[int]:
        """Backends named by replicas' leases that were not renewed in time (adapters/
        leases.py): the locks they hold belong to a replica that may be frozen. PostgreSQL
        only; empty on a store migrated before leases existed."""
        if not self._query("SELECT to_regclass('cronsource_leases') IS NOT NULL")[0][0]:
            return set()
        rows = self._query(
            "SELECT DISTINCT unnest(pids) FROM cronsource_leases"
            " WHERE renewed_at + lease_seconds * interval '1 second' < now()"
        )
        return {int(r[0]) for r in rows}

    def lock_holders(self, class_id: int) -> int:
        """How many backends hold an advisory lock of this class on this database (advisory
        locks belong to a database, but pg_locks lists the whole server's). PostgreSQL only."""
        rows = self._query(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = ? AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (class_id,),
        )
        return int(rows[0][0])
