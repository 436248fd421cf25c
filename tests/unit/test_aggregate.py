"""Given/when/then tests of the CronWorkflow aggregate, driven through CronService.

Every test uses the memory store (or, for the two-replica cases, a store shared by two service
instances) and asserts the events the commands emitted, read back from the log. Time is always
an argument: `at("10:01:00")` is 2026-05-04 10:01:00 UTC, a Monday with no DST change anywhere
near it, so a minute schedule's ticks are exactly the minutes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from copy import deepcopy
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.service import CronService, event_type
from tests.instants import at

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def child(t: datetime, cron: str = "nightly") -> str:
    """Argo's child name for the tick at `t`."""
    return f"{cron}-{int(t.timestamp())}"


def manifest(
    name: str = "nightly", *, annotations: dict[str, str] | None = None, **spec: Any
) -> CronWorkflowManifest:
    """A CronWorkflow manifest; `spec` keys are written as in YAML (camelCase)."""
    spec.setdefault("schedules", ["* * * * *"])
    spec.setdefault(
        "workflowSpec",
        {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
    )
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
            "spec": spec,
        }
    )


def service() -> CronService:
    return CronService(env=MEMORY)


def events(svc: CronService, cron_id: UUID, after: int = 0) -> list[Any]:
    return list(svc.events.get(cron_id, gt=after or None))


def types(svc: CronService, cron_id: UUID, after: int = 0) -> list[str]:
    return [event_type(e) for e in events(svc, cron_id, after)]


def of_type(svc: CronService, cron_id: UUID, name: str, after: int = 0) -> list[Any]:
    return [e for e in events(svc, cron_id, after) if event_type(e) == name]


def fired(svc: CronService, cron_id: UUID, after: int = 0) -> list[tuple[datetime, str, str]]:
    """(scheduled_time, workflow_name, trigger) of every ScheduleFired, in log order."""
    return [
        (e.scheduled_time, e.workflow_name, e.trigger)
        for e in of_type(svc, cron_id, "ScheduleFired", after)
    ]


def skipped(svc: CronService, cron_id: UUID, after: int = 0) -> list[tuple[Any, ...]]:
    """(first, last, count, reason) of every ScheduleSkipped, in log order."""
    return [
        (e.scheduled_time, e.last_scheduled_time, e.count, e.reason)
        for e in of_type(svc, cron_id, "ScheduleSkipped", after)
    ]


def decisions(svc: CronService, cron_id: UUID, after: int = 0) -> list[str]:
    """The scheduling decisions in the log after version `after`, one readable line each:
    `fire 10:07:00 catchup` or `skip 10:02:00..10:06:00 x5 CatchupLimit`."""
    out = []
    for e in events(svc, cron_id, after):
        if event_type(e) == "ScheduleFired":
            out.append(f"fire {e.scheduled_time:%H:%M:%S} {e.trigger}")
        elif event_type(e) == "ScheduleSkipped":
            first, last = e.scheduled_time, e.last_scheduled_time
            out.append(f"skip {first:%H:%M:%S}..{last:%H:%M:%S} x{e.count} {e.reason}")
    return out


def version(svc: CronService, cron_id: UUID) -> int:
    return svc.load(cron_id).version


def create(svc: CronService, t0: datetime, **spec: Any) -> UUID:
    cron_id, outcome = svc.apply(manifest(**spec), t0)
    assert outcome == "created"
    return cron_id


# --------------------------------------------------------------------------- on-time ticks


@pytest.mark.parametrize(
    ("schedule", "decided_at", "expected"),
    [
        pytest.param(
            "* * * * *",
            ["10:01:00", "10:02:05", "10:03:29"],
            ["10:01:00", "10:02:00", "10:03:00"],
            id="every minute, decided within the late tolerance",
        ),
        pytest.param(
            "*/5 * * * *",
            ["10:05:00", "10:10:00"],
            ["10:05:00", "10:10:00"],
            id="every five minutes",
        ),
        pytest.param(
            "@every 90s",
            ["10:02:00", "10:03:30", "10:05:00"],
            ["10:02:00", "10:03:30", "10:05:00"],
            id="@every counts from creation",
        ),
    ],
)
def test_on_time_ticks_fire_with_argo_child_names(
    schedule: str, decided_at: list[str], expected: list[str]
) -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), schedules=[schedule])

    for t in decided_at:
        svc.tick([cron_id], at(t))

    assert fired(svc, cron_id) == [(at(t), child(at(t)), "schedule") for t in expected]
    assert svc.load(cron_id).last_scheduled_time == at(expected[-1])


