"""Kubernetes Events (adapters/infrastructure/kube/events.py, adapters/runtime/kube/events.py):
the correlator aggregates, deduplicates and rate-limits as client-go's does; the recorder
never blocks a caller and counts what it drops; the feed turns the audit log into Events.

On FakeKube (tests/kube/fake.py); times are passed in (monotonic seconds), and nothing
sleeps but the tests of the recorder's own thread.
tests/integration/test_kube_events.py runs the same against the real API server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.kube.events import (
    COMBINED_PREFIX,
    Event,
    EventCorrelator,
    EventRecorder,
    ObjectRef,
    event_for,
)
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube.events import KubeEventFeed
from cronsource.domain.manifest import parse_manifest
from cronsource.projections.readmodel import AuditRow
from tests.instants import T0
from tests.kube.fake import FakeKube

REF = ObjectRef("ns", "job", "uid-1")


def ev(message: str = "m", reason: str = "R", at: datetime = T0, ref: ObjectRef = REF) -> Event:
    return Event(ref, "Normal", reason, message, at)


# ------------------------------------------------------------------ the correlator


def test_the_same_event_again_is_a_count_on_the_first() -> None:
    c = EventCorrelator()
    first = c.correlate(ev(), 0.0)
    again = c.correlate(ev(at=T0 + timedelta(seconds=5)), 5.0)
    assert not first.patch and again.patch
    assert again.event.name == first.event.name and again.event.count == 2
    assert again.event.first == T0


def test_similar_events_are_combined_from_the_tenth_message_on() -> None:
    """client-go's EventAggregator: same source, object, type and reason, messages that
    differ; 9 distinct messages are Events of their own, the 10th and later one combined
    Event whose count grows."""
    c = EventCorrelator()
    out = [c.correlate(ev(f"tick {i}"), float(i)) for i in range(15)]
    assert [o.patch for o in out[:10]] == [False] * 10
    assert all(not o.event.message.startswith(COMBINED_PREFIX) for o in out[:9])
    assert out[9].event.message == COMBINED_PREFIX + "tick 9"
    assert all(o.patch for o in out[10:])
    assert {o.event.name for o in out[9:]} == {out[9].event.name}
    assert out[-1].event.count == 6
    # Another reason of the same object is not combined with them.
    assert not c.correlate(ev("other", reason="Other"), 16.0).event.message.startswith("(")


def test_aggregation_counts_within_ten_minutes() -> None:
    c = EventCorrelator()
    for i in range(9):
        c.correlate(ev(f"a{i}"), float(i))
    # Ten minutes later the window starts again: the 10th message is an Event of its own.
    late = c.correlate(ev("a9"), 8.0 + 601.0)
    assert not late.event.message.startswith(COMBINED_PREFIX)


def test_spam_filter_lets_a_burst_of_25_through_then_one_per_five_minutes() -> None:
    c = EventCorrelator()
    results = [c.correlate(ev(f"m{i}", reason=f"R{i}"), 0.0) for i in range(30)]
    assert [r.skip for r in results] == [False] * 25 + [True] * 5
    assert c.correlate(ev("x", reason="X"), 299.0).skip
    assert not c.correlate(ev("y", reason="Y"), 301.0).skip
    # Per object: another CronWorkflow has a bucket of its own.
    other = ObjectRef("ns", "other", "uid-2")
    assert not c.correlate(ev("z", ref=other), 301.0).skip


# ------------------------------------------------------------------ the recorder


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    k = FakeKube()
    try:
        yield k
    finally:
        k.close()


def test_a_thousand_fires_on_one_object_make_few_event_objects(kube: FakeKube) -> None:
    clock = VirtualClock(T0)
    rec = EventRecorder(kube, clock=clock, queue_size=10_000)
    for i in range(1000):
        at = T0 + timedelta(minutes=i)
        rec.emit(REF, "Normal", "SuccessfulCreate", f"Created workflow job-{i}", at)
        clock.set(at)
        rec.drain()
    events = kube.kube_events("ns")
    # 9 on their own, then one combined Event; the spam filter keeps the writes to its
    # burst plus one per 5 minutes.
    assert len(events) == 10
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(combined) == 1 and combined[0]["count"] > 100
    assert rec.stats.created == 10
    assert rec.stats.created + rec.stats.patched + rec.stats.rate_limited == 1000
    writes = [v for v, _ in kube.calls if v in ("create_event", "patch_event")]
    assert len(writes) < 250


def test_emit_never_blocks_and_counts_what_a_full_queue_drops(kube: FakeKube) -> None:
    rec = EventRecorder(kube, queue_size=3)
    assert [rec.emit(REF, "Normal", "R", f"m{i}", T0) for i in range(5)] == [True] * 3 + [False] * 2
    assert rec.stats.dropped == 2
    assert rec.drain() == 3


def test_a_write_that_keeps_failing_is_dropped_and_counted_not_raised(kube: FakeKube) -> None:
    rec = EventRecorder(kube)
    kube.fail("create_event", 503, times=10)
    rec.emit(REF, "Warning", "SubmissionError", "boom", T0)
    rec.drain()
    assert rec.stats.failed == 1 and kube.kube_events() == []
    rec.emit(REF, "Warning", "Other", "after", T0)
    kube._failures.clear()
    rec.drain()
    assert rec.stats.created == 1


def written(kube: FakeKube, n: int, within: float) -> bool:
    """Whether the recorder's thread has written `n` Events within `within` seconds."""
    deadline = time.monotonic() + within
    while len(kube.kube_events()) < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_thread_holds_its_writes_while_workflows_are_being_created(kube: FakeKube) -> None:
    """`yield_to` (KubeTarget.quiet) unset: creations are in flight, and the Events wait."""
    quiet = threading.Event()
    rec = EventRecorder(kube, yield_to=quiet)
    rec.start()
    try:
        rec.emit(REF, "Normal", "SuccessfulCreate", "Created workflow job-1", T0)
        assert not written(kube, 1, within=0.3)
        quiet.set()
        assert written(kube, 1, within=10)
    finally:
        rec.stop()
    assert [e["reason"] for e in kube.kube_events()] == ["SuccessfulCreate"]


