"""The read model's tables and indexes, the audit views on them, and the upgrade of tables an
older version made.

`cronsource migrate` (and embedded stores at start) run `create_tables`; every statement is
idempotent, so running it again on current tables changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from cronsource.adapters.infrastructure.readside import retention, views
from cronsource.adapters.infrastructure.readside.database import Database

TABLES = [
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
    retention.TABLE,
]
#: Created after `_upgrade`, which may first have to add the column they index.
INDEXES = [
    # The run watcher asks for the few CronWorkflows with runs active among all of them.
    "CREATE INDEX IF NOT EXISTS cronsource_status_active ON cronsource_status (active)"
    " WHERE active > 0",
    # Which fire made this Workflow (the run watcher, for a Workflow file that is missing).
    "CREATE INDEX IF NOT EXISTS cronsource_audit_workflow"
    " ON cronsource_audit (namespace, workflow)",
    # The ticks of one CronWorkflow that fired in a range (a backfill must not fire them again).
    "CREATE INDEX IF NOT EXISTS cronsource_audit_ticks"
    " ON cronsource_audit (cron_id, scheduled_time)",
    # Retention: where the kept window starts, and the backfill queues it must keep.
    "CREATE INDEX IF NOT EXISTS cronsource_audit_at ON cronsource_audit (at)",
    "CREATE INDEX IF NOT EXISTS cronsource_audit_backfills ON cronsource_audit (cron_id)"
    " WHERE type IN ('BackfillQueued', 'BackfillCancelled')",
]
TABLE_NAMES = (
    "cronsource_tracking",
    "cronsource_status",
    "cronsource_audit",
    "cronsource_retention",
)


#: The replicas' leases (adapters/infrastructure/leases.py): not the read model's, but made with
#: it in the store's schema by `migrate`, and only on PostgreSQL (an embedded store has one
#: process).
LEASES_TABLE = """CREATE TABLE IF NOT EXISTS cronsource_leases (
    member BIGINT PRIMARY KEY,
    holder TEXT NOT NULL,
    pids INTEGER[] NOT NULL,
    lease_seconds DOUBLE PRECISION NOT NULL,
    renewed_at TIMESTAMPTZ NOT NULL,
    last_turn TIMESTAMPTZ)"""
#: `last_turn` (when the replica's loop last finished a turn, written with each renewal; shown
#: by `cronsource replicas`) came after the table: a store migrated before gets it here.
LEASES_UPGRADE = "ALTER TABLE cronsource_leases ADD COLUMN IF NOT EXISTS last_turn TIMESTAMPTZ"


def create_tables(db: Database) -> None:
    with db.transaction() as conn:
        for stmt in TABLES:
            conn.execute(stmt)
        _upgrade(db, conn)
        for stmt in INDEXES:
            conn.execute(stmt)
        # Last: a view is bound to the columns its tables have once `_upgrade` ran.
        views.create_views(conn, db.dialect)
        if not db.dialect.is_sqlite:
            # Not the read model's, but made with it in the store's schema by `migrate`: the
            # replicas' leases (adapters/infrastructure/leases.py), which an embedded store does not
            # need.
            conn.execute(LEASES_TABLE)
            conn.execute(LEASES_UPGRADE)


def _upgrade(db: Database, conn: Any) -> None:
    """Bring tables made by an older version up to date (`cronsource migrate`)."""
    if "active" in db.dialect.columns(conn, "cronsource_status"):
        return
    conn.execute("ALTER TABLE cronsource_status ADD COLUMN active INTEGER NOT NULL DEFAULT 0")
    rows = conn.execute("SELECT cron_id, status FROM cronsource_status").fetchall()
    counts = [(len(json.loads(st).get("active") or []), cid) for cid, st in rows]
    conn.cursor().executemany(
        db.dialect.sql("UPDATE cronsource_status SET active = ? WHERE cron_id = ?"),
        [c for c in counts if c[0]],
    )


def drop_tables(db: Database) -> None:
    with db.transaction() as conn:
        views.drop_views(conn)
        for t in TABLE_NAMES:
            conn.execute(f"DROP TABLE IF EXISTS {t}")
        if not db.dialect.is_sqlite:
            conn.execute("DROP TABLE IF EXISTS cronsource_leases")
