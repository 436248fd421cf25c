"""The simulation itself: `cronsource run`'s runtime turned on a virtual clock, over a scratch
store, with the scenario's actions applied at their instants.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import math
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.simulate.kubeevents import SimKubeEvents
from cronsource.adapters.entrypoints.simulate.scenario import (
    MAX_STEPS,
    Action,
    Scenario,
    ScenarioError,
    cron_ref,
)
from cronsource.adapters.entrypoints.simulate.target import (
    SimRunWatcher,
    SimTarget,
    SimulatedApiError,
    SimWorkflow,
    TargetFault,
)
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.supervisor import DISPATCH_MAX_BACKOFF, Supervisor
from cronsource.domain.calendars import calendar_spec, is_calendar_document
from cronsource.domain.durations import parse_duration
from cronsource.domain.manifest import parse_manifest, scheduling_options
from cronsource.projections.readmodel import rfc3339

#: Simulated instants between two `gc.freeze()` calls (see `Simulation.run`).
FREEZE_STEPS = 500


class SimulationInterrupted(RuntimeError):
    """SIGINT/SIGTERM arrived: the simulation stopped at the instant it had reached."""


@contextlib.contextmanager
def _scratch_store(config: StoreConfig) -> Iterator[StoreConfig]:
    """A store that lives as long as the simulation and never touches the user's own data."""
    if config.kind == "postgresql":
        import psycopg

        schema = f"cronsource_sim_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(config.pg_conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield config.with_schema(schema)
        finally:
            with psycopg.connect(config.pg_conninfo, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    elif config.kind == "memory":
        yield config
    else:
        # On a RAM file system where there is one: every save of the event store commits with
        # an fsync, which on disk made a day of minutely ticks take a minute; a throwaway file
        # need not survive a power cut.
        shm = Path("/dev/shm")
        tmp = tempfile.mkdtemp(prefix="cronsource-sim-", dir=shm if shm.is_dir() else None)
        try:
            yield StoreConfig.parse(f"sqlite:///{Path(tmp, 'sim.db')}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class _QuietRefusals(logging.Filter):
    """Drops the supervisor's warning for each dispatch the simulated target refused
    (`dispatch failed (retry in 0.5s): SimulatedApiError: 503 ...`): simulate has no log,
    Python's last-resort handler printed every retry on stderr, and the result tells the
    same (SubmissionFailed with its attempts)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(
            isinstance(a, str) and a.startswith(f"{SimulatedApiError.__name__}:") for a in args
        )


class _DispatchingLoop(SchedulerLoop):
    """The first replica's loop: it projects, and its dispatcher creates the Workflows.

    In `run` the dispatcher has a thread and a supervisor of its own (DispatchWorker): a
    create the target refuses (`targetFails`) backs off the dispatch alone, 0.5 s doubling
    to 5 s (DISPATCH_MAX_BACKOFF, adapters/runtime/supervisor.py), while the read model goes
    on projecting. Here
    the dispatcher follows in the projection's own catch-up, where it always did (one read
    of the log for both), under that `dispatch` supervisor; while it backs off the read
    model projects alone, and the simulation's clock jumps to its retry (`retry_in`).
    `after_projection` is told of every projection (the Kubernetes Events follow it).
    """

    def __init__(
        self, *args: Any, after_projection: Callable[[int | None], None], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.supervise_dispatch = Supervisor(
            "dispatch", self.clock, self.write_probe.check, max_backoff=DISPATCH_MAX_BACKOFF
        )
        self.after_projection = after_projection
        #: A failure of the dispatch that the simulated target did not cause: a bug.
        self.dispatch_bug: BaseException | None = None

    def dispatch_backs_off(self) -> bool:
        return self.retry_in() is not None

    def retry_in(self) -> float | None:
        """Seconds until the dispatch tries again; None when it does not back off."""
        retry = self.supervise_dispatch.retry_at
        now = self.clock.monotonic()
        return None if retry is None or retry <= now else retry - now

    def project_once(self, now: datetime) -> int:
        if self.dispatch_backs_off():
            n: int | None = self.projection.step(now, self.budget, dispatch=False)
        else:
            # A refused create fails the catch-up after the read model's part of it: the
            # read model moved (n unknown), the dispatcher's position did not.
            n = self.supervise_dispatch.run(lambda: self._project_and_dispatch(now))
        self.after_projection(n)
        return n or 0

    def _project_and_dispatch(self, now: datetime) -> int:
        try:
            return self.projection.step(now, self.budget, dispatch=True)
        except SimulatedApiError:
            raise
        except Exception as e:
            self.dispatch_bug = e
            raise


class Simulation:
    """`cronsource run`'s runtime (adapters/runtime/) turned on a virtual clock.

    Each replica is a SchedulerLoop over its own service instance and decision cache; the
    first also projects, dispatches to the simulated target and watches its runs. Between
    turns the clock jumps to the next instant anything happens: the runtime's next instant of
    work (a due time, or the moments before it when it warms and decides in advance), the
    next action, the next simulated run end, the end of an outage. With several replicas,
    each decides the next instant in advance on the same state before any commits (the worst
    interleaving), so the version check, not luck, keeps a tick from firing twice.
    """

    def __init__(
        self,
        scenario: Scenario,
        engine: Engine,
        target: SimTarget,
        stop: Callable[[], bool] = lambda: False,
        *,
        kube_events: bool = False,
    ) -> None:
        self.stop = stop  # asked at every instant: SIGINT ends a long simulation promptly
        self.sc = scenario
        self.engine = engine
        self.target = target
        self.outage_until: datetime | None = None
        self.clock = VirtualClock(scenario.start)
        #: Set when the log changed after a turn's last projection (the Waker's event).
        self.wake = threading.Event()
        self.watcher = SimRunWatcher(engine.service, target)
        self.commands = engine.replica()
        #: The Kubernetes Events `run --kube` would send (`kubeEvents`), when asked for (the
        #: scenario's `kubeEvents: true`, or `--kube-events`): following the audit and
        #: correlating every Event costs 5-8% more CPU per tick (`python -m bench.simulate
        #: --kube-events`), which a run that does not show them should not pay.
        wanted = kube_events or scenario.kube_events
        self.kube_events = SimKubeEvents(engine, self.clock) if wanted else None
        self.first = _DispatchingLoop(
            engine,
            SoleOwner(),
            role="all",
            watcher=self.watcher,
            poll_seconds=math.inf,
            clock=self.clock,
            log_decisions=False,
            heartbeat=False,
            after_projection=self._projected,
        )
        self.loops: list[SchedulerLoop] = [self.first]
        for _ in range(scenario.replicas - 1):
            peer = dataclasses.replace(
                engine, service=engine.replica(), dispatcher=None, extra_replicas=[]
            )
            self.loops.append(
                SchedulerLoop(
                    peer,
                    SoleOwner(),
                    role="scheduler",
                    poll_seconds=math.inf,
                    clock=self.clock,
                    log_decisions=False,
                    heartbeat=False,
                )
            )

    @property
    def svc(self) -> Any:
        """The scenario's actions (apply, suspend, resume, delete) come from a user, through
        a service of their own, as `cronsource suspend` is another process than `run`: a
        decision the runtime made before such an action is refused by the store, a real
        second writer (`rejectedWrites`), while the runtime's own writes (run completions)
        are its own and refuse nothing."""
        return self.commands

    def _find(self, ref: str) -> UUID:
        return self.svc.find(*cron_ref(ref)).id  # type: ignore[no-any-return]

    def _apply(self, manifest: dict[str, Any], at: datetime) -> None:
        if is_calendar_document(manifest):
            self.svc.apply_calendar(calendar_spec(manifest), at)
            return
        m = parse_manifest(manifest)
        # As `cronsource apply` does (three-way), so a scenario previews what the user's
        # apply will do: a `suspend` action survives a later `apply` of a file that says
        # `suspend: false`.
        cron_id = self.svc.apply_config(m, at).id
        opts = scheduling_options(dict(m.metadata.annotations))
        self.target.durations[str(cron_id)] = (opts.run_duration, opts.run_phase)
        if self.kube_events is not None:
            meta = m.metadata
            self.kube_events.applied(meta.namespace, meta.name, meta.uid or str(cron_id))

    def _created(self, i: int, field: str, name: str, at: datetime) -> list[SimWorkflow]:
        """The Workflows named `name` created by `at`. None is a scenario's mistake (a name
        mistyped, or a tick's that has not come yet), said as such: the action did nothing,
        and a preview that quietly ignored it would show runs the user meant to end."""
        found = [wf for wf in self.target.workflows.values() if wf.name == name]
        if not found:
            raise ScenarioError(
                f"actions[{i}].{field}: no Workflow {name!r} was created by {rfc3339(at)}"
                " (a Workflow is named after its CronWorkflow and the tick's Unix time, as"
                " Argo names it: see `-o json` workflows[].name)"
            )
        return found

    def _act(self, i: int, a: Action) -> None:
        at = a.at
        if a.suspend:
            self.svc.suspend(self._find(a.suspend), at, by="simulate")
        elif a.resume:
            self.svc.resume(self._find(a.resume), at, by="simulate")
        elif a.apply is not None:
            self._apply(a.apply, at)
        elif a.delete:
            self.svc.delete(self._find(a.delete), at)
            if self.kube_events is not None:
                self.kube_events.deleted(*cron_ref(a.delete))
        elif a.target_fails is not None:
            fails = a.target_fails
            self.target.faults.append(
                TargetFault(at, at + fails.duration, str(fails.error), fails.cron)
            )
        elif a.outage:
            self.outage_until = at + parse_duration(a.outage)
        elif a.complete is not None:
            for wf in self._created(i, "complete.workflow", a.complete.workflow, at):
                if wf.phase != "Running" or wf.ends_at < at:
                    # It ended first (its run duration, or removed): the phase the action
                    # asks for never happened, and a preview that went on quietly showed the
                    # run's own end as if it were the one asked for.
                    ended = wf.finished_at or wf.deleted_at or wf.ends_at
                    phase = wf.end_phase if wf.phase == "Running" else wf.phase
                    raise ScenarioError(
                        f"actions[{i}].complete.workflow: Workflow {wf.name!r} had ended by"
                        f" {rfc3339(at)} ({phase} at {rfc3339(ended)}): complete it before"
                        " then, or give its runs a longer runDuration"
                    )
                wf.phase, wf.finished_at, wf.ends_at = a.complete.phase, at, at
        elif a.remove_workflow:
            for wf in self._created(i, "removeWorkflow", a.remove_workflow, at):
                if wf.deleted_at is None:
                    wf.deleted_at = at
                    if wf.phase == "Running":
                        wf.phase = "Deleted"
                        wf.reported = False
                        self.target.unreported[(wf.namespace, wf.name)] = wf

    def _next_instant(self, actions: list[tuple[int, Action]]) -> datetime | None:
        """min(the runtime's next instant of work, next action, next run end, outage end)."""
        now = self.clock.now()
        candidates = []
        if actions:
            candidates.append(actions[0][1].at)
        if self.outage_until is not None:
            candidates.append(self.outage_until)  # the replicas are down: nothing else happens
        else:
            for loop in self.loops:
                seconds = loop.sleep_seconds()
                if seconds != math.inf:
                    candidates.append(now + timedelta(seconds=seconds))
            if (retry := self.first.retry_in()) is not None:
                candidates.append(now + timedelta(seconds=retry))  # a refused create, again
            if (ends := self.target.next_change()) is not None:
                candidates.append(ends)
        return min(candidates, default=None)

    def run(self) -> None:
        sc = self.sc
        # Calendars first: a CronWorkflow's first decision reads the calendars it names.
        for m in sorted(sc.cron_workflows, key=lambda d: not is_calendar_document(d)):
            self._apply(m, sc.start)
        actions = sorted(enumerate(sc.actions), key=lambda ia: (ia[1].at, ia[0]))
        clock = self.clock
        steps_at_instant = 0
        steps = 0
        first = True
        while True:
            steps += 1
            if steps % FREEZE_STEPS == 0:
                # What the simulation holds by now (every Workflow and event it reports, the
                # store's copies) is moved out of the collector's sight: its full passes over
                # them made the last day of a fleet's week cost a fifth more than the first.
                # Freed as usual when no longer referenced; `simulate` unfreezes at the end.
                gc.freeze()
            now = clock.now()
            if self.stop():
                raise SimulationInterrupted(f"interrupted at {rfc3339(now)}")
            if steps > MAX_STEPS:
                raise ScenarioError(
                    f"more than {MAX_STEPS} simulated instants by {rfc3339(now)}; shorten the"
                    f" scenario ({sc.end_field}) or use fewer, less frequent schedules"
                )
            if not first:
                t = now if self.wake.is_set() else self._next_instant(actions)
                if t is None or max(t, now) > sc.end:
                    break
                steps_at_instant = steps_at_instant + 1 if t <= now else 0
                if steps_at_instant > 50:
                    raise RuntimeError(f"simulation does not advance at {rfc3339(t)}")
                clock.wait((t - now).total_seconds(), self.wake)
                self.wake.clear()
                now = clock.now()
            first = False
            while actions and actions[0][1].at <= now:
                self._act(*actions.pop(0))
            if self.outage_until is not None and now >= self.outage_until:
                self.outage_until = None
                if self.kube_events is not None:
                    self.kube_events.restarted()
            if self.outage_until is None:
                # On the wall clock the loop turns every poll interval, so a run that ended
                # by now was seen by a turn just before now; the virtual clock has no turns
                # in between: that look is taken here, before the turn at this instant.
                self.watcher.poll(now)
                for loop in self.loops:
                    loop.turn()
                    self._raise_failures(loop)
                if self._log_moved():
                    self.wake.set()
        self.loops[0].project_once(clock.now())

    def _log_moved(self) -> bool:
        """Whether the log has events the projections have not seen (the run watcher reported
        a Replace's termination after the turn's last projection): on PostgreSQL the Waker
        would end the wait at once, so the virtual clock turns again at the same instant.
        While the dispatch backs off, only the read model counts: the dispatcher's position
        stays behind until its retry, which `_next_instant` jumps to."""
        return self.engine.projector.behind(dispatch=not self.first.dispatch_backs_off())

    def _projected(self, n: int | None) -> None:
        if self.kube_events is not None:
            self.kube_events.step(1 if n is None else n)

    @staticmethod
    def _raise_failures(loop: SchedulerLoop) -> None:
        """A step that failed in a simulation is a bug, not an outage to back off from;
        but for a create the simulated target refused (`targetFails`), which the dispatch
        backs off from as in `run`."""
        for s in loop.supervisors:
            if s.failures:
                raise RuntimeError(f"simulated {s.name} failed: {s.last_error}")
        if isinstance(loop, _DispatchingLoop) and loop.dispatch_bug is not None:
            e = loop.dispatch_bug
            raise RuntimeError(f"simulated dispatch failed: {type(e).__name__}: {e}") from e

    def result(self) -> dict[str, Any]:
        view = self.engine.view
        crons = view.statuses(include_deleted=True)
        crons.sort(key=lambda c: (not c.deleted, c.namespace, c.name))
        wfs = sorted(self.target.workflows.values(), key=lambda w: (w.created_at, w.name))
        return {
            "workflows": [w.as_json() for w in wfs],
            "cronWorkflows": [c.as_summary() for c in crons],
            "events": [r.as_event() for r in view.audit()],
            "rejectedWrites": self.engine.rejected_writes,
            **({"kubeEvents": self.kube_events.result()} if self.kube_events else {}),
        }


def simulate(
    scenario: Scenario,
    store: str | None = None,
    stop: Callable[[], bool] = lambda: False,
    *,
    kube_events: bool = False,
) -> dict[str, Any]:
    """Run `scenario`; the result `-o json` prints. `kube_events` (or the scenario's
    `kubeEvents: true`): also the Kubernetes Events `run --kube` would send (`kubeEvents`)."""
    base = StoreConfig.parse(store or "sqlite:///sim.db")
    target = SimTarget(parse_duration(scenario.run_duration), scenario.run_phase)
    quiet = _QuietRefusals()
    runtime_log = logging.getLogger("cronsource")
    with _scratch_store(base) as config:
        engine = bootstrap(config, target=target, create_tables=True)
        runtime_log.addFilter(quiet)
        try:
            sim = Simulation(scenario, engine, target, stop, kube_events=kube_events)
            sim.run()
            return sim.result()
        finally:
            runtime_log.removeFilter(quiet)
            gc.unfreeze()
            engine.close()
