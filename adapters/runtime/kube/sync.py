"""The cluster side of `cronsource run --kube`: `KubeSync`, which the scheduler loop polls for
what the watches saw and which writes changed statuses back (the engine's dispatcher creates
the Workflows through a KubeTarget, wired by adapters/bootstrap.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.kube.events import EventRecorder
from cronsource.adapters.infrastructure.kube.port import CWF, WF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.adapters.infrastructure.kube.status import StatusWriter
from cronsource.adapters.infrastructure.kube.target import KubeTarget
from cronsource.adapters.runtime.dispatchfirst import DispatchFirst
from cronsource.adapters.runtime.kube.events import KubeEventFeed
from cronsource.adapters.runtime.kube.watch import CalendarWatcher, CronWorkflowWatcher
from cronsource.adapters.runtime.kube.workflows import ViewProgress, WorkflowWatcher
from cronsource.adapters.runtime.recovery import recover_lost_runs
from cronsource.projections.dispatch import LABEL_CRON

#: How long status writes wait for a dispatcher that is behind and not moving. While it is
#: still creating the Workflows of fires the status view already shows, the API server's
#: capacity goes to those creations first (a burst of N fires is N creations, then N status
#: patches, as Argo's cron worker orders them per CronWorkflow), and a status rarely names an
#: active Workflow that is not created yet (adapters/runtime/dispatchfirst.py). A dispatcher
#: whose position has not moved for this long (stuck on a failing API) no longer holds the
#: statuses back.
STATUS_WAITS_FOR_DISPATCH = timedelta(seconds=5)
#: The longest status writes wait for a dispatcher that keeps moving but never catches up (more
#: fires than the API server takes, for minutes): statuses are then at most this stale.
STATUS_WAITS_AT_MOST = timedelta(seconds=60)
#: The longest a turn spends writing statuses: those not written by then are written at a
#: later turn. A hung API server (every write waiting out its request timeout and retries)
#: held the loop for most of a minute, and the ticks due meanwhile were decided too late
#: (DeadlineExceeded for 200 CronWorkflows while the store answered).
STATUS_WRITES_AT_MOST = 3.0


class KubeSync:
    """Everything the cluster side needs beside the dispatcher, driven from the scheduler
    loop: `start()` begins the watches (calendars, CronWorkflows, Workflows) as tasks on
    the client's loop, `poll()` (the
    RunPoller of adapters/runtime/runwatcher.py) applies what they saw on the caller's thread
    and writes changed statuses back."""

    def __init__(
        self,
        engine: Any,
        kube: KubeApi,
        namespace: str | None = None,
        instance_id: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`clock`: the engine's unless given (tests step one by hand)."""
        self.engine = engine
        clock = clock if clock is not None else engine.clock
        self.namespace = namespace
        seen = SeenMetadata()
        # The child Workflows seen (created by the dispatcher, or by the run watch), whose uids
        # the status names for Argo (adapters/kube/status.py `with_uids`).
        workflows = SeenMetadata(keys=("uid", "resourceVersion", "ownerReferences"))
        target = getattr(getattr(engine, "dispatcher", None), "target", None)
        if isinstance(target, KubeTarget):
            target.seen = workflows
        self.runs = WorkflowWatcher(
            kube,
            engine.service,
            namespace,
            clock=clock,
            progress=ViewProgress(engine.view, engine.service.name),
            workflows=workflows,
        )
        self.crons = CronWorkflowWatcher(
            kube,
            engine.service,
            namespace,
            instance_id,
            clock=clock,
            seen=seen,
            on_runs_adopted=self.runs.check,
        )
        self.calendars = CalendarWatcher(kube, engine.service, namespace, clock=clock)
        self.status = StatusWriter(
            kube, seen=seen, workflows=workflows, heads=engine.service.head_version
        )
        # Kubernetes Events on the CronWorkflows: from the audit log, and SuccessfulCreate
        # from the dispatcher; written off the hot path (adapters/runtime/kube/events.py).
        # The Events wait for the Workflows being created (`KubeTarget.quiet`).
        quiet = target.quiet if isinstance(target, KubeTarget) else None
        self.events = KubeEventFeed(engine, EventRecorder(kube, clock=clock, yield_to=quiet), seen)
        dispatcher = getattr(engine, "dispatcher", None)
        if dispatcher is not None:
            dispatcher.on_created = self.events.created
        self._written: dict[str, int] = {}
        #: The SpecError message written on each object the watch could not admit.
        self._rejected_written: dict[tuple[str, str], str] = {}
        self._statuses_first = DispatchFirst(STATUS_WAITS_FOR_DISPATCH, STATUS_WAITS_AT_MOST)
        #: The view's position when every status was last written (None: not yet).
        self._statuses_at: int | None = None
        self._stop = threading.Event()
        self.tasks: list[concurrent.futures.Future[None]] = []

    def start(self, watch_seconds: int = 30) -> None:
        self.crons.seed(self.engine.view.statuses(self.namespace))
        self.calendars.seed()
        self.tasks = [
            self.calendars.start(self._stop, watch_seconds),
            self.crons.start(self._stop, watch_seconds),
            self.runs.start(self._stop, watch_seconds),
        ]
        self.events.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End both watches (an open watch is cancelled, not waited out) and wait for them."""
        self._stop.set()
        for task in self.tasks:
            task.cancel()
        concurrent.futures.wait(self.tasks, timeout=timeout)
        self.events.stop()

    def dispatch_behind(self) -> bool:
        """Whether the dispatcher has fires to create that the status view already shows."""
        projector = self.engine.projector
        dispatched: int = projector.dispatched()
        position: int = projector.position()
        return dispatched < position

    def _statuses_wait(self, now: datetime, position: int) -> bool:
        """Whether status writes wait this turn: the dispatcher is behind the status view
        (at `position`), moved less than STATUS_WAITS_FOR_DISPATCH ago, and they have waited
        less than STATUS_WAITS_AT_MOST."""
        return self._statuses_first.waits(self.engine.projector.dispatched(), position, now)

    def write_statuses(self, now: datetime | None = None) -> int:
        """Write the status of every CronWorkflow whose view row is newer than what this
        process last wrote (the writer itself drops what the object already shows), several
        at a time, once the dispatcher has caught up or has not moved for
        STATUS_WAITS_FOR_DISPATCH, and only when the view has moved since. A failed write is
        retried next turn; the first failure is raised after the others were recorded."""
        position = self.engine.projector.position()
        if now is not None and self._statuses_wait(now, position):
            return 0
        # Status rows change only as the view's position moves: reading them all again (at
        # 10,000 CronWorkflows, half a second a turn) finds nothing new otherwise.
        if position == self._statuses_at:
            return 0
        rows = [
            row
            for row in self.engine.view.statuses(self.namespace)
            if self._written.get(row.cron_id, -1) < row.version
        ]
        if not rows:
            return 0
        written, failure, late = 0, None, 0
        results = self.status.write_many(rows, STATUS_WRITES_AT_MOST)
        for row, result in zip(rows, results, strict=True):
            if result is None:
                late += 1  # not done within the budget: written at a later turn
                continue
            if isinstance(result, BaseException):
                failure = failure or result
                continue
            written += result
            self._written[row.cron_id] = row.version
        if failure is not None:
            raise failure
        if late == len(rows):
            # Nothing answered in time: the API server hangs. The turn goes on (the
            # scheduler decides on the store alone); the run watcher backs off.
            raise TimeoutError(
                f"no status write finished within {STATUS_WRITES_AT_MOST:g}s: the API server"
                " does not answer in time"
            )
        if not late:
            self._statuses_at = position
        return written

    def write_rejected(self) -> int:
        """Argo's SpecError condition on each CronWorkflow the watch could not admit: one
        invalid from its creation has no stream, hence no status row, and showed nothing but
        a log line (Argo's operator.go reportCronWorkflowError sets the condition). Written
        once per message; a failed write is tried again next turn. Once the object is fixed
        and admitted, its first status write replaces the conditions."""
        rejected = self.crons.rejected
        for key in [k for k in self._rejected_written if k not in rejected]:
            del self._rejected_written[key]
        written = 0
        kube = self.status.kube
        for (namespace, name), message in list(rejected.items()):
            if self._rejected_written.get((namespace, name)) == message:
                continue
            condition = {"type": "SpecError", "status": "True", "message": message}
            try:
                body = {"status": {"conditions": [condition]}}
                patch = kube.patch(namespace, CWF, name, body)
                kube.run(asyncio.wait_for(patch, STATUS_WRITES_AT_MOST))
            except ApiError as e:
                if e.status != 404:  # gone since: its DELETED event drops it from `rejected`
                    raise
            self._rejected_written[(namespace, name)] = message
            written += 1
        return written

    def recover(self, now: datetime) -> int | None:
        """Record the cluster's Workflows of ours that the log has no fire for
        (adapters/runtime/recovery.py): one list of the labelled Workflows, at start-up and
        after the store changed. Those that already ended are then reported as completed by
        the run watch's next list or event, as any active run is."""
        if self.engine.projector.position() < self.engine.projector.head():
            return None
        listed = self.runs.kube.run(self.runs.kube.list(self.namespace, WF, LABEL_CRON))
        recorded = recover_lost_runs(
            self.engine, [o["metadata"] for o in listed.get("items") or []], now
        )
        if recorded:
            self.runs.report_ended(listed.get("items") or [], now)
        return recorded

    def poll(
        self, now: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        # Calendars first: a CronWorkflow that names a new calendar finds it.
        n = self.calendars.drain(now, budget, stop)
        n += self.crons.drain(now, budget, stop) + self.runs.drain(now, budget, stop)
        if n:
            self.engine.projector.step(now, budget=budget, stop=stop)
        written = self.write_statuses(now) + self.write_rejected()
        self.events.step(now)
        return n + written