def test_a_tick_at_the_creation_instant_does_not_fire() -> None:
    svc = service()
    cron_id = create(svc, at("10:01:00"))

    svc.tick([cron_id], at("10:01:00"))

    assert types(svc, cron_id) == ["CronWorkflowCreated"]
    assert svc.load(cron_id).next_due() == at("10:02:00")


def test_tick_called_twice_at_the_same_instant_is_a_noop_the_second_time() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    first = svc.tick([cron_id], at("10:01:00"))
    logged = types(svc, cron_id)

    second = svc.tick([cron_id], at("10:01:00"))

    assert (first.fires, second.fires, second.saved) == (1, 0, 0)
    assert types(svc, cron_id) == logged == ["CronWorkflowCreated", "ScheduleFired"]


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        pytest.param(
            None,
            ["skip 10:02:00..10:07:00 x6 DeadlineExceeded"],
            id="no deadline: all missed ticks skipped as one range",
        ),
        pytest.param(
            600,
            ["skip 10:02:00..10:06:00 x5 CatchupLimit", "fire 10:07:00 catchup"],
            id="deadline: only the latest missed tick runs",
        ),
        pytest.param(
            20,
            ["skip 10:02:00..10:07:00 x6 DeadlineExceeded"],
            id="deadline already passed for the latest missed tick",
        ),
    ],
)
def test_ticks_missed_during_an_outage_follow_the_starting_deadline(
    deadline: int | None, expected: list[str]
) -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), startingDeadlineSeconds=deadline)
    svc.tick([cron_id], at("10:01:00"))
    before = version(svc, cron_id)

    svc.tick([cron_id], at("10:07:45"))  # the scheduler was down from 10:01 to 10:07:45

    assert decisions(svc, cron_id, before) == expected


# --------------------------------------------------------------------------- suspend / resume


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        pytest.param(
            None,
            ["skip 10:02:00..10:05:00 x4 Suspended"],
            id="no deadline: every tick of the suspension skipped",
        ),
        pytest.param(
            600,
            ["skip 10:02:00..10:04:00 x3 Suspended", "fire 10:05:00 catchup"],
            id="deadline: the latest tick of the suspension runs",
        ),
        pytest.param(
            20,
            ["skip 10:02:00..10:05:00 x4 Suspended"],
            id="latest tick of the suspension is past its deadline",
        ),
    ],
)
def test_resume_fires_at_most_one_catchup(deadline: int | None, expected: list[str]) -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), startingDeadlineSeconds=deadline)
    svc.tick([cron_id], at("10:01:00"))
    svc.suspend(cron_id, at("10:01:30"), by="alice", note="maintenance")
    svc.tick([cron_id], at("10:03:00"))  # suspended: decides nothing
    before = version(svc, cron_id)

    svc.resume(cron_id, at("10:05:30"), by="alice")
    # The resume records only itself (issue 21): the scheduler decides the ticks.
    assert types(svc, cron_id, before) == ["Resumed"]
    svc.tick([cron_id], at("10:05:30"))

    assert decisions(svc, cron_id, before) == expected
    svc.tick([cron_id], at("10:06:00"))
    assert decisions(svc, cron_id)[-1] == "fire 10:06:00 schedule"


