"""The read side: status, audit rows and due times derived from the event log.

One projection keeps all three views of a CronWorkflow, because they change together and must
agree: each event updates them in one transaction with its tracking position, so a view is
never ahead of or behind another (exactly once, docs/design.md section 5). The projection evolves
its own copy of each aggregate with the same event classes the domain uses, so the status it
shows is exactly the state the scheduler decides on, never a second reducer that could drift.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.persistence import Tracking

from cronsource.domain.calendars import is_calendar_event
from cronsource.domain.cronhash import resolved_schedules
from cronsource.domain.cronworkflow import (
    VERSIONS_LOST,
    CronWorkflow,
    decision_wait,
    workflow_name,
)
from cronsource.domain.schedule import ScheduleError
from cronsource.domain.service import event_type


def rfc3339(t: datetime | None) -> str | None:
    if t is None:
        return None
    if t.tzinfo is UTC:
        return _rfc3339_utc(t)
    # Not cached: in a zone with DST, the two 01:30 of a fall-back night compare equal.
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_exact(t: datetime) -> str:
    """`rfc3339`, with the fraction of a second where there is one: a time someone asked
    about, or an `@every` tick at .272 s, shown in whole seconds named another instant (a
    `why` at 10:00:00.5 answered "at 10:00:00Z: NotATick")."""
    shown = rfc3339(t)
    assert shown is not None
    if t.microsecond == 0:
        return shown
    return shown[:-1] + f".{t.microsecond:06d}".rstrip("0") + "Z"


@functools.lru_cache(maxsize=4096)
def _rfc3339_utc(t: datetime) -> str:
    """Cached: a burst renders one instant for every CronWorkflow of it."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class AuditRow:
    notification_id: int
    cron_id: str
    namespace: str
    name: str
    version: int
    type: str
    at: datetime
    scheduled_time: datetime | None
    reason: str | None
    workflow: str | None
    detail: dict[str, Any]

    def as_event(self) -> dict[str, Any]:
        """The shape of `events` in `simulate -o json` and `history -o json`."""
        out: dict[str, Any] = {
            "cronWorkflow": f"{self.namespace}/{self.name}",
            "version": self.version,
            "type": self.type,
            "at": rfc3339(self.at),
            "scheduledTime": rfc3339(self.scheduled_time),
            "workflow": self.workflow,
            "reason": self.reason,
        }
        out.update(self.detail)
        return out


