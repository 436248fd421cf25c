"""`cronsource simulate`: the real engine on a virtual clock, with a simulated local target.

The domain, the store, the projections and the runtime (adapters/runtime/: the turn of
`cronsource run`, with its prepared decisions, warming, due filtering, budgets and dispatch) are
the production ones; only time (a VirtualClock) and the place Workflows run (SimTarget) are
simulated. With several replicas, every replica decides the next instant in advance on the same
state before any commits (the worst interleaving), so the version check, not luck, is what
keeps a tick from firing twice.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import Phase
from cronsource.domain.durations import parse_duration
from cronsource.domain.manifest import ManifestError, parse_manifest, scheduling_options
from cronsource.domain.service import CronService
from cronsource.domain.timestamps import TimestampError, parse_timestamp
from cronsource.projections.dispatch import LABEL_CRON, PermanentSubmissionError, is_same_workflow
from cronsource.projections.readmodel import rfc3339


class ScenarioError(ValueError):
    pass


class SimulationInterrupted(RuntimeError):
    """SIGINT/SIGTERM arrived: the simulation stopped at the instant it had reached."""


#: Longest simulated span. A year of every-minute ticks is half a million decisions; a
#: scenario far longer is a typo (a year 20260 end) and would run for hours.
MAX_SCENARIO_SPAN = timedelta(days=400)
#: Most simulated instants (a tick, the moments before it when the runtime warms and decides
#: in advance, a run ending, an action) before it stops with an error: about a million ticks.
MAX_STEPS = 3_000_000


def _aware(v: Any) -> Any:
    """A scenario time, read as every entrypoint reads one (domain/timestamps.py): an offset
    is required, and the bounds hold (cron arithmetic near year 9999 overflows)."""
    if isinstance(v, datetime):  # YAML reads an unquoted time as a datetime
        v = v.isoformat()
    try:
        return parse_timestamp(v, "time")
    except TimestampError as e:
        raise ValueError(e.reason) from None


class CompleteAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workflow: str
    phase: Literal["Succeeded", "Failed", "Error"] = "Succeeded"


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    at: datetime
    suspend: str | None = None
    resume: str | None = None
    apply: dict[str, Any] | None = None
    delete: str | None = None
    outage: str | None = None
    complete: CompleteAction | None = None
    remove_workflow: str | None = Field(default=None, alias="removeWorkflow")

    _at = field_validator("at", mode="before")(_aware)

    @field_validator("outage")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> Action:
        kinds = [
            k
            for k in (
                "suspend",
                "resume",
                "apply",
                "delete",
                "outage",
                "complete",
                "remove_workflow",
            )
            if getattr(self, k) is not None
        ]
        if len(kinds) != 1:
            raise ValueError(
                "an action needs exactly one of suspend, resume, apply, delete, outage, "
                f"complete, removeWorkflow (got {len(kinds)})"
            )
        return self


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    start: datetime
    end: datetime
    replicas: int = Field(default=1, ge=1, le=16)
    run_duration: str = Field(default="30s", alias="runDuration")
    run_phase: Literal["Succeeded", "Failed", "Error"] = Field(
        default="Succeeded", alias="runPhase"
    )
    cron_workflows: list[dict[str, Any]] = Field(default_factory=list, alias="cronWorkflows")
    actions: list[Action] = Field(default_factory=list)

    _times = field_validator("start", "end", mode="before")(_aware)

    @field_validator("run_duration")
    @classmethod
    def _duration(cls, v: str) -> str:
        parse_duration(v)
        return v

    @model_validator(mode="after")
    def _ordered(self) -> Scenario:
        if self.end < self.start:
            raise ValueError("end must not be before start")
        if self.end - self.start > MAX_SCENARIO_SPAN:
            raise ValueError(
                f"end is {(self.end - self.start).days} days after start; a scenario may span"
                f" at most {MAX_SCENARIO_SPAN.days} days"
            )
        return self


def load_scenario(data: object) -> Scenario:
    """Read a scenario; ScenarioError names the field, as `lint` does for manifests."""
    if not isinstance(data, dict):
        raise ScenarioError("<scenario>: a scenario must be a mapping")
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(
                "."
            )
            msgs.append(f"{path or '<scenario>'}: {str(err['msg']).removeprefix('Value error, ')}")
        raise ScenarioError("; ".join(msgs)) from None
    for i, m in enumerate(sc.cron_workflows):
        try:
            parse_manifest(m)
        except ManifestError as e:
            raise ScenarioError("; ".join(f"cronWorkflows[{i}].{p}" for p in e.problems)) from None
    for i, a in enumerate(sc.actions):
        if a.apply is not None:
            try:
                parse_manifest(a.apply)
            except ManifestError as e:
                raise ScenarioError(
                    "; ".join(f"actions[{i}].apply.{p}" for p in e.problems)
                ) from None
    return sc


@dataclass
class SimWorkflow:
    namespace: str
    name: str
    cron: str
    cron_id: str
    scheduled_time: datetime | None
    created_at: datetime
    trigger: str
    ends_at: datetime
    end_phase: str
    phase: str = "Running"
    finished_at: datetime | None = None
    deleted_at: datetime | None = None
    reported: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "cronWorkflow": self.cron,
            "scheduledTime": rfc3339(self.scheduled_time),
            "createdAt": rfc3339(self.created_at),
            "phase": self.phase,
            "finishedAt": rfc3339(self.finished_at),
            "deletedAt": rfc3339(self.deleted_at),
            "trigger": self.trigger,
        }


@dataclass
class SimTarget:
    """The local target on a virtual clock: Workflows run for their duration, then complete."""

    default_duration: timedelta
    default_phase: str
    workflows: dict[tuple[str, str], SimWorkflow] = field(default_factory=dict)
    durations: dict[str, tuple[timedelta | None, str | None]] = field(default_factory=dict)
    #: Each Workflow's metadata as created: whose it is, for a later create of the same name.
    metadata: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The Workflows whose end is not reported yet (running ones included): the only ones
    #: the run watcher and the next-change look at, so a week of runs costs no rescans.
    unreported: dict[tuple[str, str], SimWorkflow] = field(default_factory=dict)

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime) -> None:
        meta = workflow["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in self.workflows:
            if is_same_workflow(self.metadata[key], meta):
                return  # a replayed dispatch: the Workflow exists already
            raise PermanentSubmissionError(f"workflow {key[0]}/{key[1]} exists and is not ours")
        self.metadata[key] = copy.deepcopy(meta)
        duration, phase = self.durations.get(cron_id, (None, None))
        sched = meta["annotations"].get("workflows.argoproj.io/scheduled-time")
        self.workflows[key] = self.unreported[key] = SimWorkflow(
            namespace=key[0],
            name=key[1],
            cron=meta["labels"][LABEL_CRON],
            cron_id=cron_id,
            scheduled_time=parse_timestamp(sched, "scheduled", bounded=False) if sched else None,
            created_at=at,
            trigger=trigger,
            ends_at=at + (duration or self.default_duration),
            end_phase=phase or self.default_phase,
        )

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        meta = workflow["metadata"]
        key = (meta["namespace"], meta["name"])
        wf = self.workflows.get(key)
        return (
            wf is not None and wf.deleted_at is None and is_same_workflow(self.metadata[key], meta)
        )

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        wf = self.workflows.get((namespace, name))
        if wf is not None and wf.phase == "Running":  # finished already: not an error (Argo #11377)
            wf.phase, wf.finished_at, wf.ends_at = "Failed", at, at

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        wf = self.workflows.get((namespace, name))
        if wf is not None and wf.deleted_at is None:
            wf.deleted_at = at

    def finish_due(self, now: datetime) -> None:
        for wf in self.unreported.values():
            if wf.phase == "Running" and wf.deleted_at is None and wf.ends_at <= now:
                wf.phase, wf.finished_at = wf.end_phase, wf.ends_at

    def next_change(self) -> datetime | None:
        times = [wf.ends_at for wf in self.unreported.values() if wf.deleted_at is None]
        return min(times, default=None)


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


class SimRunWatcher:
    """The run watcher of the simulated target (the RunPoller the runtime polls): reports
    runs that ended and Workflows removed by hand, in the order they ended."""

    def __init__(self, service: CronService, target: SimTarget) -> None:
        self.service = service
        self.target = target

    def poll(
        self, now: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        target = self.target
        target.finish_due(now)
        ended = [wf for wf in target.unreported.values() if wf.phase != "Running"]
        ended.sort(key=lambda w: (w.finished_at or now, w.name))
        for wf in ended:
            wf.reported = True
            del target.unreported[(wf.namespace, wf.name)]
            cron_id = UUID(wf.cron_id)
            if wf.phase == "Deleted":
                self.service.run_vanished(cron_id, wf.name, now)
            else:
                assert wf.finished_at is not None
                phase = cast(Phase, wf.phase)
                self.service.run_completed(cron_id, wf.name, phase, wf.finished_at, now)
        return len(ended)

    def recover(self, now: datetime) -> int | None:
        """Nothing to recover: the simulated target and the store live and die together."""
        return 0


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
        for m in sc.cron_workflows:
            self._apply(m, sc.start)
        actions = sorted(enumerate(sc.actions), key=lambda ia: (ia[1].at, ia[0]))
        clock = self.clock
        steps_at_instant = 0
        steps = 0
        first = True
        while True:
            steps += 1
            now = clock.now()
            if self.stop():
                raise SimulationInterrupted(f"interrupted at {rfc3339(now)}")
            if steps > MAX_STEPS:
                raise ScenarioError(
                    f"more than {MAX_STEPS} simulated instants by {rfc3339(now)}; shorten the"
                    " scenario (end) or use fewer, less frequent schedules"
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
            engine.close()