def test_a_suspend_records_only_itself_and_an_undecided_tick_before_it_never_fires() -> None:
    """Only the scheduler decides ticks, with the state it sees (as Argo's controller): a
    suspend that came after a tick but before any scheduler decided it means no fire."""
    svc = service()
    cron_id = create(svc, at("10:00:30"))

    svc.suspend(cron_id, at("10:01:10"))  # the 10:01 tick was never ticked, though on time

    assert types(svc, cron_id) == ["CronWorkflowCreated", "Suspended"]
    assert svc.load(cron_id).next_due() is None
    svc.tick([cron_id], at("10:01:20"))  # the scheduler sees a suspended CronWorkflow
    svc.resume(cron_id, at("10:01:40"))
    svc.tick([cron_id], at("10:01:40"))
    assert fired(svc, cron_id) == []
    assert skipped(svc, cron_id) == [(at("10:01:00"), at("10:01:00"), 1, "Suspended")]


def test_next_due_follows_every_event_on_the_same_object() -> None:
    """`next_due` is kept for the version it was computed at: each event that moves the
    version is answered afresh, on the object and on a copy taken before the event."""
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    agg = svc.load(cron_id)
    assert agg.next_due() == at("10:01:00")
    copy = deepcopy(agg)
    agg.tick(at("10:01:00"))
    assert agg.next_due() == at("10:02:00")
    agg.suspend(at("10:01:10"))
    assert agg.next_due() is None
    agg.resume(at("10:01:20"))
    assert agg.next_due() == at("10:02:00")
    assert copy.next_due() == at("10:01:00")  # the copy did not move


def test_spec_suspend_true_creates_a_suspended_cronworkflow() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), suspend=True)

    svc.tick([cron_id], at("10:01:00"))
    svc.tick([cron_id], at("10:02:00"))

    agg = svc.load(cron_id)
    assert agg.suspended and agg.next_due() is None
    assert types(svc, cron_id) == ["CronWorkflowCreated", "Suspended"]
    assert of_type(svc, cron_id, "Suspended")[0].by == "spec"


def test_applying_suspend_false_resumes_with_at_most_one_run() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), suspend=True, startingDeadlineSeconds=600)

    svc.apply(manifest(suspend=False, startingDeadlineSeconds=600), at("10:04:30"))
    assert fired(svc, cron_id) == []  # the apply records only itself
    svc.tick([cron_id], at("10:04:30"))

    assert fired(svc, cron_id) == [(at("10:04:00"), child(at("10:04:00")), "catchup")]
    assert skipped(svc, cron_id) == [(at("10:01:00"), at("10:03:00"), 3, "Suspended")]


# --------------------------------------------------------------------------- spec changes


@pytest.mark.parametrize(
    ("old", "new", "deadline", "change_at", "old_decisions"),
    [
        pytest.param(
            "0 * * * *",
            "15 * * * *",
            3600,
            "11:20:00",
            [],
            id="new schedule's tick between the last run and now does not fire (Argo #7182)",
        ),
        pytest.param(
            "* * * * *",
            "*/2 * * * *",
            600,
            "11:03:30",
            ["skip 11:01:00..11:03:00 x3 DeadlineExceeded"],
            id="old missed ticks are not caught up even within the deadline",
        ),
        pytest.param(
            "@every 90s",
            "@every 120s",
            600,
            "11:02:00",
            ["skip 11:00:30..11:00:30 x1 DeadlineExceeded"],
            id="@every restarts its period at the change",
        ),
    ],
)
def test_a_schedule_change_resets_the_baseline(
    old: str,
    new: str,
    deadline: int,
    change_at: str,
    old_decisions: list[str],
) -> None:
    svc = service()
    cron_id = create(svc, at("10:59:00"), schedules=[old], startingDeadlineSeconds=deadline)
    svc.tick([cron_id], at("11:00:00"))
    before = version(svc, cron_id)

    svc.apply(manifest(schedules=[new], startingDeadlineSeconds=deadline), at(change_at))
    svc.tick([cron_id], at(change_at))

    assert decisions(svc, cron_id, before) == old_decisions
    updated = of_type(svc, cron_id, "SpecUpdated", before)
    assert [e.reset_baseline for e in updated] == [True]
    assert svc.load(cron_id).last_scheduled_time in (None, at("11:00:00"))
    # The new schedule fires from its next tick after the change, on time.
    nxt = svc.load(cron_id).next_due()
    assert nxt is not None and nxt > at(change_at)
    svc.tick([cron_id], nxt)
    assert fired(svc, cron_id, before) == [(nxt, child(nxt), "schedule")]


