"""Adopting Argo's status (issue 21 item 7): the first time cronsource takes an object Argo's
controller ran, its counts, active runs, last tick, stop and conditions carry over, so that
`stopStrategy`, `Forbid` and catch-up go on from where Argo left off; a status that cannot be
read whole is taken in part, naming what was left out.

Application level (CronService on the memory store), times as arguments: `at("10:01:00")` is
2026-05-04 10:01:00 UTC. The Kubernetes side (the watch reading a real object) is in
tests/e2e/test_kube_adopt.py; Argo's real controller on both sides of a move in
tests/e2e/test_argo_controller_interop.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import pytest

from cronsource.domain.adoption import (
    ANNOTATION_LAST_USED_SCHEDULE,
    ANNOTATION_SCHEDULED,
    ArgoStatus,
    read_argo_status,
    with_running_children,
)
from cronsource.domain.cronworkflow import CronWorkflow, CronWorkflowSnapshot
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import CronService, event_type
from cronsource.projections.readmodel import audit_row, labels_of, status_of
from tests.instants import at

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def child(t: datetime, cron: str = "moved") -> str:
    return f"{cron}-{int(t.timestamp())}"


def cluster_object(
    status: Any = None, *, last_used: str | None = "* * * * *", **spec: Any
) -> dict[str, Any]:
    """A CronWorkflow as the cluster holds it once Argo's controller ran it: the status and
    Argo's last-used-schedule annotation (None: no annotation)."""
    spec.setdefault("schedules", ["* * * * *"])
    spec.setdefault(
        "workflowSpec",
        {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
    )
    annotations = {} if last_used is None else {ANNOTATION_LAST_USED_SCHEDULE: last_used}
    obj: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "moved", "namespace": "default", "annotations": annotations},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def adopt(obj: dict[str, Any], when: datetime) -> tuple[CronService, UUID, ArgoStatus]:
    """What the Kubernetes watch does with an object it takes for the first time."""
    svc = CronService(env=MEMORY)
    status = read_argo_status(obj, "default", when)
    manifest = parse_manifest({k: v for k, v in obj.items() if k != "status"})
    cron_id, what = svc.apply(manifest, when, adopt=status)
    assert what == "created"
    return svc, cron_id, status


def types(svc: CronService, cron_id: UUID, after: int = 0) -> list[str]:
    return [event_type(e) for e in svc.events.get(cron_id, gt=after or None)]


def skips(svc: CronService, cron_id: UUID) -> list[tuple[datetime, datetime, int, str]]:
    return [
        (e.scheduled_time, e.last_scheduled_time, e.count, e.reason)
        for e in svc.events.get(cron_id)
        if event_type(e) == "ScheduleSkipped"
    ]


def fires(svc: CronService, cron_id: UUID) -> list[tuple[datetime, str]]:
    return [
        (e.scheduled_time, e.trigger)
        for e in svc.events.get(cron_id)
        if event_type(e) == "ScheduleFired"
    ]


ARGO_RAN = {
    "active": [
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "name": child(at("10:00:00")),
            "namespace": "default",
            "uid": "0b7b4b7e-0000-4000-8000-000000000001",
        }
    ],
    "lastScheduledTime": "2026-05-04T10:00:00Z",
    "succeeded": 4,
    "failed": 2,
    "phase": "Active",
    "conditions": [{"type": "SubmissionError", "status": "True", "message": "quota"}],
}


# ---------------------------------------------------------------------- reading Argo's status


