"""The simulation itself: `cronsource run`'s runtime turned on a virtual clock, over a scratch
store, with the scenario's actions applied at their instants.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
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
from cronsource.adapters.entrypoints.simulate.scenario import (
    MAX_STEPS,
    Action,
    Scenario,
    ScenarioError,
)
from cronsource.adapters.entrypoints.simulate.target import SimRunWatcher, SimTarget
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
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
        self.loops = [
            SchedulerLoop(
                engine,
                SoleOwner(),
                role="all",
                watcher=self.watcher,
                poll_seconds=math.inf,
                clock=self.clock,
                log_decisions=False,
                heartbeat=False,
            )
        ]
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
        ns, _, name = ref.rpartition("/")
        return self.svc.find(ns or "default", name).id  # type: ignore[no-any-return]

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

    def _act(self, a: Action) -> None:
        at = a.at
        if a.suspend:
            self.svc.suspend(self._find(a.suspend), at, by="simulate")
        elif a.resume:
            self.svc.resume(self._find(a.resume), at, by="simulate")
        elif a.apply is not None:
            self._apply(a.apply, at)
        elif a.delete:
            self.svc.delete(self._find(a.delete), at)
        elif a.outage:
            self.outage_until = at + parse_duration(a.outage)
        elif a.complete is not None:
            for wf in self.target.workflows.values():
                if wf.name == a.complete.workflow and wf.phase == "Running":
                    wf.phase, wf.finished_at, wf.ends_at = a.complete.phase, at, at
        elif a.remove_workflow:
            for wf in self.target.workflows.values():
                if wf.name == a.remove_workflow and wf.deleted_at is None:
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
                self._act(actions.pop(0)[1])
            if self.outage_until is not None and now >= self.outage_until:
                self.outage_until = None
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
        would end the wait at once, so the virtual clock turns again at the same instant."""
        return self.engine.projector.behind()

    @staticmethod
    def _raise_failures(loop: SchedulerLoop) -> None:
        """A step that failed in a simulation is a bug, not an outage to back off from."""
        for s in loop.supervisors:
            if s.failures:
                raise RuntimeError(f"simulated {s.name} failed: {s.last_error}")

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
        }


def simulate(
    scenario: Scenario, store: str | None = None, stop: Callable[[], bool] = lambda: False
) -> dict[str, Any]:
    base = StoreConfig.parse(store or "sqlite:///sim.db")
    target = SimTarget(parse_duration(scenario.run_duration), scenario.run_phase)
    with _scratch_store(base) as config:
        engine = bootstrap(config, target=target, create_tables=True)
        try:
            sim = Simulation(scenario, engine, target, stop)
            sim.run()
            return sim.result()
        finally:
            gc.unfreeze()
            engine.close()
