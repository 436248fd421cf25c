"""Where simulated Workflows run: a target that keeps them in memory and ends them on the virtual
clock, and the run watcher that reports their ends to the service, as the local target's does.

The target can also refuse creates for a while (a scenario's `targetFails` action: an API
server answering 503, or not at all), as a cluster's does: the error is the one the
Kubernetes client raises (`ApiError`), sorted by the cluster target's own rule
(adapters/infrastructure/kube/target.py `create_failure`), so the dispatcher retries what a
cluster's refusal would have it retry and gives up what it would give up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any, cast
from uuid import UUID

from cronsource.adapters.infrastructure.kube.port import ApiError
from cronsource.adapters.infrastructure.kube.target import create_failure, is_transient
from cronsource.domain.cronworkflow import Phase
from cronsource.domain.service import CronService, RunEnd
from cronsource.domain.timestamps import parse_timestamp
from cronsource.projections.dispatch import (
    ANNOTATION_SCHEDULED,
    LABEL_CRON,
    PermanentSubmissionError,
    is_same_workflow,
)
from cronsource.projections.readmodel import rfc3339

#: The errors a `targetFails` action names by a word: no answer at all, which the client
#: reports as status 0 (adapters/infrastructure/kube/client.py), with what it would say.
NO_ANSWER = {
    "timeout": "TimeoutError: the API server did not answer in time",
    "reset": "ClientOSError: [Errno 104] Connection reset by peer",
}
#: What a `targetFails` error may be, for the message that refuses another.
ERROR_CHOICES = "an HTTP status the cluster target retries (429, 5xx) or refuses for good"
ERROR_CHOICES += " (400, 403, 404, 422), or timeout, reset"


class SimulatedApiError(ApiError):
    """An error of the simulated API server (`targetFails`): an ApiError as the cluster's
    client raises, told apart from a bug of the simulation by its class alone."""


def target_error(error: int | str) -> SimulatedApiError:
    """The error `error` names (`503`, `"429"`, `timeout`, `reset`), as the client raises it.
    ValueError for anything the cluster target neither retries (`is_transient`) nor refuses
    for good (`create_failure`): a 409 has a meaning of its own (whose Workflow the name
    is), a 401 or a 200 is not an outage, a typo is not a guess."""
    word = str(error).strip().lower()
    if word in NO_ANSWER:
        return SimulatedApiError(0, NO_ANSWER[word])
    status = int(word) if word.isdigit() and not isinstance(error, bool) else None
    if status is not None and 400 <= status <= 599:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        err = SimulatedApiError(status, phrase)
        if is_transient(err) or create_failure(err, "", "") is not err:
            return err
    raise ValueError(f"{error!r} is not {ERROR_CHOICES}")


@dataclass(frozen=True)
class TargetFault:
    """Creates refused from `start` until `end` with `error` (see `target_error`), of every
    CronWorkflow's Workflows or, with `cron` (`namespace/name`), of that one's alone."""

    start: datetime
    end: datetime
    error: str
    cron: tuple[str, str] | None = None

    def refuses(self, namespace: str, cron: str, at: datetime) -> bool:
        return self.start <= at < self.end and self.cron in (None, (namespace, cron))


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
    #: Each Workflow's metadata as created, as far as a later create of the same name asks
    #: (`is_same_workflow`: its owners and its scheduled time).
    metadata: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The Workflows whose end is not reported yet (running ones included): the only ones
    #: the run watcher and the next-change look at, so a week of runs costs no rescans.
    unreported: dict[tuple[str, str], SimWorkflow] = field(default_factory=dict)
    #: Windows in which creates are refused (`targetFails`), in the order they began.
    faults: list[TargetFault] = field(default_factory=list)

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime) -> None:
        meta = workflow["metadata"]
        key = (meta["namespace"], meta["name"])
        if self.faults:
            self._refuse(meta, at)
        if key in self.workflows:
            if is_same_workflow(self.metadata[key], meta):
                return  # a replayed dispatch: the Workflow exists already
            raise PermanentSubmissionError(f"workflow {key[0]}/{key[1]} exists and is not ours")
        self.metadata[key] = _identity(meta)
        duration, phase = self.durations.get(cron_id, (None, None))
        sched = meta["annotations"].get(ANNOTATION_SCHEDULED)
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

    def _refuse(self, meta: dict[str, Any], at: datetime) -> None:
        """Raise what the API server answers a create at `at`, if a fault covers it (the
        latest begun wins): what the cluster target would raise for that answer (a
        PermanentSubmissionError for a refusal for good, else the error). Only creates
        fail: the look the dispatcher takes at a fire given up (`created`) still answers,
        so its attempts are the creates it tried."""
        cron = meta["labels"][LABEL_CRON]
        for fault in reversed(self.faults):
            if fault.refuses(meta["namespace"], cron, at):
                raise create_failure(target_error(fault.error), meta["namespace"], meta["name"])

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


def _identity(meta: dict[str, Any]) -> dict[str, Any]:
    """What `is_same_workflow` compares of a Workflow's metadata, copied: its owners and its
    scheduled time (a deep copy of the whole metadata was a tenth of a fleet's week)."""
    return {
        "ownerReferences": [dict(o) for o in meta.get("ownerReferences") or []],
        "annotations": {
            ANNOTATION_SCHEDULED: (meta.get("annotations") or {}).get(ANNOTATION_SCHEDULED)
        },
    }


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
        ends = []
        for wf in ended:
            wf.reported = True
            del target.unreported[(wf.namespace, wf.name)]
            phase = None if wf.phase == "Deleted" else cast(Phase, wf.phase)
            ends.append(RunEnd(UUID(wf.cron_id), wf.name, phase, wf.finished_at))
        self.service.runs_ended(ends, now)
        return len(ended)

    def recover(self, now: datetime) -> int | None:
        """Nothing to recover: the simulated target and the store live and die together."""
        return 0
