"""The scenario file `simulate` reads: its schema (pydantic), its bounds, and the one error every
bad scenario becomes (a line naming the field and value).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from cronsource.adapters.entrypoints.simulate.target import target_error
from cronsource.domain.calendars import (
    ANNOTATION_CALENDARS,
    CalendarError,
    calendar_names,
    calendar_spec,
    is_calendar_document,
)
from cronsource.domain.durations import parse_duration
from cronsource.domain.manifest import ManifestError, parse_manifest
from cronsource.domain.schedule import (
    CompiledSchedule,
    ScheduleError,
    compile_schedule,
    needs_anchor,
    resolve_schedules,
)
from cronsource.domain.timestamps import SMALLEST_STEP, TimestampError, user_time
from cronsource.projections.readmodel import rfc3339


class ScenarioError(ValueError):
    pass


#: Most ticks a scenario may hold: every CronWorkflow's schedules from its apply to the end,
#: counted before it runs. The bound is on the work, not on the span: a leap-day schedule
#: over eight years is two ticks and runs; `* * * * *` to a year 2199 end (a typo for 2029)
#: is refused at once instead of running for hours.
MAX_TICKS = 1_000_000


#: Most simulated instants (a tick, the moments before it when the runtime warms and decides
#: in advance, a run ending, an action) before it stops with an error: about a million ticks.
MAX_STEPS = 3_000_000


def _aware(v: Any) -> Any:
    """A scenario time, read by the rule of every entrypoint (domain/timestamps.py
    `user_time`): RFC 3339, or a date alone, midnight UTC (a scenario holds many
    CronWorkflows, so no one zone is meant); the bounds hold (cron arithmetic near year
    9999 overflows)."""
    if isinstance(v, datetime):  # YAML reads an unquoted time as a datetime
        v = v.isoformat()
    try:
        return user_time(v, "time")
    except TimestampError as e:
        raise ValueError(e.reason) from None


class CompleteAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workflow: str
    phase: Literal["Succeeded", "Failed", "Error"] = "Succeeded"


class TargetFailsAction(BaseModel):
    """`targetFails: {for: 3m, error: 503, cronWorkflow: NAME}`: the target (a cluster's API
    server) refuses every create for `for` with `error` (default 503), of every CronWorkflow
    or of `cronWorkflow`'s (NAME or NAMESPACE/NAME) alone."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    for_: str = Field(alias="for")
    error: int | str = 503
    cron_workflow: str | None = Field(default=None, alias="cronWorkflow")

    @field_validator("for_")
    @classmethod
    def _duration(cls, v: str) -> str:
        parse_duration(v)
        return v

    @field_validator("error")
    @classmethod
    def _error(cls, v: int | str) -> int | str:
        target_error(v)
        return v

    @property
    def duration(self) -> timedelta:
        return parse_duration(self.for_)

    @property
    def cron(self) -> tuple[str, str] | None:
        """(namespace, name) of `cronWorkflow`, the namespace `default` when it names none."""
        return None if self.cron_workflow is None else cron_ref(self.cron_workflow)


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
    target_fails: TargetFailsAction | None = Field(default=None, alias="targetFails")

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
                "target_fails",
            )
            if getattr(self, k) is not None
        ]
        if len(kinds) != 1:
            raise ValueError(
                "an action needs exactly one of suspend, resume, apply, delete, outage, "
                f"complete, removeWorkflow, targetFails (got {len(kinds)})"
            )
        return self


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    start: datetime
    end: datetime
    replicas: int = Field(default=1, ge=1, le=16, strict=True)  # `true`, '3', 1.0 ran
    run_duration: str = Field(default="30s", alias="runDuration")
    run_phase: Literal["Succeeded", "Failed", "Error"] = Field(
        default="Succeeded", alias="runPhase"
    )
    cron_workflows: list[dict[str, Any]] = Field(default_factory=list, alias="cronWorkflows")
    actions: list[Action] = Field(default_factory=list)
    #: Also the Kubernetes Events `run --kube` would send (`simulate --kube-events`).
    kube_events: bool = Field(default=False, alias="kubeEvents", strict=True)
    #: How an error names the end: `end` in a scenario file, `--end` for `simulate -f`.
    _end_field: str = PrivateAttr(default="end")
    #: The ticks counted against MAX_TICKS before it runs (set by the check).
    _ticks: int = PrivateAttr(default=0)

    _times = field_validator("start", "end", mode="before")(_aware)

    @property
    def end_field(self) -> str:
        return self._end_field

    @property
    def ticks(self) -> int:
        """About how many ticks it holds (counted before it runs, at most MAX_TICKS)."""
        return self._ticks

    @property
    def cron_workflow_count(self) -> int:
        """The CronWorkflows it holds: those given and those its `apply` actions add (the
        progress line counted the first alone beside the ticks of both)."""
        docs = list(self.cron_workflows) + [a.apply for a in self.actions if a.apply]
        return len(
            {
                ((d.get("metadata") or {}).get("namespace") or "default", d["metadata"]["name"])
                for d in docs
                if not is_calendar_document(d)
            }
        )

    @field_validator("run_duration")
    @classmethod
    def _duration(cls, v: str) -> str:
        parse_duration(v)
        return v

    @model_validator(mode="after")
    def _ordered(self) -> Scenario:
        if self.end < self.start:
            raise ValueError("end must not be before start")
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
            msgs.append(f"{path or '<scenario>'}: {_message(err)}")
        raise ScenarioError("; ".join(msgs)) from None
    _actions_in_span(sc)
    calendars: set[tuple[str, str]] = set()
    documents = [(f"cronWorkflows[{i}]", m) for i, m in enumerate(sc.cron_workflows)]
    # The calendars among the first manifests are applied first; actions in time order.
    documents.sort(key=lambda d: not is_calendar_document(d[1]))
    documents += [
        (f"actions[{i}].apply", a.apply)
        for i, a in sorted(enumerate(sc.actions), key=lambda ia: (ia[1].at, ia[0]))
        if a.apply
    ]
    #: (namespace, name) of each CronWorkflow manifest, by its path in the scenario.
    identities: dict[str, tuple[str, str]] = {}
    for path, m in documents:
        if is_calendar_document(m):
            # A ConfigMap labelled cronsource.io/calendar: "true" among the manifests: a
            # calendar, applied like a CronWorkflow (at the start, or by its action).
            try:
                cal = calendar_spec(m)
            except CalendarError as e:
                raise ScenarioError(f"{path}.{e}") from None
            calendars.add((cal.namespace, cal.name))
            continue
        try:
            manifest = parse_manifest(m)
        except ManifestError as e:
            raise ScenarioError("; ".join(f"{path}.{p}" for p in e.problems)) from None
        ns = manifest.metadata.namespace
        identities[path] = (ns, manifest.metadata.name)
        for name in calendar_names(manifest.metadata.annotations):
            if (ns, name) not in calendars:
                raise ScenarioError(
                    f"{path}.metadata.annotations: {ANNOTATION_CALENDARS}: calendar {name!r}"
                    f" not found in namespace {ns} (no calendar ConfigMap of that name is"
                    " applied by then in the scenario)"
                )
    if not identities:
        # As `simulate -f` refuses a file of no documents and `kubectl apply` one of no
        # objects: a scenario that never applies a CronWorkflow printed two empty tables and
        # exited 0, which read as "nothing would run" when the manifests were simply missing.
        raise ScenarioError(
            "cronWorkflows: the scenario applies no CronWorkflow (neither in cronWorkflows"
            " nor by an apply action): nothing to simulate"
        )
    _actions_name_what_exists(sc, identities)
    _bound_ticks(sc)
    return sc


