"""The scenario file `simulate` reads: its schema (pydantic), its bounds, and the one error every
bad scenario becomes (a line naming the field and value).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cronsource.domain.durations import parse_duration
from cronsource.domain.manifest import ManifestError, parse_manifest
from cronsource.domain.timestamps import TimestampError, user_time


class ScenarioError(ValueError):
    pass


#: Longest simulated span. A year of every-minute ticks is half a million decisions; a
#: scenario far longer is a typo (a year 20260 end) and would run for hours.
MAX_SCENARIO_SPAN = timedelta(days=400)


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
