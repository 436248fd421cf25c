"""The Argo `CronWorkflow` manifest (argoproj.io/v1alpha1) as cronsource admits it.

Admission is where bad input stops: everything the scheduler later relies on (cron syntax,
time zone, the child-name length, the `cronsource.io/*` annotations) is checked here, so a
stored spec is always one the engine can run. Errors carry the camelCase path of the field,
because that is what the user wrote in YAML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from cronsource.domain.calendars import (
    ANNOTATION_CALENDARS,
    ANNOTATION_EXCLUDE_DATES,
    calendar_names_problem,
    exclude_dates_problem,
)
from cronsource.domain.durations import parse_duration
from cronsource.domain.expression_budget import admission_problem
from cronsource.domain.expressions import ExpressionError
from cronsource.domain.expressions import validate_expression as validate_condition
from cronsource.domain.expressions.names import unknown_names
from cronsource.domain.objectlimits import (
    annotation_problems,
    label_problem,
    label_problems,
    object_size_problem,
    schedule_problem,
    subdomain_problem,
)
from cronsource.domain.schedule import (
    ScheduleError,
    schedule_zone,
    validate_expression,
    validate_resolved,
    validate_timezone,
    zone_conflict,
)
from cronsource.domain.whentemplate import unknown_when_names, validate_when
from cronsource.domain.workflowspec import json_type, workflow_spec_problem

#: Finished Workflows kept when the history limits are unset (or negative): Argo's defaults.
KEPT_SUCCEEDED = 3
KEPT_FAILED = 1
#: Longest CronWorkflow name: `<name>-<10-digit unix seconds>` must fit Kubernetes' 63.
MAX_NAME_LENGTH = 52

ANNOTATION_DST_POLICY = "cronsource.io/dst-policy"
ANNOTATION_CATCHUP_POLICY = "cronsource.io/catchup-policy"
ANNOTATION_MAX_CATCHUP = "cronsource.io/max-catchup"
ANNOTATION_RUN_DURATION = "cronsource.io/simulate-run-duration"
ANNOTATION_RUN_PHASE = "cronsource.io/simulate-run-phase"
#: Pause after this many consecutive runs ended Failed or Error (a circuit breaker; `resume`
#: clears it). docs/user-guide.md, "Pause after failures".
ANNOTATION_PAUSE_AFTER_FAILURES = "cronsource.io/pause-after-failures"
#: "true": a change of the spec clears that pause and the count, as `resume` does.
ANNOTATION_PAUSE_RESET_ON_SPEC_CHANGE = "cronsource.io/pause-reset-on-spec-change"
#: The largest threshold: the aggregate keeps the names of that many failed runs, and a
#: breaker that waits for more consecutive failures than this is a typo, not a policy.
MAX_PAUSE_AFTER_FAILURES = 1000
#: Buffered overlap (Temporal's BufferOne / BufferAll), with `concurrencyPolicy: Forbid` only:
#: a tick that comes while a run is active waits and starts when that run ends, where Forbid
#: alone drops it. docs/user-guide.md, "Buffered overlap".
ANNOTATION_OVERLAP = "cronsource.io/overlap"
OVERLAP_MODES = ("BufferOne", "BufferAll")
#: How many ticks BufferAll keeps waiting at most; later ones are skipped (BufferFull).
ANNOTATION_MAX_BUFFER = "cronsource.io/max-buffer"
DEFAULT_MAX_BUFFER = 100
#: The largest cap: each waiting tick is state the aggregate keeps and snapshots.
MAX_MAX_BUFFER = 1000
DEFAULT_MAX_CATCHUP = 10

RunPhase = Literal["Succeeded", "Failed", "Error"]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        """An explicit null (`labels:` with nothing after it, `timezone: null`) reads as an
        unset field, as Go's decoder gives Argo the zero value."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


#: The fields of Kubernetes' metav1.ObjectMeta. A cluster's objects carry more of them than we
#: read (managedFields, creationTimestamp...), so they are kept; any other key is a typo that
#: Argo's strict decoding refuses (`metadata.nmae`, `workflowMetadata.lables`).
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


