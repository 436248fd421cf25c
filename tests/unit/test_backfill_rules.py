"""Given/when/then tests of the backfill rules (domain/backfill.py) and of the queue they
leave on the aggregate."""

from datetime import UTC, datetime, timedelta

import pytest

from cronsource.domain.backfill import BackfillTooLarge, plan_backfill, start_from_queue
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import CronService, event_type

T = [datetime(2026, 5, 4, h, tzinfo=UTC) for h in range(1, 6)]  # 01:00 .. 05:00


@pytest.mark.parametrize(
    ("overlap", "parallel", "active", "fire", "queue", "skip"),
    [
        pytest.param("Allow", None, [], T, [], [], id="allow: all now"),
        pytest.param("Allow", 2, [], T[:2], T[2:], [], id="allow parallel 2"),
        pytest.param("Queue", None, [], T[:1], T[1:], [], id="queue: one after another"),
        pytest.param("Queue", 3, [], T[:3], T[3:], [], id="queue 3 at a time"),
        pytest.param("Forbid", None, [], T[:1], [], T[1:], id="forbid: the first runs"),
        pytest.param("Forbid", None, ["x-1"], [], [], T, id="forbid while a run is active"),
        pytest.param("Replace", None, ["x-1"], T[-1:], [], T[:-1], id="replace: the latest"),
    ],
)
def test_overlap_policies(overlap, parallel, active, fire, queue, skip):
    plan = plan_backfill(T, set(), overlap, parallel, active, 0)
    assert (list(plan.fire), list(plan.queue), list(plan.skip)) == (fire, queue, skip)
    if overlap == "Replace":
        assert plan.replaces == ("x-1",)


def test_fired_and_queued_ticks_never_run_again():
    plan = plan_backfill(T, {T[0], T[2]}, "Allow", None, [], 0)
    assert plan.already == (T[0], T[2]) and plan.fire == (T[1], T[3], T[4])


def test_replace_never_starts_a_tick_older_than_one_of_the_range_that_ran():
    """A first Replace backfill ran the range's latest tick (T[3]); a second over a wider
    range planned T[2], which would have replaced the newer run."""
    plan = plan_backfill(T[:4], {T[3]}, "Replace", None, ["x-4"], 1)
    assert plan.fire == () and plan.replaces == () and plan.skip == tuple(T[:3])
    # A later tick that never ran is still the one started, replacing what is active.
    plan = plan_backfill(T, {T[3]}, "Replace", None, ["x-4"], 1)
    assert plan.fire == (T[4],) and plan.replaces == ("x-4",)


def test_running_backfills_use_up_the_parallel_slots():
    assert plan_backfill(T, set(), "Queue", None, ["a"], 1).fire == ()
    assert start_from_queue(T[2:], 2, 1) == [T[2]]
    assert start_from_queue(T[2:], 1, 1) == []


def _service_with(policy: str) -> tuple[CronService, object]:
    svc = CronService(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    m = parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "hourly", "namespace": "default"},
            "spec": {
                "schedules": ["0 * * * *"],
                "concurrencyPolicy": policy,
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
    )
    cron_id, _ = svc.apply(m, T[-1] + timedelta(minutes=30))
    return svc, cron_id


def test_ticks_an_earlier_backfill_queued_are_said_apart_from_those_that_fired():
    """A second Queue backfill over a wider range said "already fired 4" of ticks three of
    which only waited in the first one's queue."""
    svc, cron_id = _service_with("Allow")
    at = T[-1] + timedelta(minutes=31)
    first = svc.run_backfill(cron_id, T[0], T[3], at, overlap="Queue")
    assert (first.fire, first.queue, first.queued_before) == ((T[0],), tuple(T[1:4]), ())
    again = svc.plan_backfill(cron_id, T[0], T[4], overlap="Queue")
    assert again.already == tuple(T[:4]) and again.queued_before == tuple(T[1:4])
    assert again.runs == (T[4],)


def test_a_queue_drains_one_run_at_a_time_and_survives_a_reload():
    svc, cron_id = _service_with("Forbid")
    at = T[-1] + timedelta(minutes=31)
    plan = svc.run_backfill(cron_id, T[0], T[-1], at, overlap="Queue")
    assert (len(plan.fire), len(plan.queue)) == (1, 4)
    # Another process on the same log rebuilds the queue from the events alone.
    other = CronService(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}, recorder=svc.recorder)
    assert other.load(cron_id).backfill_queue == T[1:]
    for i in range(4):
        svc.run_completed(cron_id, f"hourly-{int(T[i].timestamp())}", "Succeeded", at, at)
    fires = [
        (e.scheduled_time, e.trigger)
        for e in svc.events.get(cron_id)
        if event_type(e) == "ScheduleFired"
    ]
    assert fires == [(t, "backfill") for t in T]
    assert svc.load(cron_id).backfill_queue == []


def test_the_cap_is_counted_before_the_ticks_are_computed_in_full():
    svc, cron_id = _service_with("Allow")
    with pytest.raises(BackfillTooLarge, match="more than 3 ticks"):
        svc.plan_backfill(cron_id, T[0] - timedelta(days=365), T[-1], max_ticks=3)


def test_the_default_overlap_is_the_concurrency_policy():
    svc, cron_id = _service_with("Forbid")
    plan = svc.plan_backfill(cron_id, T[0], T[-1])
    assert plan.overlap == "Forbid" and len(plan.fire) == 1 and len(plan.skip) == 4


def test_parallel_alone_on_a_forbid_cronworkflow_is_a_queue_of_that_width():
    svc, cron_id = _service_with("Forbid")
    plan = svc.plan_backfill(cron_id, T[0], T[-1], parallel=2)
    assert (plan.overlap, len(plan.fire), len(plan.queue)) == ("Queue", 2, 3)
