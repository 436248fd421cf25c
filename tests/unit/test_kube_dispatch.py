"""The dispatcher (projections/dispatch.py) on a recording fake batch target, as it drives
KubeTarget: a batch of fires becomes one create_many, order holds around Replace, and failures
are reported right."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronsource.adapters.infrastructure.kube import ApiError, Creation
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from cronsource.projections.dispatch import PermanentSubmissionError
from tests.instants import T0

T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)


class RecordingBatchTarget:
    """Records what the dispatcher asked, in order; `fail` maps a Workflow name to the error
    its creation reports."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail: dict[str, BaseException] = {}

    def create_many(self, creations: Sequence[Creation], at: Any) -> list[BaseException | None]:
        names = [c.workflow["metadata"]["name"] for c in creations]
        self.calls.append(("create_many", names))
        return [self.fail.get(n) for n in names]

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: Any) -> None:
        raise AssertionError("a target with create_many is given whole batches")

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        self.calls.append(("created", workflow["metadata"]["name"]))
        return False

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        self.calls.append(("terminate", name))

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        self.calls.append(("delete", name))


@pytest.fixture
def target() -> RecordingBatchTarget:
    return RecordingBatchTarget()


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


def test_fires_committed_together_are_created_in_one_concurrent_call(
    engine: Engine, target: RecordingBatchTarget
) -> None:
    ids = [apply(engine, f"job{i}") for i in range(5)]
    engine.service.tick(ids, T1)
    engine.projector.catch_up(T1)
    assert target.calls == [("create_many", [workflow_name(f"job{i}", T1) for i in range(5)])]


def test_replace_terminates_only_after_the_replaced_run_was_created(
    engine: Engine, target: RecordingBatchTarget
) -> None:
    # A deadline that T1's fire is still within when both are dispatched at T2.
    cron_id = apply(engine, "job", concurrencyPolicy="Replace", startingDeadlineSeconds=120)
    engine.service.tick([cron_id], T1)
    engine.service.tick([cron_id], T2)  # both fires reach the dispatcher in one batch
    engine.projector.catch_up(T2)
    first, second = workflow_name("job", T1), workflow_name("job", T2)
    assert target.calls == [
        ("create_many", [first]),
        ("terminate", first),
        ("create_many", [second]),
    ]


def test_a_transient_failure_repeats_the_batch_and_each_failure_is_reported_once(
    engine: Engine, target: RecordingBatchTarget
) -> None:
    ok, flaky, refused = (apply(engine, n) for n in ("ok", "flaky", "refused"))
    target.fail = {
        workflow_name("flaky", T1): ApiError(503, "Service Unavailable"),
        workflow_name("refused", T1): PermanentSubmissionError("422 Invalid"),
    }
    engine.service.tick([ok, flaky, refused], T1)
    with pytest.raises(ApiError):
        engine.projector.catch_up(T1)
    # The refusal is reported at once; the transient failure as retried (the run stays
    # active), and the batch will be repeated.
    assert types(engine, refused).count("SubmissionFailed") == 1
    assert types(engine, flaky).count("SubmissionFailed") == 1
    with pytest.raises(ApiError):
        engine.projector.catch_up(T1)  # still failing: neither is recorded again
    assert types(engine, refused).count("SubmissionFailed") == 1
    assert types(engine, flaky).count("SubmissionFailed") == 1

    del target.fail[workflow_name("flaky", T1)]
    engine.projector.catch_up(T1)
    engine.projector.catch_up(T1)  # the events it recorded reach the dispatcher: no-op
    assert types(engine, refused).count("SubmissionFailed") == 1
    assert types(engine, flaky)[-2:] == ["SubmissionFailed", "SubmissionRecovered"]
    names = {workflow_name(n, T1) for n in ("ok", "flaky", "refused")}
    assert [set(c[1]) for c in target.calls] == [names, names, names]


def types(eng: Engine, cron_id: Any) -> list[str]:
    return [event_type(e) for e in eng.service.events.get(cron_id)]
