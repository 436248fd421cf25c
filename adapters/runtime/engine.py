"""The one composition root: a store URL in, the service and its projections out.

The CLI, `simulate`, the scheduler and the tests all build through `build_engine`, so there is
one place that decides which store, which views and which target are wired together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking

from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.projector import Projector, lock_for
from cronsource.domain.backfill import HistoryRemoved
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.service import CronService, fired_in
from cronsource.projections.dispatch import (
    NOT_STARTED_REASON,
    Dispatcher,
    NotStartedSink,
    WorkflowTarget,
)
from cronsource.projections.readmodel import AggregateFollower, ReadModelProjection

#: The stored topic of `CronWorkflowCreated` (the only event that carries a name).
CREATED_TOPIC = "cronsource:CronWorkflowCreated/v1"


@dataclass
class Engine:
    config: StoreConfig
    service: CronService
    view: ReadModel
    readmodel: ReadModelProjection
    dispatcher: Dispatcher | None = None
    #: The one owner of the projections' positions (set by `build_engine`).
    projector: Projector = field(init=False, repr=False)
    extra_replicas: list[CronService] = field(default_factory=list)
    # `ids_named`: creations read from the log beyond the status view, by (namespace, name).
    _created_names: dict[tuple[str, str], list[UUID]] = field(default_factory=dict, repr=False)
    _created_after: int = field(default=0, repr=False)
    _names_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _pending(self, projection: str, limit: int) -> list[tuple[Any, Tracking]]:
        app = self.service
        start = (self.view.max_tracking_id(app.name, projection) or 0) + 1
        notes = app.recorder.select_notifications(start=start, limit=limit)
        return [(app.mapper.to_domain_event(n), Tracking(app.name, n.id)) for n in notes]

    def catch_up(
        self,
        at: datetime | None = None,
        batch: int = 1000,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
        *,
        dispatch: bool = True,
    ) -> int:
        """Process events not yet projected; returns how many the read model took.

        The mechanism only: in the product only `Projector` (adapters/runtime/projector.py) calls
        it, under the projector lock, so one thread of one process moves the positions.
        Tests and benchmarks that are the only process on their store call it directly.
        Without a `budget` it runs until caught up. The service loop passes a budget in
        seconds and a stop check, so a backlog never holds up SIGTERM or the scheduler for
        longer than that: the rest waits for the next turn. `dispatch=False` leaves the
        dispatcher to its own thread (adapters/runtime/).
        """
        more_time = _time_left(budget, stop)
        done = self._drain("readmodel", self.readmodel.process_batch, batch, more_time)
        if dispatch:
            self._dispatch(at, batch, more_time)
        return done

    def dispatch(
        self,
        at: datetime | None = None,
        batch: int = 1000,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> int:
        """Dispatch events not yet dispatched (the dispatcher's part of `catch_up`)."""
        return self._dispatch(at, batch, _time_left(budget, stop))

    def _dispatch(self, at: datetime | None, batch: int, more_time: Callable[[], bool]) -> int:
        dispatcher = self.dispatcher
        if dispatcher is None:
            return 0
        now = at or datetime.now(UTC)
        return self._drain(
            "dispatch", lambda pending: dispatcher.process_batch(pending, now), batch, more_time
        )

    def _drain(
        self,
        projection: str,
        process: Callable[[list[tuple[Any, Tracking]]], Any],
        batch: int,
        more_time: Callable[[], bool],
    ) -> int:
        """Feed a projection its pending events, `batch` at a time, until it is caught up or
        time is up; at least one batch per call, so it always makes progress."""
        done = 0
        while True:
            pending = self._pending(projection, batch)
            process(pending)
            done += len(pending)
            if len(pending) < batch or not more_time():
                return done

    def ids_named(self, namespace: str, name: str) -> list[UUID]:
        """Streams of this namespace and name (any uid): what the status view knows, plus
        creations it has not projected yet, so a lookup right after `apply` finds it.

        The unprojected tail is read incrementally (each creation is decoded once, not once
        per lookup), so applying many new manifests in a row stays linear."""
        ids = [UUID(i) for i in self.view.cron_ids(namespace, name)]
        with self._names_lock:
            self._scan_created()
            ids += self._created_names.get((namespace, name), [])
        return ids

    def _scan_created(self) -> None:
        app = self.service
        if self._created_after == 0:
            self._created_after = self.view.max_tracking_id(app.name, "readmodel") or 0
        while True:
            notes = app.recorder.select_notifications(
                start=self._created_after + 1, limit=1000, topics=[CREATED_TOPIC]
            )
            for n in notes:
                ev: Any = app.mapper.to_domain_event(n)  # a CronWorkflowCreated (topic filter)
                self._created_names.setdefault((ev.namespace, ev.name), []).append(ev.originator_id)
                self._created_after = n.id
            if len(notes) < 1000:
                return

    def forget(self) -> None:
        """Drop every copy of the log this engine keeps in memory: the services' aggregate
        caches, the projections' aggregates and the names read ahead of the status view.
        Called when the store may have lost what those copies were built from (its
        connection was lost, or it is another server now: adapters/runtime/storeidentity.py); each
        is rebuilt from what the log holds on its next use."""
        for svc in [self.service, *self.extra_replicas]:
            svc.forget()
        self.readmodel.follower.forget()
        if self.dispatcher is not None:
            self.dispatcher.follower.forget()
        with self._names_lock:
            self._created_names.clear()
            self._created_after = 0

    def fired_ticks(self, cron_id: UUID, start: datetime, end: datetime) -> set[datetime]:
        """The ticks in [start, end] that fired (CronService.fired_ticks): the audit's, from
        its index, and those of the stream's events the status view has not projected yet
        (a read of the stream's tail, never of the whole stream)."""
        kept_from = self.view.kept_from()
        if kept_from is not None and start < kept_from:
            raise HistoryRemoved(kept_from.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        ticks, projected = self.view.fired_ticks(str(cron_id), start, end)
        tail = self.service.events.get(cron_id, gt=projected)
        return ticks | fired_in(tail, start, end)

    def replica(self) -> CronService:
        """Another service instance on the same store (its own cache), as a second process
        would have; `simulate` uses these to interleave replicas."""
        shared = self.service.recorder if self.config.kind == "memory" else None
        svc = CronService(env=self.config.env(create_table=False), recorder=shared)
        svc.late_tolerance = self.service.late_tolerance
        svc.name_index = self.ids_named
        svc.fired_index = self.fired_ticks
        self.extra_replicas.append(svc)
        return svc

    @property
    def rejected_writes(self) -> int:
        return self.service.rejected_writes + sum(r.rejected_writes for r in self.extra_replicas)

    def close(self) -> None:
        self.projector.close()
        for svc in [self.service, *self.extra_replicas]:
            svc.close()
        self.view.close()


def _time_left(budget: float | None, stop: Callable[[], bool] | None) -> Callable[[], bool]:
    deadline = None if budget is None else time.monotonic() + budget

    def more_time() -> bool:
        if stop is not None and stop():
            return False
        return deadline is None or time.monotonic() < deadline

    return more_time


def migrate(config: StoreConfig) -> None:
    """Create the event store and read-model tables once (`cronsource migrate`)."""
    svc = CronService(env=config.env(create_table=True))
    svc.close()
    view = config.read_model()
    view.create_tables()
    view.close()


def _not_started_sink(service: CronService) -> NotStartedSink:
    """The dispatcher's RunNotStarted, recorded through the domain service."""

    def record(
        cron_id: Any,
        workflow: str,
        message: str,
        late: timedelta,
        deadline: timedelta,
        at: datetime,
    ) -> None:
        service.run_not_started(
            cron_id,
            workflow,
            NOT_STARTED_REASON,
            message,
            late.total_seconds(),
            deadline.total_seconds(),
            at,
        )

    return record


def build_engine(
    store: str | StoreConfig | None = None,
    *,
    target: WorkflowTarget | None = None,
    create_tables: bool | None = None,
    late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
    service_factory: Callable[[dict[str, str]], CronService] = CronService,
) -> Engine:
    config = store if isinstance(store, StoreConfig) else StoreConfig.parse(store)
    if create_tables is None:
        # Embedded stores have one writer process at a time; PostgreSQL is migrated once.
        create_tables = config.kind != "postgresql"
    env = config.env(create_table=create_tables)
    service = service_factory(env)
    service.late_tolerance = late_tolerance
    view = config.read_model()
    if create_tables or config.kind != "postgresql":
        view.create_tables()

    def load_at(cron_id: UUID, version: int) -> CronWorkflow:
        agg: CronWorkflow = service.repository.get(cron_id, version=version)
        return agg

    # Each projection follows the log at its own pace, so each keeps its own aggregates.
    follower = AggregateFollower(load_at, load_many=service.load_many)
    engine = Engine(config, service, view, ReadModelProjection(view, follower))
    engine.projector = Projector(engine, lock_for(config))
    service.name_index = engine.ids_named
    service.fired_index = engine.fired_ticks
    if target is not None:
        dfollower = AggregateFollower(load_at, load_many=service.load_many)
        engine.dispatcher = Dispatcher(
            target,
            view,
            dfollower,
            on_failure=lambda cid, wf, t, msg, at: service.submission_failed(
                cid, wf, t, msg, False, at
            ),
            on_not_started=_not_started_sink(service),
            late_tolerance=lambda: service.late_tolerance,
        )
    return engine
