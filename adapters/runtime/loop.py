"""`cronsource run`: the scheduler loop, the projection workers and the run watcher.

One loop per process, in this order each turn: project what is new (status, audit, due index,
dispatch), decide what is due, project again (so Workflows are created right after their fire
is committed), look at the runs. The loop then sleeps until the next due time or until the log
changes (PostgreSQL LISTEN/NOTIFY; polling on SQLite), whichever comes first.

Crash safety comes from the order of effects, not from this loop: a fire is committed before
any Workflow exists, the dispatcher creates Workflows idempotently before it moves its position,
and the read model moves its position in the same transaction as its rows.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from adapters.engine import Engine
from adapters.logs import DecisionLog
from adapters.runtime.dispatchworker import DispatchWorker
from adapters.runtime.projection import lag
from adapters.runtime.runwatcher import RunPoller
from adapters.runtime.settings import (
    BATCH,
    PREPARE_AHEAD,
    PREPARE_LIMIT,
    PREPARED_MAX_DELAY,
    REPORT_SECONDS,
    TURN_BUDGET,
    WARM_AHEAD,
    WARM_LIMIT,
)
from adapters.runtime.supervisor import Supervisor
from adapters.runtime.waker import Waker
from adapters.shards import REBALANCE_SECONDS, Ownership
from domain.cronworkflow import CronWorkflow
from domain.service import TickReport

log = logging.getLogger("cronsource")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class SchedulerLoop:
    engine: Engine
    ownership: Ownership
    role: str = "all"
    watcher: RunPoller | None = None
    poll_seconds: float = 0.5
    clock: Callable[[], datetime] = utcnow
    stop_event: threading.Event = field(default_factory=threading.Event)
    fires: int = 0
    _known_next: dict[UUID, tuple[int, datetime | None]] = field(default_factory=dict)
    #: Decisions made in advance for one due instant: (instant, batches of aggregates).
    _prepared: tuple[datetime, list[list[CronWorkflow]]] | None = None
    _seen: dict[UUID, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.projector = Supervisor("projections")
        self.scheduler = Supervisor("scheduler")
        self.watch = Supervisor("run watcher")
        self.shards = Supervisor("shards")
        self.warmer = Supervisor("warm-up")
        self.last_warmed = 0
        self.dispatch_worker: DispatchWorker | None = None  # started by `run`
        self._last_rebalance = 0.0
        self._last_report = time.monotonic()
        self.decision_log: DecisionLog | None = None  # created once this replica projects
        #: time.monotonic() when the last turn finished; None before the first (the probe
        #: server's readiness bounds its age: adapters/probes.py).
        self.last_turn: float | None = None

    @property
    def runs_projections(self) -> bool:
        return self.role in ("all", "projector") and self.ownership.is_projector()

    @property
    def runs_scheduler(self) -> bool:
        return self.role in ("all", "scheduler")

    def _due(self, now: datetime) -> list[UUID]:
        ids = []
        self._seen = {}
        for raw, version in self.engine.view.due_versions(now):
            cron_id = UUID(raw)
            if not self.ownership.owns(cron_id):
                continue
            known = self._known_next.get(cron_id)
            if known is not None and version < known[0]:
                # The due index has not yet seen our own last save: what we decided then is
                # newer than what it shows. Once it has caught up, it is the one to trust
                # (someone else may have changed the CronWorkflow since).
                if known[1] is None or known[1] > now:
                    continue
            ids.append(cron_id)
            self._seen[cron_id] = version
        return ids

    def schedule_once(self, now: datetime) -> int:
        """Decide everything due now, BATCH CronWorkflows per transaction; returns fires.

        What `prepare_once` decided in advance for an instant that has now come is committed
        first, as it is: the store's version check refuses any of it whose CronWorkflow
        changed since (that batch is then decided again on fresh state). The rest is decided
        now. Batch k+1 is decided while batch k's transaction is on its way to the store (one
        committing thread keeps the commits in order): the database's time and Python's
        overlap instead of adding up. Batches hold distinct CronWorkflows, so the two never
        touch the same aggregate.
        """
        prepared = self._take_prepared(now)
        taken = {a.id for _, batch in prepared for a in batch}
        due = [cron_id for cron_id in self._due(now) if cron_id not in taken]
        svc = self.engine.service
        fired = 0

        def settle(report: TickReport) -> None:
            nonlocal fired
            fired += report.fires
            if report.fires and self.dispatch_worker is not None:
                self.dispatch_worker.wake.set()  # its Workflows can be created right away
            for cron_id, version in report.versions.items():
                self._known_next[cron_id] = (version, report.next_due.get(cron_id))

        def decided() -> Iterator[tuple[datetime, list[CronWorkflow]]]:
            yield from prepared
            for i in range(0, len(due), BATCH):
                yield now, svc.decide(due[i : i + BATCH], now, self._seen)

        with ThreadPoolExecutor(1, thread_name_prefix="commit") as committer:
            in_flight: Future[TickReport] | None = None
            for at, batch in decided():
                if in_flight is not None:
                    settle(in_flight.result())
                in_flight = committer.submit(svc.commit, batch, at)
            if in_flight is not None:
                settle(in_flight.result())
        self.fires += fired
        return fired

    def _take_prepared(self, now: datetime) -> list[tuple[datetime, list[CronWorkflow]]]:
        """The batches decided in advance for an instant that has come, if it came no more
        than PREPARED_MAX_DELAY ago; decisions for a later instant stay, stale ones go."""
        if self._prepared is None or now < self._prepared[0]:
            return []
        instant, batches = self._prepared
        self._prepared = None
        if now - instant > PREPARED_MAX_DELAY:
            return []  # their copies were taken out of the cache: the next decision reloads
        return [(instant, batch) for batch in batches]

    def prepare_once(self, now: datetime) -> int:
        """Decide in advance the next due instant's CronWorkflows, when it is near.

        A decision is a pure function of the aggregate and the instant, so it can be made
        before the instant and committed at it (never before: `schedule_once` only commits
        decisions for an instant that has come). A burst then costs the commits alone. If a
        CronWorkflow changes in between (suspended, a run completed, its spec edited), the
        store refuses the stale save and that batch is decided again on fresh state.
        Returns how many were decided.
        """
        instant = self.engine.view.next_due_after(now)
        if (
            instant is None
            or instant - now > PREPARE_AHEAD
            or (self._prepared is not None and self._prepared[0] == instant)
        ):
            return 0
        seen = {
            cron_id: version
            for raw, version in self.engine.view.due_versions(instant, PREPARE_LIMIT, after=now)
            if self.ownership.owns(cron_id := UUID(raw))
        }
        ids = list(seen)
        svc = self.engine.service
        batches = [svc.decide(ids[i : i + BATCH], instant, seen) for i in range(0, len(ids), BATCH)]
        self._prepared = (instant, [b for b in batches if b])
        return len(ids)

    def warm_once(self, now: datetime) -> int:
        """Load what is due within WARM_AHEAD and not yet in memory; returns how many."""
        versions = {
            cron_id: version
            for raw, version in self.engine.view.due_versions(now + WARM_AHEAD)
            if self.ownership.owns(cron_id := UUID(raw))
        }
        self.last_warmed = self.engine.service.warm(versions, WARM_LIMIT)
        return self.last_warmed

    def budget(self) -> float:
        """Seconds the projections and the run watcher may take this turn: TURN_BUDGET, but
        never past the next due instant, so a backlog of projection work does not delay a
        fire (it waits for the turn after)."""
        if not self.runs_scheduler:
            return TURN_BUDGET
        try:
            nxt = self.engine.view.next_due()
        except Exception:
            return TURN_BUDGET
        if nxt is None:
            return TURN_BUDGET
        return max(0.05, min(TURN_BUDGET, (nxt - self.clock()).total_seconds()))

    def project_once(self, now: datetime) -> int:
        worker = self.dispatch_worker
        if worker is not None:
            worker.wake.set()  # the dispatcher follows the log alongside the read model
        n = self.engine.catch_up(
            now, budget=self.budget(), stop=self.stop_event.is_set, dispatch=worker is None
        )
        if worker is not None:
            worker.wake.set()
        # One structured line per committed decision (cronWorkflow, tick, version), written by
        # the projector only, so each decision is logged once across replicas.
        if self.decision_log is None:
            self.decision_log = DecisionLog(self.engine.view)
        self.decision_log.emit_new()
        return n

    def turn(self) -> None:
        if time.monotonic() - self._last_rebalance >= REBALANCE_SECONDS:
            self.shards.run(self.ownership.rebalance)
            self._last_rebalance = time.monotonic()
        if self.runs_projections:
            self.projector.run(lambda: self.project_once(self.clock()))
        if self.runs_scheduler:
            self.scheduler.run(lambda: self.schedule_once(self.clock()))
        if self.runs_projections:
            self.projector.run(lambda: self.project_once(self.clock()))
            if self.watcher is not None:
                self.watch.run(
                    lambda: (
                        self.watcher.poll(self.clock(), self.budget(), self.stop_event.is_set)
                        if self.watcher
                        else 0
                    )
                )
        if self.runs_scheduler:
            # Last, after the projections moved the due index past this turn's decisions.
            self.warmer.run(lambda: self.warm_once(self.clock()))
            self.warmer.run(lambda: self.prepare_once(self.clock()))
        if time.monotonic() - self._last_report >= REPORT_SECONDS:
            self._last_report = time.monotonic()
            self.projector.run(self.report)
        self.last_turn = time.monotonic()

    @property
    def supervisors(self) -> list[Supervisor]:
        extra = [self.dispatch_worker.supervisor] if self.dispatch_worker is not None else []
        return [self.projector, self.scheduler, self.watch, self.shards, self.warmer, *extra]

    def report(self) -> None:
        """The operator's heartbeat: what this replica owns, did, and how far behind it is."""
        owned = getattr(self.ownership, "owned", None)
        # Plain key=value words, not Python dictionaries: the line is read by people and
        # by log queries, and neither knows Python's repr.
        lags = lag(self.engine) if self.runs_projections else None
        failures = [f"{s.name}:{s.failures}" for s in self.supervisors if s.failures]
        log.info(
            "fires=%d projector=%s shards=%s lag=%s failures=%s",
            self.fires,
            str(self.runs_projections).lower(),
            len(owned) if owned is not None else "all",
            ",".join(f"{k}:{v}" for k, v in lags.items()) if isinstance(lags, dict) else "-",
            ",".join(failures) or "0",
        )

    def sleep_seconds(self) -> float:
        try:
            nxt = self.engine.view.next_due()
        except Exception:
            return self.poll_seconds
        if nxt is None:
            return self.poll_seconds
        return max(0.0, min(self.poll_seconds, (nxt - self.clock()).total_seconds()))

    def run(self, waker: Waker | None = None, on_ready: Callable[[], None] | None = None) -> None:
        """Turn until stopped; `on_ready` is called once, after the first turn (projections
        caught up, what was due decided, the next minute's aggregates loaded)."""
        if self.engine.dispatcher is not None and self.role in ("all", "projector"):
            self.dispatch_worker = DispatchWorker(self)
            self.dispatch_worker.start()
        while not self.stop_event.is_set():
            self.turn()
            if on_ready is not None:
                on_ready()
                on_ready = None
            if self.stop_event.is_set():
                break
            delay = self.sleep_seconds()
            if waker is not None:
                waker.wait(delay)
            else:
                self.stop_event.wait(delay)
        if self.dispatch_worker is not None:
            self.dispatch_worker.stop()
        self.ownership.release()

    def install_signal_handlers(self, waker: Waker | None = None) -> None:
        """SIGTERM/SIGINT finish the turn in flight, release the shards and exit 0."""

        def stop(signum: int, frame: Any) -> None:
            log.info("signal %d: finishing the batch in flight", signum)
            self.stop_event.set()
            if waker is not None:
                waker.event.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
