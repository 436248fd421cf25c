"""`KubeEventFeed`: the log's events as Kubernetes Events on their CronWorkflow, a follower of
the audit log as `run`'s decision log is (adapters/infrastructure/logs.py).

Where it stands is kept in memory and starts at the audit's head when the watches start:
at most once. A restart emits nothing twice and nothing of the history before it; what was
recorded while no replica projected, or was queued and not yet written when the process
died, is not emitted (Events are best effort: the log, `history` and `why` keep everything).
Only the replica that holds the projector role emits, so two replicas do not say it twice.

Each step is a few indexed reads of the audit and a non-blocking `emit` per row: the
writes happen on the recorder's own thread (adapters/infrastructure/kube/events.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronsource.adapters.infrastructure.kube.events import (
    AUDIT_TYPES,
    EventRecorder,
    ObjectRef,
    created_event,
    event_for,
)
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.domain.cronworkflow import CronWorkflow

#: Audit rows read at a time.
PAGE = 500


class KubeEventFeed:
    def __init__(self, engine: Any, recorder: EventRecorder, seen: SeenMetadata) -> None:
        self.engine = engine
        self.recorder = recorder
        self.seen = seen  # the CronWorkflows the watch saw: the uid of each Event's object
        #: The last audit position emitted; None until `start` (a replica that never
        #: projects never emits).
        self.position: int | None = None
        self.unattached = 0  # rows of a CronWorkflow the cluster does not show (no Event)

    def start(self, *, writer: bool = True) -> None:
        """Emit from now on (the audit's head); `writer=False` leaves the recorder without
        its thread, for a caller that drains it (`simulate`, on its virtual clock)."""
        self.position = self.engine.view.audit_head()
        if writer:
            self.recorder.start()

    def stop(self) -> None:
        self.recorder.stop()

    def ref(self, namespace: str, name: str, uid: str | None = None) -> ObjectRef | None:
        """The Event's object: the CronWorkflow as the cluster shows it (its uid from the
        watch's copy); None when the cluster has no such object."""
        meta = self.seen.get(namespace, name)
        if meta is None or (uid and meta.get("uid") != uid):
            return None
        return ObjectRef(namespace, name, str(meta.get("uid") or ""))

    def created(self, agg: CronWorkflow, workflow: str, at: datetime) -> None:
        """The dispatcher created a Workflow (`Dispatcher.on_created`): `SuccessfulCreate`.
        A replayed create after a crash says it again (the dispatcher is at least once)."""
        if self.position is None:
            return
        ref = self.ref(agg.namespace, agg.name, agg.uid or None)
        if ref is not None:
            self.recorder.emit(ref, *created_event(workflow), at)

    def step(self, now: datetime | None = None) -> int:
        """Emit the Events of what the audit gained since the last step; how many."""
        if self.position is None or not self.engine.projector.lock.try_acquire():
            return 0
        emitted = 0
        while True:
            rows = self.engine.view.audit(
                types=AUDIT_TYPES, after_position=self.position, limit=PAGE
            )
            for row in rows:
                self.position = row.notification_id
                what = event_for(row)
                if what is None:
                    continue
                ref = self.ref(row.namespace, row.name)
                if ref is None:
                    self.unattached += 1
                    continue
                self.recorder.emit(ref, *what, row.at)
                emitted += 1
            if len(rows) < PAGE:
                return emitted
