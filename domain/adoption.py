"""Argo's CronWorkflowStatus, read for adoption: what cronsource takes over the first time it
takes an object that Argo's controller ran (docs/migration.md).

Argo keeps a CronWorkflow's counts and its last tick only in `.status`: `succeeded` and
`failed` (what a `stopStrategy` on `cronworkflow.failed` reads), `active` (what `Forbid`
waits for), `lastScheduledTime` (where catch-up starts) and `conditions`. A move that started
them from zero would restart a stop strategy silently and fire beside a run Argo started. The
status is the cluster's, not ours, so it is read field by field: a field that cannot be read
is named and left out, and the rest is still taken (a malformed `failed` must not cost the
`active` runs that `Forbid` waits for).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsource.domain.timestamps import TIME_MAX, TIME_MIN, TimestampError, parse_timestamp

#: Argo's annotation of the schedule its controller last ran (`CRON_TZ=<zone> ` before each
#: expression, joined by commas). When it is missing or names another schedule, Argo's own
#: catch-up (`shouldOutstandingWorkflowsBeRun`) runs nothing: the schedule changed since.
ANNOTATION_LAST_USED_SCHEDULE = "cronworkflows.argoproj.io/last-used-schedule"
#: Argo's annotation of the tick a child Workflow was fired for (RFC 3339).
ANNOTATION_SCHEDULED = "workflows.argoproj.io/scheduled-time"
#: The phases of a Workflow that has ended (Argo's `WorkflowPhase.Fulfilled`).
ENDED = ("Succeeded", "Failed", "Error")
#: How far ahead of the adopting clock a `lastScheduledTime` may be and still be a time Argo
#: fired: two hosts' clocks differ by far less. A later one would hold every tick until then
#: (ticks up to it count as decided), so it is named as unreadable instead.
MAX_CLOCK_SKEW = timedelta(minutes=5)
_UNIX_SUFFIX = re.compile(r"-(\d{9,11})$")


@dataclass(frozen=True)
class ArgoStatus:
    """What can be read of one object's status. `active` pairs each run's name with its
    scheduled time (from Argo's name `<cron>-<unix seconds>`, else the last scheduled time).
    `catch_up` says whether the ticks after `last_scheduled_time` are still the schedule's
    (Argo's last-used-schedule annotation names the current schedule). `unreadable` has one
    line per field left out, naming the field and its value."""

    last_scheduled_time: datetime | None = None
    succeeded: int = 0
    failed: int = 0
    active: tuple[tuple[str, datetime], ...] = ()
    conditions: tuple[Mapping[str, str], ...] = ()
    stopped: bool = False
    catch_up: bool = False
    unreadable: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to take: no controller ever wrote a status worth carrying over."""
        return self == ArgoStatus(catch_up=self.catch_up)


def schedule_string(spec: Mapping[str, Any]) -> str:
    """Argo's `GetScheduleWithTimezoneString`: what its last-used-schedule annotation holds."""
    schedules = spec.get("schedules")
    if not isinstance(schedules, list):
        legacy = spec.get("schedule")
        schedules = [legacy] if isinstance(legacy, str) and legacy else []
    zone = spec.get("timezone")
    prefix = f"CRON_TZ={zone} " if isinstance(zone, str) and zone else ""
    return ",".join(f"{prefix}{s}" for s in schedules if isinstance(s, str))


def _count(status: Mapping[str, Any], key: str, problems: list[str]) -> int:
    value = status.get(key)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    problems.append(f"status.{key}: {value!r} is not a count (a whole number >= 0)")
    return 0


def _active(
    status: Mapping[str, Any],
    namespace: str,
    fallback: datetime,
    problems: list[str],
) -> tuple[tuple[str, datetime], ...]:
    refs = status.get("active")
    if refs is None:
        return ()
    if not isinstance(refs, list):
        problems.append(f"status.active: {refs!r} is not a list of Workflow references")
        return ()
    out: dict[str, datetime] = {}
    for i, ref in enumerate(refs):
        where = f"status.active[{i}]"
        if not isinstance(ref, Mapping):
            problems.append(f"{where}: {ref!r} is not a Workflow reference")
            continue
        name = ref.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: {name!r} is not a Workflow name")
            continue
        ns = ref.get("namespace")
        if ns not in (None, "", namespace):
            problems.append(f"{where}.namespace: {ns!r} is not the CronWorkflow's ({namespace})")
            continue
        out[name] = _scheduled_time(name) or fallback
    return tuple(out.items())


def _scheduled_time(name: str) -> datetime | None:
    """The tick in Argo's child name `<cron>-<unix seconds>` (None for other names: a
    manual run submitted from the CronWorkflow)."""
    m = _UNIX_SUFFIX.search(name)
    if m is None:
        return None
    t = datetime.fromtimestamp(int(m.group(1)), UTC)
    return t if TIME_MIN <= t < TIME_MAX else None


def _conditions(status: Mapping[str, Any], problems: list[str]) -> tuple[Mapping[str, str], ...]:
    items = status.get("conditions")
    if items is None:
        return ()
    if not isinstance(items, list):
        problems.append(f"status.conditions: {items!r} is not a list of conditions")
        return ()
    out = []
    for i, c in enumerate(items):
        where = f"status.conditions[{i}]"
        if not isinstance(c, Mapping):
            problems.append(f"{where}: {c!r} is not a condition")
            continue
        kind, state, message = c.get("type"), c.get("status"), c.get("message", "")
        if not isinstance(kind, str) or not kind:
            problems.append(f"{where}.type: {kind!r} is not a condition type")
            continue
        if not isinstance(state, str) or not state:
            problems.append(f"{where}.status: {state!r} is not True, False or Unknown")
            continue
        out.append(
            {"type": kind, "status": state, "message": message if isinstance(message, str) else ""}
        )
    return tuple(out)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def read_argo_status(obj: Mapping[str, Any], namespace: str, at: datetime) -> ArgoStatus:
    """The status of a CronWorkflow object as the cluster holds it (`obj` is the whole
    object: the status, its spec and Argo's annotation are read), taken at `at`."""
    status = obj.get("status")
    if status is None:
        return ArgoStatus()
    if not isinstance(status, Mapping):
        return ArgoStatus(unreadable=(f"status: {status!r} is not an object",))
    problems: list[str] = []
    last: datetime | None = None
    raw = status.get("lastScheduledTime")
    if raw is not None:
        try:
            last = parse_timestamp(raw, "status.lastScheduledTime", naive_is_utc=True)
        except TimestampError as e:
            problems.append(str(e))
        else:
            if last > at + MAX_CLOCK_SKEW:
                problems.append(
                    f"status.lastScheduledTime: {raw!r} is later than now"
                    f" ({at.isoformat()}) by more than a clock can be off"
                )
                last = None
    phase = status.get("phase")
    if phase not in (None, "", "Active", "Stopped"):
        problems.append(f"status.phase: {phase!r} is not Active or Stopped")
    spec = _mapping(obj.get("spec"))
    annotations = _mapping(_mapping(obj.get("metadata")).get("annotations"))
    last_used = annotations.get(ANNOTATION_LAST_USED_SCHEDULE)
    return ArgoStatus(
        last_scheduled_time=last,
        succeeded=_count(status, "succeeded", problems),
        failed=_count(status, "failed", problems),
        active=_active(status, namespace, last or at, problems),
        conditions=_conditions(status, problems),
        stopped=phase == "Stopped",
        catch_up=last is not None and last_used == schedule_string(spec),
        unreadable=tuple(problems),
    )


def with_running_children(
    status: ArgoStatus, children: Iterable[Mapping[str, Any]], owner_uid: str, at: datetime
) -> tuple[ArgoStatus, tuple[str, ...]]:
    """The status as Argo's own controller reads it at its next reconciliation: `status.active`
    and every child Workflow of this CronWorkflow (`owner_uid` among its ownerReferences) that
    has not ended. Returns the status with those children added to `active`, and their names.

    Argo counts a run only while it is in `active`, and each `syncAll` pass adds every child
    that has not ended and is missing (operator.go `reconcileActiveWfs`): a pass that works
    from lists taken before a fire writes the new run out of `active`, and the next pass puts
    it back. An object taken between the two passes carries a running run that Argo's status
    does not name; taking the status alone, nobody would ever count it. `children` are whole
    Workflow objects (metadata and status) as the cluster holds them."""
    listed = {name for name, _ in status.active}
    added: dict[str, datetime] = {}
    for child in children:
        meta = _mapping(child.get("metadata"))
        name = meta.get("name")
        if not isinstance(name, str) or not name or name in listed or name in added:
            continue
        owners = meta.get("ownerReferences")
        if not isinstance(owners, list) or not any(
            isinstance(o, Mapping) and o.get("uid") == owner_uid for o in owners
        ):
            continue
        if _mapping(child.get("status")).get("phase") in ENDED:
            continue
        added[name] = (
            _annotated_time(_mapping(meta.get("annotations")).get(ANNOTATION_SCHEDULED))
            or _scheduled_time(name)
            or status.last_scheduled_time
            or at
        )
    if not added:
        return status, ()
    ordered = sorted(added.items(), key=lambda a: (a[1], a[0]))  # by tick, as Argo fired them
    return replace(status, active=(*status.active, *ordered)), tuple(n for n, _ in ordered)


def _annotated_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        t = parse_timestamp(text, "scheduled-time", naive_is_utc=True)
    except TimestampError:
        return None
    return t if TIME_MIN <= t < TIME_MAX else None
