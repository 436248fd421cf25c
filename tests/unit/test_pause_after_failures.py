"""Pause after N consecutive failures (`cronsource.io/pause-after-failures`, issue 23 item 1).

Given/when/then tests of the circuit breaker through CronService on the memory store: N runs
in a row that end Failed or Error pause the CronWorkflow (an event naming them); its ticks
wait, and are decided at the resume as `PausedAfterFailures` skips (the latest may catch up
within the deadline, as after a suspension); a success in between, a resume, or a changed
spec with `cronsource.io/pause-reset-on-spec-change: "true"` starts the count again. Plus the
pure rule (domain/decisions.py) as a hypothesis property, admission, the condition, and a
snapshot of the state before the breaker existed.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronsource.adapters.application.explain import explain
from cronsource.adapters.bootstrap import bootstrap
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import failure_streak, runs_that_pause
from cronsource.domain.manifest import ManifestError, scheduling_options
from cronsource.domain.service import CronService
from cronsource.projections.readmodel import audit_row, paused_runs, status_of
from tests.golden_snapshots import store_golden
from tests.instants import at
from tests.unit.test_adoption import adopt, cluster_object
from tests.unit.test_aggregate import (
    child,
    decisions,
    fired,
    manifest,
    of_type,
    service,
    skipped,
    types,
    version,
)

PAUSE = "cronsource.io/pause-after-failures"
RESET = "cronsource.io/pause-reset-on-spec-change"
GOLDEN_V2 = Path(__file__).resolve().parents[1] / "golden" / "snapshot-v2.json"


def breaker(n: int = 3, *, reset: bool | None = None, **spec: Any) -> Any:
    annotations = {PAUSE: str(n)}
    if reset is not None:
        annotations[RESET] = str(reset).lower()
    return manifest(annotations=annotations, **spec)


def create(svc: CronService, m: Any, t: str = "10:00:30") -> UUID:
    cron_id, outcome = svc.apply(m, at(t))
    assert outcome == "created"
    return cron_id


def run_minute(svc: CronService, cron_id: UUID, minute: int, phase: str) -> str:
    """The tick of 10:MM fires on time and its run ends with `phase` 20 s later."""
    t = at(f"10:{minute:02d}:00")
    svc.tick([cron_id], t)
    name = child(t)
    end = at(f"10:{minute:02d}:20")
    svc.run_completed(cron_id, name, phase, end, end)  # type: ignore[arg-type]
    return name


def test_three_failures_in_a_row_pause_and_the_event_names_the_runs() -> None:
    svc = service()
    cron_id = create(svc, breaker(3))
    names = [run_minute(svc, cron_id, m, p) for m, p in enumerate(["Failed", "Error"], 1)]
    assert "PausedAfterFailures" not in types(svc, cron_id)

    names.append(run_minute(svc, cron_id, 3, "Failed"))

    [paused] = of_type(svc, cron_id, "PausedAfterFailures")
    assert paused.workflows == names and paused.threshold == 3
    agg = svc.load(cron_id)
    assert agg.failure_pause == names and agg.next_due() is None and not agg.suspended
    # Ticks wait while paused: nothing fires, nothing is decided yet.
    before = version(svc, cron_id)
    svc.tick([cron_id], at("10:04:00"))
    svc.tick([cron_id], at("10:05:00"))
    assert version(svc, cron_id) == before


def test_a_success_in_between_starts_the_count_again() -> None:
    svc = service()
    cron_id = create(svc, breaker(2))
    for m, phase in enumerate(["Failed", "Succeeded", "Error", "Succeeded", "Failed"], 1):
        run_minute(svc, cron_id, m, phase)
    assert of_type(svc, cron_id, "PausedAfterFailures") == []
    assert svc.load(cron_id).failure_streak == [child(at("10:05:00"))]


def test_without_the_annotation_failures_never_pause() -> None:
    svc = service()
    cron_id = create(svc, manifest())
    for m in range(1, 6):
        run_minute(svc, cron_id, m, "Failed")
    assert of_type(svc, cron_id, "PausedAfterFailures") == []
    assert svc.load(cron_id).failure_streak == []


@pytest.mark.parametrize(
    ("deadline", "expected"),
    [
        pytest.param(
            None,
            ["skip 10:03:00..10:06:00 x4 PausedAfterFailures"],
            id="no deadline: every tick of the pause is skipped",
        ),
        pytest.param(
            120,
            [
                "skip 10:03:00..10:05:00 x3 PausedAfterFailures",
                "fire 10:06:00 catchup",
            ],
            id="within the deadline: the latest runs as a catch-up",
        ),
    ],
)
def test_resume_clears_the_pause_and_decides_its_ticks_as_paused(
    deadline: int | None, expected: list[str]
) -> None:
    svc = service()
    spec = {} if deadline is None else {"startingDeadlineSeconds": deadline}
    cron_id = create(svc, breaker(2, **spec))
    run_minute(svc, cron_id, 1, "Failed")
    run_minute(svc, cron_id, 2, "Failed")
    assert svc.load(cron_id).failure_pause is not None
    before = version(svc, cron_id)

    svc.resume(cron_id, at("10:06:30"), by="alice")
    svc.tick([cron_id], at("10:06:30"))

    assert decisions(svc, cron_id, before) == expected
    agg = svc.load(cron_id)
    assert agg.failure_pause is None and agg.failure_streak == []
    assert agg.next_due() == at("10:07:00")
    # The count starts again: one more failure does not pause a breaker of 2.
    svc.tick([cron_id], at("10:07:00"))
    svc.run_completed(cron_id, child(at("10:07:00")), "Failed", at("10:07:20"), at("10:07:20"))
    assert len(of_type(svc, cron_id, "PausedAfterFailures")) == 1


def test_a_changed_spec_lifts_the_pause_when_the_annotation_says_so() -> None:
    svc = service()
    cron_id = create(svc, breaker(2, reset=True))
    run_minute(svc, cron_id, 1, "Failed")
    run_minute(svc, cron_id, 2, "Failed")
    before = version(svc, cron_id)

    fixed = breaker(
        2,
        reset=True,
        workflowSpec={
            "entrypoint": "fixed",
            "templates": [{"name": "fixed", "container": {"image": "busybox"}}],
        },
    )
    svc.apply(fixed, at("10:04:30"))
    svc.tick([cron_id], at("10:05:00"))

    [reset] = of_type(svc, cron_id, "FailureCountReset", before)
    assert reset.unpaused is True and reset.by == "spec"
    assert decisions(svc, cron_id, before) == [
        "skip 10:03:00..10:04:00 x2 PausedAfterFailures",
        "fire 10:05:00 schedule",
    ]
    assert svc.load(cron_id).failure_pause is None


@pytest.mark.parametrize(
    "reset",
    [pytest.param(None, id="annotation absent"), pytest.param(False, id="annotation false")],
)
def test_a_changed_spec_keeps_the_pause_by_default(reset: bool | None) -> None:
    svc = service()
    cron_id = create(svc, breaker(2, reset=reset))
    run_minute(svc, cron_id, 1, "Failed")
    run_minute(svc, cron_id, 2, "Failed")

    svc.apply(
        breaker(
            2,
            reset=reset,
            workflowSpec={
                "entrypoint": "fixed",
                "templates": [{"name": "fixed", "container": {"image": "busybox"}}],
            },
        ),
        at("10:04:30"),
    )

    assert of_type(svc, cron_id, "FailureCountReset") == []
    assert svc.load(cron_id).failure_pause is not None


def test_a_changed_spec_resets_the_count_of_a_cronworkflow_not_yet_paused() -> None:
    svc = service()
    cron_id = create(svc, breaker(2, reset=True))
    run_minute(svc, cron_id, 1, "Failed")
    svc.apply(
        breaker(
            2,
            reset=True,
            workflowSpec={
                "entrypoint": "fixed",
                "templates": [{"name": "fixed", "container": {"image": "busybox"}}],
            },
        ),
        at("10:01:30"),
    )
    [reset] = of_type(svc, cron_id, "FailureCountReset")
    assert reset.unpaused is False

    run_minute(svc, cron_id, 2, "Failed")

    assert of_type(svc, cron_id, "PausedAfterFailures") == []


def test_a_paused_and_suspended_cronworkflow_stays_suspended_when_the_spec_lifts_the_pause() -> (
    None
):
    svc = service()
    cron_id = create(svc, breaker(1, reset=True))
    run_minute(svc, cron_id, 1, "Failed")
    svc.suspend(cron_id, at("10:01:40"), by="bob")

    svc.apply(
        breaker(
            1,
            reset=True,
            workflowSpec={
                "entrypoint": "fixed",
                "templates": [{"name": "fixed", "container": {"image": "busybox"}}],
            },
        ),
        at("10:03:30"),
    )

    agg = svc.load(cron_id)
    assert agg.failure_pause is None and agg.suspended and agg.next_due() is None


def test_a_schedule_change_while_paused_closes_the_old_ticks_as_paused() -> None:
    svc = service()
    cron_id = create(svc, breaker(1))
    run_minute(svc, cron_id, 1, "Failed")
    before = version(svc, cron_id)

    svc.apply(breaker(1, schedules=["*/5 * * * *"]), at("10:04:30"))

    assert skipped(svc, cron_id, before) == [
        (at("10:02:00"), at("10:04:00"), 3, "PausedAfterFailures")
    ]
    assert svc.load(cron_id).failure_pause is not None


def test_manual_runs_count_and_a_run_ending_while_paused_changes_nothing_more() -> None:
    svc = service()
    cron_id = create(svc, breaker(2, concurrencyPolicy="Allow"))
    svc.tick([cron_id], at("10:01:00"))
    manual = svc.trigger(cron_id, at("10:01:10"), "r-1")
    assert manual is not None
    svc.run_completed(cron_id, manual, "Failed", at("10:01:15"), at("10:01:15"))
    svc.tick([cron_id], at("10:02:00"))
    svc.run_completed(cron_id, child(at("10:02:00")), "Error", at("10:02:20"), at("10:02:20"))
    [paused] = of_type(svc, cron_id, "PausedAfterFailures")
    assert paused.workflows == [manual, child(at("10:02:00"))]

    # The 10:01 run was still running: it ends while paused, failing again.
    svc.run_completed(cron_id, child(at("10:01:00")), "Failed", at("10:02:40"), at("10:02:40"))

    assert len(of_type(svc, cron_id, "PausedAfterFailures")) == 1
    assert fired(svc, cron_id)[-1][0] == at("10:02:00")


def test_the_status_shows_a_condition_and_keeps_phase_active() -> None:
    svc = service()
    cron_id = create(svc, breaker(2))
    names = [run_minute(svc, cron_id, m, "Failed") for m in (1, 2)]

    status = status_of(svc.load(cron_id))

    assert status["phase"] == "Active"
    [cond] = [c for c in status["conditions"] if c["type"] == "PausedAfterFailures"]
    assert cond["status"] == "True"
    assert cond["message"].startswith(f"paused after 2 consecutive failed runs: {names[0]}, ")
    assert paused_runs(status) == names
    svc.resume(cron_id, at("10:03:00"))
    assert paused_runs(status_of(svc.load(cron_id))) is None


def test_the_audit_row_names_the_runs() -> None:
    svc = service()
    cron_id = create(svc, breaker(1))
    name = run_minute(svc, cron_id, 1, "Error")
    [ev] = of_type(svc, cron_id, "PausedAfterFailures")
    row = audit_row(ev, svc.load(cron_id), 1)
    assert row.type == "PausedAfterFailures"
    assert row.detail["workflows"] == [name] and row.detail["threshold"] == 1


def test_why_says_a_tick_of_the_pause_waits_for_the_resume() -> None:
    svc = service()
    cron_id = create(svc, breaker(1))
    name = run_minute(svc, cron_id, 1, "Failed")
    out = explain(svc.load(cron_id), at("10:03:00"), [])
    assert out["outcome"] == "Pending"
    assert f"paused after 1 consecutive failed runs ({name})" in out["explanation"]


def test_a_stale_paused_condition_on_an_object_taken_over_again_is_not_shown() -> None:
    """Handed back to Argo and taken over again, an object may still carry our condition
    (Argo leaves conditions it does not know); the new stream is not paused, so neither is
    its status, while Argo's own conditions are kept as adoption keeps them."""
    stale = {"type": "PausedAfterFailures", "status": "True", "message": "paused after 2 ..."}
    argo = {"type": "SubmissionError", "status": "True", "message": "quota"}
    obj = cluster_object({"lastScheduledTime": "2026-05-04T09:59:00Z", "conditions": [stale, argo]})
    svc, cron_id, _ = adopt(obj, at("10:00:20"))
    status = status_of(svc.load(cron_id))
    assert [c["type"] for c in status["conditions"]] == ["SubmissionError"]
    assert paused_runs(status) is None


