"""Loading a golden snapshot (tests/golden/snapshot-v*.json): a snapshot written by an older
release and the events after it, stored as retention would have left them (the events before
the snapshot gone), so that a load must come through the upcasters."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent


def store_golden(svc: Any, golden: dict[str, Any]) -> UUID:
    """Insert `golden`'s snapshot and its `events_after` into `svc`'s stores; the stream id."""
    snap = golden["snapshot"]
    cron_id = UUID(snap["originator_id"])
    assert svc.snapshots is not None
    svc.snapshots.recorder.insert_events(
        [StoredEvent(cron_id, snap["originator_version"], snap["topic"], snap["state"].encode())]
    )
    svc.recorder.insert_into_gaps(
        [
            StoredEvent(cron_id, e["originator_version"], e["topic"], e["state"].encode())
            for e in golden["events_after"]
        ]
    )
    return cron_id
