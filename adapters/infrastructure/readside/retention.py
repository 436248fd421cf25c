"""The read model's part of retention: where the kept window starts, and the audit rows past it.

The audit log is bounded by the same retention as the event log (adapters/runtime/retention.py):
rows of events older than the cut are removed in small batches, except those still needed (an
active run's fire). `cronsource_retention` remembers the oldest instant kept, so that `history`,
`why` and the HTTP audit queries can say that a time before it was removed, naming it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from cronsource.adapters.infrastructure.readside.database import Database

TABLE = """CREATE TABLE IF NOT EXISTS cronsource_retention (
    name TEXT PRIMARY KEY, kept_from DOUBLE PRECISION NOT NULL)"""


def position_before(db: Database, cutoff: datetime) -> int:
    """The last log position whose event happened before `cutoff` (0: none)."""
    rows = db.fetch(
        "SELECT max(notification_id) FROM cronsource_audit WHERE at < ?", (cutoff.timestamp(),)
    )
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def needed_positions(db: Database, upto: int) -> list[int]:
    """Positions at or below `upto` that retention must keep, whatever their age: the fire
    (or recovery) of each run still active, and the last BackfillQueued of each stream whose
    last backfill event is one (a queue not cancelled; its ticks may still be waiting)."""
    runs: dict[str, list[str]] = {}
    for namespace, status in db.fetch(
        "SELECT namespace, status FROM cronsource_status WHERE deleted = 0 AND active > 0"
    ):
        runs.setdefault(namespace, []).extend(
            r["name"] for r in json.loads(status).get("active") or []
        )
    keep: list[int] = []
    for namespace, names in runs.items():
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            keep += [
                int(r[0])
                for r in db.fetch(
                    "SELECT notification_id FROM cronsource_audit WHERE namespace = ?"
                    " AND workflow IN (" + ",".join("?" for _ in chunk) + ")"
                    " AND type IN ('ScheduleFired', 'RunRecovered') AND notification_id <= ?",
                    (namespace, *chunk, upto),
                )
            ]
    keep += [
        int(r[0])
        for r in db.fetch(
            "SELECT a.notification_id FROM cronsource_audit a WHERE a.type = 'BackfillQueued'"
            " AND a.notification_id <= ? AND a.notification_id = (SELECT max(b.notification_id)"
            " FROM cronsource_audit b WHERE b.cron_id = a.cron_id"
            " AND b.type IN ('BackfillQueued', 'BackfillCancelled'))",
            (upto,),
        )
    ]
    return keep


def remove_audit(db: Database, upto: int, keep: Sequence[int], limit: int) -> int:
    """Delete up to `limit` audit rows at or below position `upto`, except `keep`; returns
    how many."""
    sql = db.dialect.sql
    with db.transaction() as conn:
        rows = conn.execute(
            sql(
                "SELECT notification_id FROM cronsource_audit WHERE notification_id <= ?"
                " ORDER BY notification_id LIMIT ?"
            ),
            (upto, limit + len(keep)),
        ).fetchall()
        kept = set(keep)
        doomed = [(int(r[0]),) for r in rows if int(r[0]) not in kept][:limit]
        conn.cursor().executemany(
            sql("DELETE FROM cronsource_audit WHERE notification_id = ?"), doomed
        )
    return len(doomed)


def set_kept_from(db: Database, t: datetime) -> None:
    sql = db.dialect.sql
    with db.transaction() as conn:
        conn.execute(
            sql(
                "INSERT INTO cronsource_retention (name, kept_from) VALUES ('log', ?)"
                " ON CONFLICT (name) DO UPDATE SET kept_from = excluded.kept_from"
            ),
            (t.timestamp(),),
        )