# --------------------------------------------------------------------------- admission


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param(PAUSE, "0", id="zero"),
        pytest.param(PAUSE, "-1", id="negative"),
        pytest.param(PAUSE, "lots", id="not a number"),
        pytest.param(PAUSE, "²", id="a digit int() refuses"),
        pytest.param(PAUSE, "1001", id="over the limit"),
        pytest.param(PAUSE, "", id="empty"),
        pytest.param(RESET, "yes", id="reset not a boolean"),
    ],
)
def test_a_bad_annotation_is_refused_naming_it_and_its_value(key: str, value: str) -> None:
    with pytest.raises(ManifestError) as e:
        manifest(annotations={key: value})
    [problem] = e.value.problems
    assert problem.startswith(f"metadata.annotations: {key} must be ")
    assert problem.endswith(f"(value: {value!r})")


def test_good_annotations_are_admitted() -> None:
    m = manifest(annotations={PAUSE: "1000", RESET: "false"})
    assert m.metadata.annotations[PAUSE] == "1000"


@pytest.mark.parametrize("value", ["lots", "0", "²"])
def test_a_stored_bad_value_is_no_breaker(value: str) -> None:
    """A value an older cronsource stored unchecked is read as no breaker, never a crash."""
    assert scheduling_options({PAUSE: value}).pause_after_failures is None