def test_nothing_fires_while_the_spec_is_rejected_until_a_valid_spec_arrives() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    svc.tick([cron_id], at("10:01:00"))

    svc.reject_spec(cron_id, 2, "spec.schedules[0]: L is not supported", at("10:01:30"))
    svc.tick([cron_id], at("10:02:00"))
    svc.tick([cron_id], at("10:03:00"))
    assert svc.load(cron_id).next_due() is None
    svc.apply(manifest(successfulJobsHistoryLimit=2), at("10:03:10"))
    svc.tick([cron_id], at("10:04:00"))

    # The ticks of the rejected period are closed as skipped (SpecError) when the valid
    # spec arrives: they never run, not even as a catch-up.
    assert types(svc, cron_id)[2:5] == ["SpecRejected", "ScheduleSkipped", "SpecUpdated"]
    assert [(a, b, n, r) for a, b, n, r in skipped(svc, cron_id)] == [
        (at("10:02:00"), at("10:03:00"), 2, "SpecError")
    ]
    assert [t for t, _, _ in fired(svc, cron_id)] == [at("10:01:00"), at("10:04:00")]


def test_a_schedule_change_after_a_rejected_spec_leaves_no_tick_undecided() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    svc.tick([cron_id], at("10:01:00"))
    svc.reject_spec(cron_id, 2, "spec.schedules[0]: L is not supported", at("10:01:30"))
    svc.tick([cron_id], at("10:03:00"))

    svc.apply(manifest(schedules=["*/5 * * * *"]), at("10:04:30"))
    svc.tick([cron_id], at("10:05:00"))

    # Ticks 10:02, 10:03 and 10:04 of the old schedule happened while the CronWorkflow
    # existed; each needs a decision (a skip, whatever its reason), as after a suspension.
    assert [(a, b, n) for a, b, n, _ in skipped(svc, cron_id)] == [
        (at("10:02:00"), at("10:04:00"), 3)
    ]
    assert [t for t, _, _ in fired(svc, cron_id)] == [at("10:01:00"), at("10:05:00")]


def test_a_change_that_keeps_the_schedule_does_not_reset_the_baseline() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), startingDeadlineSeconds=600)
    svc.tick([cron_id], at("10:01:00"))
    before = version(svc, cron_id)

    svc.apply(manifest(startingDeadlineSeconds=600, successfulJobsHistoryLimit=5), at("10:03:40"))
    svc.tick([cron_id], at("10:03:40"))

    assert [e.reset_baseline for e in of_type(svc, cron_id, "SpecUpdated", before)] == [False]
    # The missed 10:03 tick is still caught up: the change did not touch the schedule.
    assert fired(svc, cron_id, before) == [(at("10:03:00"), child(at("10:03:00")), "catchup")]


# --------------------------------------------------------------------------- concurrency


def test_replace_names_the_active_runs() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Replace")
    svc.tick([cron_id], at("10:01:00"))

    svc.tick([cron_id], at("10:02:00"))
    svc.run_completed(cron_id, child(at("10:01:00")), "Failed", at("10:02:01"), at("10:02:01"))
    svc.tick([cron_id], at("10:03:00"))

    replaced = [e.replaced for e in of_type(svc, cron_id, "ScheduleFired")]
    assert replaced == [[], [child(at("10:01:00"))], [child(at("10:02:00"))]]


def test_replace_tolerates_a_run_that_already_finished() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Replace")
    svc.tick([cron_id], at("10:01:00"))
    svc.run_completed(cron_id, child(at("10:01:00")), "Succeeded", at("10:01:40"), at("10:01:40"))

    svc.tick([cron_id], at("10:02:00"))

    assert of_type(svc, cron_id, "ScheduleFired")[-1].replaced == []