class _OpenMeta(_Model):
    """ObjectMeta as Kubernetes decodes it: its own fields only, those we do not read kept."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )

    @model_validator(mode="before")
    @classmethod
    def _only_object_meta_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(k) for k in data if k not in OBJECT_META_FIELDS)
            if unknown:
                raise ValueError(f"unknown field {unknown[0]!r} (not a field of ObjectMeta)")
        return data


class ObjectMeta(_OpenMeta):
    """Kubernetes metadata."""

    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name_fits_child_names(cls, v: str) -> str:
        if len(v) > MAX_NAME_LENGTH:
            raise ValueError(
                f"name is {len(v)} characters, at most {MAX_NAME_LENGTH} are allowed "
                "(the child Workflow name adds '-' and 10 digits and must fit 63)"
            )
        if (problem := subdomain_problem(v)) is not None:
            raise ValueError(problem)
        return v

    @field_validator("namespace", mode="before")
    @classmethod
    def _empty_namespace_is_unset(cls, v: Any) -> Any:
        # As kubectl and the API server read it: the default namespace.
        return "default" if v == "" or v is None else v

    @field_validator("namespace")
    @classmethod
    def _namespace_is_dns_label(cls, v: str) -> str:
        if (problem := label_problem(v)) is not None:
            raise ValueError(problem)
        return v

    @field_validator("labels")
    @classmethod
    def _labels_as_kubernetes_checks_them(cls, v: dict[str, str]) -> dict[str, str]:
        if problems := label_problems(v):
            raise ValueError("; ".join(problems))
        return v

    @field_validator("annotations")
    @classmethod
    def _cronsource_annotations(cls, v: dict[str, str]) -> dict[str, str]:
        if problems := annotation_problems(v):
            raise ValueError("; ".join(problems))
        if (p := v.get(ANNOTATION_DST_POLICY)) is not None and p not in ("once", "argo"):
            raise ValueError(f"{ANNOTATION_DST_POLICY} must be 'once' or 'argo'")
        if (p := v.get(ANNOTATION_CATCHUP_POLICY)) is not None and p not in ("Latest", "All"):
            raise ValueError(f"{ANNOTATION_CATCHUP_POLICY} must be 'Latest' or 'All'")
        if (k := v.get(ANNOTATION_MAX_CATCHUP)) is not None and (not k.isdigit() or int(k) < 1):
            raise ValueError(f"{ANNOTATION_MAX_CATCHUP} must be a whole number >= 1")
        if (d := v.get(ANNOTATION_RUN_DURATION)) is not None:
            try:
                parse_duration(d)
            except ValueError as e:  # which annotation, as the run phase's message says
                raise ValueError(f"{ANNOTATION_RUN_DURATION}: {e}") from None
        if (ph := v.get(ANNOTATION_RUN_PHASE)) is not None and ph not in (
            "Succeeded",
            "Failed",
            "Error",
        ):
            raise ValueError(f"{ANNOTATION_RUN_PHASE} must be Succeeded, Failed or Error")
        if (n := v.get(ANNOTATION_PAUSE_AFTER_FAILURES)) is not None and (
            pause_threshold(n) is None
        ):
            raise ValueError(
                f"{ANNOTATION_PAUSE_AFTER_FAILURES} must be a whole number from 1 to"
                f" {MAX_PAUSE_AFTER_FAILURES} (value: {_shown_value(n)})"
            )
        if (r := v.get(ANNOTATION_PAUSE_RESET_ON_SPEC_CHANGE)) is not None and r not in (
            "true",
            "false",
        ):
            raise ValueError(
                f"{ANNOTATION_PAUSE_RESET_ON_SPEC_CHANGE} must be 'true' or 'false'"
                f" (value: {_shown_value(r)})"
            )
        if (o := v.get(ANNOTATION_OVERLAP)) is not None and o not in OVERLAP_MODES:
            raise ValueError(
                f"{ANNOTATION_OVERLAP} must be BufferOne or BufferAll (value: {_shown_value(o)})"
            )
        if (x := v.get(ANNOTATION_EXCLUDE_DATES)) is not None and (
            problem := exclude_dates_problem(x)
        ):
            raise ValueError(problem)
        if (c := v.get(ANNOTATION_CALENDARS)) is not None and (
            problem := calendar_names_problem(c)
        ):
            raise ValueError(problem)
        if (b := v.get(ANNOTATION_MAX_BUFFER)) is not None and buffer_cap(b) is None:
            raise ValueError(
                f"{ANNOTATION_MAX_BUFFER} must be a whole number from 1 to {MAX_MAX_BUFFER}"
                f" (value: {_shown_value(b)})"
            )
        return v


def _shown_value(v: str) -> str:
    """An annotation's value for a message: quoted, and never echoed in full (256 KiB may
    reach us)."""
    shown = repr(v)
    return shown if len(shown) <= 80 else shown[:70] + "...'"


_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")


def pause_threshold(value: str | None) -> int | None:
    """`cronsource.io/pause-after-failures` as a number, or None when unset or not one
    admission takes (a stored value an older cronsource admitted unchecked is no breaker).
    ASCII digits only: `str.isdigit` takes `²`, which `int` refuses."""
    if value is None or not _WHOLE_NUMBER.fullmatch(value):
        return None
    n = int(value)
    return n if 1 <= n <= MAX_PAUSE_AFTER_FAILURES else None


def buffer_cap(value: str | None) -> int | None:
    """`cronsource.io/max-buffer` as a number from 1 to MAX_MAX_BUFFER, or None when it is
    not one admission takes."""
    if value is None or not _WHOLE_NUMBER.fullmatch(value):
        return None
    n = int(value)
    return n if 1 <= n <= MAX_MAX_BUFFER else None


class StopStrategy(_Model):
    expression: str | None = None
    condition: str | None = None  # the pre-3.6 Argo name of the same field

    @model_validator(mode="after")
    def _one_expression(self) -> StopStrategy:
        src = self.source
        if src is None:
            raise ValueError("stopStrategy needs an expression")
        try:
            validate_condition(src)
        except ExpressionError as e:
            raise ValueError(str(e)) from None
        return self

    @property
    def source(self) -> str | None:
        return self.expression if self.expression is not None else self.condition


class WorkflowMetadata(_OpenMeta):
    """Argo's `workflowMetadata` is an ObjectMeta too (labels, annotations, finalizers...)."""

    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