def _message(err: Any) -> str:
    """pydantic's message, with the value it refused as `apply` gives it (`(value: ...)`)
    where the message does not already show it: `runPhase: Input should be 'Succeeded',
    'Failed' or 'Error' (value: 'Running')`."""
    msg = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if isinstance(value, str | int | float | bool) and repr(value) not in msg:
        msg += f" (value: {value!r})"
    return msg


def _actions_in_span(sc: Scenario) -> None:
    """An action happens between start and end: one before the start was applied at the
    start but recorded at its own time (an audit that went back in time), one after the
    end never happened, silently. `--outage` and `--target-fails` refuse the same."""
    for i, a in enumerate(sc.actions):
        if not sc.start <= a.at <= sc.end:
            side = "before start" if a.at < sc.start else "after end"
            raise ScenarioError(
                f"actions[{i}].at: {rfc3339(a.at)} is {side} ({rfc3339(sc.start)}.."
                f"{rfc3339(sc.end)}): an action happens within the scenario"
            )


def cron_ref(ref: str) -> tuple[str, str]:
    """(namespace, name) of a CronWorkflow an action names (NAME or NAMESPACE/NAME): the
    namespace `default` when it names none."""
    ns, _, name = ref.rpartition("/")
    return ns or "default", name


def _actions_name_what_exists(sc: Scenario, identities: dict[str, tuple[str, str]]) -> None:
    """`suspend`, `resume` and `delete` name a CronWorkflow (NAME or NAMESPACE/NAME) that
    the scenario has by then: applied at the start or by an earlier action, and not deleted
    since. Found only at its instant, such a mistake ended the simulation half way with
    `NotFound` (exit 1) instead of naming the action. `identities`: each manifest's, by
    its path (`cronWorkflows[i]`, `actions[i].apply`), as `load_scenario` parsed them."""
    present = {
        identities[f"cronWorkflows[{i}]"]
        for i in range(len(sc.cron_workflows))
        if f"cronWorkflows[{i}]" in identities  # calendars are not CronWorkflows
    }
    anywhere = set(identities.values())
    for i, a in sorted(enumerate(sc.actions), key=lambda ia: (ia[1].at, ia[0])):
        if f"actions[{i}].apply" in identities:
            present.add(identities[f"actions[{i}].apply"])
            continue
        fails = a.target_fails.cron_workflow if a.target_fails is not None else None
        if fails is not None and cron_ref(fails) not in anywhere:
            # A fault scoped to a name the scenario never has made the scenario test
            # nothing, and said so nowhere. It may name one applied later in its window.
            ns, name = cron_ref(fails)
            raise ScenarioError(
                f"actions[{i}].targetFails.cronWorkflow: {fails!r}: no CronWorkflow"
                f" {ns}/{name} in the scenario"
            )
        for field, ref in (("suspend", a.suspend), ("resume", a.resume), ("delete", a.delete)):
            if ref is None:
                continue
            ns, name = cron_ref(ref)
            if ref.count("/") > 1 or not name:
                raise ScenarioError(f"actions[{i}].{field}: {ref!r} is not NAME or NAMESPACE/NAME")
            if (ns, name) not in present:
                raise ScenarioError(
                    f"actions[{i}].{field}: {ref!r}: no CronWorkflow {ns}/{name} in the"
                    f" scenario at {rfc3339(a.at)} (applied at the start or by an earlier"
                    " action, and not deleted)"
                )
            if field == "delete":
                present.discard((ns, name))


