"""No run starts past its deadline (docs/design.md invariant 4; issue 21 item 2).

A schedule or catch-up fire whose Workflow the dispatcher would create at or after its tick +
`startingDeadlineSeconds` (the late tolerance when that is unset) is not created: a
RunNotStarted event says so, with the delay, and the run stops counting as active. Manual and
backfill fires have no deadline. A Workflow that exists already (created before a crash kept
the dispatch position from moving) is success, never "not started".

Three levels: the aggregate given/when/then through CronService on the memory store; the
dispatcher over a real LocalTarget directory at chosen instants; and the runtime's own loop on
a virtual clock, with the dispatcher down or failing while the scheduler fires. The same rule
through real processes (`kill -9` of `cronsource run`) is in tests/e2e/test_faults_not_started.py,
and against the real API server in tests/integration/test_kube_not_started.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import Tracking

from cronsource.adapters.application.explain import explain
from cronsource.adapters.application.statuspage import child_workflows
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http.timeline import timeline, window_bounds
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.projections.dispatch import Creation, start_deadline
from cronsource.projections.readmodel import status_of
from tests.instants import at
from tests.unit.test_aggregate import child, create, decisions, manifest, of_type, service, types

TICK = at("10:01:00")
NAME = child(TICK)


# ------------------------------------------------------------------------- the aggregate


def test_a_run_not_started_stops_counting_as_active_and_records_the_delay() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"), startingDeadlineSeconds=60)
    svc.tick([cron_id], TICK)
    assert svc.load(cron_id).active == {NAME: TICK}

    recorded = svc.run_not_started(
        cron_id, NAME, "DeadlineExceeded", "reached late", 1500.0, 60.0, at("10:26:00")
    )

    assert recorded is True
    (ev,) = of_type(svc, cron_id, "RunNotStarted")
    assert (ev.workflow_name, ev.scheduled_time, ev.reason, ev.message) == (
        NAME,
        TICK,
        "DeadlineExceeded",
        "reached late",
    )
    assert (ev.late_seconds, ev.deadline_seconds, ev.timestamp) == (1500.0, 60.0, at("10:26:00"))
    assert svc.load(cron_id).active == {}


def test_forbid_fires_the_next_tick_after_a_run_that_was_not_started() -> None:
    """The slot is free: without the release the 10:02 tick would find the 10:01 run active
    and be skipped as ConcurrencyForbid, for a run that never existed."""
    svc = service()
    cron_id = create(svc, at("10:00:30"), concurrencyPolicy="Forbid")
    svc.tick([cron_id], TICK)
    svc.run_not_started(cron_id, NAME, "DeadlineExceeded", "late", 40.0, 30.0, at("10:01:40"))

    svc.tick([cron_id], at("10:02:00"))

    assert decisions(svc, cron_id) == ["fire 10:01:00 schedule", "fire 10:02:00 schedule"]


def test_forbid_with_a_deadline_is_due_at_once_when_the_active_run_was_not_started() -> None:
    """The 11:00 tick waits behind 10:00's run until 11:10 (its deadline); once that run is
    recorded as not started, nothing blocks it: it is due now, not at its expiry."""
    svc = service()
    cron_id = create(
        svc,
        at("09:59:30"),
        schedules=["0 * * * *"],
        concurrencyPolicy="Forbid",
        startingDeadlineSeconds=600,
    )
    svc.tick([cron_id], at("10:00:00"))
    svc.tick([cron_id], at("11:00:00"))
    assert svc.load(cron_id).next_due() == at("11:10:00")

    svc.run_not_started(
        cron_id, child(at("10:00:00")), "DeadlineExceeded", "late", 3720.0, 600.0, at("11:02:00")
    )

    assert svc.load(cron_id).next_due() == at("11:00:00")
    svc.tick([cron_id], at("11:02:00"))
    assert decisions(svc, cron_id) == ["fire 10:00:00 schedule", "fire 11:00:00 catchup"]


@pytest.mark.parametrize(
    "before",
    [
        pytest.param(
            lambda svc, cid: svc.run_not_started(
                cid, NAME, "DeadlineExceeded", "late", 40.0, 30.0, at("10:01:40")
            ),
            id="recorded already (a replayed batch)",
        ),
        pytest.param(
            lambda svc, cid: svc.run_completed(
                cid, NAME, "Succeeded", at("10:01:20"), at("10:01:20")
            ),
            id="the run completed",
        ),
        pytest.param(
            lambda svc, cid: svc.run_vanished(cid, NAME, at("10:01:20")),
            id="the run was deleted by hand",
        ),
    ],
)
def test_a_run_that_is_not_active_is_never_recorded_as_not_started(before: Any) -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    svc.tick([cron_id], TICK)
    before(svc, cron_id)
    version = svc.load(cron_id).version

    again = svc.run_not_started(
        cron_id, NAME, "DeadlineExceeded", "late", 50.0, 30.0, at("10:01:50")
    )

    assert again is False
    assert svc.load(cron_id).version == version
    assert len(of_type(svc, cron_id, "RunNotStarted")) <= 1


def test_the_status_shows_a_submission_error_until_a_later_tick_fires() -> None:
    svc = service()
    cron_id = create(svc, at("10:00:30"))
    svc.tick([cron_id], TICK)
    svc.run_not_started(cron_id, NAME, "DeadlineExceeded", "why", 40.0, 30.0, at("10:01:40"))

    status = status_of(svc.load(cron_id))
    assert status["active"] == []
    assert status["lastScheduledTime"] == "2026-05-04T10:01:00Z"
    assert status["conditions"] == [
        {
            "type": "SubmissionError",
            "status": "True",
            "message": f"workflow {NAME} not started: why",
        }
    ]

    svc.tick([cron_id], at("10:02:00"))
    assert status_of(svc.load(cron_id))["conditions"] == []


# ------------------------------------------------------------------------- the deadline


@pytest.mark.parametrize(
    ("spec", "trigger", "expected"),
    [
        pytest.param({"startingDeadlineSeconds": 60}, "schedule", timedelta(seconds=60), id="set"),
        pytest.param({}, "schedule", DEFAULT_LATE_TOLERANCE, id="unset: the late tolerance"),
        pytest.param(
            {"startingDeadlineSeconds": 0}, "catchup", DEFAULT_LATE_TOLERANCE, id="0 is unset"
        ),
        pytest.param(
            {"startingDeadlineSeconds": 300}, "catchup", timedelta(seconds=300), id="catch-up"
        ),
        pytest.param({"startingDeadlineSeconds": 60}, "manual", None, id="manual: none"),
        pytest.param({"startingDeadlineSeconds": 60}, "backfill", None, id="backfill: none"),
    ],
)
def test_a_fires_starting_deadline(
    spec: dict[str, Any], trigger: str, expected: timedelta | None
) -> None:
    agg = CronWorkflow.from_manifest(manifest(**spec), at("10:00:00"))
    assert start_deadline(agg, trigger, DEFAULT_LATE_TOLERANCE) == expected


# ------------------------------------------------------------------------- the dispatcher


class Crash(Exception):
    """The process dies here (before the dispatch position moves)."""


@pytest.fixture
def target(tmp_path: Path) -> LocalTarget:
    return LocalTarget(tmp_path / "workflows")


def apply(engine: Engine, name: str = "nightly", **spec: Any) -> UUID:
    cron_id, _ = engine.service.apply(manifest(name, **spec), at("10:00:30"))
    return cron_id


def event_types(engine: Engine, cron_id: UUID) -> list[str]:
    return types(engine.service, cron_id)


def dispatch(engine: Engine, when: datetime) -> None:
    """Everything in the log through the dispatcher at `when` (the runtime's clock)."""
    engine.projector.dispatch(when)


@pytest.mark.parametrize(
    ("after_tick", "created"),
    [
        pytest.param(timedelta(seconds=0), True, id="at the tick"),
        pytest.param(timedelta(seconds=60, microseconds=-1), True, id="just inside the deadline"),
        pytest.param(timedelta(seconds=60), False, id="at the deadline"),
        pytest.param(timedelta(minutes=25), False, id="25 minutes late (issue 21)"),
    ],
)
def test_a_fire_is_created_until_its_deadline_and_never_after(
    engine: Engine, target: LocalTarget, after_tick: timedelta, created: bool
) -> None:
    cron_id = apply(engine, startingDeadlineSeconds=60)
    engine.service.tick([cron_id], TICK)

    dispatch(engine, TICK + after_tick)

    assert target.exists("default", NAME) is created
    not_started = of_type(engine.service, cron_id, "RunNotStarted")
    if created:
        assert not_started == []
        assert engine.service.load(cron_id).active == {NAME: TICK}
        return
    (ev,) = not_started
    assert ev.late_seconds == after_tick.total_seconds() and ev.deadline_seconds == 60.0
    assert ev.message == (
        f"the dispatcher reached it {'60s' if after_tick.seconds == 60 else '25m'} after its"
        " tick, past its starting deadline of 60s (startingDeadlineSeconds: 60)"
    )
    assert engine.service.load(cron_id).active == {}


def test_without_a_deadline_the_late_tolerance_of_the_run_is_the_deadline(
    target: LocalTarget,
) -> None:
    """`run --late-tolerance 5s`: the dispatcher uses the runtime's tolerance, not 30 s."""
    engine = bootstrap("memory:", target=target, late_tolerance=timedelta(seconds=5))
    try:
        early, late = apply(engine, "early"), apply(engine, "late")
        engine.service.tick([early], TICK)
        dispatch(engine, TICK + timedelta(seconds=4.9))
        engine.service.tick([late], TICK + timedelta(seconds=1))
        dispatch(engine, TICK + timedelta(seconds=5))

        assert target.exists("default", child(TICK, "early"))
        assert not target.exists("default", child(TICK, "late"))
        (ev,) = of_type(engine.service, late, "RunNotStarted")
        assert ev.message.endswith(
            "past its starting deadline of 5s (the late tolerance of 5s;"
            " startingDeadlineSeconds is unset)"
        )
    finally:
        engine.close()


def test_manual_and_backfill_runs_have_no_deadline(engine: Engine, target: LocalTarget) -> None:
    cron_id = apply(engine)
    engine.service.tick([cron_id], at("10:05:00"))  # 10:01..10:04 missed (no deadline): skipped
    manual = engine.service.trigger(cron_id, at("10:06:00"), "request-1")
    backfilled = engine.service.backfill(cron_id, at("10:01:00"), at("10:04:00"), at("10:06:00"))
    assert manual is not None and len(backfilled) == 4

    dispatch(engine, at("15:00:00"))  # hours later: the dispatcher was down

    assert target.exists("default", manual)
    assert all(target.exists("default", child(t)) for t in backfilled)
    # The one schedule fire among them has a deadline, and it is long past.
    assert not target.exists("default", child(at("10:05:00")))
    (ev,) = of_type(engine.service, cron_id, "RunNotStarted")
    assert ev.workflow_name == child(at("10:05:00"))


class CrashBeforeTrack:
    """The dispatch position store of a process that dies right before the position moves."""

    def __init__(self, positions: Any) -> None:
        self.positions = positions

    def max_tracking_id(self, application_name: str, projection: str | None = None) -> int | None:
        return self.positions.max_tracking_id(application_name, projection)  # type: ignore[no-any-return]

    def track(self, projection: str, tracking: Tracking) -> bool:
        raise Crash


def crash_before_the_position_moves(engine: Engine, when: datetime) -> None:
    dispatcher = engine.dispatcher
    assert dispatcher is not None
    positions = dispatcher.positions
    dispatcher.positions = CrashBeforeTrack(positions)
    try:
        with pytest.raises(Crash):
            dispatch(engine, when)
    finally:
        dispatcher.positions = positions


def test_a_workflow_created_before_a_crash_is_done_when_the_replay_comes_past_the_deadline(
    engine: Engine, target: LocalTarget
) -> None:
    cron_id = apply(engine, startingDeadlineSeconds=60)
    engine.service.tick([cron_id], TICK)
    crash_before_the_position_moves(engine, TICK + timedelta(seconds=2))
    assert target.exists("default", NAME)

    dispatch(engine, TICK + timedelta(minutes=30))  # the restart, long after the deadline

    assert "RunNotStarted" not in event_types(engine, cron_id)
    assert engine.service.load(cron_id).active == {NAME: TICK}
    (wf,) = target.workflows()
    assert wf["name"] == NAME and wf["creationTimestamp"] == "2026-05-04T10:01:02+00:00"


def test_a_replay_after_not_started_was_recorded_records_nothing_more_and_creates_nothing(
    engine: Engine, target: LocalTarget
) -> None:
    cron_id = apply(engine, startingDeadlineSeconds=60)
    engine.service.tick([cron_id], TICK)
    crash_before_the_position_moves(engine, TICK + timedelta(minutes=5))
    assert len(of_type(engine.service, cron_id, "RunNotStarted")) == 1

    dispatch(engine, TICK + timedelta(minutes=6))

    assert len(of_type(engine.service, cron_id, "RunNotStarted")) == 1
    assert not target.exists("default", NAME) and target.workflows() == []


def test_a_replace_fire_past_its_deadline_terminates_nothing(
    engine: Engine, target: LocalTarget
) -> None:
    """The fire that would have replaced the 10:01 run does not start, so the 10:01 run goes
    on: terminating it would leave nothing running, as a CronJob that misses its window
    leaves its active Job alone."""
    cron_id = apply(engine, concurrencyPolicy="Replace")
    engine.service.tick([cron_id], TICK)
    dispatch(engine, TICK)
    engine.service.tick([cron_id], at("10:02:00"))  # names 10:01's run to replace

    dispatch(engine, at("10:40:00"))

    assert target.observe("default", NAME, at("10:01:00")) is None  # still running
    assert not target.exists("default", child(at("10:02:00")))
    assert list(engine.service.load(cron_id).active) == [NAME]


def test_a_run_not_started_shows_in_history_why_and_the_status_page(engine: Engine) -> None:
    cron_id = apply(engine, startingDeadlineSeconds=60)
    engine.service.tick([cron_id], TICK)
    dispatch(engine, TICK + timedelta(minutes=25))
    engine.projector.catch_up(TICK + timedelta(minutes=25))
    view = engine.view

    row = view.audit()[-1]
    assert (row.type, row.workflow, row.reason, row.scheduled_time) == (
        "RunNotStarted",
        NAME,
        "DeadlineExceeded",
        TICK,
    )
    assert row.detail["lateSeconds"] == 1500.0 and row.detail["deadlineSeconds"] == 60.0

    why = explain(engine.service.load(cron_id), TICK, view.decisions_at("default", "nightly", TICK))
    assert (why["outcome"], why["reason"]) == ("NotStarted", "DeadlineExceeded")
    assert why["explanation"].startswith(
        "fired (schedule) at 2026-05-04T10:01:00Z as workflow nightly-1777888860; not started"
        " (recorded at 2026-05-04T10:26:00Z): the dispatcher reached it 25m after its tick"
    )

    (status,) = view.statuses("default")
    assert status.status["active"] == []
    assert [c["type"] for c in status.status["conditions"]] == ["SubmissionError"]
    (item,) = child_workflows(view, "default", "nightly", [], 10)
    assert item["phase"] == "NotStarted" and "25m after its tick" in item["message"]
    # The status page's timeline counts it as a fired tick that did not run.
    since, until, bucket = window_bounds(TICK, 1 / 24, 60)
    window = view.window("default", "nightly", since, until, bucket)
    (line,) = timeline(view.statuses("default"), window, since, until, bucket)
    assert [c for c in line["cells"] if c] == [{"fired": 1, "failed": 1}]


def test_runs_not_started_are_counted_for_metrics(engine: Engine) -> None:
    from cronsource.adapters.observability.metrics import EventTail

    def counted(tail: EventTail) -> dict[tuple[str, ...], float]:
        (family,) = [f for f in tail.collect() if f.name == "cronsource_runs_not_started"]
        return {tuple(s.labels.values()): s.value for s in family.samples}

    cron_id = apply(engine, startingDeadlineSeconds=60)
    engine.service.tick([cron_id], TICK)
    dispatch(engine, TICK + timedelta(minutes=5))
    engine.projector.catch_up(TICK + timedelta(minutes=5))
    tail = EventTail(engine.view)
    tail.refresh()  # the whole history at the first scrape
    assert counted(tail) == {("default", "DeadlineExceeded"): 1.0}

    engine.service.tick([cron_id], at("10:02:00"))
    dispatch(engine, at("10:09:00"))
    engine.projector.catch_up(at("10:09:00"))
    tail.refresh()  # what came since
    assert counted(tail) == {("default", "DeadlineExceeded"): 2.0}


# ------------------------------------------------------------------------- the runtime's loop


class RefusingTarget(LocalTarget):
    """A local target that fails every request (an API server that refuses connections)
    until the runtime's clock reaches `heals_at`: a transient error, which the dispatcher
    retries."""

    def __init__(self, directory: Path, clock: VirtualClock, heals_at: datetime) -> None:
        super().__init__(directory)
        self.clock = clock
        self.heals_at = heals_at
        self.refused = 0

    def _refuse(self) -> None:
        if self.clock.now() < self.heals_at:
            self.refused += 1
            raise ConnectionRefusedError("the target refuses for now")

    def create_many(
        self, creations: Sequence[Creation], at: datetime
    ) -> list[BaseException | None]:
        self._refuse()
        return super().create_many(creations, at)

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        self._refuse()
        return super().created(workflow, cron_id=cron_id)


HOURLY = {"schedules": ["0 * * * *"], "startingDeadlineSeconds": 60}
ELEVEN = at("11:00:00")


def hourly_engine(tmp_path: Path, target: LocalTarget) -> tuple[Engine, UUID]:
    engine = bootstrap(f"sqlite:///{tmp_path / 'cronsource.db'}", target=target)
    cron_id, _ = engine.service.apply(manifest("hourly", **HOURLY), at("10:30:00"))
    engine.projector.catch_up(at("10:30:00"), dispatch=False)  # the due index the scheduler reads
    return engine, cron_id


@pytest.mark.parametrize(
    ("back_after", "created"),
    [
        pytest.param(timedelta(seconds=59), True, id="back within the deadline"),
        pytest.param(timedelta(seconds=61), False, id="back past the deadline"),
        pytest.param(timedelta(minutes=25), False, id="back 25 minutes later"),
    ],
)
def test_a_dispatcher_that_was_down_creates_nothing_past_the_deadline(
    tmp_path: Path, back_after: timedelta, created: bool
) -> None:
    """The scheduler fires at 11:00 while no process dispatches (a scheduler-only replica);
    the dispatcher comes back `back_after` later and takes the fire in its first turn."""
    target = LocalTarget(tmp_path / "workflows")
    engine, cron_id = hourly_engine(tmp_path, target)
    try:
        clock = VirtualClock(ELEVEN)
        SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=clock).turn()
        assert event_types(engine, cron_id)[-1] == "ScheduleFired"

        clock.set(ELEVEN + back_after)
        SchedulerLoop(engine, SoleOwner(), clock=clock, heartbeat=False).turn()

        name = child(ELEVEN, "hourly")
        assert target.exists("default", name) is created
        assert ("RunNotStarted" in event_types(engine, cron_id)) is not created
        (row,) = engine.view.statuses("default")
        assert [a["name"] for a in row.status["active"]] == ([name] if created else [])
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("heals_after", "created"),
    [
        pytest.param(timedelta(seconds=40), True, id="refuses for 40s of a 60s deadline"),
        pytest.param(timedelta(minutes=3), False, id="refuses for 3 minutes"),
    ],
)
def test_a_dispatcher_failing_until_past_the_deadline_gives_the_fire_up_with_the_last_error(
    tmp_path: Path, heals_after: timedelta, created: bool
) -> None:
    """One process, scheduler and dispatcher, on a virtual clock that moves 5 s per turn:
    the target refuses every write from the fire on; the dispatcher retries with backoff
    until the fire's deadline, recording the first failure (TransientSubmissionError) and,
    past the deadline, the fire failed to submit with the last error and the number of
    attempts (SubmissionRetriesExhausted); the TransientSubmissionError condition stays on
    the status until a create succeeds."""
    clock = VirtualClock(ELEVEN - timedelta(seconds=5))
    target = RefusingTarget(tmp_path / "workflows", clock, ELEVEN + heals_after)
    engine, cron_id = hourly_engine(tmp_path, target)
    try:
        loop = SchedulerLoop(engine, SoleOwner(), clock=clock, heartbeat=False)
        while clock.now() < ELEVEN + heals_after + timedelta(seconds=35):
            loop.turn()
            clock.wait(5)

        name = child(ELEVEN, "hourly")
        assert target.refused > 1
        assert target.exists("default", name) is created
        assert [w["name"] for w in target.workflows()] == ([name] if created else [])
        assert of_type(engine.service, cron_id, "RunNotStarted") == []
        failed = of_type(engine.service, cron_id, "SubmissionFailed")
        reasons = [f.reason for f in failed]
        (row,) = engine.view.statuses("default")
        conditions = {c["type"]: c["message"] for c in row.status["conditions"]}
        if created:
            assert reasons == ["TransientSubmissionError"]
            assert event_types(engine, cron_id)[-1] == ("SubmissionRecovered")
            assert "TransientSubmissionError" not in conditions
        else:
            assert reasons == ["TransientSubmissionError", "SubmissionRetriesExhausted"]
            given_up = failed[-1]
            assert "the target refuses for now" in given_up.message
            assert given_up.attempts > 1 and not given_up.transient
            # Given up at the first attempt at or past the deadline (11:01), not later.
            assert ELEVEN + timedelta(seconds=60) <= given_up.timestamp
            assert given_up.timestamp < ELEVEN + timedelta(seconds=60 + 35)
            assert "given up" in conditions["TransientSubmissionError"]
            assert [a["name"] for a in row.status["active"]] == []
    finally:
        engine.close()
