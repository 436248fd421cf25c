"""Tracking positions: how far each projection has processed the log (`cronsource_tracking`).

A projection's rows and its position are written in one transaction
(adapters/infrastructure/readside/ writer.py), so the position says exactly which events its rows
include (exactly once, docs/design.md section 5). Positions are moved only by conditional
statements, so two processes projecting at once cannot both apply one event.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Tracking

from cronsource.adapters.infrastructure.readside.database import Database
from cronsource.adapters.infrastructure.readside.dialect import Dialect


def max_tracking_id(db: Database, projection: str, application_name: str) -> int | None:
    """The position of `projection` in the log of `application_name` (None: never moved)."""
    rows = db.fetch(
        "SELECT notification_id FROM cronsource_tracking"
        " WHERE projection = ? AND application_name = ?",
        (projection, application_name),
    )
    return int(rows[0][0]) if rows else None


def advance(conn: Any, dialect: Dialect, projection: str, tracking: Tracking) -> bool:
    """Move the position to this event; False if it was already processed.

    One conditional upsert, so two processes projecting at once cannot both pass a
    check: the second waits on the row lock, then finds the position moved and skips.
    """
    row = conn.execute(
        dialect.sql(
            "INSERT INTO cronsource_tracking (projection, application_name, notification_id)"
            " VALUES (?, ?, ?) ON CONFLICT (projection, application_name)"
            " DO UPDATE SET notification_id = excluded.notification_id"
            " WHERE cronsource_tracking.notification_id < excluded.notification_id"
            " RETURNING notification_id"
        ),
        (projection, tracking.application_name, tracking.notification_id),
    ).fetchone()
    return row is not None


def track(db: Database, projection: str, tracking: Tracking) -> bool:
    """Record a position for a projection with no rows of its own (the dispatcher)."""
    with db.transaction() as conn:
        return advance(conn, db.dialect, projection, tracking)


def lock_position(conn: Any, dialect: Dialect, projection: str, application_name: str) -> int:
    """The position, locked for this transaction, so two projectors take turns."""
    conn.execute(
        dialect.sql(
            "INSERT INTO cronsource_tracking (projection, application_name, notification_id)"
            " VALUES (?, ?, 0) ON CONFLICT (projection, application_name) DO NOTHING"
        ),
        (projection, application_name),
    )
    row = conn.execute(
        dialect.sql(
            "SELECT notification_id FROM cronsource_tracking"
            " WHERE projection = ? AND application_name = ?" + dialect.for_update
        ),
        (projection, application_name),
    ).fetchone()
    return int(row[0])


def set_position(
    conn: Any, dialect: Dialect, projection: str, application_name: str, notification_id: int
) -> None:
    """Move a position locked by `lock_position` in this transaction."""
    conn.execute(
        dialect.sql(
            "UPDATE cronsource_tracking SET notification_id = ?"
            " WHERE projection = ? AND application_name = ?"
        ),
        (notification_id, projection, application_name),
    )
