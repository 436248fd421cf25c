"""Rows of the read model's tables as the row types readers get.

Times are stored as Unix seconds (DOUBLE PRECISION), JSON documents as text; these functions
are the one place that turns them back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsource.domain.timestamps import parse_timestamp
from cronsource.projections.readmodel import AuditRow, StatusRow

#: Columns of cronsource_audit in the order `audit_from_row` reads them.
AUDIT_COLUMNS = (
    "notification_id, cron_id, namespace, name, version, type, at, scheduled_time, reason,"
    " workflow, detail"
)
#: Columns of cronsource_status in the order `status_from_row` reads them.
STATUS_COLUMNS = "cron_id, namespace, name, deleted, next_due, version, status, spec, metadata"


def ts(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def dt(x: float | None) -> datetime | None:
    return None if x is None else datetime.fromtimestamp(x, UTC)


def audit_from_row(r: Sequence[Any]) -> AuditRow:
    """An AuditRow from a row selected with AUDIT_COLUMNS."""
    at = dt(r[6])
    assert at is not None  # the column is NOT NULL
    return AuditRow(
        notification_id=int(r[0]),
        cron_id=r[1],
        namespace=r[2],
        name=r[3],
        version=int(r[4]),
        type=r[5],
        at=at,
        scheduled_time=dt(r[7]),
        reason=r[8],
        workflow=r[9],
        detail=json.loads(r[10]),
    )


def status_from_row(r: Sequence[Any]) -> StatusRow:
    """A StatusRow from a row selected with STATUS_COLUMNS."""
    return StatusRow(
        cron_id=r[0],
        namespace=r[1],
        name=r[2],
        deleted=bool(r[3]),
        next_due=dt(r[4]),
        version=int(r[5]),
        status=json.loads(r[6]),
        spec=json.loads(r[7]),
        metadata=json.loads(r[8]),
    )


def skip_last(row: AuditRow) -> datetime:
    """The last tick of a skipped range (stored to the second, so its whole second counts)."""
    last = row.detail.get("lastScheduledTime")
    assert row.scheduled_time is not None
    if not last:
        return row.scheduled_time
    end = parse_timestamp(last, "lastScheduledTime", bounded=False)  # our own, stored value
    return end + timedelta(seconds=1) - timedelta(microseconds=1)