@dataclass(frozen=True)
class StatusRow:
    """A CronWorkflow as the status view holds it: what the projection writes, and what every
    reader (CLI, HTTP API, metrics, status page, simulate, the Kubernetes status writer) gets."""

    cron_id: str
    namespace: str
    name: str
    deleted: bool
    next_due: datetime | None
    status: dict[str, Any]
    spec: dict[str, Any]
    metadata: dict[str, Any]
    version: int

    @property
    def next_tick(self) -> datetime | None:
        """The next tick to be decided: what `argo cron get` calls NextScheduledTime. It is
        `next_due` (the due index: when it will be decided) less the wait of Forbid with a
        starting deadline behind an active run (`decision_wait`); None while nothing can be
        decided (suspended, stopped, paused, deleted)."""
        if self.next_due is None:
            return None
        d = self.spec.get("startingDeadlineSeconds")
        wait = decision_wait(
            self.spec.get("concurrencyPolicy") or "Allow",
            timedelta(seconds=d) if isinstance(d, int | float) and d > 0 else None,
            bool(self.status.get("active")),
        )
        return self.next_due - wait

    def as_object(self) -> dict[str, Any]:
        """Argo's CronWorkflow object (the shape of `cronsource get -o json` and of the HTTP
        API), plus `metadata.resourceVersion` (the aggregate version `If-Match` takes),
        `status.nextScheduledTime` (the next tick, as `argo cron get` shows it) and
        `status.nextDecisionTime` (when the scheduler will decide it: later than the tick only
        for Forbid with a starting deadline behind an active run); both null while nothing
        can be decided. Neither is written to Kubernetes: Argo's status has no such field."""
        metadata = dict(self.metadata)
        metadata["resourceVersion"] = str(self.version)
        status = dict(self.status)
        status["nextScheduledTime"] = rfc3339(self.next_tick)
        status["nextDecisionTime"] = rfc3339(self.next_due)
        return {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": metadata,
            "spec": self.spec,
            "status": status,
        }

    def as_summary(self) -> dict[str, Any]:
        """The shape of `cronWorkflows` in `simulate -o json`: the labels Argo would show (the
        completed label of a stopped one, say) and the status."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "metadata": {"labels": self.metadata.get("labels") or {}},
            "status": self.status,
        }


#: What the view writes per event: its tracking, the status row (None: a later event of
#: the batch carries it) and its audit row (None: a calendar's event, which has none).
ViewItem = tuple[Tracking, StatusRow | None, AuditRow | None]


class ReadModelView(Protocol):
    """Where the views live; every write carries the tracking position (exactly once)."""

    def max_tracking_id(self, application_name: str) -> int | None: ...

    def write(self, tracking: Tracking, status: StatusRow, audit: AuditRow) -> None: ...

    def write_batch(self, items: Sequence[ViewItem]) -> int: ...


def status_of(agg: CronWorkflow) -> dict[str, Any]:
    """Argo's CronWorkflowStatus from aggregate state.

    `resolvedSchedules` (Argo PR #16604, "v4.2 and after") maps each schedule with hashed `H`
    items to what it resolves to for this CronWorkflow; derived from spec, namespace and name
    like the compiled schedule, and absent when no schedule has an `H` (Argo's `omitempty`).
    """
    conditions: list[dict[str, Any]] = []
    if agg.spec_error:
        conditions.append({"type": "SpecError", "status": "True", "message": agg.spec_error})
    elif getattr(agg, "when_error", None):
        conditions.append({"type": "SpecError", "status": "True", "message": agg.when_error})
    not_started = agg.not_started
    if (
        not_started is not None
        and agg.last_scheduled_time is not None
        and not_started["workflow"] == workflow_name(agg.name, agg.last_scheduled_time)
    ):
        # Argo's condition for a run its controller could not start; it holds until a later
        # tick fires, as Argo removes it at the next submission.
        conditions.append(
            {
                "type": "SubmissionError",
                "status": "True",
                "message": f"workflow {not_started['workflow']} not started:"
                f" {not_started['message']}",
            }
        )
    trouble = getattr(agg, "submission_trouble", None)
    if trouble is not None:
        shown = trouble_condition(trouble)
        if all(c["type"] != shown["type"] for c in conditions):  # not_started's goes first
            conditions.append(shown)
    if agg.failure_pause is not None:
        conditions.append(paused_condition(agg.failure_pause))
    conditions += _adopted_conditions(agg, {c["type"] for c in conditions})
    status: dict[str, Any] = {
        "active": [
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Workflow",
                "namespace": agg.namespace,
                "name": name,
            }
            for name in agg.active
        ],
        "lastScheduledTime": rfc3339(agg.last_scheduled_time),
        "conditions": conditions,
        "succeeded": agg.succeeded,
        "failed": agg.failed,
        "phase": "Stopped" if agg.stopped else "Active",
    }
    resolved = resolved_schedules(agg.spec_model.all_schedules, agg.namespace, agg.name)
    if resolved:
        status["resolvedSchedules"] = resolved
    return status


#: Argo's condition type for a submission that failed for a transient error (PR #16233, for
#: argoproj/argo-workflows#14880), with its message's words.
TRANSIENT_CONDITION = "TransientSubmissionError"


def trouble_condition(trouble: dict[str, Any]) -> dict[str, Any]:
    """The condition of a fire whose create failed, until the next create that succeeds
    (SubmissionRecovered): Argo's SubmissionError for a refusal for good ("Failed to submit
    Workflow: %v", operator.go `run`); TransientSubmissionError for transient errors, set at
    the first and kept when the fire is given up at its deadline."""
    if trouble.get("reason") == "SubmissionError":
        return {
            "type": "SubmissionError",
            "status": "True",
            "message": f"Failed to submit Workflow: {trouble['message']}",
        }
    attempts = int(trouble.get("attempts") or 1)
    if trouble.get("reason") == "SubmissionRetriesExhausted":
        state = "given up"
    else:
        state = "will retry"
    return {
        "type": TRANSIENT_CONDITION,
        "status": "True",
        "message": f"Failed to submit Workflow {trouble['workflow']} (transient, {state};"
        f" {attempts} attempt{'s' if attempts != 1 else ''}): {trouble['message']}",
    }


#: The condition of a CronWorkflow paused after failures (`cronsource.io/pause-after-failures`).
#: Argo's CronWorkflowStatus conditions are free-form `type`/`status`/`message` entries, so the
#: object stays valid for Argo's CRD and `kubectl get -o yaml` shows it; the phase stays
#: Active (Argo knows no other phase but Stopped, which is for good).
PAUSED_CONDITION = "PausedAfterFailures"
_PAUSED_MESSAGE = re.compile(r"paused after (\d+) consecutive failed runs: ([^;]*);")


def paused_condition(runs: Sequence[str]) -> dict[str, Any]:
    return {
        "type": PAUSED_CONDITION,
        "status": "True",
        "message": f"paused after {len(runs)} consecutive failed runs: {', '.join(runs)};"
        " no tick runs until it is resumed (cronsource resume)",
    }


def paused_runs(status: dict[str, Any]) -> list[str] | None:
    """The runs whose failures paused the CronWorkflow, read back from its condition (the
    one place the read model keeps them); None when it is not paused after failures."""
    for c in status.get("conditions") or []:
        if c.get("type") == PAUSED_CONDITION and c.get("status") == "True":
            m = _PAUSED_MESSAGE.match(str(c.get("message", "")))
            return m.group(2).split(", ") if m else []
    return None


def _adopted_conditions(agg: CronWorkflow, shown: set[str]) -> list[dict[str, Any]]:
    """The conditions Argo's controller had set when cronsource took the object over, shown
    until the first tick fires here, as Argo clears them at its next run (operator.go `run`
    removes SubmissionError); a condition of our own of the same type wins."""
    adopted = getattr(agg, "adopted", None)
    if not adopted or not adopted.get("conditions"):
        return []
    last = agg.last_scheduled_time
    if (None if last is None else last.isoformat()) != adopted.get("lastScheduledTime"):
        return []
    # Ours is derived from this stream's own state: one left on an object handed back to Argo
    # and taken over again says nothing of this stream. SpecError is not kept either: the spec
    # was admitted, and Argo's controller removes the condition as soon as the spec validates
    # (operator.go validateCronWorkflow), as it does the one written while it was invalid.
    shown = shown | {PAUSED_CONDITION, "SpecError"}
    return [dict(c) for c in adopted["conditions"] if c.get("type") not in shown]


#: The label Argo's cron controller puts on a CronWorkflow its stopStrategy stopped
#: (operator.go setAsCompleted; common.LabelKeyCronWorkflowCompleted).
LABEL_COMPLETED = "cronworkflows.argoproj.io/completed"


def labels_of(agg: CronWorkflow) -> dict[str, str]:
    """The CronWorkflow's labels as Argo shows them: with the completed label once stopped."""
    if not agg.stopped:
        return agg.labels
    return {**agg.labels, LABEL_COMPLETED: "true"}


def status_row(agg: CronWorkflow) -> StatusRow:
    meta = {
        "name": agg.name,
        "namespace": agg.namespace,
        "labels": labels_of(agg),
        "annotations": agg.annotations,
        "generation": agg.generation,
    }
    if agg.uid:
        meta["uid"] = agg.uid
    # Every Kubernetes object has it (kubectl's and Argo's AGE); the first event's time.
    meta["creationTimestamp"] = rfc3339(agg.created_on)
    spec = dict(agg.spec)
    spec["suspend"] = agg.suspended
    return StatusRow(
        cron_id=str(agg.id),
        namespace=agg.namespace,
        name=agg.name,
        deleted=agg.deleted,
        next_due=agg.next_due(),
        status=status_of(agg),
        spec=spec,
        metadata=meta,
        version=agg.version,
    )


_DETAIL_FIELDS = {
    "trigger": "trigger",
    "replaced": "replaced",
    "last_scheduled_time": "lastScheduledTime",
    "count": "count",
    "message": "message",
    "phase": "phase",
    "finished_at": "finishedAt",
    "by": "by",
    "note": "note",
    "workflow_names": "workflows",
    "generation": "generation",
    "transient": "transient",
    "attempts": "attempts",  # SubmissionFailed v2, SubmissionRecovered
    "overlap": "overlap",
    "parallel": "parallel",
    "created_at": "createdAt",
    "late_seconds": "lateSeconds",
    "deadline_seconds": "deadlineSeconds",
    "succeeded": "succeeded",
    "failed": "failed",
    "active_workflows": "active",
    "stopped": "stopped",
    "unreadable": "unreadable",
    "workflows": "workflows",
    "threshold": "threshold",
    "unpaused": "unpaused",
    # What a `when` (ScheduleSkipped WhenFalse) or stop strategy (Stopped) read.
    "expression": "expression",
    "values": "values",
    "behind": "behind",
    "decided_by": "decidedBy",  # the replica that decided (ScheduleFired/Skipped v2)
}


def _dst_of(agg: CronWorkflow, tick: datetime) -> dict[str, str] | None:
    """What DST did to a decided tick (domain DstShift), from the schedule as it was when the
    tick was decided: the projection's aggregate is at that event."""
    try:
        shift = agg.schedule.dst_shift(tick)
    except ScheduleError:  # pragma: no cover - a stored schedule compiled when it was admitted
        return None
    return None if shift is None else shift.as_dict()


def audit_row(ev: Any, agg: CronWorkflow, notification_id: int) -> AuditRow:
    d = ev.__dict__
    detail: dict[str, Any] = {}
    for key, out in _DETAIL_FIELDS.items():
        if key in d and d[key] not in (None, "", []):
            v = d[key]
            detail[out] = rfc3339(v) if isinstance(v, datetime) else v
    tick = d.get("scheduled_time")
    if (
        "scheduled_time" in d
        and isinstance(tick, datetime)
        and d.get("trigger") != "manual"
        and ("trigger" in d or "count" in d)  # a fire or a skip: a decided tick
    ):
        # Derived, not stored in the event: `history`, `why` and simulate say that this tick
        # was moved out of a DST gap or is the one run of a repeated wall time.
        dst = _dst_of(agg, tick)
        if dst is not None:
            detail["dst"] = dst
    return AuditRow(
        notification_id=notification_id,
        cron_id=str(agg.id),
        namespace=agg.namespace,
        name=agg.name,
        version=ev.originator_version,
        type=event_type(ev),
        at=ev.timestamp,
        scheduled_time=d.get("scheduled_time"),
        reason=d.get("reason"),
        workflow=d.get("workflow_name"),
        detail=detail,
    )


class AggregateFollower:
    """Evolves aggregates event by event, as the projections see them.

    Keeps evolved aggregates in a bounded cache. A stream's first event builds its aggregate
    from nothing; on a miss or a gap later in a stream (the projection restarted, or the cache
    evicted it) the stream is replayed up to the event's version from the store, so a restart
    re-derives the same state. `prefetch` does those replays for a whole batch in one query.
    """

    def __init__(
        self,
        load_at_version: Callable[[UUID, int], CronWorkflow],
        size: int = 20_000,
        load_many: Callable[[dict[UUID, int | None]], dict[UUID, CronWorkflow]] | None = None,
    ):
        self._load = load_at_version
        self._load_many = load_many
        self._cache: OrderedDict[UUID, CronWorkflow] = OrderedDict()
        self._size = size

    def prefetch(self, events: Sequence[Any]) -> None:
        """Load, in one go, every aggregate the batch would otherwise replay one by one."""
        if self._load_many is None:
            return
        seen: set[UUID] = set()
        need: dict[UUID, int | None] = {}
        for ev in events:
            cron_id, version = ev.originator_id, ev.originator_version
            if cron_id in seen or is_calendar_event(ev):
                continue
            seen.add(cron_id)
            agg = self._cache.get(cron_id)
            if version == 1 or (agg is not None and agg.version in (version - 1, version)):
                continue
            need[cron_id] = version
        if need:
            for cron_id, agg in self._load_many(need).items():
                self._remember(cron_id, agg)

    def follow(self, ev: Any) -> CronWorkflow:
        cron_id = ev.originator_id
        agg = self._cache.get(cron_id)
        if (
            isinstance(ev, VERSIONS_LOST)
            and agg is not None
            and agg.version > ev.originator_version
        ):
            # A hole filled in after the stream went on (`cronsource check --repair`): it
            # changes nothing, and the state to show is still the latest one.
            return agg
        if agg is not None and agg.version == ev.originator_version - 1:
            ev.mutate(agg)
        elif agg is None and ev.originator_version == 1:
            agg = ev.mutate(None)
        elif agg is None or agg.version != ev.originator_version:
            agg = self._load(cron_id, ev.originator_version)
        assert agg is not None
        self._remember(cron_id, agg)
        return agg

    def forget(self) -> None:
        """Drop every evolved aggregate: the next event of each stream replays it from the
        store (the log may have lost what they were built from)."""
        self._cache.clear()

    def _remember(self, cron_id: UUID, agg: CronWorkflow) -> None:
        self._cache[cron_id] = agg
        self._cache.move_to_end(cron_id)
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)


class ReadModelProjection:
    """Status + audit + due index, one transaction per event."""

    name = "readmodel"

    def __init__(self, view: ReadModelView, follower: AggregateFollower):
        self.view = view
        self.follower = follower

    def process_event(self, ev: Any, tracking: Tracking) -> None:
        self.process_batch([(ev, tracking)])

    def process_batch(self, batch: Sequence[tuple[Any, Tracking]]) -> int:
        """Several events in one view transaction: the position moves to the last of them.

        A CronWorkflow's status row is built once per batch, with its last event: the rows
        its earlier events would have written are overwritten in the same transaction anyway.
        """
        followed: list[tuple[Tracking, CronWorkflow | None, AuditRow | None]] = []
        last: dict[UUID, int] = {}
        self.follower.prefetch([ev for ev, _ in batch])
        for k, (ev, tracking) in enumerate(batch):
            if is_calendar_event(ev):
                # A calendar's change: no CronWorkflow row; the position still moves past it.
                followed.append((tracking, None, None))
                continue
            agg = self.follower.follow(ev)
            followed.append((tracking, agg, audit_row(ev, agg, tracking.notification_id)))
            last[agg.id] = k
        return self.view.write_batch(
            [
                (tracking, status_row(agg) if last[agg.id] == k else None, audit)
                if agg is not None
                else (tracking, None, None)
                for k, (tracking, agg, audit) in enumerate(followed)
            ]
        )