def test_a_whole_status_is_read_as_argo_wrote_it() -> None:
    status = read_argo_status(cluster_object(ARGO_RAN), "default", at("10:00:20"))
    assert status == ArgoStatus(
        last_scheduled_time=at("10:00:00"),
        succeeded=4,
        failed=2,
        active=((child(at("10:00:00")), at("10:00:00")),),
        conditions=({"type": "SubmissionError", "status": "True", "message": "quota"},),
        stopped=False,
        catch_up=True,
        unreadable=(),
    )


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        pytest.param("failed", "2", "status.failed: '2' is not a count", id="failed a string"),
        pytest.param("succeeded", -1, "status.succeeded: -1 is not a count", id="negative"),
        pytest.param("succeeded", True, "status.succeeded: True is not a count", id="a bool"),
        pytest.param(
            "lastScheduledTime",
            "yesterday",
            "status.lastScheduledTime: 'yesterday' is not an RFC 3339 time",
            id="time not a time",
        ),
        pytest.param(
            "lastScheduledTime",
            "2031-01-01T00:00:00Z",
            "status.lastScheduledTime: '2031-01-01T00:00:00Z' is later than now",
            id="time far ahead",
        ),
        pytest.param("active", "x", "status.active: 'x' is not a list", id="active a string"),
        pytest.param("active", [{"uid": "u"}], "status.active[0].name: None", id="ref no name"),
        pytest.param(
            "active",
            [{"name": "w", "namespace": "other"}],
            "status.active[0].namespace: 'other' is not the CronWorkflow's (default)",
            id="ref elsewhere",
        ),
        pytest.param("conditions", {"a": 1}, "status.conditions: {'a': 1}", id="conditions map"),
        pytest.param("conditions", [{"status": "True"}], "status.conditions[0].type", id="no type"),
        pytest.param("phase", "Paused", "status.phase: 'Paused'", id="unknown phase"),
    ],
)
def test_a_malformed_field_is_named_and_the_rest_is_taken(
    field: str, value: Any, named: str
) -> None:
    status = read_argo_status(cluster_object({**ARGO_RAN, field: value}), "default", at("10:00:20"))
    (problem,) = status.unreadable
    assert problem.startswith(named), problem
    whole = read_argo_status(cluster_object(ARGO_RAN), "default", at("10:00:20"))
    # Everything else is what the whole status gives.
    for other in ("succeeded", "failed", "active", "conditions", "last_scheduled_time"):
        key = {"last_scheduled_time": "lastScheduledTime"}.get(other, other)
        if key != field:
            assert getattr(status, other) == getattr(whole, other), other


def test_a_status_that_is_not_an_object_is_named_and_nothing_is_taken() -> None:
    status = read_argo_status(cluster_object("broken"), "default", at("10:00:20"))
    assert status.unreadable == ("status: 'broken' is not an object",)
    assert (status.succeeded, status.failed, status.active) == (0, 0, ())


def test_an_object_no_controller_ran_has_nothing_to_adopt() -> None:
    assert read_argo_status(cluster_object(), "default", at("10:00:20")).empty
    svc, cron_id, _ = adopt(cluster_object(), at("10:00:20"))
    assert types(svc, cron_id) == ["CronWorkflowCreated"]


@pytest.mark.parametrize(
    ("last_used", "schedules", "timezone", "catch_up"),
    [
        pytest.param("* * * * *", ["* * * * *"], "", True, id="same schedule"),
        pytest.param(
            "CRON_TZ=Europe/Paris 0 9 * * *,CRON_TZ=Europe/Paris 0 18 * * *",
            ["0 9 * * *", "0 18 * * *"],
            "Europe/Paris",
            True,
            id="zone and two schedules, as Argo writes them",
        ),
        pytest.param("*/5 * * * *", ["* * * * *"], "", False, id="schedule changed since"),
        pytest.param(None, ["* * * * *"], "", False, id="no annotation"),
    ],
)
def test_catch_up_follows_argos_last_used_schedule(
    last_used: str | None, schedules: list[str], timezone: str, catch_up: bool
) -> None:
    """Argo's own catch-up (`shouldOutstandingWorkflowsBeRun`) runs nothing after a schedule
    change, which its last-used-schedule annotation tells."""
    obj = cluster_object(ARGO_RAN, last_used=last_used, schedules=schedules, timezone=timezone)
    assert read_argo_status(obj, "default", at("10:00:20")).catch_up is catch_up


OWNER = "0b7b4b7e-0000-4000-8000-0000000000aa"


