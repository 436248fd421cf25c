"""Retried submissions (issue 23 item 5): a create refused with a transient error is retried
with backoff until the fire's deadline, recorded once as TransientSubmissionError, then given
up with the last error (SubmissionRetriesExhausted); a refusal for good is not retried; the
`TransientSubmissionError` condition holds until a create succeeds (SubmissionRecovered).

The dispatcher runs on a recording target and the engine's own projector, with the instants
passed in (the fake clock of these tests): nothing sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from cronsource.adapters.application.explain import explain
from cronsource.adapters.infrastructure.kube import ApiError, Creation
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import CronWorkflow, workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import RETRY_WITHOUT_DEADLINE, PermanentSubmissionError
from tests.instants import T0

T1 = T0 + timedelta(minutes=1)


class FlakyTarget:
    """Answers each creation with `fail[name]` (an error) or creates it; counts the calls."""

    def __init__(self) -> None:
        self.fail: dict[str, BaseException] = {}
        self.creates: list[str] = []
        self.made: set[str] = set()

    def create_many(self, creations: Sequence[Creation], at: Any) -> list[BaseException | None]:
        out: list[BaseException | None] = []
        for c in creations:
            name = c.workflow["metadata"]["name"]
            self.creates.append(name)
            error = self.fail.get(name)
            if error is None:
                self.made.add(name)
            out.append(error)
        return out

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: Any) -> None:
        raise AssertionError("a target with create_many is given whole batches")

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        name = workflow["metadata"]["name"]
        error = self.fail.get(name)
        if error is not None and not isinstance(error, PermanentSubmissionError):
            raise error
        return name in self.made

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        pass

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        pass


@pytest.fixture
def target() -> FlakyTarget:
    return FlakyTarget()


def apply(eng: Engine, name: str, **spec: Any) -> Any:
    manifest = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }
    cron_id, _ = eng.service.apply(parse_manifest(manifest), T0)
    return cron_id


def dispatch(eng: Engine, at: datetime) -> BaseException | None:
    """One turn of the dispatcher at `at`: the error it raised (the batch is repeated), if any."""
    try:
        eng.projector.catch_up(at)
    except Exception as e:
        return e
    return None


def failures(eng: Engine, cron_id: Any) -> list[Any]:
    return [e for e in eng.service.events.get(cron_id) if event_type(e) == "SubmissionFailed"]


def conditions(eng: Engine) -> dict[str, str]:
    eng.projector.catch_up(None, dispatch=False)
    (row,) = eng.view.statuses("ns")
    return {c["type"]: c["message"] for c in row.status["conditions"]}


def test_transient_errors_are_retried_until_the_deadline_then_given_up_with_the_last(
    engine: Engine, target: FlakyTarget
) -> None:
    cron_id = apply(engine, "flaky", startingDeadlineSeconds=60)
    name = workflow_name("flaky", T1)
    target.fail[name] = ApiError(503, "Service Unavailable")
    engine.service.tick([cron_id], T1)
    # Retried every 10 s (the step's backoff) within the 60 s deadline: recorded once.
    for s in range(0, 60, 10):
        assert isinstance(dispatch(engine, T1 + timedelta(seconds=s)), ApiError)
    (first,) = failures(engine, cron_id)
    assert (first.reason, first.transient, first.attempts) == ("TransientSubmissionError", True, 1)
    assert "will retry" in conditions(engine)["TransientSubmissionError"]
    target.fail[name] = ApiError(0, "ConnectionResetError")  # the last error changes
    assert dispatch(engine, T1 + timedelta(seconds=60)) is None  # past it: given up
    last = failures(engine, cron_id)[-1]
    assert (last.reason, last.transient) == ("SubmissionRetriesExhausted", False)
    assert "ConnectionResetError" in last.message and "60s" in last.message
    assert last.attempts == 7
    assert "given up" in conditions(engine)["TransientSubmissionError"]
    assert engine.service.repository.get(cron_id).active == {}
    why = explain(engine.service.load(cron_id), T1, engine.view.decisions_at("ns", "flaky", T1))
    assert (why["outcome"], why["reason"]) == ("SubmissionFailed", "SubmissionRetriesExhausted")
    assert "retried" in why["explanation"] and "ConnectionResetError" in why["explanation"]
    # The position moved on: nothing more is tried or recorded for that fire.
    tries = len(target.creates)
    assert dispatch(engine, T1 + timedelta(seconds=90)) is None
    assert len(target.creates) == tries and len(failures(engine, cron_id)) == 2

    # The next fire's create succeeds: the condition clears.
    t2 = T1 + timedelta(minutes=1)
    engine.service.tick([cron_id], t2)
    assert dispatch(engine, t2) is None
    assert event_type(list(engine.service.events.get(cron_id))[-1]) == "SubmissionRecovered"
    assert "TransientSubmissionError" not in conditions(engine)


def test_a_refusal_for_good_is_not_retried(engine: Engine, target: FlakyTarget) -> None:
    cron_id = apply(engine, "refused", startingDeadlineSeconds=60)
    name = workflow_name("refused", T1)
    target.fail[name] = PermanentSubmissionError("workflow ns/x refused (422 Invalid)")
    engine.service.tick([cron_id], T1)
    for s in (0, 10, 20):
        assert dispatch(engine, T1 + timedelta(seconds=s)) is None
    assert target.creates == [name]
    (failed,) = failures(engine, cron_id)
    assert (failed.reason, failed.transient, failed.attempts) == ("SubmissionError", False, 1)
    assert "TransientSubmissionError" not in conditions(engine)


def failed_count(eng: Engine) -> int:
    eng.projector.catch_up(None, dispatch=False)
    (row,) = eng.view.statuses("ns")
    return int(row.status["failed"])


def test_a_fire_whose_workflow_is_not_created_for_good_counts_as_failed_as_in_argo(
    engine: Engine, target: FlakyTarget
) -> None:
    """Argo's reportCronWorkflowError adds 1 to `status.failed` for a submission that failed,
    what a stopStrategy on `cronworkflow.failed` reads: a refusal for good and retries given
    up each count once; a transient failure retried until its create succeeds counts nothing.
    With `failed >= 2` the CronWorkflow stops at its next tick, as Argo's does."""
    cron_id = apply(
        engine,
        "refused",
        startingDeadlineSeconds=30,
        stopStrategy={"expression": "cronworkflow.failed >= 2"},
    )
    ticks = [T1 + timedelta(minutes=i) for i in range(4)]
    names = [workflow_name("refused", t) for t in ticks]
    target.fail[names[0]] = ApiError(503, "Service Unavailable")
    engine.service.tick([cron_id], ticks[0])
    assert isinstance(dispatch(engine, ticks[0]), ApiError)
    assert failed_count(engine) == 0  # retried, not given up
    del target.fail[names[0]]
    assert dispatch(engine, ticks[0] + timedelta(seconds=10)) is None
    assert failed_count(engine) == 0 and names[0] in target.made

    target.fail[names[1]] = PermanentSubmissionError("workflow ns/x refused (403 Forbidden)")
    engine.service.tick([cron_id], ticks[1])
    assert dispatch(engine, ticks[1]) is None
    assert failed_count(engine) == 1

    target.fail[names[2]] = ApiError(503, "Service Unavailable")
    engine.service.tick([cron_id], ticks[2])
    assert isinstance(dispatch(engine, ticks[2]), ApiError)
    assert dispatch(engine, ticks[2] + timedelta(seconds=30)) is None  # past it: given up
    assert failed_count(engine) == 2

    engine.service.tick([cron_id], ticks[3])
    agg = engine.service.load(cron_id)
    assert agg.stopped and agg.failed == 2
    assert event_type(list(engine.service.events.get(cron_id))[-2]) == "Stopped"


