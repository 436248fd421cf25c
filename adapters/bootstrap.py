"""The one composition root: settings, a clock and a target in; the engine out.

Every entrypoint (the CLI's commands, `serve`, `run`, `simulate`, the Kubernetes side) and
every test and benchmark builds through `bootstrap`, so one place decides which store, which
views, which target and which clock are wired together; nothing else constructs a service.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.locks import lock_for
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.indexes import ViewIndex
from cronsource.adapters.runtime.projector import Projector
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.service import CronService, LogIndex
from cronsource.projections.dispatch import (
    NOT_STARTED_REASON,
    Dispatcher,
    NotStartedSink,
    WorkflowTarget,
)
from cronsource.projections.readmodel import AggregateFollower, ReadModelProjection

#: What builds the service: CronService, or a subclass a test wraps around it.
ServiceFactory = Callable[..., CronService]


def bootstrap(
    store: str | StoreConfig | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    target: WorkflowTarget | None = None,
    create_tables: bool | None = None,
    late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
    service_factory: ServiceFactory = CronService,
) -> Engine:
    """The engine over `store` (a URL, settings, or None for the embedded default).

    `target`: where fired runs become Workflows (the dispatcher runs only with one).
    `create_tables`: None creates them on embedded stores, which have one writer process at
    a time, and leaves PostgreSQL to `cronsource migrate`.
    """
    config = store if isinstance(store, StoreConfig) else StoreConfig.parse(store)
    if create_tables is None:
        create_tables = config.kind != "postgresql"
    view = config.read_model()
    if create_tables or config.kind != "postgresql":
        view.create_tables()
    indexes: list[ViewIndex] = []

    def index(service: CronService) -> LogIndex:
        indexes.append(ViewIndex(service, view))
        return indexes[0]

    service = service_factory(
        env=config.env(create_table=create_tables), late_tolerance=late_tolerance, index=index
    )

    def load_at(cron_id: UUID, version: int) -> CronWorkflow:
        agg: CronWorkflow = service.repository.get(cron_id, version=version)
        return agg

    # Each projection follows the log at its own pace, so each keeps its own aggregates.
    readmodel = ReadModelProjection(view, AggregateFollower(load_at, load_many=service.load_many))
    dispatcher = None
    if target is not None:
        dispatcher = Dispatcher(
            target,
            view,
            AggregateFollower(load_at, load_many=service.load_many),
            on_failure=lambda cid, wf, t, msg, at: service.submission_failed(
                cid, wf, t, msg, False, at
            ),
            on_not_started=_not_started_sink(service),
            late_tolerance=lambda: service.late_tolerance,
        )
    projector = Projector(service, view, readmodel, dispatcher, lock_for(config), clock)
    return Engine(config, service, view, readmodel, dispatcher, projector, indexes[0], clock)


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