def workflow(
    name: str, phase: str | None, owner: str = OWNER, scheduled: str | None = None
) -> dict[str, Any]:
    """A child Workflow as the cluster holds it: its owner, Argo's annotation, its phase."""
    meta: dict[str, Any] = {
        "name": name,
        "ownerReferences": [{"kind": "CronWorkflow", "name": "moved", "uid": owner}],
    }
    if scheduled is not None:
        meta["annotations"] = {ANNOTATION_SCHEDULED: scheduled}
    return {"metadata": meta, "status": {} if phase is None else {"phase": phase}}


def test_a_running_child_the_status_does_not_list_is_taken_as_argos_next_pass_lists_it() -> None:
    """Argo's syncAll wrote the run of 10:01 out of `active` (its lists predate the fire);
    its next pass would list it again, since it has not ended. Ended children, children of
    another object of that name and the runs listed already are left as they are."""
    status = read_argo_status(
        cluster_object({**ARGO_RAN, "lastScheduledTime": "2026-05-04T10:01:00Z"}),
        "default",
        at("10:01:04"),
    )
    children = [
        workflow(child(at("10:00:00")), "Running"),  # listed already
        workflow(child(at("10:01:00")), "Running"),  # written out: taken
        workflow(child(at("09:59:00")), "Succeeded"),  # ended: Argo counted it, or never will
        workflow(child(at("09:58:00")), "Error"),
        workflow(child(at("10:00:30")), "Running", owner="another-uid"),  # not this object's
        workflow("moved-manual", None, scheduled="2026-05-04T10:00:40Z"),  # pending, manual
    ]
    taken, added = with_running_children(status, children, OWNER, at("10:01:04"))
    assert added == ("moved-manual", child(at("10:01:00")))
    assert taken.active == (
        (child(at("10:00:00")), at("10:00:00")),
        ("moved-manual", at("10:00:40")),
        (child(at("10:01:00")), at("10:01:00")),
    )
    assert taken == ArgoStatus(**{**status.__dict__, "active": taken.active})


def test_with_no_child_to_add_the_status_is_the_same() -> None:
    status = read_argo_status(cluster_object(ARGO_RAN), "default", at("10:00:20"))
    assert with_running_children(status, [], OWNER, at("10:00:20")) == (status, ())


def test_a_dropped_run_is_counted_when_it_ends() -> None:
    obj = cluster_object({**ARGO_RAN, "lastScheduledTime": "2026-05-04T10:01:00Z"})
    status, _ = with_running_children(
        read_argo_status(obj, "default", at("10:01:04")),
        [workflow(child(at("10:01:00")), "Running")],
        OWNER,
        at("10:01:04"),
    )
    svc = CronService(env=MEMORY)
    manifest = parse_manifest({k: v for k, v in obj.items() if k != "status"})
    cron_id, _ = svc.apply(manifest, at("10:01:04"), adopt=status)
    svc.run_completed(cron_id, child(at("10:01:00")), "Succeeded", at("10:01:12"), at("10:01:12"))
    assert svc.load(cron_id).succeeded == 5


# ---------------------------------------------------------------------- the adopted state


def test_adoption_is_recorded_in_the_save_that_creates_the_stream() -> None:
    svc, cron_id, _ = adopt(cluster_object(ARGO_RAN), at("10:00:20"))
    created, adopted = svc.events.get(cron_id)
    assert event_type(adopted) == "StatusAdopted"
    notes = svc.recorder.select_notifications(start=1, limit=10)
    assert [n.originator_version for n in notes] == [1, 2]  # nothing in between
    row = audit_row(adopted, svc.load(cron_id), 2)
    assert (row.detail["succeeded"], row.detail["failed"]) == (4, 2)
    assert row.detail["active"] == [child(at("10:00:00"))]
    assert row.detail["lastScheduledTime"] == "2026-05-04T10:00:00Z"


