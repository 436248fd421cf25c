"""`memory:`: the library's in-process recorders with the same checks, and their factory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    StoredEvent,
)
from eventsourcing.popo import POPOAggregateRecorder, POPOApplicationRecorder, POPOFactory

from cronsource.adapters.infrastructure.store.recorders.common import (
    StaleAppend,
    first_versions,
)


class MemoryRecorder(POPOApplicationRecorder):
    """`memory:`: the library's in-process recorder with the same last-version check. It
    carries its snapshots (`snapshots`), so that replicas sharing it share them too."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots = MemorySnapshotRecorder()

    def _assert_uniqueness(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._assert_uniqueness(stored_events, **kwargs)
        stale: dict[UUID, tuple[int, int | None]] = {}
        for oid, first in first_versions(stored_events).items():
            versions = self._stored_events_index[str(oid)]
            last = max((v for v in versions if v < first), default=None)
            if (last or 0) != first - 1:
                stale[oid] = (first, last)
        if stale:
            raise StaleAppend(stale)

    def select_events_many(
        self, originator_ids: Sequence[UUID], after: Mapping[UUID, int] | None = None
    ) -> dict[UUID, list[StoredEvent]]:
        """The events of these streams after the version `after` gives for each."""
        out = {}
        for oid in originator_ids:
            events = self.select_events(oid, gt=(after or {}).get(oid))
            if events:
                out[oid] = list(events)
        return out

    def gaps(self) -> list[tuple[UUID, int, int]]:
        """Holes inside streams (none can arise in one process's memory, but say so)."""
        out = []
        with self._database_lock:
            for key, versions in self._stored_events_index.items():
                prev = 0
                for v in sorted(versions):
                    if v - prev > 1:
                        out.append((UUID(key), prev, v))
                    prev = v
        return out


class MemorySnapshotRecorder(POPOAggregateRecorder):
    def select_latest_many(self, upto: Mapping[UUID, int | None]) -> dict[UUID, StoredEvent]:
        """The latest snapshot of each stream at or below its version (None: any)."""
        out = {}
        for oid, v in upto.items():
            latest = self.select_events(oid, lte=v, desc=True, limit=1)
            if latest:
                out[oid] = latest[0]
        return out


class MemoryFactory(POPOFactory):
    """eventsourcing's in-process persistence with `MemoryRecorder` as the event store and
    `MemorySnapshotRecorder` for snapshots."""

    def application_recorder(self) -> MemoryRecorder:
        self._recorder = MemoryRecorder()
        return self._recorder

    def aggregate_recorder(self, purpose: str = "events") -> MemorySnapshotRecorder:
        recorder = getattr(self, "_recorder", None)
        return recorder.snapshots if recorder is not None else MemorySnapshotRecorder()
