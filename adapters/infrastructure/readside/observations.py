"""The reads the status page and the metrics make of the read model: timeline windows, what is
overdue, the latest decisions, counts, the audit's tail, and who holds the store's locks.

Kept apart from the command-side reads (queries.py) because they are many and answer people
and Prometheus, not decisions; `Queries` extends this class, so the read model offers both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronsource.adapters.infrastructure.readside.database import Database
from cronsource.adapters.infrastructure.readside.rows import (
    AUDIT_COLUMNS,
    audit_from_row,
    dt,
)
from cronsource.projections.readmodel import PAUSED_CONDITION, AuditRow, paused_runs


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


class Observations:
    """The observers' reads over one read-model database (`db`)."""

    db: Database

    @property
    def is_sqlite(self) -> bool:
        return self.db.dialect.is_sqlite

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.db.fetch(sql, args)

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

    def paused_by_namespace(self) -> list[tuple[str, int]]:
        """Live CronWorkflows paused after failures, per namespace (those that have any), by
        namespace. The text match finds the few candidates (the condition type in the status
        JSON); the condition itself, parsed, decides, so a label or name that happens to
        contain the word is not counted."""
        rows = self._query(
            "SELECT namespace, status FROM cronsource_status WHERE deleted = 0"
            " AND status LIKE ? ORDER BY namespace",
            (f"%{PAUSED_CONDITION}%",),
        )
        counts: dict[str, int] = {}
        for ns, status in rows:
            if paused_runs(json.loads(status)) is not None:
                counts[ns] = counts.get(ns, 0) + 1
        return sorted(counts.items())

    # ------------------------------------------------------------------ PostgreSQL locks

    def advisory_locks(self, classes: Sequence[int]) -> list[tuple[int, int, int]]:
        """(class id, object id, backend pid) of the advisory locks of these classes granted
        on this database (adapters/infrastructure/shards.py takes them). PostgreSQL only."""
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

    def leases(self) -> list[tuple[str, list[int], datetime, float, bool, datetime | None]]:
        """Every replica's lease (adapters/infrastructure/leases.py): its identity (`holder`),
        the backends that hold its locks, when it last renewed, its length, and whether it
        lapsed by the server's clock, and when its loop last finished a turn (None: not
        reported yet, or a store migrated before `last_turn`). PostgreSQL only; empty on a
        store migrated before leases existed."""
        if not self._query("SELECT to_regclass('cronsource_leases') IS NOT NULL")[0][0]:
            return []
        rows = self._query(
            "SELECT holder, pids, renewed_at, lease_seconds,"
            " renewed_at + lease_seconds * interval '1 second' < now(),"
            # by name through the row's JSON: the column may not exist yet (see schema.py)
            " (to_jsonb(l) ->> 'last_turn')::timestamptz"
            " FROM cronsource_leases l ORDER BY holder"
        )
        return [
            (str(h), [int(p) for p in pids], at, float(s), bool(x), turn)
            for h, pids, at, s, x, turn in rows
        ]

    def lock_holders(self, class_id: int, below: int = 2**32) -> int:
        """How many backends hold an advisory lock of this class, with a key below `below`,
        on this database (advisory locks belong to a database, but pg_locks lists the whole
        server's). PostgreSQL only."""
        rows = self._query(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = ? AND objid::bigint < ? AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (class_id, below),
        )
        return int(rows[0][0])
