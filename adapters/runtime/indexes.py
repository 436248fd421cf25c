"""The service's LogIndex: lookups across streams, answered from the read model's indexed rows
plus the events it has not projected yet.

A command addresses a CronWorkflow by name (a stream id includes the Kubernetes uid), and a
backfill asks which ticks fired; reading whole streams for either would make both grow with
the log's age. The read model's status and audit rows answer them by index; the tail of the log
past its position covers what a command wrote a moment ago.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.domain.backfill import HistoryRemoved
from cronsource.domain.service import CronService, fired_in

#: The stored topic of `CronWorkflowCreated` (the only event that carries a name).
CREATED_TOPIC = "cronsource:CronWorkflowCreated/v1"
#: How many creations one read of the unprojected tail decodes.
PAGE = 1000


class ViewIndex:
    """LogIndex over `view` for `service`'s log (domain/service.py)."""

    def __init__(self, service: CronService, view: ReadModel) -> None:
        self.service = service
        self.view = view
        # Creations read from the log beyond the status view, by (namespace, name).
        self._created_names: dict[tuple[str, str], list[UUID]] = {}
        self._created_after = 0
        self._lock = threading.Lock()

    def ids_named(self, namespace: str, name: str) -> list[UUID]:
        """Streams of this namespace and name (any uid): what the status view knows, plus
        creations it has not projected yet, so a lookup right after `apply` finds it.

        The unprojected tail is read incrementally (each creation is decoded once, not once
        per lookup), so applying many new manifests in a row stays linear."""
        ids = [UUID(i) for i in self.view.cron_ids(namespace, name)]
        with self._lock:
            self._scan_created()
            ids += self._created_names.get((namespace, name), [])
        return ids

    def _scan_created(self) -> None:
        app = self.service
        if self._created_after == 0:
            self._created_after = self.view.max_tracking_id(app.name, "readmodel") or 0
        while True:
            notes = app.recorder.select_notifications(
                start=self._created_after + 1, limit=PAGE, topics=[CREATED_TOPIC]
            )
            for n in notes:
                ev: Any = app.mapper.to_domain_event(n)  # a CronWorkflowCreated (topic filter)
                self._created_names.setdefault((ev.namespace, ev.name), []).append(ev.originator_id)
                self._created_after = n.id
            if len(notes) < PAGE:
                return

    def fired_ticks(self, cron_id: UUID, start: datetime, end: datetime) -> set[datetime]:
        """The ticks in [start, end] that fired: the audit's, from its index, and those of the
        stream's events the status view has not projected yet (a read of the stream's tail,
        never of the whole stream)."""
        kept_from = self.view.kept_from()
        if kept_from is not None and start < kept_from:
            raise HistoryRemoved(kept_from.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        ticks, projected = self.view.fired_ticks(str(cron_id), start, end)
        tail = self.service.events.get(cron_id, gt=projected)
        return ticks | fired_in(tail, start, end)

    def forget(self) -> None:
        """Drop the names read ahead of the status view (the store may have lost them)."""
        with self._lock:
            self._created_names.clear()
            self._created_after = 0