def test_a_fire_without_a_deadline_is_retried_for_a_bounded_time(
    engine: Engine, target: FlakyTarget
) -> None:
    """A manual run has no starting deadline: it is retried for RETRY_WITHOUT_DEADLINE after
    its first failed create, not for ever (it would hold up every fire after it)."""
    cron_id = apply(engine, "manual")
    name = engine.service.trigger(cron_id, T1, "req-1")
    assert name is not None
    target.fail[name] = ApiError(500, "Internal Server Error")
    assert isinstance(dispatch(engine, T1), ApiError)
    half = T1 + RETRY_WITHOUT_DEADLINE / 2
    assert isinstance(dispatch(engine, half), ApiError)
    assert [f.reason for f in failures(engine, cron_id)] == ["TransientSubmissionError"]
    assert dispatch(engine, T1 + RETRY_WITHOUT_DEADLINE) is None
    last = failures(engine, cron_id)[-1]
    assert last.reason == "SubmissionRetriesExhausted" and "10m of retries" in last.message


def test_a_retried_fire_that_succeeds_clears_the_condition(
    engine: Engine, target: FlakyTarget
) -> None:
    cron_id = apply(engine, "heals", startingDeadlineSeconds=60)
    name = workflow_name("heals", T1)
    target.fail[name] = ApiError(429, "Too Many Requests")
    engine.service.tick([cron_id], T1)
    assert isinstance(dispatch(engine, T1), ApiError)
    assert "TransientSubmissionError" in conditions(engine)
    del target.fail[name]
    assert dispatch(engine, T1 + timedelta(seconds=20)) is None
    recovered = list(engine.service.events.get(cron_id))[-1]
    assert (event_type(recovered), recovered.attempts) == ("SubmissionRecovered", 2)
    assert "TransientSubmissionError" not in conditions(engine)
    assert name in engine.service.repository.get(cron_id).active


def test_a_version_1_submission_failed_reads_with_a_reason_and_one_attempt(
    engine: Engine,
) -> None:
    """A SubmissionFailed stored before version 2 (no `reason`, no `attempts`) is upcast on
    load: a refusal for good, or a retried one when it said `transient`."""
    cron_id = apply(engine, "old")
    engine.service.tick([cron_id], T1)
    svc = engine.service
    agg = svc.repository.get(cron_id)
    cls = CronWorkflow.SubmissionFailed  # type: ignore[attr-defined]
    assert cls.class_version == 3
    for transient, reason in ((False, "SubmissionError"), (True, "TransientSubmissionError")):
        ev = cls(
            originator_id=cron_id,
            originator_version=agg.version + 1,
            timestamp=T1,
            workflow_name=workflow_name("old", T1),
            scheduled_time=T1,
            message="refused",
            transient=transient,
            reason="",
            attempts=0,
            counted=True,
        )
        stored = svc.mapper.to_stored_event(ev)
        state = json.loads(stored.state)
        state.pop("reason", None)
        state.pop("attempts", None)
        state.pop("counted", None)
        state.pop("class_version", None)  # what version 1 stored
        v1 = StoredEvent(
            stored.originator_id,
            stored.originator_version,
            stored.topic,
            json.dumps(state).encode(),
        )
        got = svc.mapper.to_domain_event(v1)
        assert (got.reason, got.attempts, got.counted) == (reason, 1, False)
