"""What the read-model projection writes: status and audit rows with the position they reach,
in one transaction.

If the process dies before the commit, neither the rows nor the position are stored and the
projection processes the events again; if it dies after, the position says so and they are
not applied twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cronsource.adapters.infrastructure.readside import positions
from cronsource.adapters.infrastructure.readside.database import Database
from cronsource.adapters.infrastructure.readside.rows import ts
from cronsource.projections.readmodel import StatusRow, ViewItem


def write_batch(db: Database, projection: str, items: Sequence[ViewItem]) -> int:
    """Apply events (in log order) and move the position to the last, in one transaction.
    Events at or below the stored position were applied before and are skipped, so a
    replay after a crash, or a second projector, changes nothing. Returns rows applied.
    A status may be None where a later event of the batch carries that CronWorkflow's."""
    if not items:
        return 0
    app = items[0][0].application_name
    sql = db.dialect.sql
    with db.transaction() as conn:
        current = positions.lock_position(conn, db.dialect, projection, app)
        fresh = [i for i in items if i[0].notification_id > current]
        if not fresh:
            return 0
        latest: dict[str, StatusRow] = {}
        for _, status, _ in fresh:
            if status is not None:
                latest[status.cron_id] = status
        cur = conn.cursor()
        cur.executemany(
            sql(
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
                    ts(st.next_due),
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
            sql(
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
                    ts(a.at),
                    ts(a.scheduled_time),
                    a.reason,
                    a.workflow,
                    json.dumps(a.detail),
                )
                for _, _, a in fresh
                if a is not None
            ],
        )
        positions.set_position(conn, db.dialect, projection, app, fresh[-1][0].notification_id)
        return len(fresh)