@pytest.mark.parametrize(
    ("deadline", "waiting", "completed_at", "after_completion"),
    [
        pytest.param(
            600,
            ["10:02:00"],
            "10:02:40",
            ["fire 10:02:00 catchup"],
            id="the waiting tick runs when the run ends",
        ),
        pytest.param(
            600,
            ["10:02:00", "10:03:00"],
            "10:03:40",
            ["skip 10:02:00..10:02:00 x1 ConcurrencyForbid", "fire 10:03:00 catchup"],
            id="only the latest waiting tick runs",
        ),
        pytest.param(
            50,
            ["10:02:00"],
            "10:02:55",
            ["skip 10:02:00..10:02:00 x1 ConcurrencyForbid"],
            id="a waiting tick past its deadline is skipped",
        ),
    ],
)
def test_forbid_with_a_deadline_decides_the_waiting_tick_when_the_run_completes(
    deadline: int,
    waiting: list[str],
    completed_at: str,
    after_completion: list[str],
) -> None:
    svc = service()
    cron_id = create(
        svc, at("10:00:30"), concurrencyPolicy="Forbid", startingDeadlineSeconds=deadline
    )
    svc.tick([cron_id], at("10:01:00"))
    for t in waiting:  # 10:01's run is active: these ticks wait
        svc.tick([cron_id], at(t))
    assert fired(svc, cron_id) == [(at("10:01:00"), child(at("10:01:00")), "schedule")]

    done = at(completed_at)
    svc.run_completed(cron_id, child(at("10:01:00")), "Succeeded", done, done)

    # Whether an older waiting tick is skipped as soon as a newer one waits, or only when
    # the run ends, the log ends up with the same decisions.
    assert decisions(svc, cron_id) == ["fire 10:01:00 schedule", *after_completion]


def test_forbid_with_a_deadline_is_next_due_when_the_waiting_tick_expires() -> None:
    svc = service()
    cron_id = create(
        svc,
        at("09:59:30"),
        schedules=["0 * * * *"],
        concurrencyPolicy="Forbid",
        startingDeadlineSeconds=600,
    )
    svc.tick([cron_id], at("10:00:00"))

    svc.tick([cron_id], at("11:00:00"))  # 10:00's run is still active: 11:00 waits

    assert decisions(svc, cron_id) == ["fire 10:00:00 schedule"]
    assert svc.load(cron_id).next_due() == at("11:10:00")
    svc.tick([cron_id], at("11:10:00"))
    assert decisions(svc, cron_id) == [
        "fire 10:00:00 schedule",
        "skip 11:00:00..11:00:00 x1 ConcurrencyForbid",
    ]
    assert svc.load(cron_id).next_due() == at("12:10:00")


def test_forbid_runs_the_latest_waiting_tick_even_when_it_is_still_on_time() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Forbid", startingDeadlineSeconds=600)
    svc.tick([cron_id], at("10:01:00"))
    svc.tick([cron_id], at("10:02:00"))
    svc.tick([cron_id], at("10:03:00"))  # 10:02 and 10:03 both wait behind 10:01's run

    # 20 s after 10:03: 10:03 is on time, 10:02 is a missed tick.
    done = at("10:03:20")
    svc.run_completed(cron_id, child(at("10:01:00")), "Succeeded", done, done)

    # Today the log ends ["fire 10:01:00 schedule", "fire 10:02:00 catchup"], and 10:03
    # keeps waiting, now behind 10:02's run (and runs too when that one ends).
    assert decisions(svc, cron_id) == [
        "fire 10:01:00 schedule",
        "skip 10:02:00..10:02:00 x1 ConcurrencyForbid",
        "fire 10:03:00 schedule",
    ]


def test_forbid_without_a_deadline_skips_at_once() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Forbid")
    svc.tick([cron_id], at("10:01:00"))

    svc.tick([cron_id], at("10:02:00"))

    assert skipped(svc, cron_id) == [(at("10:02:00"), at("10:02:00"), 1, "ConcurrencyForbid")]


def test_a_child_deleted_by_hand_stops_counting_as_active() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Forbid")
    svc.tick([cron_id], at("10:01:00"))

    svc.run_vanished(cron_id, child(at("10:01:00")), at("10:01:30"))
    svc.tick([cron_id], at("10:02:00"))

    assert svc.load(cron_id).active == {child(at("10:02:00")): at("10:02:00")}
    assert [t for t, _, _ in fired(svc, cron_id)] == [at("10:01:00"), at("10:02:00")]


