"""The CronWorkflow aggregate: one event stream per CronWorkflow, every decision an event.

Commands (public methods) check and decide; the `@event` methods below them only assign
state, because eventsourcing re-runs them on every load: a guard or a computation from "now"
there would run again on every replay. Every command takes its time as an argument.

Topics are explicit and versioned (`cronsource:<Event>/v1`) so that moving a module never
orphans a stored event; a changed event gets a new version and an upcaster.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from itertools import islice
from typing import Any, Literal, cast
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, Snapshot, event
from eventsourcing.utils import get_topic, register_topic

from cronsource.domain.adoption import ArgoStatus
from cronsource.domain.backfill import BackfillPlan, BackfillTooLarge, start_from_queue
from cronsource.domain.calendars import (
    ANNOTATION_CALENDARS,
    CALENDAR_LABEL,
    CalendarDates,
    annotation_dates,
    calendar_names,
    excluded,
)
from cronsource.domain.decisions import (
    DEFAULT_LATE_TOLERANCE,
    Fire,
    HoldReason,
    Outcome,
    RunState,
    Skip,
    SkipReason,
    TickPolicy,
    buffer_ticks,
    decide_ticks,
    expired_buffer,
    failure_streak,
    runs_that_pause,
)
from cronsource.domain.expressions import (
    NOW_VARIABLE,
    ExpressionError,
    cronworkflow_variables,
    evaluate_bool,
)
from cronsource.domain.lastapplied import (
    DEFAULT_MANAGER,
    ApplyConflict,
    applied_config,
    live_config,
    merge,
    named_config,
    ownership_conflicts,
    record_manager,
    record_problem,
    with_manager,
)
from cronsource.domain.manifest import (
    ANNOTATION_DST_POLICY,
    ANNOTATION_PAUSE_AFTER_FAILURES,
    ANNOTATION_PAUSE_RESET_ON_SPEC_CHANGE,
    CronWorkflowManifest,
    CronWorkflowSpec,
    ManifestError,
    parse_manifest,
    pause_threshold,
    scheduling_options,
)
from cronsource.domain.schedule import (
    CompiledSchedule,
    compile_schedule,
    needs_anchor,
    resolve_schedules,
)
from cronsource.domain.timestamps import SMALLEST_STEP
from cronsource.domain.whentemplate import evaluate_when, values_read

#: uuid5 namespace of cronsource stream ids; never change it (ids are stored everywhere).
STREAM_NAMESPACE = UUID("6f2d1a52-6c1e-4a55-9d0e-2b8f3c1a7e10")
#: How long after its tick a decision made at the tick itself takes `now()` to be. Argo reads
#: the clock a moment after robfig fires, so `now()` is never the tick itself: Argo's
#: examples/cron-when.yaml (`(now() - lastScheduledTime).Seconds() > 360`) runs every 6
#: minutes, not 7. Fixed, so that `simulate` and replicas decide alike (docs/design.md section 4).
NOW_AFTER_TICK = timedelta(milliseconds=1)
#: The reasons of SubmissionFailed (v2). A refusal for good: Argo's condition type for it
#: (`SubmissionError`). A transient error that is retried: Argo PR #16233's condition type
#: (`TransientSubmissionError`, for argoproj/argo-workflows#14880). Transient errors until the
#: fire's deadline passed: the fire is given up, with the last error.
SUBMISSION_REFUSED = "SubmissionError"
SUBMISSION_RETRYING = "TransientSubmissionError"
SUBMISSION_EXHAUSTED = "SubmissionRetriesExhausted"

Phase = Literal["Succeeded", "Failed", "Error"]


def stream_id(namespace: str, name: str, uid: str = "", incarnation: int = 0) -> UUID:
    """Deterministic stream id, so every writer of one CronWorkflow converges on one stream.

    Without a Kubernetes uid (local target) a CronWorkflow deleted and created again under the
    same name takes the next `incarnation`, so its old history stays a stream of its own.
    """
    return uuid5(STREAM_NAMESPACE, f"{namespace}/{name}/{uid}/{incarnation}")


def workflow_name(cron_name: str, scheduled_time: datetime) -> str:
    """Argo's child name: `<cron>-<unix seconds of the scheduled time>`."""
    return f"{cron_name}-{int(scheduled_time.timestamp())}"


def manual_workflow_name(cron_name: str, request_id: str) -> str:
    """A manual run's name: no tick can take it (not all digits), a retried request repeats it."""
    digest = hashlib.sha256(request_id.encode()).hexdigest()[:9]
    return f"{cron_name}-m{digest}"


#: Validation context for a spec read back from events: admission checks added since it
#: was stored must not make its stream unreadable.
STORED: dict[str, Any] = {"stored": True}


def _spec_dict(spec: CronWorkflowSpec) -> dict[str, Any]:
    return spec.model_dump(by_alias=True, exclude_none=True, mode="json")


def _without_suspend(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "suspend"}


def _merged_manifest(
    manifest: CronWorkflowManifest, config: dict[str, Any], ref: str
) -> CronWorkflowManifest:
    """The manifest a three-way merge leads to, admitted as any manifest is: valid parts of
    a file and of the live object do not always make a valid whole (a timezone from one and
    a `CRON_TZ=` schedule from the other)."""
    meta = manifest.metadata.model_dump(by_alias=True, exclude_none=True, mode="json")
    meta.pop("labels", None)
    meta.pop("annotations", None)
    meta.update(config.get("metadata", {}))
    doc = {
        "apiVersion": manifest.api_version,
        "kind": manifest.kind,
        "metadata": meta,
        "spec": config.get("spec", {}),
    }
    try:
        return parse_manifest(doc)
    except ManifestError as e:
        raise ManifestError(
            [
                f"{p} (after merging with the values other writers set since the last apply;"
                " --force-conflicts takes the file's values)"
                for p in e.problems
            ],
            ref,
        ) from None


def _schedule_key(spec: dict[str, Any], annotations: dict[str, str]) -> tuple[Any, ...]:
    s = CronWorkflowSpec.model_validate(spec, context=STORED)
    return (s.all_schedules, s.timezone, scheduling_options(annotations).dst_policy)


def _compile(
    schedules: tuple[str, ...],
    timezone: str,
    dst_policy: str,
    baseline: datetime,
    namespace: str,
    name: str,
) -> CompiledSchedule:
    """Compiled schedules are immutable, so aggregates with the same schedule share one; only
    `@every` depends on the aggregate's own anchor (its creation time). Hashed `H` items are
    resolved for this CronWorkflow first (derived each time, never stored, never written back
    into the spec), so aggregates whose `H` lands on the same minute share one too."""
    resolved = resolve_schedules(schedules, namespace, name)
    # The whole second, as robfig's Every ticks (its Next drops the fraction) and as every
    # time is shown (creationTimestamp, scheduledTime, the Workflow's Unix-seconds name): a
    # tick at a fraction could be named by no time a user was shown.
    anchor = baseline.replace(microsecond=0) if needs_anchor(resolved) else None
    return _compile_shared(resolved, timezone, dst_policy, anchor)


@functools.lru_cache(maxsize=4096)
def _compile_shared(
    schedules: tuple[str, ...], timezone: str, dst_policy: str, anchor: datetime | None
) -> CompiledSchedule:
    return compile_schedule(schedules, timezone, dst_policy, anchor=anchor)


#: The state a snapshot holds, in this order: everything events assign, nothing derived (the
#: compiled schedule, the parsed spec and policy are rebuilt on first use).
_SNAPSHOT_FIELDS = (
    "_created_on",
    "_modified_on",
    "namespace",
    "name",
    "uid",
    "incarnation",
    "spec",
    "labels",
    "annotations",
    "generation",
    "last_applied",
    "spec_error",
    "when_error",
    "baseline",
    "decided_until",
    "suspended",
    "stopped",
    "deleted",
    "suspension_end",
    "suspension_reason",
    "not_started",
    "active",
    "finished",
    "succeeded",
    "failed",
    "last_scheduled_time",
    "last_finished_at",
    "manual_runs",
    "backfill_queue",
    "backfill_parallel",
    "backfill_running",
    "adopted",
    "failure_streak",
    "failure_pause",
    "buffered",
    "submission_trouble",
)


class CronWorkflowSnapshot(Snapshot):
    """A CronWorkflow's state at a version, so that a load reads the latest snapshot and the
    events after it instead of a stream that grows with every tick (eventsourcing's own
    snapshotting). The state is the fields events assign, in JSON's types (sets and tuples as
    lists), with the aggregate's `class_version`: a snapshot written by an older version is
    brought up to date by the aggregate's `upcast_vN_vN+1` methods when it is read. The
    timestamp is the aggregate's last modification, not a clock reading."""

    TOPIC = "cronsource:CronWorkflowSnapshot/v1"

    @classmethod
    def take(cls, aggregate: Any) -> CronWorkflowSnapshot:
        agg = cast(CronWorkflow, aggregate)
        return cls(
            originator_id=agg.id,
            originator_version=agg.version,
            timestamp=agg.modified_on,
            topic=get_topic(type(agg)),
            state=agg.snapshot_state(),
        )

    def mutate(self, _: Any) -> CronWorkflow:
        agg = cast(CronWorkflow, super().mutate(None))
        agg.restore_from_snapshot()
        return agg