def test_the_status_shows_what_argo_showed() -> None:
    svc, cron_id, _ = adopt(cluster_object(ARGO_RAN), at("10:00:20"))
    status = status_of(svc.load(cron_id))
    assert status["succeeded"] == 4 and status["failed"] == 2
    assert status["lastScheduledTime"] == "2026-05-04T10:00:00Z"
    assert [a["name"] for a in status["active"]] == [child(at("10:00:00"))]
    assert status["phase"] == "Active"
    assert status["conditions"] == [
        {"type": "SubmissionError", "status": "True", "message": "quota"}
    ]


def test_adopted_conditions_clear_at_the_first_fire_as_argos_run_clears_them() -> None:
    svc, cron_id, _ = adopt(cluster_object({**ARGO_RAN, "active": []}), at("10:00:20"))
    svc.tick([cron_id], at("10:01:00"))
    assert status_of(svc.load(cron_id))["conditions"] == []


def test_a_stop_strategy_on_failures_counts_argos_failures() -> None:
    """failed was 2 under Argo: the third failure stops it, not the fifth."""
    stop = {"expression": "cronworkflow.failed >= 3"}
    obj = cluster_object(ARGO_RAN, stopStrategy=stop)
    svc, cron_id, _ = adopt(obj, at("10:00:20"))
    svc.run_completed(cron_id, child(at("10:00:00")), "Failed", at("10:00:30"), at("10:00:30"))
    agg = svc.load(cron_id)
    assert agg.failed == 3 and agg.stopped
    assert "Stopped" in types(svc, cron_id)
    svc.tick([cron_id], at("10:01:00"))
    assert fires(svc, cron_id) == []


def test_a_stop_argo_met_stays_met() -> None:
    obj = cluster_object({**ARGO_RAN, "phase": "Stopped", "active": []})
    svc, cron_id, _ = adopt(obj, at("10:00:20"))
    agg = svc.load(cron_id)
    assert agg.stopped and status_of(agg)["phase"] == "Stopped"
    assert labels_of(agg)["cronworkflows.argoproj.io/completed"] == "true"
    svc.tick([cron_id], at("10:03:00"))
    assert fires(svc, cron_id) == []


def test_forbid_waits_for_the_run_argo_started() -> None:
    obj = cluster_object(ARGO_RAN, concurrencyPolicy="Forbid")
    svc, cron_id, _ = adopt(obj, at("10:00:20"))
    svc.tick([cron_id], at("10:01:00"))
    assert fires(svc, cron_id) == []
    assert skips(svc, cron_id) == [(at("10:01:00"), at("10:01:00"), 1, "ConcurrencyForbid")]
    svc.run_completed(cron_id, child(at("10:00:00")), "Succeeded", at("10:01:30"), at("10:01:30"))
    assert svc.load(cron_id).succeeded == 5
    svc.tick([cron_id], at("10:02:00"))
    assert fires(svc, cron_id) == [(at("10:02:00"), "schedule")]


def test_catch_up_goes_on_from_argos_last_tick() -> None:
    """Argo's controller stopped after 10:00; cronsource takes the object at 10:04:40, as
    Argo's controller would take it when it starts again (`runOutstandingWorkflows`): with
    startingDeadlineSeconds the latest missed tick runs; the ticks before it were Argo's."""
    obj = cluster_object({**ARGO_RAN, "active": []}, startingDeadlineSeconds=120)
    svc, cron_id, _ = adopt(obj, at("10:04:40"))
    assert svc.load(cron_id).next_due() == at("10:04:00")
    svc.tick([cron_id], at("10:04:40"))
    assert fires(svc, cron_id) == [(at("10:04:00"), "catchup")]
    assert skips(svc, cron_id) == []


def test_without_a_deadline_nothing_missed_is_caught_up() -> None:
    obj = cluster_object({**ARGO_RAN, "active": []})
    svc, cron_id, _ = adopt(obj, at("10:04:40"))
    assert svc.load(cron_id).next_due() == at("10:05:00")