# --------------------------------------------------------------------------- run results


def _run_minutes(svc: CronService, cron_id: UUID, minutes: int) -> list[str]:
    names = []
    for m in range(1, minutes + 1):
        t = at(f"10:{m:02d}:00")
        svc.tick([cron_id], t)
        names.append(child(t))
    return names


@pytest.mark.parametrize(
    ("limits", "results", "pruned"),
    [
        pytest.param(
            {},
            [(1, "Succeeded"), (2, "Succeeded"), (3, "Succeeded"), (4, "Succeeded")],
            [[1]],
            id="default keeps 3 successes",
        ),
        pytest.param(
            {},
            [(1, "Failed"), (2, "Error")],
            [[1]],
            id="default keeps 1 failure",
        ),
        pytest.param(
            {"successfulJobsHistoryLimit": 1},
            [(2, "Succeeded"), (1, "Succeeded"), (3, "Succeeded")],
            [[2], [1]],
            id="newest kept by finish time, not by tick",
        ),
        pytest.param(
            {"successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0},
            [(1, "Succeeded"), (2, "Failed")],
            [[1], [2]],
            id="0 keeps none",
        ),
        pytest.param(
            {"successfulJobsHistoryLimit": -1, "failedJobsHistoryLimit": -2},
            [(1, "Succeeded"), (2, "Failed"), (3, "Succeeded"), (4, "Failed")],
            [[2]],
            id="negative keeps the defaults, as Argo",
        ),
    ],
)
def test_history_limits_prune_the_oldest_finished_runs(
    limits: dict[str, int], results: list[tuple[int, str]], pruned: list[list[int]]
) -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), **limits)
    names = _run_minutes(svc, cron_id, 4)

    for i, (run, phase) in enumerate(results):
        done = at(f"10:04:{10 + i:02d}")
        svc.run_completed(cron_id, names[run - 1], phase, done, done)  # type: ignore[arg-type]

    got = [e.workflow_names for e in of_type(svc, cron_id, "HistoryPruned")]
    assert got == [[names[r - 1] for r in group] for group in pruned]


def test_stop_strategy_stops_the_cronworkflow_after_two_failed_runs() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), stopStrategy={"expression": "cronworkflow.failed >= 2"})
    names = _run_minutes(svc, cron_id, 3)
    svc.run_completed(cron_id, names[0], "Failed", at("10:03:10"), at("10:03:10"))
    assert "Stopped" not in types(svc, cron_id)

    svc.run_completed(cron_id, names[1], "Error", at("10:03:20"), at("10:03:20"))
    svc.tick([cron_id], at("10:04:00"))
    svc.tick([cron_id], at("10:05:00"))

    stopped = of_type(svc, cron_id, "Stopped")
    assert len(stopped) == 1 and "cronworkflow.failed >= 2" in stopped[0].reason
    assert [t for t, _, _ in fired(svc, cron_id)] == [at(f"10:0{m}:00") for m in (1, 2, 3)]
    assert svc.load(cron_id).next_due() is None
    # After a resume the scheduler decides the ticks of the stop; the stop strategy is
    # still met at that decision (as at Argo's next tick), so they are skipped as Stopped,
    # never run, and the CronWorkflow stops again.
    before = version(svc, cron_id)
    svc.resume(cron_id, at("10:05:30"))
    assert not svc.load(cron_id).stopped
    svc.tick([cron_id], at("10:05:30"))
    assert skipped(svc, cron_id, before) == [(at("10:04:00"), at("10:05:00"), 2, "Stopped")]
    assert fired(svc, cron_id, before) == []
    assert svc.load(cron_id).stopped