# --------------------------------------------------------------------------- the pure rule

PHASES = st.sampled_from(["Succeeded", "Failed", "Error"])


@given(phases=st.lists(PHASES, max_size=40), threshold=st.integers(1, 6))
def test_the_streak_pauses_exactly_at_n_failures_in_a_row(
    phases: list[str], threshold: int
) -> None:
    """From any sequence of run ends, the rule pauses at the first end that completes N
    failures in a row, naming exactly those N, and at no other end before it."""
    streak: list[str] = []
    for k, phase in enumerate(phases):
        streak = failure_streak(streak, f"r{k}", phase, threshold)
        assert len(streak) <= threshold
        runs = runs_that_pause(streak, threshold)
        tail = phases[max(0, k - threshold + 1) : k + 1]
        in_a_row = len(tail) == threshold and all(p != "Succeeded" for p in tail)
        assert (runs is not None) == in_a_row
        if runs is not None:
            assert list(runs) == [f"r{j}" for j in range(k - threshold + 1, k + 1)]


@given(phases=st.lists(PHASES, min_size=1, max_size=12), threshold=st.integers(1, 4))
def test_no_schedule_fire_follows_n_failures_in_a_row_until_a_resume(
    phases: list[str], threshold: int
) -> None:
    """Through the aggregate: after the run that completes N failures in a row, nothing of
    the schedule fires, however many ticks pass, until a resume."""
    svc = service()
    cron_id = create(svc, breaker(threshold))
    for m, phase in enumerate(phases, 1):
        run_minute(svc, cron_id, m, phase)
    # The minute whose run completes the first N failures in a row, if any.
    first = next(
        (
            i + threshold
            for i in range(len(phases) - threshold + 1)
            if "Succeeded" not in phases[i : i + threshold]
        ),
        None,
    )
    pauses = of_type(svc, cron_id, "PausedAfterFailures")
    assert len(pauses) == (0 if first is None else 1)
    last = len(phases) if first is None else first
    assert [t for t, _, _ in fired(svc, cron_id)] == [
        at(f"10:{m:02d}:00") for m in range(1, last + 1)
    ]