def _cron_expression(v: str) -> str:
    if (too_long := schedule_problem(v)) is not None:
        raise ValueError(too_long)
    try:
        validate_expression(v)
    except ScheduleError as e:
        raise ValueError(str(e)) from None
    return v


#: One cron expression, checked on its own so an error names its index (`spec.schedules[1]`).
CronExpression = Annotated[str, AfterValidator(_cron_expression)]


class CronWorkflowSpec(_Model):
    """Argo's CronWorkflowSpec; closed, so a typo is an error rather than a silent no-op."""

    schedules: list[CronExpression] | None = None
    schedule: str | None = None
    timezone: str = ""
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = "Allow"
    # Strict, as the API server decodes them: "yes" or "30" in a bool or int field is an
    # error there, never coerced to true or 30.
    suspend: bool = Field(default=False, strict=True)
    # Bounded as Kubernetes' int32 field is, so deadline arithmetic can never overflow.
    starting_deadline_seconds: int | None = Field(default=None, ge=0, le=2**31 - 1, strict=True)
    # int32 in Argo's CRD, as the deadline is.
    successful_jobs_history_limit: int | None = Field(default=None, le=2**31 - 1, strict=True)
    failed_jobs_history_limit: int | None = Field(default=None, le=2**31 - 1, strict=True)
    workflow_metadata: WorkflowMetadata | None = None
    # Validated even when absent: Argo's CRD requires it (see `_argo_validates_workflow_spec`).
    workflow_spec: dict[str, Any] = Field(default_factory=dict, validate_default=True)
    when: str | None = None
    stop_strategy: StopStrategy | None = None

    @property
    def kept_succeeded(self) -> int:
        """Finished successful Workflows kept: Argo's enforceHistoryLimit keeps its default
        (3) for an unset or negative limit, and its CRD has no minimum, so a negative one is
        stored as written (`get -o yaml` shows what was applied) and read as unset."""
        return _limit(self.successful_jobs_history_limit, KEPT_SUCCEEDED)

    @property
    def kept_failed(self) -> int:
        """Finished failed Workflows kept: 1 for an unset or negative limit, as Argo."""
        return _limit(self.failed_jobs_history_limit, KEPT_FAILED)

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, v: str | None) -> str | None:
        return _cron_expression(v) if v is not None and v.strip() else v

    @field_validator("workflow_spec", mode="before")
    @classmethod
    def _argo_validates_workflow_spec(cls, v: object, info: ValidationInfo) -> object:
        if info.context and info.context.get("stored"):
            return v  # admitted when it was stored; an older cronsource checked less
        meta = info.data.get("workflow_metadata")
        # Argo decodes the whole object, then validates the schedules before the workflowSpec:
        # with no schedule, only the decoding of workflowSpec may be the first problem.
        scheduled = info.data.get("schedules") or (info.data.get("schedule") or "").strip()
        problem = workflow_spec_problem(
            {} if v is None else v,
            labels=set(meta.labels) if meta else set(),
            annotations=set(meta.annotations) if meta else set(),
            decode_only=not scheduled,
        )
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, v: str) -> str:
        try:
            validate_timezone(v)
        except ScheduleError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("when")
    @classmethod
    def _valid_when(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                validate_when(v)
            except ExpressionError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("concurrency_policy", mode="before")
    @classmethod
    def _empty_policy_is_allow(cls, v: object) -> object:
        # Argo's validate and operator treat "" as Allow.
        return "Allow" if v == "" else v

    @model_validator(mode="after")
    def _has_a_schedule(self) -> CronWorkflowSpec:
        if not self.all_schedules:
            raise ValueError(
                "@schedules: at least one schedule is required (schedules or schedule)"
            )
        if self.timezone:
            for s in self.all_schedules:
                if schedule_zone(s) is not None:
                    raise ValueError("@schedules: " + zone_conflict(s, self.timezone))
        return self

    @property
    def all_schedules(self) -> tuple[str, ...]:
        """`schedules` (v4) and the legacy `schedule`, merged without repeats."""
        out: list[str] = []
        for s in [*(self.schedules or []), *([self.schedule] if self.schedule else [])]:
            if s.strip() and s not in out:
                out.append(s)
        return tuple(out)


class CronWorkflowManifest(_Model):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
    api_version: Literal["argoproj.io/v1alpha1"]
    kind: Literal["CronWorkflow"]
    metadata: ObjectMeta
    # Argo decodes a missing spec as an empty one and refuses it for its schedules; so do we,
    # so that the error names the same field.
    spec: CronWorkflowSpec = Field(default_factory=dict, validate_default=True)
    status: dict[str, Any] | None = None  # written by us; ignored on input

    @model_validator(mode="after")
    def _hashed_schedules_fire(self) -> CronWorkflowManifest:
        """Each schedule checked as what its hashed `H` items resolve to for this namespace
        and name: `0 0 31 H *` is a schedule that never fires for some names only."""
        spec, meta = self.spec, self.metadata
        named = [(f"schedules[{i}]", s) for i, s in enumerate(spec.schedules or [])]
        if spec.schedule and spec.schedule.strip():
            named.append(("schedule", spec.schedule))
        for path, s in named:
            try:
                validate_resolved(s, meta.namespace, meta.name)
            except ScheduleError as e:
                raise ValueError(f"@spec.{path}: {e}") from None
        overlap = meta.annotations.get(ANNOTATION_OVERLAP)
        if overlap is not None and spec.concurrency_policy != "Forbid":
            raise ValueError(
                f"@metadata.annotations: {ANNOTATION_OVERLAP}: {overlap} needs"
                f" concurrencyPolicy: Forbid (value: spec.concurrencyPolicy:"
                f" {spec.concurrency_policy})"
            )
        return self


class ManifestError(ValueError):
    """A manifest that cannot be admitted; `problems` are `path: message (value)` lines."""

    def __init__(self, problems: list[str], source: str = "") -> None:
        self.problems = problems
        where = f"{source}: " if source else ""
        super().__init__(where + "; ".join(problems))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or "[" in str(part):
            continue
        else:
            # A default validated in place is named by its Python name; users wrote camelCase.
            name = to_camel(part) if "_" in part else part
            out += ("." if out else "") + name
    return out


def _describe(err: Any) -> str:
    path = _path(tuple(err["loc"]))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if msg.startswith("@"):  # a model-level check that names the field it is about
        sub, _, msg = msg[1:].partition(": ")
        path = f"{path}.{sub}" if path else sub
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    value = err.get("input")
    shown = "" if isinstance(value, dict | list) or value is None else f" (value: {value!r})"
    if len(shown) > 200:  # a hostile value is not echoed in full
        shown = shown[:190] + "...)"
    if err["type"] == "missing":
        shown = ""
    return f"{path or '<manifest>'}: {msg}{shown}"


def is_other_kind(data: object) -> bool:
    """A Kubernetes object of another kind (a WorkflowTemplate beside the CronWorkflow):
    `argo cron lint` lints the CronWorkflows of a file and ignores the rest, so do we. A
    document without a kind is still refused (Argo skips it silently; a typo should not)."""
    if not isinstance(data, dict):
        return False
    kind = data.get("kind")
    return isinstance(kind, str) and kind not in ("", "CronWorkflow")


def parse_manifest(data: object, source: str = "") -> CronWorkflowManifest:
    """Admit one manifest document, or raise ManifestError naming every bad field."""
    if not isinstance(data, dict):
        raise ManifestError(
            [f"<document>: a CronWorkflow manifest must be a mapping, got {json_type(data)}"],
            source,
        )
    if (too_big := object_size_problem(data)) is not None:
        raise ManifestError([f"<manifest>: {too_big}"], source)
    try:
        manifest = CronWorkflowManifest.model_validate(data)
    except ValidationError as e:
        raise ManifestError([_describe(err) for err in e.errors()], source) from None
    if problems := _over_budget(manifest):
        raise ManifestError(problems, source)
    return manifest


def _over_budget(m: CronWorkflowManifest) -> list[str]:
    """Expressions that exceed their cost budget on this manifest's own inputs."""
    meta, spec = m.metadata, m.spec
    out = []
    for field, source in (
        ("spec.when", spec.when),
        ("spec.stopStrategy", spec.stop_strategy.source if spec.stop_strategy else None),
    ):
        problem = admission_problem(
            source,
            name=meta.name,
            namespace=meta.namespace,
            labels=meta.labels,
            annotations=meta.annotations,
        )
        if problem is not None:
            out.append(f"{field}: {problem}")
    return out


def _limit(v: int | None, default: int) -> int:
    return default if v is None or v < 0 else v


def manifest_warnings(m: CronWorkflowManifest) -> list[str]:
    """What Argo admits but reads otherwise than it is written: the names below, and a
    negative history limit, which keeps the default (it read as "keep none")."""
    spec = m.spec
    out = name_warnings(m)
    for field, v, default in (
        ("successfulJobsHistoryLimit", spec.successful_jobs_history_limit, KEPT_SUCCEEDED),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit, KEPT_FAILED),
    ):
        if v is not None and v < 0:
            out.append(
                f"spec.{field}: {v} is negative: Argo and cronsource keep the default"
                f" ({default}); 0 keeps none"
            )
    return out


