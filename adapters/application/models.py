"""The models of what the facade answers, one set for every edge: the HTTP API's request and
response bodies (routes name them as `response_model`, so FastAPI validates what a handler
returns against them and the OpenAPI document shows them) and the results of the Python
library and its HTTP client, so a value round-trips between them.

Field names are the JSON names clients see (camelCase, as Argo and Kubernetes write them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from cronsource.adapters.application.inputs import (
    MAX_NAME,
    MAX_NOTE,
    MAX_PARALLEL,
    FieldError,
    parse_time,
)
from cronsource.adapters.application.statuspage import OVERDUE_LISTED
from cronsource.domain.backfill import MAX_BACKFILL_TICKS


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CronWorkflowStatus(BaseModel):
    """Argo's CronWorkflowStatus (active, lastScheduledTime, conditions, succeeded, failed,
    phase) and `nextScheduledTime` (cronsource extension); the fields named here are those
    whose shape a client may rely on beyond that."""

    model_config = ConfigDict(extra="allow")
    # The status view always writes these (projections/readmodel.py), so naming them changes
    # no answer; it types them for clients.
    active: list[dict[str, Any]] = Field(default_factory=list, description="Runs not finished")
    lastScheduledTime: str | None = Field(default=None, description="RFC 3339, the last fire")
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    succeeded: int = 0
    failed: int = 0
    phase: str = Field(default="Active", description="Active, or Stopped")
    nextScheduledTime: str | None = Field(
        default=None,
        description="RFC 3339, the next tick, as `argo cron get` shows NextScheduledTime"
        " (cronsource extension: Argo's status has no such field); null while nothing can be"
        " decided",
    )
    nextDecisionTime: str | None = Field(
        default=None,
        description="RFC 3339, when the scheduler will decide the next tick (cronsource"
        " extension): the tick itself, or later for Forbid with a starting deadline while a"
        " run is active (it waits for the run up to the deadline); null while nothing can be"
        " decided",
    )
    resolvedSchedules: dict[str, str] | None = Field(
        default=None,
        # Absent rather than null, as Argo's `omitempty` leaves it.
        exclude_if=lambda v: v is None,
        description="Each schedule with hashed `H` items mapped to what it resolves to for this"
        " CronWorkflow (Argo PR #16604, v4.2 and after); absent when no schedule has an `H`.",
        examples=[{"H H * * *": "9 6 * * *"}],
    )


class CronWorkflowObject(BaseModel):
    """A CronWorkflow in Argo's shape; `metadata.resourceVersion` is the aggregate version,
    `status.nextScheduledTime` the next tick and `status.nextDecisionTime` when it will be
    decided (cronsource extensions)."""

    model_config = ConfigDict(extra="allow")
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]
    status: CronWorkflowStatus


class CronWorkflowList(BaseModel):
    apiVersion: str = "argoproj.io/v1alpha1"
    kind: str = "CronWorkflowList"
    items: list[CronWorkflowObject]


class Event(BaseModel):
    """One event of the audit log, as `cronsource history -o json` prints it, with its log
    `position`; type-specific fields (trigger, count, lastScheduledTime, message, phase, by,
    note, ...) follow."""

    model_config = ConfigDict(extra="allow")
    position: int
    cronWorkflow: str
    version: int
    type: str
    at: str
    scheduledTime: str | None = None
    workflow: str | None = None
    reason: str | None = None


class EventList(BaseModel):
    items: list[Event]
    nextAfter: int | None = Field(
        description="Pass as `after` for the next page; null when this page is the last"
    )


class DstNote(BaseModel):
    """What DST did to a tick (domain.schedule.DstShift): `gap`, moved out of a wall time
    the zone skips that day; `fold`, the one run of a wall time that occurs twice."""

    kind: str = Field(description="gap or fold", examples=["gap"])
    wall: str = Field(description="The wall-clock slot the schedule names", examples=["02:30"])
    date: str = Field(examples=["2027-03-14"])
    zone: str = Field(examples=["America/New_York"])
    note: str = Field(examples=["02:30 does not exist on 2027-03-14"])


class ExcludedNote(BaseModel):
    """Why a listed tick will not run: a calendar (or `cronsource.io/exclude-dates`) names
    its date, as of that source's version now; a later change is seen when it is decided."""

    reason: str = Field(
        description="Excluded, or SpecError when a named calendar does not exist",
        examples=["Excluded"],
    )
    message: str = Field(examples=["excluded by calendar holidays-us (version 3): 2026-12-25"])
    calendar: str | None = Field(
        default=None,
        description="The calendar's name, or cronsource.io/exclude-dates",
        examples=["holidays-us"],
    )
    version: str | None = Field(default=None, examples=["3"])
    date: str | None = Field(default=None, description="The tick's date in the CronWorkflow's zone")


class Decision(BaseModel):
    at: str
    outcome: str = Field(
        description="Fired, NotStarted (fired, its Workflow not created by its starting"
        " deadline), SubmissionFailed (fired, its Workflow refused, or its creates failing"
        " with transient errors until its deadline), Skipped, Pending, NotScheduled,"
        " NotATick, Unknown, or Removed (before the window `run --retain` keeps)"
    )
    reason: str | None = None
    explanation: str
    decisions: list[Event]
    nextTick: str | None = None
    dst: DstNote | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Present when DST moved the tick out of a gap (a time asked inside the"
        " gap is answered for that tick) or folded a repeated hour",
    )
    excluded: ExcludedNote | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Present when the tick is not decided yet and a calendar excludes it now",
    )