def decision_wait(concurrency: str, deadline: timedelta | None, running: bool) -> timedelta:
    """How long after its tick the next tick is decided (`next_due` minus the tick): Forbid
    with a starting deadline and a run active waits up to the deadline for the run to end;
    everything else is decided at its tick. Shared with the read side, which shows the tick
    (`status.nextScheduledTime`) and the decision time (`status.nextDecisionTime`) apart."""
    if concurrency == "Forbid" and deadline and running:
        return deadline
    return timedelta(0)


class CronWorkflow(Aggregate):
    TOPIC = "cronsource:CronWorkflow/v1"
    #: The version of the snapshot state (`snapshot_state`). 1: the state before the resume
    #: rule moved to the scheduler, the last-applied record and runs not started (no
    #: `suspension_end`, `suspension_reason`, `last_applied`, `not_started`); 2: before the
    #: pause after failures (no `failure_streak`, `failure_pause`); 3: before buffered
    #: overlap (no `buffered`); 4: before retried submissions (no `submission_trouble`);
    #: 5: today's.
    #: Each step has an `upcast_vN_vN+1`.
    class_version = 5
    Snapshot = CronWorkflowSnapshot

    def snapshot_state(self) -> dict[str, Any]:
        """The fields events assign, as JSON holds them, and the class version."""
        state = {k: self.__dict__[k] for k in _SNAPSHOT_FIELDS}
        state["active"] = dict(self.active)
        state["finished"] = [list(f) for f in self.finished]
        state["manual_runs"] = sorted(self.manual_runs)
        state["backfill_running"] = sorted(self.backfill_running)
        state["backfill_queue"] = list(self.backfill_queue)
        state["class_version"] = type(self).class_version
        return state

    def restore_from_snapshot(self) -> None:
        """Back to the types events give (after the library restored `__dict__`)."""
        d = self.__dict__
        d["finished"] = [(f[0], f[1], f[2]) for f in d["finished"]]
        d["manual_runs"] = set(d["manual_runs"])
        d["backfill_running"] = set(d["backfill_running"])
        # A snapshot of this class version taken before adoption existed (never released)
        # has no `adopted`: none was.
        d.setdefault("adopted", None)
        d["_compiled"] = None
        # Lists in JSON and in the state alike; a copy, so no snapshot shares one.
        d["failure_streak"] = list(d["failure_streak"])
        d["buffered"] = list(d["buffered"])

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        """A snapshot of before the resume rule moved to the scheduler (a resume decided its
        ticks at once, so no suspension is pending) and before the last-applied record."""
        state.setdefault("suspension_end", None)
        state.setdefault("suspension_reason", "Suspended")
        state.setdefault("last_applied", None)
        state.setdefault("not_started", None)
        state.setdefault("adopted", None)

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        """A snapshot of before the pause after failures: no streak and no pause. Exact, as
        the streak counts only runs that ended while `cronsource.io/pause-after-failures`
        was set (decisions.failure_streak), which no admission of that time took as one.
        (An object that carried the annotation unchecked then counts from its first run
        after the snapshot, where a replay of its whole stream would count the earlier
        ones: at worst a pause comes later, never one that a replay would not make.)"""
        state.setdefault("failure_streak", [])
        state.setdefault("failure_pause", None)

    @staticmethod
    def upcast_v3_v4(state: dict[str, Any]) -> None:
        """A snapshot of before buffered overlap: no tick waits in a buffer (no admission of
        that time took `cronsource.io/overlap`), so the buffer is empty, exactly."""
        state.setdefault("buffered", [])

    @staticmethod
    def upcast_v4_v5(state: dict[str, Any]) -> None:
        """A snapshot of before retried submissions: no transient SubmissionFailed was ever
        recorded (nothing wrote one), so there is no trouble to show, exactly."""
        state.setdefault("submission_trouble", None)

    # ------------------------------------------------------------------ creation

    @staticmethod
    def create_id(namespace: str, name: str, uid: str, incarnation: int) -> UUID:
        return stream_id(namespace, name, uid, incarnation)

    @event("Created", topic="cronsource:CronWorkflowCreated/v1")
    def __init__(
        self,
        namespace: str,
        name: str,
        uid: str,
        incarnation: int,
        spec: dict[str, Any],
        labels: dict[str, str],
        annotations: dict[str, str],
        generation: int,
        last_applied: dict[str, Any] | None,
        timestamp: datetime,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.incarnation = incarnation
        self.spec = spec
        self.labels = labels
        self.annotations = annotations
        self.generation = generation
        # What the last `apply` of a file named (domain/lastapplied.py), for the next one's
        # three-way merge; None: no apply wrote one (created by the Kubernetes watch, or
        # before records were kept, which `upcast_v1_v2` below says).
        self.last_applied = last_applied
        self.spec_error: str | None = None
        self.when_error: str | None = None  # `when` could not be evaluated at the last tick
        self.baseline = timestamp
        self.decided_until = timestamp
        self.suspended = False
        self.stopped = False
        self.deleted = False
        #: The last resume: the undecided ticks before it belong to the suspension, decided by
        #: the resume rule (see `tick`), as Suspended or Stopped.
        self.suspension_end: datetime | None = None
        self.suspension_reason = "Suspended"
        #: The latest run not started past its deadline, for the status condition:
        #: {"workflow": name, "message": why}; None until one is.
        self.not_started: dict[str, str] | None = None
        #: The latest fire whose Workflow could not be created for a transient error (5xx,
        #: 429, no answer), for the `TransientSubmissionError` condition: {"workflow": name,
        #: "message": last error, "attempts": n, "reason": TransientSubmissionError while it
        #: is retried, SubmissionRetriesExhausted once its deadline passed}; None when the
        #: last create after it succeeded (SubmissionRecovered).
        self.submission_trouble: dict[str, Any] | None = None
        self.active: dict[str, datetime] = {}
        self.finished: list[tuple[str, str, datetime]] = []
        self.succeeded = 0
        self.failed = 0
        self.last_scheduled_time: datetime | None = None
        self.last_finished_at: datetime | None = None
        self.manual_runs: set[str] = set()
        # Backfill ticks waiting their turn (Queue, or Allow with a parallel limit), at most
        # `backfill_parallel` backfill runs (`backfill_running`) at once.
        self.backfill_queue: list[datetime] = []
        self.backfill_parallel = 1
        self.backfill_running: set[str] = set()
        #: What was taken over from another controller's status (`adopt_status`), for the
        #: status conditions it had: {"conditions": [...], "lastScheduledTime": ISO text or
        #: None}; None when nothing was. Plain JSON, so a snapshot stores it as it is.
        self.adopted: dict[str, Any] | None = None
        #: The consecutive runs that ended Failed or Error, oldest first, at most as many as
        #: `cronsource.io/pause-after-failures` says (decisions.failure_streak); replaced,
        #: never mutated in place, so copies may share it.
        self.failure_streak: list[str] = []
        #: The runs whose failures paused this CronWorkflow (the pause after failures); None
        #: while it is not paused. `resume` clears it.
        self.failure_pause: list[str] | None = None
        #: The ticks waiting for the active run to end (buffered overlap,
        #: `cronsource.io/overlap`), oldest first; each is decided later, fired from the
        #: buffer or skipped. Replaced, never mutated in place, so copies may share it.
        self.buffered: list[datetime] = []
        self._compiled: tuple[tuple[Any, ...], CompiledSchedule] | None = None
        #: `next_due` as computed at a version (an aggregate restored from a snapshot has
        #: none until asked).
        self._due_at_version: tuple[int, datetime | None] | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> CronWorkflow:
        """The repository copies cached aggregates for every command (so a refused save cannot
        corrupt the cache). Only the containers that events mutate in place need copying;
        spec, labels, annotations and the compiled schedule are replaced, never mutated, so the
        copy shares them. This keeps a batch load of 10,000 aggregates cheap."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.active = dict(self.active)
        new.finished = list(self.finished)
        new.manual_runs = set(self.manual_runs)
        new.backfill_queue = list(self.backfill_queue)
        new.backfill_running = set(self.backfill_running)
        new._pending_events = list(self._pending_events)
        return new

    @classmethod
    def from_manifest(
        cls,
        manifest: CronWorkflowManifest,
        at: datetime,
        incarnation: int = 0,
        *,
        last_applied: dict[str, Any] | None = None,
    ) -> CronWorkflow:
        """Create from a manifest; `last_applied` is the record of an `apply` (None for a
        writer that is not one: the cluster's object is then the whole truth)."""
        meta = manifest.metadata
        agg = cls(
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid or "",
            incarnation=incarnation,
            spec=_spec_dict(manifest.spec),
            labels=dict(meta.labels),
            annotations=dict(meta.annotations),
            generation=meta.generation or 1,
            last_applied=last_applied,
            timestamp=at,
        )
        if manifest.spec.suspend:
            agg.suspend(at, by="spec", note="spec.suspend is true")
        return agg

    def adopt_status(self, status: ArgoStatus, at: datetime) -> None:
        """Take over the status Argo's controller left on the object (domain/adoption.py),
        the first time cronsource takes it: counts, active runs, the last tick, the stop and
        the conditions, so that `stopStrategy`, `Forbid` and catch-up go on from where Argo
        left off. Recorded as its own event, in the save that creates the stream, so the
        audit log says where the counts came from.

        The ticks up to now were Argo's controller's to decide (it held the object until
        now; one it skipped, for `Forbid` say, must not run here after all), so this stream
        decides the ticks after now, but one: with `status.catch_up` (Argo's last-used-
        schedule is the current schedule), cronsource takes over as Argo's controller starts
        again (`runOutstandingWorkflows`): the latest tick since Argo's last one is left to
        the scheduler when it is still within `startingDeadlineSeconds`, and `@every` goes
        on from Argo's last tick instead of starting its period again."""
        if self.deleted or status.empty:
            return
        names = [name for name, _ in status.active]
        last = status.last_scheduled_time
        baseline = decided = None
        if last is not None and status.catch_up:
            spec = self.spec_model
            schedule = _compile(
                tuple(spec.all_schedules),
                spec.timezone,
                scheduling_options(self.annotations).dst_policy,
                last,
                self.namespace,
                self.name,
            )
            baseline, decided = last, max(at, last)
            deadline = self.policy().deadline
            if deadline:
                # Only a tick within the deadline can run: none older need be looked at.
                missed = list(schedule.ticks_between(max(last, at - deadline), at))
                if missed:
                    decided = missed[-1] - SMALLEST_STEP
        self._status_adopted(
            last_scheduled_time=last,
            succeeded=status.succeeded,
            failed=status.failed,
            active_workflows=names,
            active_scheduled_times=[t for _, t in status.active],
            conditions=[dict(c) for c in status.conditions],
            stopped=status.stopped,
            baseline=baseline,
            decided_until=decided,
            unreadable=list(status.unreadable),
            at=at,
            timestamp=at,
        )

    # ------------------------------------------------------------------ derived views

    @property
    def spec_model(self) -> CronWorkflowSpec:
        """The spec as a model, parsed once per spec dict (events replace it, never edit it)."""
        cached = getattr(self, "_spec_model", None)
        if cached is None or cached[0] is not self.spec:
            cached = (self.spec, CronWorkflowSpec.model_validate(self.spec, context=STORED))
            self._spec_model = cached
        model: CronWorkflowSpec = cached[1]
        return model

    @property
    def schedule(self) -> CompiledSchedule:
        """The compiled schedule, compiled once per spec (not stored: derived from events)."""
        spec = self.spec_model
        key = (
            spec.all_schedules,
            spec.timezone,
            self.annotations.get(ANNOTATION_DST_POLICY),
            self.baseline,
        )
        cached = getattr(self, "_compiled", None)
        if cached is None or cached[0] != key:
            compiled = _compile(
                tuple(spec.all_schedules),
                spec.timezone,
                scheduling_options(self.annotations).dst_policy,
                self.baseline,
                self.namespace,
                self.name,
            )
            self._compiled = (key, compiled)
            return compiled
        result: CompiledSchedule = cached[1]
        return result

    def policy(self, late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE) -> TickPolicy:
        """The tick policy, built once per spec and annotations (events replace them)."""
        cached = getattr(self, "_policy", None)
        if (
            cached is not None
            and cached[0] is self.spec
            and cached[1] is self.annotations
            and cached[2] == late_tolerance
        ):
            result: TickPolicy = cached[3]
            return result
        built = self._build_policy(late_tolerance)
        self._policy = (self.spec, self.annotations, late_tolerance, built)
        return built

    def _build_policy(self, late_tolerance: timedelta) -> TickPolicy:
        spec = self.spec_model
        opts = scheduling_options(self.annotations)
        d = spec.starting_deadline_seconds
        return TickPolicy(
            concurrency=spec.concurrency_policy,
            deadline=timedelta(seconds=d) if d else None,
            catchup_all=opts.catchup_all,
            max_catchup=opts.max_catchup,
            late_tolerance=late_tolerance,
        )

    @property
    def is_live(self) -> bool:
        """Live ticks are decided; a suspended, stopped, paused (after failures), rejected or
        deleted one waits."""
        return not (
            self.deleted
            or self.suspended
            or self.stopped
            or self.spec_error
            or self.failure_pause is not None
        )

    @property
    def held_by(self) -> str | None:
        """Why none of its ticks runs until a resume (or a new spec): Stopped, Suspended,
        PausedAfterFailures or SpecError; None while it is live."""
        return None if self.is_live else self._hold_reason()

    def _hold_reason(self) -> HoldReason | Literal["SpecError"]:
        """Why the ticks of a CronWorkflow that is not live wait: the skip reason they get
        when they are closed without running."""
        if self.stopped:
            return "Stopped"
        if self.suspended:
            return "Suspended"
        if self.failure_pause is not None:
            return "PausedAfterFailures"
        return "SpecError"

    def next_due(self) -> datetime | None:
        """When this CronWorkflow next needs a decision; None while nothing can be decided.

        Forbid with a deadline and a run active: the first undecided tick waits until it
        expires (or the run ends, which decides at once), so the due time is its expiry.

        Only events change what it depends on, and each moves the version: the answer is
        kept for the version it was computed at (a burst asks once per CronWorkflow when
        deciding in advance, again when saving, and the read model asks for its status).
        """
        known = self.__dict__.get("_due_at_version")
        if known is not None and known[0] == self.version:
            return cast(datetime | None, known[1])
        due = self._next_due()
        self._due_at_version = (self.version, due)
        return due

    def _next_due(self) -> datetime | None:
        if not self.is_live:
            return None
        if self.buffered and not self.active:
            return self.buffered[0]  # the run it waited for ended: it starts now
        first = self.schedule.next_after(self.decided_until)
        pol = self.policy()
        due = first
        held = self.suspension_end is not None and first < self.suspension_end
        # With a buffer, a new tick is decided when it comes (it joins the buffer or is
        # skipped); only a tick of a resumed suspension waits as without one.
        if not self._buffering() or held:
            due = first + decision_wait(pol.concurrency, pol.deadline, bool(self.active))
        if self.buffered and pol.deadline:
            due = min(due, self.buffered[0] + pol.deadline)  # the oldest one's wait ends
        return due

    def _buffering(self) -> bool:
        """Buffered overlap applies: `cronsource.io/overlap` with Forbid."""
        return (
            self.spec_model.concurrency_policy == "Forbid"
            and scheduling_options(self.annotations).overlap is not None
        )

    def _variables(self, at: datetime) -> dict[str, object]:
        """`cronworkflow.*` for `when` and `stopStrategy`, and `now()` as the decision time."""
        return {**self._cron_variables(), NOW_VARIABLE: at}

    def _cron_variables(self) -> dict[str, object]:
        return cronworkflow_variables(
            name=self.name,
            namespace=self.namespace,
            labels=self.labels,
            annotations=self.annotations,
            failed=self.failed,
            succeeded=self.succeeded,
            last_scheduled_time=self.last_scheduled_time,
        )

    def _when(self, at: datetime) -> bool | str:
        src = self.spec_model.when
        if not src:
            return True
        try:
            return evaluate_when(src, self._variables(at))
        except ExpressionError as e:
            return str(e)

    # ------------------------------------------------------------------ scheduling commands

    def tick(
        self,
        at: datetime,
        late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
        *,
        until: datetime | None = None,
        catch_up: bool = True,
        superseded: bool = False,
        decided_by: str | None = None,
    ) -> list[Fire]:
        """Decide every tick up to `until` (default `at`); an already decided tick is a no-op.

        `decided_by` names the replica that decides (its identity,
        adapters/infrastructure/replica.py); it is recorded on the ScheduleFired and
        ScheduleSkipped events, so the audit says who decided. None when no scheduler
        replica decides (a command, a test).

        Deciding again on fresh state after a rejected save lands here too, and finds the
        ticks the winner decided at or below `decided_until`: nothing is fired twice.
        """
        if not self.is_live:
            return []
        fires: list[Fire] = []
        if until is None and self.buffered:
            fires += self._drain_buffer(at, late_tolerance, decided_by)
        until = until or at
        ticks = list(self.schedule.ticks_between(self.decided_until, until))
        if not ticks:
            return fires
        when = self._before_fire(ticks, at, decided_by)
        if when is None:
            return fires
        read = None if when is True else self._when_read(ticks, at)
        exclusion = self._exclusion()
        end = self.suspension_end
        held = [t for t in ticks if end is not None and t < end]
        if held:
            # The ticks of a suspension that was resumed since: the resume rule (the latest
            # may run as a catch-up within its deadline, the others are skipped), decided
            # here by the scheduler, not by the resume itself. A later tick due now wins.
            rest = ticks[len(held) :]
            outcome = decide_ticks(
                held,
                at,
                self.policy(late_tolerance),
                RunState(tuple(self.active), self.last_finished_at),
                suspension=cast(HoldReason, self.suspension_reason),
                when=when,
                run_name=lambda t: workflow_name(self.name, t),
                superseded=superseded or bool(rest),
                excluded=exclusion,
            )
            fires += self._record(outcome, at, read, decided_by)
            if outcome.waiting or not rest:
                return fires
            ticks = rest
        pol = self.policy(late_tolerance)
        if catch_up and when is True and (self.active or self.buffered) and self._buffering():
            if exclusion is None:
                self._buffer(ticks, at, pol, decided_by)
                return fires
            # Excluded ticks never wait in the buffer: in tick order, the ticks between them
            # are buffered (or skipped) as a group, each excluded one skipped on its own.
            group: list[datetime] = []
            for t in ticks:
                x = exclusion(t)
                if x is None:
                    group.append(t)
                    continue
                if group:
                    self._buffer(group, at, pol, decided_by)
                    group = []
                self._skipped_range(x, at, None, decided_by)
            if group:
                self._buffer(group, at, pol, decided_by)
            return fires
        if not catch_up:
            pol = TickPolicy(pol.concurrency, None, False, 1, pol.late_tolerance)
        outcome = decide_ticks(
            ticks,
            at,
            pol,
            RunState(tuple(self.active), self.last_finished_at),
            when=when,
            run_name=lambda t: workflow_name(self.name, t),
            superseded=superseded,
            excluded=exclusion,
        )
        return fires + self._record(outcome, at, read, decided_by)

    def _exclusion(self) -> Callable[[datetime], Skip | None] | None:
        """The Excluded skip of a tick whose date (in the CronWorkflow's zone) a calendar
        excludes: `cronsource.io/exclude-dates` (versioned by the generation), then the
        calendars `cronsource.io/calendars` names, as the service resolved them for this
        decision (`calendar_states`, not stored: the calendar streams' state at their
        versions). A named calendar that does not exist skips the ticks as SpecError naming
        it: the CronWorkflow asked not to run on some dates, and which is unknown."""
        sources: list[CalendarDates] = []
        own = annotation_dates(self.annotations, self.generation)
        if own is not None:
            sources.append(own)
        names = calendar_names(self.annotations)
        if names:
            resolved = self.calendar_states
            missing = [n for n in names if resolved.get(n) is None]
            if missing:
                message = (
                    f"{ANNOTATION_CALENDARS}: calendar {missing[0]!r} not found in namespace"
                    f' {self.namespace} (a ConfigMap labelled {CALENDAR_LABEL}: "true")'
                )
                return lambda t: Skip(t, t, 1, "SpecError", message)
            sources += [s for n in names if (s := resolved.get(n)) is not None]
        if not sources:
            return None
        zone = self.spec_model.timezone or ""

        def check(t: datetime) -> Skip | None:
            x = excluded(t, zone, sources)
            if x is None:
                return None
            return Skip(t, t, 1, "Excluded", x.message, tuple(x.detail().items()))

        return check

    def exclusion_at(self, t: datetime) -> Skip | None:
        """How the tick at `t` would be skipped for a calendar now (Excluded, or SpecError
        when a named calendar is missing); None when no calendar excludes it. For `next`
        and `why`: the decision itself consults the calendars as of when it is made."""
        check = self._exclusion()
        return check(t) if check is not None else None

    @property
    def calendar_states(self) -> dict[str, CalendarDates | None]:
        """The named calendars as of this decision (name: dates, None when there is no
        such calendar), set by the service before it decides (`CronService`); transient,
        never part of the state events or snapshots restore."""
        return cast(dict[str, CalendarDates | None], self.__dict__.get("_calendars", {}))

    @calendar_states.setter
    def calendar_states(self, states: dict[str, CalendarDates | None]) -> None:
        self.__dict__["_calendars"] = states

    def _buffer(
        self, ticks: list[datetime], at: datetime, pol: TickPolicy, decided_by: str | None
    ) -> None:
        """Buffered overlap: the ticks that come while a run is active (or ticks wait
        already) join the buffer while it has room, or are skipped (decisions.buffer_ticks),
        recorded in tick order."""
        opts = scheduling_options(self.annotations)
        assert opts.overlap is not None  # _buffering
        out = buffer_ticks(ticks, at, pol, len(self.buffered), opts.overlap, opts.max_buffer)
        entries: list[tuple[datetime, datetime | Skip]] = [(t, t) for t in out.buffered]
        entries += [(s.first, s) for s in out.skipped]
        entries.sort(key=lambda e: e[0])
        for _, d in entries:
            if isinstance(d, Skip):
                self._skipped_range(d, at, None, decided_by)
            else:
                self._tick_buffered(
                    scheduled_time=d, at=at, behind=sorted(self.active), timestamp=at
                )

    def _drain_buffer(
        self, at: datetime, late_tolerance: timedelta, decided_by: str | None
    ) -> list[Fire]:
        """The waiting ticks past their starting deadline are skipped (DeadlineExceeded);
        then, with no run active, the oldest waiting tick starts (trigger `buffer`, its own
        scheduled time): one at a time, as Forbid runs."""
        deadline = self.policy(late_tolerance).deadline
        for t in expired_buffer(self.buffered, at, deadline):
            self._skipped_range(
                Skip(
                    t,
                    t,
                    1,
                    "DeadlineExceeded",
                    f"waited in the buffer for the active run past startingDeadlineSeconds:"
                    f" {self.spec_model.starting_deadline_seconds}",
                ),
                at,
                None,
                decided_by,
            )
        if self.active or not self.buffered:
            return []
        t = self.buffered[0]
        self.trigger_event(
            _SCHEDULE_FIRED,
            scheduled_time=t,
            workflow_name=workflow_name(self.name, t),
            fired_at=at,
            trigger="buffer",
            replaced=[],
            decided_by=decided_by,
            timestamp=at,
        )
        return [Fire(t, "buffer")]

    def _before_fire(
        self, ticks: list[datetime], at: datetime, decided_by: str | None = None
    ) -> bool | str | None:
        """Argo's order before a fire (workflow/cron/operator.go `run`): the stop strategy,
        then `when`. A stop strategy already met stops the CronWorkflow and these ticks start
        nothing; one that cannot be evaluated skips them with its message (a `SpecError`
        condition), never stops for good. Returns the `when` verdict, or None when the ticks
        were decided here."""
        now = max(at, ticks[-1] + NOW_AFTER_TICK)  # the instant `now()` reads
        stop = self._stop_verdict(now)
        if stop is True:
            self._stopped(reason=self._stop_reason(), values=self._stop_read(now), timestamp=at)
            self._skipped_range(
                Skip(ticks[0], ticks[-1], len(ticks), "Stopped"), at, None, decided_by
            )
            return None
        if isinstance(stop, str):
            self._skipped_range(
                Skip(ticks[0], ticks[-1], len(ticks), "SpecError", stop), at, None, decided_by
            )
            return None
        return self._when(now)

    def _when_read(self, ticks: list[datetime], at: datetime) -> tuple[str, dict[str, str]]:
        """`spec.when` and the values of the variables it read, as `_before_fire` evaluated
        it: what a WhenFalse skip records so that `why` and `history` can show them."""
        now = max(at, ticks[-1] + NOW_AFTER_TICK)
        src = self.spec_model.when or ""
        return src, values_read(src, self._variables(now))

    def _stop_read(self, at: datetime) -> dict[str, str] | None:
        """The values the stop strategy read when it was met (recorded on Stopped)."""
        strategy = self.spec_model.stop_strategy
        if strategy is None or not strategy.source:
            return None
        return values_read(strategy.source, self._variables(at)) or None

    def _stop_verdict(self, at: datetime) -> bool | str:
        """Whether `stopStrategy` is met now: True, False, or the message of its failure."""
        strategy = self.spec_model.stop_strategy
        if strategy is None or not strategy.source or self.stopped:
            return False
        try:
            return evaluate_bool(strategy.source, self._variables(at))
        except ExpressionError as e:
            return (
                f"failed to check CronWorkflow '{self.name}' stopping condition: "
                f"failed to evaluate stop expression: {e}"
            )

    def _stop_reason(self) -> str:
        strategy = self.spec_model.stop_strategy
        return f"stopStrategy met: {strategy.source if strategy else ''}"

    def _record(
        self,
        outcome: Outcome,
        at: datetime,
        read: tuple[str, dict[str, str]] | None = None,
        decided_by: str | None = None,
    ) -> list[Fire]:
        fires: list[Fire] = []
        for d in outcome.decisions:
            if isinstance(d, Fire):
                # The event of `_fired`, triggered directly: the decorator's generic argument
                # handling was a sixth of a burst's decisions. Same event, same topic.
                self.trigger_event(
                    _SCHEDULE_FIRED,
                    scheduled_time=d.scheduled_time,
                    workflow_name=workflow_name(self.name, d.scheduled_time),
                    fired_at=at,
                    trigger=d.trigger,
                    replaced=list(d.replaces),
                    decided_by=decided_by,
                    timestamp=at,
                )
                fires.append(d)
            else:
                self._skipped_range(d, at, read if d.reason == "WhenFalse" else None, decided_by)
        return fires

    def _skipped_range(
        self,
        d: Skip,
        at: datetime,
        read: tuple[str, dict[str, str]] | None = None,
        decided_by: str | None = None,
    ) -> None:
        self._skipped(
            scheduled_time=d.first,
            last_scheduled_time=d.last,
            count=d.count,
            reason=d.reason,
            message=d.message,
            at=at,
            expression=read[0] if read else "",
            values=(read[1] or None) if read else (dict(d.detail) or None),
            decided_by=decided_by,
            timestamp=at,
        )

    def suspend(self, at: datetime, by: str = "", note: str = "") -> None:
        """Suspend: records only itself. Only the scheduler decides ticks, with the state it
        sees when it decides (as Argo's controller does): a tick before `at` that no
        scheduler decided yet is now a tick of the suspension, decided at the resume."""
        if self.deleted or self.suspended:
            return
        self._suspended(at=at, by=by, note=note, timestamp=at)

    def resume(self, at: datetime, by: str = "", note: str = "") -> list[Fire]:
        """Resume: records only itself. The scheduler then decides the ticks of the
        suspension by the resume rule (`tick`): at most one run, a catch-up within the
        deadline. Returns no fires (kept for the callers that add up a command's fires).
        A pause after failures is lifted too, and its count starts again."""
        if self.deleted or not (self.suspended or self.stopped or self.failure_pause is not None):
            return []
        self._resumed(at=at, by=by, note=note, timestamp=at)
        return []

    def update_spec(
        self,
        manifest: CronWorkflowManifest,
        at: datetime,
        late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
        *,
        last_applied: dict[str, Any] | None = None,
    ) -> list[Fire]:
        """Take the writer's spec, labels and annotations as they are (two-way): what the
        Kubernetes watch does with the cluster's object, the live state, and what an HTTP PUT
        does. A file that does not set `suspend` keeps the live value. `last_applied`: the
        record of an apply that falls back to this (None keeps the record as it is)."""
        if self.deleted:
            raise ValueError(f"CronWorkflow {self.namespace}/{self.name} is deleted")
        named = "suspend" in manifest.spec.model_fields_set
        return self._set_spec(
            _spec_dict(manifest.spec),
            dict(manifest.metadata.labels),
            dict(manifest.metadata.annotations),
            manifest.metadata.generation,
            manifest.spec.suspend if named else None,
            at,
            late_tolerance,
            last_applied,
        )

    def apply_config(
        self,
        manifest: CronWorkflowManifest,
        at: datetime,
        late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
        *,
        force: bool = False,
        manager: str = DEFAULT_MANAGER,
    ) -> list[str]:
        """`kubectl apply` of a file: a three-way merge of the last-applied record, the file
        and the live object (domain/lastapplied.py), so a field another writer changed since
        the last apply (`cronsource suspend` first of all) keeps that writer's value while the
        file's value for it has not changed; `force` takes the file's values. Without a
        usable record it falls back to a two-way apply. Returns one line per thing the
        user should know: a field kept at its live value, or the fallback.

        `manager`: the field manager applying (server-side apply over HTTP). A record
        another manager wrote is not this one's last apply: a field it set that this file
        would change raises ApplyConflict (nothing recorded) unless `force`; otherwise the
        file merges with an empty record of its own, and its record replaces the other's.
        The default manager (`cronsource apply`'s) never conflicts: over another manager's
        record it applies two-way, as without a record, and says so.

        Raises ManifestError when the merge of valid parts is not a valid CronWorkflow."""
        if self.deleted:
            raise ValueError(f"CronWorkflow {self.namespace}/{self.name} is deleted")
        ref = f"{self.namespace}/{self.name}"
        config = applied_config(manifest)
        record = with_manager(config, manager)
        problem = record_problem(self.last_applied)
        live = live_config(self.spec, self.labels, self.annotations, self.suspended)
        last: dict[str, Any] = {}
        if problem is None:
            assert self.last_applied is not None  # record_problem said it is usable
            owner = record_manager(self.last_applied)
            if owner == manager:
                last = named_config(self.last_applied)
            elif manager == DEFAULT_MANAGER:
                # `cronsource apply` never conflicts (as kubectl's client-side apply never
                # does): a record another manager wrote is not its own last apply, so it
                # applies as it does without one.
                problem = f"the last apply was field manager {owner!r}'s"
            else:
                conflicts = ownership_conflicts(named_config(self.last_applied), config, live)
                if conflicts and not force:
                    raise ApplyConflict(manager, owner, conflicts)
        if problem is not None and manager == DEFAULT_MANAGER:
            self.update_spec(manifest, at, late_tolerance, last_applied=record)
            return [
                f"{ref}: {problem}: applied two-way (the file's values replace the live"
                " ones); the next apply merges three-way"
            ]
        # Another manager's apply (forced, or changing nothing its owner set), or one with
        # no record to go by, merges with an empty record of its own: the file's fields
        # take its values and the rest stays as it is.
        merged = merge(last, config, live, force)
        desired = _merged_manifest(manifest, merged.config, ref)
        spec = _spec_dict(desired.spec)
        if _without_suspend(spec) == _without_suspend(self.spec):
            # `suspend` is state of its own (Suspended/Resumed events); the stored spec's copy
            # of it changing alone is no spec change.
            spec = self.spec
        self._set_spec(
            spec,
            dict(desired.metadata.labels),
            dict(desired.metadata.annotations),
            manifest.metadata.generation,
            desired.spec.suspend,
            at,
            late_tolerance,
            record,
        )
        return [f"{ref}: {k.describe()}" for k in merged.kept]

    def _set_spec(
        self,
        spec: dict[str, Any],
        labels: dict[str, str],
        annotations: dict[str, str],
        generation: int | None,
        suspend: bool | None,
        at: datetime,
        late_tolerance: timedelta,
        last_applied: dict[str, Any] | None,
    ) -> list[Fire]:
        """Record a new spec. A schedule or time-zone change resets the baseline (Argo
        #7182): old ticks are never caught up and the change itself starts nothing.
        `suspend` None leaves the suspension as it is."""
        fires: list[Fire] = []
        spec_changed = _without_suspend(spec) != _without_suspend(self.spec)
        changed = (spec, labels, annotations) != (self.spec, self.labels, self.annotations)
        if changed or self.spec_error:
            reset = _schedule_key(spec, annotations) != _schedule_key(self.spec, self.annotations)
            if reset:
                self._close_buffer(at, "ScheduleChanged")
            if self.spec_error:
                # The ticks of the rejected period never ran and never will (even as a
                # catch-up): close them now, whatever the new spec says.
                self._close_ticks(at, "SpecError")
            elif reset:
                if self.is_live:
                    self._close_superseded(at, late_tolerance)
                else:
                    self._close_ticks(at, self._hold_reason())
            self._spec_updated(
                spec=spec,
                labels=labels,
                annotations=annotations,
                # The API server moves it on a change of anything but metadata and status:
                # a change of labels or annotations alone keeps it.
                generation=generation or self.generation + int(spec != self.spec),
                reset_baseline=reset,
                last_applied=last_applied,
                timestamp=at,
            )
            if spec_changed:
                self._reset_failures_on_spec_change(at)
        elif last_applied is not None and last_applied != self.last_applied:
            # Only the record changes (the first apply onto a CronWorkflow without one, or a
            # file now saying what another writer already set): kept, so the next apply
            # merges with it. The spec is the same, so the generation is too.
            self._spec_updated(
                spec=self.spec,
                labels=self.labels,
                annotations=self.annotations,
                generation=self.generation,
                reset_baseline=False,
                last_applied=last_applied,
                timestamp=at,
            )
        if suspend is None:
            return fires
        if suspend and not self.suspended:
            self.suspend(at, by="spec", note="spec.suspend is true")
        elif not suspend and self.suspended:
            fires += self.resume(at, by="spec", note="spec.suspend is false")
        return fires

    def _reset_failures_on_spec_change(self, at: datetime) -> None:
        """With `cronsource.io/pause-reset-on-spec-change: "true"` (as the new spec's
        annotations say), a changed spec is presumed to be the fix: the pause after failures
        is lifted and the count starts again, as a resume does (docs/user-guide.md)."""
        if not scheduling_options(self.annotations).pause_reset_on_spec_change:
            return
        if self.failure_pause is None and not self.failure_streak:
            return
        unpaused = self.failure_pause is not None
        self._failure_count_reset(
            at=at,
            by="spec",
            note=f"the spec changed ({ANNOTATION_PAUSE_RESET_ON_SPEC_CHANGE})"
            + (": the pause after failures is lifted" if unpaused else ""),
            unpaused=unpaused,
            timestamp=at,
        )

    def _close_superseded(self, at: datetime, late_tolerance: timedelta) -> None:
        """The ticks of the old schedule that no scheduler decided before it changed: they
        are no ticks of the CronWorkflow any more, and the change itself starts nothing
        (Argo drops them; old ticks are never caught up). Each is recorded as missed
        (`DeadlineExceeded`) when no scheduler decided it within the late tolerance, else as
        `ScheduleChanged`: the change came before any scheduler saw it."""
        ticks = list(self.schedule.ticks_between(self.decided_until, at - SMALLEST_STEP))
        if not ticks:
            return
        missed = [t for t in ticks if at - t >= late_tolerance]
        if missed:
            self._skipped_range(Skip(missed[0], missed[-1], len(missed), "DeadlineExceeded"), at)
        later = ticks[len(missed) :]
        if later:
            self._skipped_range(Skip(later[0], later[-1], len(later), "ScheduleChanged"), at)

    def _close_buffer(self, at: datetime, reason: SkipReason) -> None:
        """The waiting ticks are decided without running: the schedule they belong to was
        replaced."""
        for t in list(self.buffered):
            self._skipped_range(Skip(t, t, 1, reason, "it waited in the buffer"), at)

    def _close_ticks(self, at: datetime, reason: SkipReason) -> None:
        """Skip every undecided tick before `at` for `reason`: the ticks of a suspension or a
        rejected spec, before a new spec changes what the ticks are."""
        ticks = list(self.schedule.ticks_between(self.decided_until, at - SMALLEST_STEP))
        if ticks:
            self._skipped_range(Skip(ticks[0], ticks[-1], len(ticks), reason), at)

    def reject_spec(self, generation: int, message: str, at: datetime) -> None:
        """An invalid spec arrived from the cluster: nothing fires until a valid one arrives."""
        if self.deleted or (self.spec_error == message and self.generation == generation):
            return
        if self.is_live:
            self.tick(at, until=at - SMALLEST_STEP, catch_up=False)
        self._spec_rejected(generation=generation, message=message, timestamp=at)

    def delete(self, at: datetime) -> None:
        if self.deleted:
            return
        self._deleted(at=at, timestamp=at)

    # ------------------------------------------------------------------ runs

    def run_completed(
        self,
        workflow: str,
        phase: Phase,
        finished_at: datetime,
        at: datetime | None = None,
        decided_by: str | None = None,
    ) -> list[Fire]:
        """A child finished: count it, apply history limits and the stop strategy, and
        decide ticks that waited behind it (Forbid with a deadline), as `decided_by`."""
        at = at or finished_at
        if workflow not in self.active:
            return []
        self._run_completed(
            workflow_name=workflow, phase=phase, finished_at=finished_at, timestamp=at
        )
        self._prune_history(at)
        self._check_stop(at)
        self._check_failures(at)
        fires = self.tick(at, decided_by=decided_by) if self.is_live else []
        self._start_queued(at)
        return fires

    def run_vanished(
        self, workflow: str, at: datetime, decided_by: str | None = None
    ) -> list[Fire]:
        """A child deleted by hand while active stops counting as active (Argo #2297)."""
        if workflow not in self.active and workflow not in {f[0] for f in self.finished}:
            return []
        self._run_vanished(workflow_name=workflow, at=at, timestamp=at)
        fires = self.tick(at, decided_by=decided_by) if self.is_live else []
        self._start_queued(at)
        return fires

    def _before_adoption(self, scheduled_time: datetime) -> bool:
        """Whether a run of this tick is the other controller's, from before this stream took
        the object over (at or before the last tick its status named): its count is in the
        adopted status already (and a run still going was adopted as active), so the log did
        not lose it."""
        last = (self.adopted or {}).get("lastScheduledTime")
        return last is not None and scheduled_time <= datetime.fromisoformat(last)

    def recover_run(
        self,
        workflow: str,
        scheduled_time: datetime,
        trigger: str,
        created_at: datetime,
        reason: str,
        at: datetime,
        late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
        decided_by: str | None = None,
    ) -> bool:
        """A Workflow of ours exists that the log has no fire for (the log lost it in a
        failover, after its Workflow was created): record it, so the log matches the world.

        Its tick is decided by it and never fired again: ticks before it that are undecided
        are decided first, by the usual rules (as the scheduler would decide them now), then
        the recovered run is the decision of its own tick. A tick the log had already decided
        otherwise (a skip recorded on the log that had lost the fire) keeps that decision, and
        the recovery says the run exists all the same. The run counts as active until the run
        watcher reports it ended. Returns whether anything was recorded (False: the log knows
        this run, or it is the other controller's, from before the adoption)."""
        if self.deleted or workflow in self.active or workflow in self.manual_runs:
            return False
        if any(f[0] == workflow for f in self.finished):
            return False
        if self._before_adoption(scheduled_time):
            return False
        ticks_rule = trigger in ("schedule", "catchup", "buffer")
        if ticks_rule and scheduled_time > self.decided_until:
            if self.is_live:
                self.tick(
                    at,
                    late_tolerance,
                    until=scheduled_time - SMALLEST_STEP,
                    superseded=True,
                    decided_by=decided_by,
                )
            else:
                self._close_ticks(scheduled_time, self._hold_reason())
        self._run_recovered(
            scheduled_time=scheduled_time,
            workflow_name=workflow,
            trigger=trigger,
            created_at=created_at,
            reason=reason,
            timestamp=at,
        )
        return True

    def run_not_started(
        self,
        workflow: str,
        reason: str,
        message: str,
        late_seconds: float,
        deadline_seconds: float,
        at: datetime,
    ) -> bool:
        """The dispatcher did not create this fire's Workflow: it reached the fire after the
        fire's starting deadline (docs/design.md invariant 4). The run stops counting as
        active, so Forbid's slot is free and the scheduler decides what waited behind it at
        its next turn. Returns whether anything was recorded: False when the run is not
        active (recorded already, by a dispatcher that repeats its batch after a crash, or
        it ended), so a replay never records a run twice."""
        if workflow not in self.active:
            return False
        self._run_not_started(
            workflow_name=workflow,
            scheduled_time=self.active[workflow],
            reason=reason,
            message=message,
            late_seconds=late_seconds,
            deadline_seconds=deadline_seconds,
            timestamp=at,
        )
        return True

    def submission_failed(
        self,
        workflow: str,
        scheduled_time: datetime,
        message: str,
        transient: bool,
        at: datetime,
        *,
        reason: str | None = None,
        attempts: int = 1,
    ) -> bool:
        """The dispatcher could not create this fire's Workflow. `reason` (default by
        `transient`): SubmissionError, refused for good (403, 422, a name that is not ours);
        TransientSubmissionError, a transient error it goes on retrying (the run stays
        active); SubmissionRetriesExhausted, transient errors until the fire's deadline
        passed, `message` the last one. Returns whether anything was recorded: a transient
        failure of a run that is not active (it ended, or the fire was given up) or that is
        already recorded as retried is not recorded again, so a dispatcher that repeats its
        batch, or restarts, records each retried fire once."""
        reason = reason or (SUBMISSION_RETRYING if transient else SUBMISSION_REFUSED)
        trouble = self.submission_trouble
        if workflow not in self.active or (
            transient
            and trouble is not None
            and trouble["workflow"] == workflow
            and trouble["reason"] == SUBMISSION_RETRYING
        ):
            return False
        self._submission_failed(
            workflow_name=workflow,
            scheduled_time=scheduled_time,
            message=message,
            transient=transient,
            reason=reason,
            attempts=attempts,
            counted=not transient,
            timestamp=at,
        )
        if not transient:
            self._start_queued(at)
        return True

    def submission_recovered(self, workflow: str, attempts: int, at: datetime) -> bool:
        """A Workflow was created after failures were recorded (transient ones of this fire,
        or an earlier fire given up or refused): the `TransientSubmissionError` or
        `SubmissionError` condition clears, as Argo clears both at the next successful
        submission (PR #16233, operator.go `run`). Nothing is recorded
        when no trouble is shown, so every successful create may call it."""
        trouble = self.submission_trouble
        if trouble is None or (
            trouble["reason"] == SUBMISSION_RETRYING and trouble["workflow"] != workflow
        ):
            return False  # nothing shown, or another fire is still being retried
        self._submission_recovered(workflow_name=workflow, attempts=attempts, timestamp=at)
        return True

    def _prune_history(self, at: datetime) -> None:
        spec = self.spec_model
        keep_ok, keep_bad = spec.kept_succeeded, spec.kept_failed
        ok = sorted((f for f in self.finished if f[1] == "Succeeded"), key=lambda f: f[2])
        bad = sorted((f for f in self.finished if f[1] != "Succeeded"), key=lambda f: f[2])
        doomed = [f[0] for f in ok[: max(0, len(ok) - keep_ok)]]
        doomed += [f[0] for f in bad[: max(0, len(bad) - keep_bad)]]
        if doomed:
            self._history_pruned(workflow_names=doomed, timestamp=at)

    def _check_failures(self, at: datetime) -> None:
        """After a run completes: N consecutive failures pause the CronWorkflow
        (`cronsource.io/pause-after-failures`), naming the N runs. Already paused, later
        failures change nothing but the streak."""
        if self.deleted or self.failure_pause is not None:
            return
        runs = runs_that_pause(
            self.failure_streak, scheduling_options(self.annotations).pause_after_failures
        )
        if runs is not None:
            self._paused_after_failures(
                workflows=list(runs), threshold=len(runs), at=at, timestamp=at
            )

    def _check_stop(self, at: datetime) -> None:
        """After a run completes, as Argo's reconcileActiveWfs: met stops; a failure to
        evaluate changes nothing here (the next tick skips with the message)."""
        if self._stop_verdict(at) is True:
            self._stopped(reason=self._stop_reason(), values=self._stop_read(at), timestamp=at)

    # ------------------------------------------------------------------ manual and backfill

    def trigger(self, at: datetime, request_id: str) -> str | None:
        """Run now. Returns the run's name, or None when this request already ran."""
        if self.deleted:
            raise ValueError(f"CronWorkflow {self.namespace}/{self.name} is deleted")
        name = manual_workflow_name(self.name, request_id)
        if name in self.manual_runs:
            return None
        self._fired(
            scheduled_time=at,
            workflow_name=name,
            fired_at=at,
            trigger="manual",
            replaced=[],
            decided_by=None,
            timestamp=at,
        )
        return name

    def backfill_ticks(
        self, start: datetime, end: datetime, already_fired: Iterable[datetime]
    ) -> list[datetime]:
        """Ticks in [start, end] that never fired; undecided ticks, and ticks waiting in the
        buffer (decided later), are left to the scheduler."""
        done = set(already_fired) | set(self.buffered)
        end = min(end, self.decided_until)
        ticks = self.schedule.ticks_between(start - SMALLEST_STEP, end)
        return [t for t in ticks if t not in done]

    def backfill_candidates(
        self, start: datetime, end: datetime, cap: int | None
    ) -> list[datetime]:
        """The ticks a backfill of [start, end] considers (domain/backfill.py): the current
        schedule's, up to the decided watermark, but for those waiting in the buffer (the
        scheduler starts or skips them). More than `cap` raises BackfillTooLarge before the
        rest are computed."""
        upto = min(end, self.decided_until)
        if upto < start:
            return []
        ticks: Iterable[datetime] = self.schedule.ticks_between(start - SMALLEST_STEP, upto)
        if self.buffered:
            waiting = set(self.buffered)
            ticks = (t for t in ticks if t not in waiting)
        if cap is None:
            return list(ticks)
        out = list(islice(ticks, cap + 1))
        if len(out) > cap:
            raise BackfillTooLarge(len(out), cap)
        return out

    def backfill(
        self, ticks: Iterable[datetime], at: datetime, replaces: Iterable[str] = ()
    ) -> list[str]:
        """Fire these ticks as backfill runs now (the first one replacing `replaces`)."""
        names = []
        replaced = list(replaces)
        for t in ticks:
            name = workflow_name(self.name, t)
            self._fired(
                scheduled_time=t,
                workflow_name=name,
                fired_at=at,
                trigger="backfill",
                replaced=replaced,
                decided_by=None,
                timestamp=at,
            )
            replaced = []
            names.append(name)
        return names

    def apply_backfill(self, plan: BackfillPlan, at: datetime) -> list[datetime]:
        """Carry out a plan made on this state: fire what runs now, queue the rest (the
        queue drains as backfill runs end). Returns the ticks fired now."""
        if self.deleted:
            raise ValueError(f"CronWorkflow {self.namespace}/{self.name} is deleted")
        self.backfill(plan.fire, at, plan.replaces)
        if plan.queue:
            self._backfill_queued(
                ticks=list(plan.queue),
                parallel=plan.parallel or 1,
                overlap=plan.overlap,
                # First, last and count, as a skipped range has them (for the audit log).
                scheduled_time=plan.queue[0],
                last_scheduled_time=plan.queue[-1],
                count=len(plan.queue),
                timestamp=at,
            )
        return list(plan.fire)

    def cancel_backfill(self, at: datetime) -> int:
        """Drop every queued backfill tick (runs already started go on); returns how many."""
        n = len(self.backfill_queue)
        if n:
            self._backfill_cancelled(count=n, timestamp=at)
        return n

    def _start_queued(self, at: datetime) -> None:
        """A backfill run ended (or never started): start the next queued ticks."""
        if self.deleted or not self.backfill_queue:
            return
        self.backfill(
            start_from_queue(
                self.backfill_queue, self.backfill_parallel, len(self.backfill_running)
            ),
            at,
        )

    # ------------------------------------------------------------------ state changes only

    @event("ScheduleFired", topic="cronsource:ScheduleFired/v1")
    def _fired(
        self,
        scheduled_time: datetime,
        workflow_name: str,
        fired_at: datetime,
        trigger: str,
        replaced: list[str],
        decided_by: str | None,
        timestamp: datetime,
    ) -> None:
        self.active[workflow_name] = scheduled_time
        if trigger == "backfill":
            self.backfill_running.add(workflow_name)
            queue = self.backfill_queue
            i = bisect.bisect_left(queue, scheduled_time)
            if i < len(queue) and queue[i] == scheduled_time:
                del queue[i]
        if trigger in ("schedule", "catchup"):
            self.when_error = None
            self.decided_until = max(self.decided_until, scheduled_time)
            if self.last_scheduled_time is None or scheduled_time > self.last_scheduled_time:
                self.last_scheduled_time = scheduled_time
        elif trigger == "manual":
            self.manual_runs.add(workflow_name)
        elif trigger == "buffer":
            # A tick of the schedule that waited (buffered overlap): its own time counts.
            self.buffered = [t for t in self.buffered if t != scheduled_time]
            if self.last_scheduled_time is None or scheduled_time > self.last_scheduled_time:
                self.last_scheduled_time = scheduled_time

    @event("ScheduleSkipped", topic="cronsource:ScheduleSkipped/v1")
    def _skipped(
        self,
        scheduled_time: datetime,
        last_scheduled_time: datetime,
        count: int,
        reason: str,
        message: str,
        at: datetime,
        decided_by: str | None,
        timestamp: datetime,
        expression: str = "",
        values: dict[str, str] | None = None,
    ) -> None:
        # v2: `expression` and `values`, what a WhenFalse skip's `when` read (upcast below).
        self.decided_until = max(self.decided_until, last_scheduled_time)
        if reason == "WhenFalse" or (reason == "SpecError" and message):
            self.when_error = message or None
        if self.buffered and scheduled_time in self.buffered:
            # A waiting tick decided at last without running (its deadline passed, or the
            # schedule changed).
            self.buffered = [t for t in self.buffered if t != scheduled_time]

    @event("TickBuffered", topic="cronsource:TickBuffered/v1")
    def _tick_buffered(
        self, scheduled_time: datetime, at: datetime, behind: list[str], timestamp: datetime
    ) -> None:
        """A tick that came while `behind` ran waits in the buffer (buffered overlap): it is
        past the watermark, and decided later (fired from the buffer or skipped)."""
        self.decided_until = max(self.decided_until, scheduled_time)
        self.buffered = [*self.buffered, scheduled_time]

    @event("SpecUpdated", topic="cronsource:SpecUpdated/v1")
    def _spec_updated(
        self,
        spec: dict[str, Any],
        labels: dict[str, str],
        annotations: dict[str, str],
        generation: int,
        reset_baseline: bool,
        last_applied: dict[str, Any] | None,
        timestamp: datetime,
    ) -> None:
        self.spec = spec
        self.labels = labels
        self.annotations = annotations
        self.generation = generation
        if last_applied is not None:  # None: a writer that is not an apply keeps the record
            self.last_applied = last_applied
        self.spec_error = None
        self.when_error = None
        if reset_baseline:
            self.baseline = timestamp
            self.decided_until = max(self.decided_until, timestamp)

    @event("SpecRejected", topic="cronsource:SpecRejected/v1")
    def _spec_rejected(self, generation: int, message: str, timestamp: datetime) -> None:
        self.generation = generation
        self.spec_error = message

    @event("Suspended", topic="cronsource:Suspended/v1")
    def _suspended(self, at: datetime, by: str, note: str, timestamp: datetime) -> None:
        self.suspended = True

    @event("Resumed", topic="cronsource:Resumed/v1")
    def _resumed(self, at: datetime, by: str, note: str, timestamp: datetime) -> None:
        # Ticks before `at` that are still undecided are the suspension's: `tick` decides
        # them by the resume rule. (A resume written by an older cronsource decided them at
        # once, so there are none left then.)
        self.suspension_end = at
        self.suspension_reason = self._hold_reason()
        self.suspended = False
        self.stopped = False
        self.failure_pause = None
        self.failure_streak = []

    @event("RunCompleted", topic="cronsource:RunCompleted/v1")
    def _run_completed(
        self, workflow_name: str, phase: str, finished_at: datetime, timestamp: datetime
    ) -> None:
        self.active.pop(workflow_name, None)
        self.backfill_running.discard(workflow_name)
        self.finished.append((workflow_name, phase, finished_at))
        self.failure_streak = failure_streak(
            self.failure_streak,
            workflow_name,
            phase,
            pause_threshold(self.annotations.get(ANNOTATION_PAUSE_AFTER_FAILURES)),
        )
        if phase == "Succeeded":
            self.succeeded += 1
        else:
            self.failed += 1
        if self.last_finished_at is None or finished_at > self.last_finished_at:
            self.last_finished_at = finished_at

    @event("RunVanished", topic="cronsource:RunVanished/v1")
    def _run_vanished(self, workflow_name: str, at: datetime, timestamp: datetime) -> None:
        self.active.pop(workflow_name, None)
        self.backfill_running.discard(workflow_name)
        self.finished = [f for f in self.finished if f[0] != workflow_name]

    @event("RunRecovered", topic="cronsource:RunRecovered/v1")
    def _run_recovered(
        self,
        scheduled_time: datetime,
        workflow_name: str,
        trigger: str,
        created_at: datetime,
        reason: str,
        timestamp: datetime,
    ) -> None:
        self.active[workflow_name] = scheduled_time
        if trigger in ("schedule", "catchup", "buffer"):
            self.decided_until = max(self.decided_until, scheduled_time)
            if self.last_scheduled_time is None or scheduled_time > self.last_scheduled_time:
                self.last_scheduled_time = scheduled_time
            if self.buffered and scheduled_time in self.buffered:
                # The waiting tick's run exists already (its fire was lost): it is decided.
                self.buffered = [t for t in self.buffered if t != scheduled_time]
        elif trigger == "manual":
            self.manual_runs.add(workflow_name)
        elif trigger == "backfill":
            self.backfill_running.add(workflow_name)

    @event("SubmissionFailed", topic="cronsource:SubmissionFailed/v1")
    def _submission_failed(
        self,
        workflow_name: str,
        scheduled_time: datetime,
        message: str,
        transient: bool,
        timestamp: datetime,
        reason: str = SUBMISSION_REFUSED,
        attempts: int = 1,
        counted: bool = False,
    ) -> None:
        # v2: `reason` and `attempts`; v3: `counted` (upcast below).
        if not transient:
            self.active.pop(workflow_name, None)
            self.backfill_running.discard(workflow_name)
        if counted:
            # Argo's reportCronWorkflowError: a submission that failed is `failed` + 1, what a
            # stopStrategy on `cronworkflow.failed` reads.
            self.failed += 1
        # Every reason shows on the status until a later create succeeds: a refusal for
        # good too, as Argo's SubmissionError condition (operator.go reportCronWorkflowError;
        # it showed only as a Warning Event).
        if reason in (SUBMISSION_RETRYING, SUBMISSION_EXHAUSTED, SUBMISSION_REFUSED):
            self.submission_trouble = {
                "workflow": workflow_name,
                "message": message,
                "attempts": attempts,
                "reason": reason,
            }

    @event("SubmissionRecovered", topic="cronsource:SubmissionRecovered/v1")
    def _submission_recovered(self, workflow_name: str, attempts: int, timestamp: datetime) -> None:
        self.submission_trouble = None

    @event("RunNotStarted", topic="cronsource:RunNotStarted/v1")
    def _run_not_started(
        self,
        workflow_name: str,
        scheduled_time: datetime,
        reason: str,
        message: str,
        late_seconds: float,
        deadline_seconds: float,
        timestamp: datetime,
    ) -> None:
        self.active.pop(workflow_name, None)
        self.backfill_running.discard(workflow_name)
        # The latest run not started, for the status condition (projections/readmodel.py
        # `status_of`); plain strings, so a snapshot stores it as it is.
        self.not_started = {"workflow": workflow_name, "message": message}

    @event("HistoryPruned", topic="cronsource:HistoryPruned/v1")
    def _history_pruned(self, workflow_names: list[str], timestamp: datetime) -> None:
        gone = set(workflow_names)
        self.finished = [f for f in self.finished if f[0] not in gone]

    @event("BackfillQueued", topic="cronsource:BackfillQueued/v1")
    def _backfill_queued(
        self,
        ticks: list[datetime],
        parallel: int,
        overlap: str,
        scheduled_time: datetime,
        last_scheduled_time: datetime,
        count: int,
        timestamp: datetime,
    ) -> None:
        self.backfill_queue = sorted(set(self.backfill_queue) | set(ticks))
        self.backfill_parallel = parallel

    @event("BackfillCancelled", topic="cronsource:BackfillCancelled/v1")
    def _backfill_cancelled(self, count: int, timestamp: datetime) -> None:
        self.backfill_queue = []

    @event("StatusAdopted", topic="cronsource:StatusAdopted/v1")
    def _status_adopted(
        self,
        last_scheduled_time: datetime | None,
        succeeded: int,
        failed: int,
        active_workflows: list[str],
        active_scheduled_times: list[datetime],
        conditions: list[dict[str, str]],
        stopped: bool,
        baseline: datetime | None,
        decided_until: datetime | None,
        unreadable: list[str],
        at: datetime,
        timestamp: datetime,
    ) -> None:
        self.succeeded = succeeded
        self.failed = failed
        for name, t in zip(active_workflows, active_scheduled_times, strict=True):
            self.active[name] = t
        if last_scheduled_time is not None and (
            self.last_scheduled_time is None or last_scheduled_time > self.last_scheduled_time
        ):
            self.last_scheduled_time = last_scheduled_time
        if baseline is not None:  # `@every` counts its period from Argo's last tick
            self.baseline = baseline
        if decided_until is not None:  # the ticks Argo's controller decided (or a catch-up)
            self.decided_until = decided_until
        if stopped:
            self.stopped = True
        self.adopted = {
            "conditions": conditions,
            "lastScheduledTime": None
            if last_scheduled_time is None
            else last_scheduled_time.isoformat(),
        }

    @event("PausedAfterFailures", topic="cronsource:PausedAfterFailures/v1")
    def _paused_after_failures(
        self, workflows: list[str], threshold: int, at: datetime, timestamp: datetime
    ) -> None:
        self.failure_pause = list(workflows)

    @event("FailureCountReset", topic="cronsource:FailureCountReset/v1")
    def _failure_count_reset(
        self, at: datetime, by: str, note: str, unpaused: bool, timestamp: datetime
    ) -> None:
        self.failure_streak = []
        if self.failure_pause is None:
            return
        self.failure_pause = None
        if not (self.suspended or self.stopped or self.spec_error):
            # As a resume: the ticks of the pause are decided by the resume rule (`tick`).
            self.suspension_end = at
            self.suspension_reason = "PausedAfterFailures"

    @event("Stopped", topic="cronsource:Stopped/v1")
    def _stopped(
        self, reason: str, timestamp: datetime, values: dict[str, str] | None = None
    ) -> None:
        # v2: `values`, what the stop strategy read when it was met (upcast below).
        self.stopped = True

    @event("Deleted", topic="cronsource:CronWorkflowDeleted/v1")
    def _deleted(self, at: datetime, timestamp: datetime) -> None:
        self.deleted = True

    @event("VersionsLost", topic="cronsource:VersionsLost/v1")
    def _versions_lost(self, first: int, last: int, note: str, timestamp: datetime) -> None:
        """Versions `first`..`last` were lost from the log (a writer of an older cronsource
        saved on top of a log that had lost its tail); `cronsource check --repair` records
        each missing version with this event so the stream can be replayed again. Nothing of
        what they held can be known, so nothing changes."""


def _upcast_without_last_applied(state: dict[str, Any]) -> None:
    """v1 of these events predates the last-applied record: none was kept, so a three-way
    apply onto such a CronWorkflow falls back to two-way once, and says so."""
    state["last_applied"] = None


# Version 2 of the two events that carry a spec adds `last_applied` (the record of the apply
# that wrote it; None when the writer was not an apply). The stored topic stays the same, so
# every reader that selects events by topic (adapters/runtime/indexes.py's CREATED_TOPIC) still
# finds both versions; eventsourcing stores `class_version` in the event and upcasts v1 on load.
_SPEC_EVENTS: tuple[type[Any], ...] = (
    CronWorkflow.Created,
    CronWorkflow.SpecUpdated,  # type: ignore[attr-defined]
)
for _spec_event in _SPEC_EVENTS:
    _spec_event.class_version = 2
    _spec_event.upcast_v1_v2 = staticmethod(_upcast_without_last_applied)


def _upcast_skip_v1(state: dict[str, Any]) -> None:
    """v1 of ScheduleSkipped recorded neither what a `when` read nor which replica decided."""
    state["expression"] = ""
    state["values"] = None
    state["decided_by"] = None


def _upcast_fire_v1(state: dict[str, Any]) -> None:
    """v1 of ScheduleFired predates `decided_by`: which replica decided was not recorded, so
    it reads as None (the audit shows no replica)."""
    state["decided_by"] = None


def _upcast_stop_without_values(state: dict[str, Any]) -> None:
    state["values"] = None


def _upcast_submission_failed_v1(state: dict[str, Any]) -> None:
    """v1 of SubmissionFailed had no reason and no attempt count: what it recorded was one
    attempt, a refusal for good unless `transient` (which nothing but tests wrote)."""
    state["reason"] = SUBMISSION_RETRYING if state.get("transient") else SUBMISSION_REFUSED
    state["attempts"] = 1


def _upcast_submission_failed_v2(state: dict[str, Any]) -> None:
    """Before v3 a submission that failed for good was not counted in `failed`: a log keeps
    the counts it showed (and a snapshot taken from it agrees with its replay)."""
    state["counted"] = False


# Version 2 of the decision events: ScheduleFired and ScheduleSkipped add `decided_by`, the
# identity of the replica that decided (None for a manual run, a backfill, a command, or an
# event written before it); ScheduleSkipped also records the `when` expression and the values
# it read (a WhenFalse skip), and version 2 of Stopped the values its stop strategy read, so
# `why` and `history` show what the expression saw. Same topics; old events are upcast on load.
CronWorkflow.ScheduleFired.class_version = 2  # type: ignore[attr-defined]
CronWorkflow.ScheduleFired.upcast_v1_v2 = staticmethod(_upcast_fire_v1)  # type: ignore[attr-defined]
CronWorkflow.ScheduleSkipped.class_version = 2  # type: ignore[attr-defined]
CronWorkflow.ScheduleSkipped.upcast_v1_v2 = staticmethod(_upcast_skip_v1)  # type: ignore[attr-defined]
CronWorkflow.Stopped.class_version = 2  # type: ignore[attr-defined]
CronWorkflow.Stopped.upcast_v1_v2 = staticmethod(_upcast_stop_without_values)  # type: ignore[attr-defined]
# Version 2 of SubmissionFailed adds `reason` (refused, retried, retries exhausted) and
# `attempts` (how many creates failed); version 3 `counted`, whether it added 1 to `failed`.
# Same topic; older events are upcast on load.
CronWorkflow.SubmissionFailed.class_version = 3  # type: ignore[attr-defined]
CronWorkflow.SubmissionFailed.upcast_v1_v2 = staticmethod(_upcast_submission_failed_v1)  # type: ignore[attr-defined]
CronWorkflow.SubmissionFailed.upcast_v2_v3 = staticmethod(_upcast_submission_failed_v2)  # type: ignore[attr-defined]

# A snapshot is read by processes that never took one: its topic must resolve from the start
# (the library registers an explicit TOPIC only when a snapshot is first taken).
register_topic(CronWorkflowSnapshot.TOPIC, CronWorkflowSnapshot)

#: The event class `@event("ScheduleFired")` made for `_fired` (see `_record`).
_SCHEDULE_FIRED: type[Any] = CronWorkflow.ScheduleFired  # type: ignore[attr-defined]
#: The event `cronsource check --repair` writes at each version a stream lost.
VERSIONS_LOST: type[Any] = CronWorkflow.VersionsLost  # type: ignore[attr-defined]