def test_the_thread_holds_back_at_most_so_long_for_creations_that_never_end(
    kube: FakeKube,
) -> None:
    """A stretch of creations longer than `yield_at_most` no longer holds the Events back:
    they are late, not lost."""
    rec = EventRecorder(kube, yield_to=threading.Event(), yield_at_most=0.2)
    rec.start()
    try:
        for i in range(3):
            rec.emit(REF, "Normal", "R", f"m{i}", T0)
        assert written(kube, 3, within=10)
    finally:
        rec.stop(timeout=10)
    assert len(kube.kube_events()) == 3 and rec.stats.created == 3


def test_a_patch_of_an_event_that_expired_creates_it_again(kube: FakeKube) -> None:
    rec = EventRecorder(kube)
    rec.emit(REF, "Normal", "R", "m", T0)
    rec.drain()
    (first,) = kube.kube_events()
    kube._objects.pop(("events", "ns", first["metadata"]["name"]))  # the API server's TTL
    rec.emit(REF, "Normal", "R", "m", T0 + timedelta(hours=2))
    rec.drain()
    (again,) = kube.kube_events()
    assert again["count"] == 1 and again["metadata"]["name"] != first["metadata"]["name"]


def test_the_thread_writes_and_stop_flushes(kube: FakeKube) -> None:
    rec = EventRecorder(kube)
    rec.start()
    for i in range(5):
        rec.emit(REF, "Normal", "R", f"m{i}", T0)
    rec.stop()
    assert len(kube.kube_events()) == 5


# ------------------------------------------------------------------ what the log becomes


def row(type_: str, reason: str | None = None, **detail: Any) -> AuditRow:
    return AuditRow(1, "id", "ns", "job", 2, type_, T0, T0, reason, "job-1", detail)