def test_when_false_skips_after_one_success() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), when="cronworkflow.succeeded < 1")
    svc.tick([cron_id], at("10:01:00"))
    svc.run_completed(cron_id, child(at("10:01:00")), "Succeeded", at("10:01:20"), at("10:01:20"))

    svc.tick([cron_id], at("10:02:00"))
    svc.tick([cron_id], at("10:03:00"))

    assert [t for t, _, _ in fired(svc, cron_id)] == [at("10:01:00")]
    assert skipped(svc, cron_id) == [
        (at("10:02:00"), at("10:02:00"), 1, "WhenFalse"),
        (at("10:03:00"), at("10:03:00"), 1, "WhenFalse"),
    ]


@pytest.mark.parametrize(
    ("when", "in_message"),
    [
        pytest.param("cronworkflow.faild > 1", "faild", id="unknown field (a typo)"),
        pytest.param("cronworkflow.name > 1", "mismatched types", id="type mismatch"),
        pytest.param(
            "cronworkflow.lastScheduledTime.Unix() > 0", "nil", id="method on nil before a run"
        ),
        pytest.param("cronworkflow.succeeded", "bool", id="not a bool"),
    ],
)
def test_a_when_that_cannot_be_evaluated_skips_with_a_message(when: str, in_message: str) -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), when=when)

    svc.tick([cron_id], at("10:01:00"))

    (skip,) = of_type(svc, cron_id, "ScheduleSkipped")
    assert skip.reason == "WhenFalse"
    assert in_message in skip.message
    assert fired(svc, cron_id) == []
    assert svc.load(cron_id).next_due() == at("10:02:00")


def test_when_can_use_now_as_in_argos_example() -> None:
    # argo-workflows examples/cron-when.yaml: runs every 6 minutes, because now() is read
    # a moment after the tick, as Argo reads its clock after robfig fires.
    guard = (
        "{{= cronworkflow.lastScheduledTime == nil || "
        "(now() - cronworkflow.lastScheduledTime).Seconds() > 360 }}"
    )
    svc = service()
    cron_id = create(svc, at("10:00:30"), when=guard)

    for m in range(1, 10):
        svc.tick([cron_id], at(f"10:{m:02d}:00"))

    assert [t for t, _, _ in fired(svc, cron_id)] == [at("10:01:00"), at("10:07:00")]
    assert skipped(svc, cron_id) == [
        (at(f"10:0{m}:00"), at(f"10:0{m}:00"), 1, "WhenFalse") for m in (2, 3, 4, 5, 6, 8, 9)
    ]
    assert [e.message for e in of_type(svc, cron_id, "ScheduleSkipped")] == [""] * 7


# --------------------------------------------------------------------------- manual and backfill


def test_manual_trigger_with_the_same_request_id_starts_one_run() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))

    first = svc.trigger(cron_id, at("10:00:40"), "request-1")
    retried = svc.trigger(cron_id, at("10:00:50"), "request-1")
    other = svc.trigger(cron_id, at("10:00:55"), "request-2")

    assert first is not None and retried is None and other not in (None, first)
    manual = fired(svc, cron_id)
    assert [(n, g) for _, n, g in manual] == [(first, "manual"), (other, "manual")]
    # No tick can take a manual run's name, and a manual run does not move lastScheduledTime.
    assert not any(re.fullmatch(r"nightly-\d+", n) for _, n, _ in manual)
    assert svc.load(cron_id).last_scheduled_time is None


def test_backfill_fires_skipped_ticks_and_never_refires_a_fired_one() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    svc.tick([cron_id], at("10:01:00"))
    svc.tick([cron_id], at("10:04:00"))  # 10:02 and 10:03 missed (skipped), 10:04 fires
    assert skipped(svc, cron_id) == [(at("10:02:00"), at("10:03:00"), 2, "DeadlineExceeded")]
    before = version(svc, cron_id)

    planned = svc.backfill(cron_id, at("09:59:00"), at("10:10:00"), at("10:04:10"), dry_run=True)
    assert version(svc, cron_id) == before
    done = svc.backfill(cron_id, at("09:59:00"), at("10:10:00"), at("10:04:10"))
    again = svc.backfill(cron_id, at("09:59:00"), at("10:10:00"), at("10:04:20"))

    # Ticks before creation and skipped ones run; fired ones and undecided (future) ones do not.
    expected = [at("09:59:00"), at("10:00:00"), at("10:02:00"), at("10:03:00")]
    assert planned == done == expected
    assert again == []
    assert fired(svc, cron_id, before) == [(t, child(t), "backfill") for t in expected]
    assert svc.load(cron_id).last_scheduled_time == at("10:04:00")
    # Backfill did not decide anything: the scheduler still fires 10:05 on time.
    svc.tick([cron_id], at("10:05:00"))
    assert fired(svc, cron_id)[-1] == (at("10:05:00"), child(at("10:05:00")), "schedule")