# --------------------------------------------------------------------------- stored state


def test_the_snapshot_round_trips_the_streak_and_the_pause() -> None:
    svc = service()
    cron_id = create(svc, breaker(2))
    run_minute(svc, cron_id, 1, "Failed")
    run_minute(svc, cron_id, 2, "Error")
    agg = svc.load(cron_id)
    stored = svc.mapper.to_stored_event(CronWorkflow.Snapshot.take(agg))
    back = svc.mapper.to_domain_event(stored).mutate(None)
    assert back.snapshot_state() == agg.snapshot_state()
    assert back.failure_pause == agg.failure_pause and back.failure_streak is not None
    assert back.next_due() is None


def test_a_snapshot_of_state_v2_loads_through_the_upcaster(tmp_path: Path) -> None:
    """tests/golden/snapshot-v2.json was written by the code just before the breaker
    (aggregate state v2: no streak, no pause), with the events after it: the annotation
    arriving and two failures. The load upcasts the snapshot to v3 and replays those
    events, which count (the breaker was set) but do not pause (a pause is a command's
    decision, recorded when it is made); the next failure pauses, naming all three."""
    golden = json.loads(GOLDEN_V2.read_text())
    engine = bootstrap(f"sqlite:///{tmp_path}/g.db")
    try:
        svc = engine.service
        cron_id = store_golden(svc, golden)
        want = golden["expect"]
        agg = svc.load(cron_id)
        assert agg.version == want["version"]
        assert (agg.succeeded, agg.failed) == (want["succeeded"], want["failed"])
        assert sorted(f[0] for f in agg.finished) == want["finished"]
        assert agg.decided_until.isoformat() == want["decided_until"]
        assert agg.failure_pause is None
        assert len(agg.failure_streak) == 2
        nxt = agg.decided_until + timedelta(minutes=10)
        svc.tick([cron_id], nxt + timedelta(seconds=1))
        name = f"golden2-{int(nxt.timestamp())}"
        end = nxt + timedelta(seconds=20)
        svc.run_completed(cron_id, name, "Failed", end, end)
        paused = svc.load(cron_id).failure_pause
        assert paused is not None and paused[-1] == name and len(paused) == 3
    finally:
        engine.close()