def name_warnings(m: CronWorkflowManifest) -> list[str]:
    """Names `when` and `stopStrategy` read that Argo's expression environment does not
    define (`spec.when: cronworkflow.faild is not a variable Argo defines (nearest:
    cronworkflow.failed)`). Warnings, not problems: Argo admits them, and then a tick reads
    nil or fails; `lint --strict` makes them errors."""
    spec = m.spec
    out = [f"spec.when: {u.describe()}" for u in unknown_when_names(spec.when or "")]
    stop = spec.stop_strategy
    if stop is not None and stop.source:
        field = "expression" if stop.expression is not None else "condition"
        out += [f"spec.stopStrategy.{field}: {u.describe()}" for u in unknown_names(stop.source)]
    return out


@dataclass(frozen=True)
class SchedulingOptions:
    """The cronsource.io annotations that change scheduling, read once at admission."""

    dst_policy: str = "once"
    catchup_all: bool = False
    max_catchup: int = DEFAULT_MAX_CATCHUP
    run_duration: timedelta | None = None
    run_phase: RunPhase | None = None
    #: Pause after this many consecutive failed runs; None: never.
    pause_after_failures: int | None = None
    #: A spec change clears the pause and the count of failures.
    pause_reset_on_spec_change: bool = False
    #: Buffered overlap: "BufferOne", "BufferAll", or None (Forbid drops the tick).
    overlap: str | None = None
    #: How many ticks may wait at once: 1 for BufferOne, `max-buffer` for BufferAll.
    max_buffer: int = DEFAULT_MAX_BUFFER