class CalendarObject(BaseModel):
    """A calendar (a ConfigMap labelled cronsource.io/calendar) at its current version."""

    namespace: str
    name: str
    version: int = Field(description="The calendar stream's version: what skips name")
    deleted: bool
    dates: str
    rrule: str
    outcome: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="created, updated or unchanged (PUT only)",
    )


class FireTime(BaseModel):
    local: str
    utc: str
    dst: DstNote | None = Field(
        default=None,
        # Absent rather than null: only a tick DST moved or folded has one.
        exclude_if=lambda v: v is None,
        description="Present when DST moved this tick out of a gap or folded a repeated hour",
    )
    excluded: ExcludedNote | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Present when a calendar excludes this tick: it is listed, and skipped",
    )


class NextTimes(BaseModel):
    timezone: str
    items: list[FireTime]
    heldBy: str | None = Field(
        default=None,
        description="Why none of these runs until a resume: Suspended, Stopped,"
        " PausedAfterFailures or SpecError; null while the CronWorkflow is live",
    )


class SuspendRequest(_Model):
    by: str = Field(default="api", max_length=MAX_NAME)
    note: str = Field(default="", max_length=MAX_NOTE)


class TriggerRequest(_Model):
    requestId: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME,
        description="Idempotency key: a retried request with the same key starts no second run",
    )


class Triggered(BaseModel):
    workflow: str
    requestId: str
    triggered: bool = Field(description="false when this request id already ran")


class BackfillRequest(_Model):
    start: str = Field(
        description="RFC 3339; ticks at or after it", examples=["2026-05-04T00:00:00Z"]
    )
    end: str = Field(
        description="RFC 3339; ticks at or before it", examples=["2026-05-04T06:00:00Z"]
    )
    # Strict: pydantic's lax bool took "no" for false, and ran a backfill that was meant
    # to be a dry run.
    dryRun: StrictBool = False
    overlap: Literal["Allow", "Forbid", "Replace", "Queue"] | None = Field(
        default=None,
        description="How backfill runs overlap; default the CronWorkflow's concurrencyPolicy."
        " Queue runs them one after another",
    )
    parallel: int | None = Field(
        default=None, ge=1, le=MAX_PARALLEL, description="Allow/Queue: at most this many at once"
    )
    maxTicks: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BACKFILL_TICKS,
        description="Refuse a range with more ticks than this (default 10,000, at most 100,000)",
    )

    @field_validator("start", "end")
    @classmethod
    def _rfc3339(cls, v: str) -> str:
        try:
            parse_time(v, "time")
        except FieldError as e:
            raise ValueError(e.message) from None
        return v


class BackfillItem(BaseModel):
    scheduledTime: str
    workflow: str
    action: str = Field(description="fire, queue or skip (dry run: would fire, would queue)")


class BackfillResult(BaseModel):
    dryRun: bool
    overlap: str
    parallel: int | None
    ticks: int = Field(description="Ticks of the schedule in the range, up to the last decided")
    count: int = Field(description="Runs this backfill starts, now or queued")
    fired: int
    queued: int
    skipped: int
    skipReason: str | None
    alreadyFired: int = Field(description="Ticks in the range that ran before")
    alreadyQueued: int = Field(
        description="Ticks in the range an earlier backfill queued and has not started yet"
    )
    items: list[BackfillItem]


class Deleted(BaseModel):
    kind: str = "Status"
    status: str = "Success"
    namespace: str
    name: str
    version: int


class TimelineRow(BaseModel):
    namespace: str
    name: str
    cells: list[dict[str, Any]] = Field(
        description="One per bucket, oldest first: {fired, failed, skipped: {reason: n}},"
        " zero counts left out"
    )


class Timeline(BaseModel):
    since: str
    until: str
    bucketSeconds: int
    items: list[TimelineRow]


class Health(BaseModel):
    status: str
    lag: dict[str, int] | None = None
    maxLag: int | None = None
    error: str | None = None


# ---------------------------------------------------------------------- the status page


class Overdue(BaseModel):
    namespace: str
    name: str
    dueAt: str


class ReplicaPresence(BaseModel):
    replica: str = Field(description="Its identity: the pod name, CRONSOURCE_REPLICA or host:pid")
    shards: int = Field(description="Shards it owns (of 64 on PostgreSQL)")
    projector: bool = Field(description="Whether it runs the projections")
    live: bool = Field(description="false: its lease lapsed (frozen or cut off)")


class SchedulerHealth(BaseModel):
    now: str = Field(description="The server's clock (the page measures relative times by it)")
    lateToleranceSeconds: float
    stale: bool = Field(
        description="true when some tick has been due for longer than the late tolerance"
        " and no scheduler has decided it"
    )
    overdueCount: int
    overdue: list[Overdue] = Field(description=f"The {OVERDUE_LISTED} longest overdue")
    lastDecisionAt: str | None = Field(
        description="When a scheduler last recorded a decision (fire or skip)"
    )
    schedulers: int | None = Field(
        description="`cronsource run` processes holding the store: replicas holding their"
        " member lock on PostgreSQL, 1 or 0 on SQLite (the projector file lock); null for"
        " memory:"
    )
    replicas: list[ReplicaPresence] = Field(
        default_factory=list,
        description="The `cronsource run` replicas holding the store (`cronsource replicas`)",
    )


class ChildWorkflow(BaseModel):
    name: str
    scheduledTime: str | None
    createdAt: str
    trigger: str
    phase: str = Field(
        description="Succeeded, Failed, Error (from the run's end), Active (not finished),"
        " SubmissionFailed, NotStarted (not created by its starting deadline) or Vanished"
    )
    finishedAt: str | None = None
    message: str | None = None


class ChildWorkflowList(BaseModel):
    items: list[ChildWorkflow] = Field(description="Newest first")
