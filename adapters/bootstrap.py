"""The one composition root: settings, a clock and a target in; the engine out.

Every entrypoint (the CLI's commands, `serve`, `run`, `simulate`, the Kubernetes side) and
every test and benchmark builds through `bootstrap`, so one place decides which store, which
views, which target and which clock are wired together; nothing else constructs a service.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.kube.port import KubeApi
from cronsource.adapters.infrastructure.leases import LEASE_SECONDS
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.infrastructure.locks import lock_for
from cronsource.adapters.infrastructure.shards import AdvisoryLockShards, Ownership, SoleOwner
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.indexes import ViewIndex
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.projector import Projector
from cronsource.adapters.runtime.retention import Retention
from cronsource.adapters.runtime.runwatcher import RunPoller, RunWatcher
from cronsource.adapters.runtime.waker import Waker
from cronsource.domain.cronworkflow import SUBMISSION_REFUSED, CronWorkflow
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.service import CronService, LogIndex
from cronsource.projections.dispatch import (
    NOT_STARTED_REASON,
    Dispatcher,
    FailureSink,
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
    replica: str | None = None,
) -> Engine:
    """The engine over `store` (a URL, settings, or None for the embedded default).

    `target`: where fired runs become Workflows (the dispatcher runs only with one).
    `create_tables`: None creates them on embedded stores, which have one writer process at
    a time, and leaves PostgreSQL to `cronsource migrate`.
    `replica`: the identity of the `run` replica this engine decides for
    (adapters/infrastructure/replica.py), recorded as `decidedBy` on its decisions.
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

    named = {"decided_by": replica} if replica is not None else {}
    service = service_factory(
        env=config.env(create_table=create_tables),
        late_tolerance=late_tolerance,
        index=index,
        **named,
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
            on_failure=_failure_sink(service),
            on_not_started=_not_started_sink(service),
            late_tolerance=lambda: service.late_tolerance,
            on_recovered=service.submission_recovered,
        )
    projector = Projector(service, view, readmodel, dispatcher, lock_for(config, replica), clock)
    return Engine(config, service, view, readmodel, dispatcher, projector, indexes[0], clock)


def migrate(config: StoreConfig) -> None:
    """Create the event store and read-model tables once (`cronsource migrate`), and the
    URL's schema first when it names one that does not exist yet (it said the schema "does
    not exist", as a connection failure)."""
    if config.kind == "postgresql" and config.pg_schema:
        import psycopg
        from psycopg import sql

        with psycopg.connect(config.pg_conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(config.pg_schema))
            )
    svc = CronService(env=config.env(create_table=True))
    svc.close()
    view = config.read_model()
    view.create_tables()
    view.close()


def _failure_sink(service: CronService) -> FailureSink:
    """The dispatcher's SubmissionFailed, recorded through the domain service."""

    def record(
        cron_id: Any,
        workflow: str,
        scheduled_time: datetime,
        message: str,
        at: datetime,
        *,
        transient: bool = False,
        reason: str = SUBMISSION_REFUSED,
        attempts: int = 1,
    ) -> bool:
        return service.submission_failed(
            cron_id,
            workflow,
            scheduled_time,
            message,
            transient,
            at,
            reason=reason,
            attempts=attempts,
        )

    return record


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


@dataclass
class Replica:
    """One `cronsource run` replica around an engine: the scheduler loop, its ownership of
    shards, the poller of runs (the local target's, or the cluster's watches), the waker,
    and what they hold open (the cluster's client is its opener's to close)."""

    engine: Engine
    loop: SchedulerLoop
    watcher: RunPoller
    waker: Waker

    def close(self) -> None:
        if isinstance(self.watcher, KubeSync):
            self.watcher.stop()
        self.waker.stop()
        self.engine.close()


def bootstrap_replica(
    engine: Engine,
    *,
    role: str = "all",
    identity: str | None = None,
    lease_seconds: float = LEASE_SECONDS,
    kube: KubeApi | None = None,
    instance_id: str | None = None,
    local: LocalTarget | None = None,
    retain: timedelta | None = None,
) -> Replica:
    """Wire `run`'s runtime around `engine` (built by `bootstrap` with its target): shards
    and leases on PostgreSQL (the whole store otherwise), the Kubernetes watches (`kube`)
    or the local target's run watcher (`local`), retention (`retain`), the loop and its
    waker. The watches start here when this replica may project. `identity` names the
    replica (adapters/infrastructure/replica.py; `run` computes it once): its lease row, its
    metrics' label, and `decidedBy` on its decisions."""
    config = engine.config
    ownership: Ownership
    if config.kind == "postgresql":
        shards = AdvisoryLockShards(
            config.pg_conninfo,
            want_projector=role != "scheduler",
            want_shards=role != "projector",
            schema=config.pg_schema,
            lease_seconds=lease_seconds,
            holder=identity,
        )
        if role != "scheduler":
            # The projections write on the session that holds the projector lock, so that a
            # replica whose role was taken while it was frozen cannot write
            # (adapters/infrastructure/shards.py).
            engine.view.write_through(shards.projector_transaction)
        ownership = shards
    else:
        ownership = SoleOwner(engine.projector.lock)
    watcher: RunPoller
    if kube is not None:
        sync = KubeSync(engine, kube, namespace=None, instance_id=instance_id)
        if role != "scheduler":
            sync.start()
        watcher = sync
    elif local is not None:
        watcher = RunWatcher(engine, local, clock=engine.clock)
    else:
        raise ValueError("a replica needs a cluster (kube) or a local target (local)")
    retention = Retention(engine, retain) if retain is not None else None
    loop = SchedulerLoop(
        engine, ownership, role=role, watcher=watcher, retention=retention, replica=identity
    )
    if isinstance(ownership, AdvisoryLockShards):
        ownership.lease.turn_age = loop.turn_age  # `last_turn` in the lease (`replicas`)
    return Replica(engine, loop, watcher, Waker(engine))