@pytest.mark.parametrize(
    ("audit", "expected"),
    [
        (row("ScheduleSkipped", "DeadlineExceeded"), ("Warning", "MissSchedule")),
        (row("ScheduleSkipped", "ConcurrencyForbid"), ("Normal", "JobAlreadyActive")),
        (row("ScheduleSkipped", "WhenFalse", message="false"), ("Normal", "WhenFalse")),
        (row("SubmissionFailed", "SubmissionError", message="422"), ("Warning", "SubmissionError")),
        (
            row("SubmissionFailed", "TransientSubmissionError", transient=True),
            ("Warning", "TransientSubmissionError"),
        ),
        (
            row("SubmissionFailed", "SubmissionRetriesExhausted", attempts=7),
            ("Warning", "TransientSubmissionError"),
        ),
        (row("RunNotStarted", "DeadlineExceeded"), ("Warning", "MissSchedule")),
        (row("RunCompleted", phase="Succeeded"), ("Normal", "SawCompletedJob")),
        (row("RunRecovered", "Lost"), ("Warning", "UnexpectedJob")),
        (row("Suspended", by="alice"), ("Normal", "Suspended")),
        (row("Resumed"), ("Normal", "Resumed")),
        (row("PausedAfterFailures", threshold=3), ("Warning", "PausedAfterFailures")),
        (row("SpecRejected", message="bad"), ("Warning", "SpecError")),
    ],
)
def test_reasons_are_argos_and_cronjobs_words(audit: AuditRow, expected: tuple[str, str]) -> None:
    got = event_for(audit)
    assert got is not None and got[:2] == expected


def test_a_given_up_fire_says_so_with_the_attempts() -> None:
    got = event_for(
        row("SubmissionFailed", "SubmissionRetriesExhausted", attempts=7, message="503")
    )
    assert got is not None and "given up; 7 attempts): 503" in got[2]


def test_the_feed_emits_new_audit_rows_for_objects_the_cluster_shows(
    engine: Engine, kube: FakeKube
) -> None:
    manifest = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "job", "namespace": "ns", "uid": "uid-1"},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }
    cron_id, _ = engine.service.apply(parse_manifest(manifest), T0)
    engine.service.suspend(cron_id, T0, "alice")  # before the feed starts: not emitted
    engine.projector.catch_up(T0)
    seen = SeenMetadata()
    seen.saw(
        {"metadata": {"name": "job", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7"}}
    )
    feed = KubeEventFeed(engine, EventRecorder(kube), seen)
    feed.position = engine.view.audit_head()  # `start` without the thread
    engine.service.resume(cron_id, T0 + timedelta(minutes=1), "bob")
    engine.projector.catch_up(T0)
    assert feed.step() == 1
    assert feed.step() == 0  # nothing twice
    feed.recorder.drain()
    (written,) = kube.kube_events("ns")
    assert (written["reason"], written["type"]) == ("Resumed", "Normal")
    assert written["involvedObject"] == {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "namespace": "ns",
        "name": "job",
        "uid": "uid-1",
    }
    assert written["source"] == {"component": "cronsource"} and written["count"] == 1


class HangingApi:
    """An API server that does not answer an Event write until `release` is set."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.release = threading.Event()

    async def _hang(self, body: dict[str, Any]) -> dict[str, Any]:
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        return body

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._hang(body)

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._hang(body)

    def run(self, coro: Any) -> Any:
        return self.kube.run(coro)


def test_an_api_that_does_not_answer_blocks_neither_emit_nor_stop(kube: FakeKube) -> None:
    api = HangingApi(kube)
    rec = EventRecorder(api, queue_size=10)
    rec.start()
    thread = rec._thread
    assert thread is not None
    try:
        for i in range(100):  # the thread is stuck on the first; the queue fills, then drops
            rec.emit(REF, "Normal", "R", f"m{i}", T0)
        assert rec.stats.dropped >= 89
        rec.stop(timeout=0.2)  # returns within its timeout, the write still hanging
        assert rec._thread is None and rec.stats.created == 0
    finally:
        api.release.set()  # let the thread finish before the fake cluster goes
        rec._queue.put(None)
        thread.join(timeout=10)
