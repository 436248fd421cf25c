"""`cronsource run`: the runtime's turn, sequenced on a clock.

One loop per process, in this order each turn: rebalance the shards (now and then), project
what is new (status, audit, due index, dispatch), decide what is due, project again (so
Workflows are created right after their fire is committed), look at the runs, warm and
prepare the next instant, log the heartbeat (now and then). The loop then waits on its clock
until the next due time or until the log changes (PostgreSQL LISTEN/NOTIFY; polling on
SQLite), whichever comes first. `cronsource simulate` runs the same turn on a virtual clock.

Crash safety comes from the order of effects, not from this loop: a fire is committed before
any Workflow exists, the dispatcher creates Workflows idempotently before it moves its position,
and the read model moves its position in the same transaction as its rows.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.locks import RoleLock
from cronsource.adapters.infrastructure.shards import REBALANCE_SECONDS, Ownership
from cronsource.adapters.runtime.decision_cache import DecisionCache
from cronsource.adapters.runtime.dispatchworker import DispatchWorker
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.projection import ProjectionWorker
from cronsource.adapters.runtime.retention import RETENTION_SECONDS, Retention
from cronsource.adapters.runtime.runwatcher import RunPoller
from cronsource.adapters.runtime.scheduler import Scheduler
from cronsource.adapters.runtime.scheduler import log_decisions as log_own_decisions
from cronsource.adapters.runtime.settings import (
    EXIT_STOP_OVERDUE,
    IDENTITY_SECONDS,
    RECOVERY_WAIT,
    REPORT_SECONDS,
    STOP_GRACE_SECONDS,
    STOP_SNAPSHOT_BATCH,
    STOP_SNAPSHOT_SECONDS,
    TURN_BUDGET,
)
from cronsource.adapters.runtime.storeidentity import store_identity
from cronsource.adapters.runtime.supervisor import Supervisor
from cronsource.adapters.runtime.waker import Waker
from cronsource.adapters.runtime.writeprobe import WriteProbe

log = logging.getLogger("cronsource")


class SchedulerLoop:
    def __init__(
        self,
        engine: Engine,
        ownership: Ownership,
        role: str = "all",
        watcher: RunPoller | None = None,
        poll_seconds: float = 0.5,
        clock: Clock | None = None,
        stop_event: threading.Event | None = None,
        *,
        log_decisions: bool = True,
        heartbeat: bool = True,
        retention: Retention | None = None,
        replica: str | None = None,
    ) -> None:
        self.engine = engine
        #: This replica's identity (adapters/infrastructure/replica.py), None in tests.
        self.replica = replica
        #: `run --retain`: what the log no longer needs is removed, by the projector replica.
        self.retention = retention
        self._last_retention: float | None = None
        self.ownership = ownership
        self.role = role
        self.watcher = watcher
        self.poll_seconds = poll_seconds
        self.clock: Clock = clock if clock is not None else engine.clock
        self.stop_event = stop_event if stop_event is not None else threading.Event()
        self.cache = DecisionCache(engine.service.load_many, engine.service.fast_forward)
        engine.service.on_saved(self.cache.saved)
        # This replica's decisions are logged by it, as the store takes them (scheduler.py).
        engine.service.on_recorded(log_own_decisions)
        self.scheduler = Scheduler(
            engine.service,
            engine.view,
            ownership,
            self.cache,
            on_fired=self._wake_dispatch,
            clock=self.clock,
            replica=replica,
        )
        self.projection = ProjectionWorker(
            engine, self.clock, self.stop_event, log_decisions=log_decisions
        )
        if role != "scheduler":
            # This process projects only while its ownership holds the projector role (a
            # scheduler-only replica keeps the store's own lock: it never projects by reading).
            engine.projector.use_lock(RoleLock(ownership.is_projector))
        #: Whether the store takes writes (readiness, and recovery from a backoff).
        self.write_probe = WriteProbe(engine.config, self.clock)
        probe = self.write_probe.check
        self.supervise_projections = Supervisor("projections", self.clock, probe)
        self.supervise_scheduler = Supervisor("scheduler", self.clock, probe)
        self.supervise_runs = Supervisor("run watcher", self.clock, probe)
        self.supervise_shards = Supervisor("shards", self.clock, probe)
        self.supervise_retention = Supervisor("retention", self.clock)
        self.supervise_warmup = Supervisor("warm-up", self.clock, probe)
        self.supervise_recovery = Supervisor("recovery", self.clock, probe)
        #: What the store was at the last look (adapters/runtime/storeidentity.py), when that was,
        #: and whether a step failed since (a lost connection): see `check_store`.
        self._identity: str | None = None
        self._identity_at: float | None = None
        self._store_lost = False
        #: Whether the runs that exist are still to be held against the log (`recover_once`).
        self._recover_pending = True
        self._recover_since: float | None = None
        self.heartbeat = heartbeat  # the operator's log line every REPORT_SECONDS
        self.dispatch_worker: DispatchWorker | None = None  # started by `run`
        self._last_rebalance: float | None = None
        self._last_report = self.clock.monotonic()
        #: clock.monotonic() when the last turn finished; None before the first (the probe
        #: server's readiness bounds its age: adapters/entrypoints/probes.py).
        self.last_turn: float | None = None
        #: Times the wall clock moved back by more than the late tolerance (a metric).
        self.clock_backward_jumps = 0
        self._last_seen: tuple[datetime, float] | None = None  # (wall, monotonic) last turn

    # The scheduler step, as the benchmarks and tests drive it.

    @property
    def fires(self) -> int:
        return self.scheduler.fires

    @property
    def last_warmed(self) -> int:
        return self.scheduler.last_warmed

    def schedule_once(self, now: datetime) -> int:
        return self.scheduler.schedule_once(now)

    def prepare_once(self, now: datetime) -> int:
        prepared = self.scheduler.prepare_once(now)
        instant = self.scheduler.prepared_for
        if prepared and instant is not None and self.dispatch_worker is not None:
            self.dispatch_worker.expect(prepared, instant)
        return prepared

    def warm_once(self, now: datetime) -> int:
        return self.scheduler.warm_once(now)

    @property
    def runs_projections(self) -> bool:
        return self.role in ("all", "projector") and self.ownership.is_projector()

    @property
    def runs_scheduler(self) -> bool:
        return self.role in ("all", "scheduler")

    def _wake_dispatch(self) -> None:
        if self.dispatch_worker is not None:
            self.dispatch_worker.wake.set()

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
        return max(0.05, min(TURN_BUDGET, (nxt - self.clock.now()).total_seconds()))

    def project_once(self, now: datetime) -> int:
        worker = self.dispatch_worker
        self._wake_dispatch()  # the dispatcher follows the log alongside the read model
        n = self.projection.step(now, self.budget, dispatch=worker is None)
        self._wake_dispatch()
        return n

    def check_store(self) -> None:
        """Drop every cached copy of the log when the store may have lost what they were
        built from: it is another server or file now (a failover, a restore, a restart,
        also one the pool reconnected to silently). The version check already refuses a save
        built on such a copy; dropping them means the next decisions are made on what the log
        holds instead of being refused again, and the runs it lost are recovered first. Looks
        at most once every IDENTITY_SECONDS; every turn while the store does not answer, so
        the scheduler (which waits for it) goes on as soon as it does."""
        now = self.clock.monotonic()
        if (
            not self._store_lost
            and self._identity_at is not None
            and now - self._identity_at < IDENTITY_SECONDS
        ):
            return
        self._identity_at = now
        identity = store_identity(self.engine)
        if self._identity is not None and identity != self._identity:
            log.warning(
                "the store is another one now (was: %s; now: %s): cached copies dropped; the"
                " runs it lost are recovered before the next decisions",
                self._identity,
                identity,
            )
            self.forget()
        elif self._store_lost:
            log.info("the store answers again (the same one: %s)", identity)
        self._identity = identity
        self._store_lost = False

    def forget(self) -> None:
        self.engine.forget()
        self.scheduler.forget()
        self._recover_pending = True
        self._recover_since = None

    def _retention_due(self) -> bool:
        now = self.clock.monotonic()
        if self._last_retention is not None and now - self._last_retention < RETENTION_SECONDS:
            return False
        self._last_retention = now
        return True

    def retain_once(self, now: datetime) -> int:
        """Remove what the retention no longer keeps, within the turn's budget (the rest
        waits for the next pass; a fire never waits for more than one small batch)."""
        assert self.retention is not None
        clock, seconds = self.clock, self.budget()
        deadline = clock.monotonic() + seconds

        def more_time() -> bool:
            return not self.stop_event.is_set() and clock.monotonic() < deadline

        removed = self.retention.step(now, more_time)
        if self.retention.behind:
            self._last_retention = None  # the budget ran out first: go on next turn
        return removed

    def recovery_first(self) -> bool:
        """Whether the scheduler waits this turn for the recovery of lost runs: a tick whose
        run exists must be recorded by its recovery, not decided again first (a skip and a
        recovery of one tick would be two decisions). This process recovers when it projects
        and has a run watcher; it waits at most RECOVERY_WAIT seconds for it (a long
        projection backlog at start-up must not hold every fire back), then decides anyway."""
        if not (self._recover_pending and self.runs_projections and self.watcher is not None):
            return False
        if self._recover_since is None:
            self._recover_since = self.clock.monotonic()
        return self.clock.monotonic() - self._recover_since < RECOVERY_WAIT

    def recover_once(self, now: datetime) -> int | None:
        """Record the runs that exist and that the log has no fire for (after start-up and
        after the store changed: adapters/runtime/recovery.py), before the scheduler decides
        their ticks again. Done once the read model is at the head of the log."""
        assert self.watcher is not None
        found = self.watcher.recover(now)
        if found is not None:
            self._recover_pending = False
            self._recover_since = None
        return found

    def watch_wall_clock(self) -> None:
        """Log and count a backward step of the wall clock beyond the late tolerance.

        Nothing else is needed for correctness: the scheduler decides the ticks each
        CronWorkflow has not decided yet, from its log, never "the ticks before now", so no
        tick is decided twice; the next undecided tick simply waits until the wall clock
        reaches it again. That wait is silent from the outside (a fleet stepped back an hour
        fires nothing for an hour), hence the warning and the metric.
        """
        now, mono = self.clock.now(), self.clock.monotonic()
        last, self._last_seen = self._last_seen, (now, mono)
        if last is None:
            return
        expected = last[0] + timedelta(seconds=mono - last[1])
        back = expected - now
        if back > self.engine.service.late_tolerance:
            self.clock_backward_jumps += 1
            log.warning(
                "the wall clock moved back by %.0fs (to %s, expected %s): nothing fires until"
                " it reaches the next tick not decided yet; no tick is decided twice",
                back.total_seconds(),
                now.isoformat(timespec="seconds"),
                expected.isoformat(timespec="seconds"),
            )

    def turn(self) -> None:
        """One turn of steps. Once SIGTERM has come (`stop_event`), the step in flight
        finishes and no other starts: while the store is down each step can wait a pool
        timeout for a connection, and a turn's six of them one after the other kept a replica
        from exiting for 30 s. Nothing is lost by stopping between steps: a fire is committed
        before its Workflow exists, and the projections and the dispatcher resume from their
        positions in the next replica."""
        clock = self.clock
        stopping = self.stop_event.is_set
        self.watch_wall_clock()
        try:
            self.check_store()
        except Exception as e:  # unreachable: nothing below decides until it answers again
            if not self._store_lost:
                log.warning("the store does not answer: %s: %s", type(e).__name__, e)
            self._store_lost = True
        if stopping():
            return
        if (
            self._last_rebalance is None
            or clock.monotonic() - self._last_rebalance >= REBALANCE_SECONDS
        ):
            self.supervise_shards.run(self.ownership.rebalance)
            self._last_rebalance = clock.monotonic()
        if self.runs_projections and not stopping():
            self.supervise_projections.run(lambda: self.project_once(clock.now()))
            if self._recover_pending and self.watcher is not None and not stopping():
                self.supervise_recovery.run(lambda: self.recover_once(clock.now()))
        # Not while the store may be another one than the copies were made on, nor before
        # the runs it lost are recovered: a decision then would be made on copies ahead of
        # the log, or decide again a tick whose run exists.
        if (
            self.runs_scheduler
            and not self._store_lost
            and not stopping()
            and not self.recovery_first()
        ):
            self.supervise_scheduler.run(lambda: self.schedule_once(clock.now()))
        if stopping():
            return
        if self.runs_projections:
            self.supervise_projections.run(lambda: self.project_once(clock.now()))
            watcher = self.watcher
            if watcher is not None and not stopping():
                self.supervise_runs.run(
                    lambda: watcher.poll(clock.now(), self.budget(), self.stop_event.is_set)
                )
        else:
            # Another replica projects now: a failure from when we did is not ours to report.
            self.supervise_projections.forget()
            self.supervise_runs.forget()
        if (
            self.runs_scheduler
            and not stopping()
            and not self.engine.projector.read_model_first.waiting
        ):
            # Last, after the projections moved the due index past this turn's decisions;
            # not while they wait for the dispatcher: the due index still shows the burst
            # just fired, and looking through it again each turn found nothing to load.
            self.supervise_warmup.run(lambda: self.warm_once(clock.now()))
            if not stopping():
                self.supervise_warmup.run(lambda: self.prepare_once(clock.now()))
        if stopping():
            return
        if self.retention is not None and self.runs_projections and self._retention_due():
            self.supervise_retention.run(lambda: self.retain_once(clock.now()))
        if self.heartbeat and clock.monotonic() - self._last_report >= REPORT_SECONDS:
            self._last_report = clock.monotonic()
            self.supervise_projections.run(self.report)
        self.last_turn = clock.monotonic()

    def turn_age(self) -> float | None:
        """Seconds since the last turn finished; None before the first (the lease writes it
        as `last_turn`, adapters/infrastructure/leases.py)."""
        last = self.last_turn
        return None if last is None else self.clock.monotonic() - last

    @property
    def supervisors(self) -> list[Supervisor]:
        extra = [self.dispatch_worker.supervisor] if self.dispatch_worker is not None else []
        return [
            self.supervise_projections,
            self.supervise_scheduler,
            self.supervise_runs,
            self.supervise_shards,
            self.supervise_warmup,
            self.supervise_recovery,
            self.supervise_retention,
            *extra,
        ]

    def report(self) -> None:
        """The operator's heartbeat: what this replica owns, did, and how far behind it is."""
        owned = getattr(self.ownership, "owned", None)
        # Plain key=value words, not Python dictionaries: the line is read by people and
        # by log queries, and neither knows Python's repr.
        lags = self.engine.projector.lag() if self.runs_projections else None
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
        """How long the loop would wait now: until the scheduler's next instant of work,
        at most `poll_seconds` (the log may change without a wake-up)."""
        try:
            now = self.clock.now()
            nxt = (
                self.scheduler.next_wake(now)
                if self.runs_scheduler
                else self.engine.view.next_due()
            )
        except Exception:
            return self.poll_seconds
        if nxt is None:
            return self.poll_seconds
        if nxt <= now and self.engine.projector.read_model_first.waiting:
            # What was just fired still shows due: its projection waits for the dispatcher,
            # which wakes this loop when it has caught up (`DispatchWorker.on_caught_up`).
            # Turning at once until then would take the process from the creations.
            return self.poll_seconds
        return max(0.0, min(self.poll_seconds, (nxt - now).total_seconds()))

    def run(self, waker: Waker | None = None, on_ready: Callable[[], None] | None = None) -> None:
        """Turn until stopped; `on_ready` is called once, after the first turn (projections
        caught up, what was due decided, the next minute's aggregates loaded)."""
        projector = self.engine.projector
        if self.engine.dispatcher is not None and self.role in ("all", "projector"):
            self.dispatch_worker = DispatchWorker(
                projector,
                self.clock,
                self.stop_event,
                poll_seconds=self.poll_seconds,
                runs_projections=lambda: self.runs_projections,
                store_probe=self.write_probe.check,
            )
            projector.dispatch_thread = True
            if waker is not None:
                self.dispatch_worker.on_caught_up = waker.event.set
            self.dispatch_worker.start()
        # Readers in this process (the probe server, the Kubernetes status writer) now wait
        # for this loop's projection step instead of projecting themselves.
        projector.worker_running = self.role in ("all", "projector")
        while not self.stop_event.is_set():
            self.turn()
            if on_ready is not None:
                on_ready()
                on_ready = None
            if self.stop_event.is_set():
                break
            delay = self.sleep_seconds()
            wake = waker.event if waker is not None else self.stop_event
            self.clock.wait(delay, wake)
            if waker is not None:
                waker.event.clear()
        if self.dispatch_worker is not None:
            self.dispatch_worker.stop()
        projector.worker_running = projector.dispatch_thread = False
        self.snapshot_at_stop()
        self.ownership.release()

    def snapshot_at_stop(self) -> int:
        """Snapshot the copies this replica holds that have events after their latest
        snapshot, longest tails first, within STOP_SNAPSHOT_SECONDS: the copies are what the
        scheduler decided on (as saved), so a routine restart (a redeploy, a rollout) starts
        from snapshots alone instead of replaying up to SNAPSHOT_INTERVAL events of each
        CronWorkflow. A crash skips this and the next start replays the tails, bounded as
        ever; a failure costs only that speed. Nothing is taken while the store does not
        answer (a stop must not wait for it: the last look found it lost, or a step's last
        run failed, as the step in flight at SIGTERM does while the store is down), nor when
        it is not the store the copies were made on (after a failover they may be ahead of
        its log). Returns how many were taken."""
        if self._store_lost or self._identity is None or any(s.failing for s in self.supervisors):
            return 0
        service = self.engine.service
        known = service.snapshot_versions
        held = sorted(self.cache.held(), key=lambda a: known.get(a.id, 0) - a.version)
        if not held:
            return 0
        started = self.clock.monotonic()
        taken = 0
        try:
            if store_identity(self.engine) != self._identity:
                return 0
            for i in range(0, len(held), STOP_SNAPSHOT_BATCH):
                if self.clock.monotonic() - started > STOP_SNAPSHOT_SECONDS:
                    break
                taken += service.snapshot_tails(held[i : i + STOP_SNAPSHOT_BATCH])
        except Exception as e:
            log.warning("snapshots at stop not taken: %s: %s", type(e).__name__, e)
        if taken:
            log.info(
                "snapshots of %d CronWorkflow(s) taken at stop in %.2fs",
                taken,
                self.clock.monotonic() - started,
            )
        return taken

    def install_signal_handlers(
        self, waker: Waker | None = None, grace: float = STOP_GRACE_SECONDS
    ) -> None:
        """SIGTERM/SIGINT finish the step in flight (`turn`), release the shards and exit 0;
        or, if that has not happened `grace` seconds after the signal, exit at once with
        EXIT_STOP_OVERDUE (adapters/runtime/settings.py says why that loses nothing)."""
        overdue: list[threading.Timer] = []

        def stop(signum: int, frame: Any) -> None:
            log.info("signal %d: finishing the batch in flight", signum)
            self.stop_event.set()
            if waker is not None:
                waker.event.set()
            if not overdue:
                timer = threading.Timer(grace, self._stop_overdue, args=(grace,))
                timer.daemon = True  # a clean exit before it fires ends it with the process
                timer.start()
                overdue.append(timer)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def _stop_overdue(self, grace: float) -> None:
        log.error(
            "still not stopped %gs after the signal: a step waits on the store, which does not"
            " answer; exiting now without releasing the shards (they are freed when the"
            " session ends or the lease lapses); nothing is lost: a fire is committed before"
            " its Workflow exists, and the next replica resumes from the log",
            grace,
        )
        for handler in logging.getLogger().handlers + log.handlers:
            try:
                handler.flush()
            except Exception:  # exiting anyway: a handler that cannot flush must not stop it
                pass
        sys.stderr.flush()
        os._exit(EXIT_STOP_OVERDUE)