#: Ticks of a schedule counted one by one before the rest of its span is counted at their
#: pace (a calendar repeats; counting a million one by one took 20 s).
COUNT_EXACTLY = 2000


def _bound_ticks(sc: Scenario) -> None:
    """ScenarioError when the scenario holds more than MAX_TICKS ticks: each manifest's
    schedules from its apply to the end (suspends and deletes aside), counted once per
    distinct schedule and span. The count is kept (`Scenario.ticks`)."""
    applied = [(sc.start, m) for m in sc.cron_workflows if not is_calendar_document(m)]
    applied += [
        (a.at, a.apply)
        for a in sc.actions
        if a.apply is not None and not is_calendar_document(a.apply)
    ]
    counted: dict[tuple[Any, ...], int] = {}
    total = 0
    for at, manifest in applied:
        m = parse_manifest(manifest)
        expressions = resolve_schedules(m.spec.all_schedules, m.metadata.namespace, m.metadata.name)
        if not expressions or at > sc.end:
            continue
        key = (expressions, m.spec.timezone, at)
        if key not in counted:
            try:
                anchor = at if needs_anchor(expressions) else None
                schedule = compile_schedule(expressions, m.spec.timezone, anchor=anchor)
            except ScheduleError:
                continue  # recorded as a rejected spec when applied: it has no ticks
            counted[key] = _ticks_in(schedule, at, sc.end)
        total += counted[key]
        if total > MAX_TICKS:
            if sc.end_field == "end":
                raise ScenarioError(
                    f"end: the scenario holds more than {MAX_TICKS:,} ticks by"
                    f" {rfc3339(sc.end)}; shorten it or use fewer, less frequent schedules"
                )
            n = sc.cron_workflow_count
            raise ScenarioError(
                f"{sc.end_field}: {n:,} CronWorkflow(s) hold more than {MAX_TICKS:,} ticks by"
                f" {rfc3339(sc.end)}, simulate's bound on work (at most {MAX_TICKS:,});"
                " nothing was simulated: shorten the span or simulate fewer CronWorkflows"
            )
    sc._ticks = total


def _ticks_in(schedule: CompiledSchedule, at: datetime, end: datetime) -> int:
    """The ticks in [at, end]: the first COUNT_EXACTLY one by one, the rest at their pace."""
    n = 0
    for tick in schedule.ticks_between(at - SMALLEST_STEP, end):
        n += 1
        if n >= COUNT_EXACTLY and tick > at:
            return math.ceil(n * ((end - at) / (tick - at)))
    return n


def from_manifests(
    manifests: list[dict[str, Any]],
    *,
    start: datetime,
    end: datetime,
    outages: list[tuple[datetime, datetime]],
    run_duration: str = "30s",
    run_phase: str = "Succeeded",
    target_faults: Sequence[tuple[datetime, datetime, str]] = (),
) -> Scenario:
    """The scenario `simulate -f` runs: plain manifests, all applied at `start`, an outage
    action per `--outage A..B` and a targetFails action per `--target-fails A..B[:ERROR]`.
    The caller has admitted the manifests and checked the flags; the tick bound is checked
    here as for a file, naming `--end`."""

    def span(a: datetime, b: datetime) -> str:
        return f"{(b - a) // timedelta(microseconds=1)}us"

    actions: list[dict[str, Any]] = [{"at": a, "outage": span(a, b)} for a, b in outages]
    actions += [
        {"at": a, "targetFails": {"for": span(a, b), "error": error}}
        for a, b, error in target_faults
    ]
    try:
        sc = Scenario.model_validate(
            {
                "start": start,
                "end": end,
                "runDuration": run_duration,
                "runPhase": run_phase,
                "cronWorkflows": manifests,
                "actions": actions,
            }
        )
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ScenarioError(f"{where}: {str(err['msg']).removeprefix('Value error, ')}") from None
    sc._end_field = "--end"
    _bound_ticks(sc)
    return sc