def test_a_tick_argo_skipped_before_the_move_is_not_decided_again() -> None:
    """Argo's controller skipped 10:01 for Forbid (its run of 10:00 was active) and the
    object moved at 10:01:05; the run ends at 10:01:10. The tick was Argo's to decide: it
    does not run now, five seconds late. The next one does."""
    obj = cluster_object(ARGO_RAN, concurrencyPolicy="Forbid")
    svc, cron_id, _ = adopt(obj, at("10:01:05"))
    svc.run_completed(cron_id, child(at("10:00:00")), "Failed", at("10:01:10"), at("10:01:10"))
    svc.tick([cron_id], at("10:01:10"))
    assert fires(svc, cron_id) == [] and skips(svc, cron_id) == []
    svc.tick([cron_id], at("10:02:00"))
    assert fires(svc, cron_id) == [(at("10:02:00"), "schedule")]


def test_a_changed_schedule_is_not_caught_up() -> None:
    obj = cluster_object(
        {**ARGO_RAN, "active": []}, last_used="*/5 * * * *", startingDeadlineSeconds=120
    )
    svc, cron_id, _ = adopt(obj, at("10:04:20"))
    assert svc.load(cron_id).next_due() == at("10:05:00")
    svc.tick([cron_id], at("10:04:20"))
    assert fires(svc, cron_id) == [] and skips(svc, cron_id) == []
    assert svc.load(cron_id).last_scheduled_time == at("10:00:00")


def test_every_goes_on_with_argos_period() -> None:
    """Argo fired `@every 10s` at 10:00:07; taken at 10:00:12, the next tick is 10:00:17, not
    ten seconds after the adoption."""
    obj = cluster_object(
        {"lastScheduledTime": "2026-05-04T10:00:07Z", "active": []},
        last_used="@every 10s",
        schedules=["@every 10s"],
    )
    svc, cron_id, _ = adopt(obj, at("10:00:12"))
    assert svc.load(cron_id).next_due() == at("10:00:17")
    svc.tick([cron_id], at("10:00:17"))
    assert fires(svc, cron_id) == [(at("10:00:17"), "schedule")]


def test_a_malformed_field_is_recorded_in_the_event() -> None:
    obj = cluster_object({**ARGO_RAN, "failed": "two"})
    svc, cron_id, status = adopt(obj, at("10:00:20"))
    _, adopted = svc.events.get(cron_id)
    assert adopted.unreadable == list(status.unreadable)
    assert adopted.unreadable[0].startswith("status.failed: 'two'")
    agg = svc.load(cron_id)
    assert (agg.failed, agg.succeeded, list(agg.active)) == (0, 4, [child(at("10:00:00"))])


def test_an_update_adopts_nothing() -> None:
    """Only the first time: a live stream's counts are its own from then on."""
    svc, cron_id, _ = adopt(cluster_object(ARGO_RAN), at("10:00:20"))
    later = read_argo_status(cluster_object({**ARGO_RAN, "failed": 9}), "default", at("10:00:30"))
    manifest = parse_manifest(cluster_object(suspend=True))
    assert svc.apply(manifest, at("10:00:30"), adopt=later) == (cron_id, "updated")
    assert svc.load(cron_id).failed == 2
    assert types(svc, cron_id).count("StatusAdopted") == 1


def test_a_snapshot_keeps_the_adopted_state() -> None:
    svc, cron_id, _ = adopt(cluster_object(ARGO_RAN), at("10:00:20"))
    agg = svc.load(cron_id)
    back = CronWorkflowSnapshot.take(agg).mutate(None)
    assert back.adopted == agg.adopted and back.adopted is not None
    assert back.adopted["conditions"][0]["type"] == "SubmissionError"
    assert status_of(back) == status_of(agg)


def test_a_version_1_snapshot_has_adopted_nothing() -> None:
    svc, cron_id, _ = adopt(cluster_object(ARGO_RAN), at("10:00:20"))
    state = dict(CronWorkflowSnapshot.take(svc.load(cron_id)).state)
    del state["adopted"]
    CronWorkflow.upcast_v1_v2(state)
    assert state["adopted"] is None