# --------------------------------------------------------------------------- lifecycle


def test_delete_then_reapply_creates_a_new_stream_and_keeps_the_old_history() -> None:
    svc = service()
    old_id = create(svc, at("10:00:30"))
    svc.tick([old_id], at("10:01:00"))
    svc.delete(old_id, at("10:01:30"))
    old_log = types(svc, old_id)

    new_id, outcome = svc.apply(manifest(), at("10:02:30"))
    svc.tick([old_id, new_id], at("10:03:00"))

    assert outcome == "created" and new_id != old_id
    assert svc.load(new_id).incarnation == 1 and svc.load(old_id).incarnation == 0
    assert svc.find("default", "nightly").id == new_id
    assert old_log == ["CronWorkflowCreated", "ScheduleFired", "CronWorkflowDeleted"]
    assert types(svc, old_id) == old_log  # the deleted stream decides nothing more
    assert fired(svc, new_id) == [(at("10:03:00"), child(at("10:03:00")), "schedule")]


# --------------------------------------------------------------------------- concurrent writers


@pytest.fixture(params=["memory", "sqlite"])
def replicas(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[CronService, CronService]]:
    """Two CronService instances on one store."""
    if request.param == "memory":
        first = service()
        yield first, CronService(env=MEMORY, recorder=first.recorder)
        return
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "s.db")}
    first, second = CronService(env=env), CronService(env=env)
    yield first, second
    first.close()
    second.close()


@pytest.mark.parametrize("winner_first", [True, False], ids=["first saves first", "second saves"])
def test_two_replicas_deciding_the_same_tick_fire_it_once(
    replicas: tuple[CronService, CronService], winner_first: bool
) -> None:
    a, b = replicas
    cron_id = create(a, at("10:00:30"))

    decided_a = a.decide_batch([cron_id], at("10:01:00"))
    decided_b = b.decide_batch([cron_id], at("10:01:00"))
    winner, loser = (a, b) if winner_first else (b, a)
    w_aggs, l_aggs = (decided_a, decided_b) if winner_first else (decided_b, decided_a)
    won = winner.commit_batch(w_aggs, at("10:01:00"))
    lost = loser.commit_batch(l_aggs, at("10:01:00"))

    assert fired(a, cron_id) == [(at("10:01:00"), child(at("10:01:00")), "schedule")]
    assert (won.fires, lost.fires) == (1, 0)
    assert loser.rejected_writes >= 1 and winner.rejected_writes == 0
    assert lost.rejected == 1
    for svc in (a, b):
        assert svc.load(cron_id).last_scheduled_time == at("10:01:00")


def test_a_stale_writer_is_rejected_and_last_scheduled_time_never_decreases(
    replicas: tuple[CronService, CronService],
) -> None:
    """Argo #4558: a writer that decided on old state must not patch an old
    lastScheduledTime over a new one, nor start a second run."""
    a, b = replicas
    cron_id = create(a, at("10:00:30"))
    stale = b.decide_batch([cron_id], at("10:01:00"))  # b decides 10:01, then stalls

    a.tick([cron_id], at("10:01:00"))
    a.tick([cron_id], at("10:02:00"))
    report = b.commit_batch(stale, at("10:01:00"))

    assert report.rejected == 1 and b.rejected_writes == 1
    assert [t for t, _, _ in fired(a, cron_id)] == [at("10:01:00"), at("10:02:00")]
    for svc in (a, b):
        assert svc.load(cron_id).last_scheduled_time == at("10:02:00")