def scheduling_options(annotations: dict[str, str]) -> SchedulingOptions:
    phase = annotations.get(ANNOTATION_RUN_PHASE)
    dur = annotations.get(ANNOTATION_RUN_DURATION)
    overlap = annotations.get(ANNOTATION_OVERLAP)
    return SchedulingOptions(
        dst_policy=annotations.get(ANNOTATION_DST_POLICY, "once"),
        catchup_all=annotations.get(ANNOTATION_CATCHUP_POLICY) == "All",
        max_catchup=int(annotations.get(ANNOTATION_MAX_CATCHUP, DEFAULT_MAX_CATCHUP)),
        run_duration=parse_duration(dur) if dur else None,
        run_phase=phase if phase in ("Succeeded", "Failed", "Error") else None,  # type: ignore[arg-type]
        pause_after_failures=pause_threshold(annotations.get(ANNOTATION_PAUSE_AFTER_FAILURES)),
        pause_reset_on_spec_change=annotations.get(ANNOTATION_PAUSE_RESET_ON_SPEC_CHANGE) == "true",
        overlap=overlap if overlap in OVERLAP_MODES else None,
        max_buffer=1
        if overlap == "BufferOne"
        else buffer_cap(annotations.get(ANNOTATION_MAX_BUFFER)) or DEFAULT_MAX_BUFFER,
    )
