"""DST named where it happens: `CompiledSchedule.dst_shift` and `gap_shift` say which tick was
moved out of a spring-forward gap and which is the one run of a repeated wall time, so that
`next`, `why`, `history` and simulate can say so beside the tick (docs/scheduling.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from cronsource.domain.schedule import compile_schedule
from tests.instants import (
    NY_FALL_BACK_0130_FIRST,
    NY_FALL_BACK_0130_SECOND,
    NY_FALL_DAY_BEFORE_0130,
    NY_SPRING_DAY_AFTER_0230,
    NY_SPRING_DAY_BEFORE_0230,
    NY_SPRING_FORWARD_0230,
)

NY = "America/New_York"


def test_a_tick_moved_out_of_the_gap_names_the_wall_time_that_does_not_exist() -> None:
    # Given a daily 02:30 in New York under the default policy
    schedule = compile_schedule(["30 2 * * *"], NY)
    # When asked about the spring-forward day's tick (03:00 EDT)
    shift = schedule.dst_shift(NY_SPRING_FORWARD_0230)
    # Then it was moved out of the gap, from 02:30
    assert shift is not None
    assert (shift.kind, shift.tick, shift.wall) == (
        "gap",
        NY_SPRING_FORWARD_0230,
        datetime(2026, 3, 8, 2, 30),
    )
    assert shift.note == "02:30 does not exist on 2026-03-08"
    assert shift.as_dict() == {
        "kind": "gap",
        "wall": "02:30",
        "date": "2026-03-08",
        "zone": NY,
        "note": "02:30 does not exist on 2026-03-08",
    }


def test_ticks_dst_did_not_touch_have_no_shift() -> None:
    # Given the same schedule
    schedule = compile_schedule(["30 2 * * *"], NY)
    # When asked about the days around it, and about a time that is no tick
    # Then nothing is named
    assert schedule.dst_shift(NY_SPRING_DAY_BEFORE_0230) is None
    assert schedule.dst_shift(NY_SPRING_DAY_AFTER_0230) is None
    assert schedule.dst_shift(NY_SPRING_FORWARD_0230 + timedelta(minutes=1)) is None


def test_the_one_run_of_a_repeated_wall_time_is_named_a_fold() -> None:
    # Given a daily 01:30 in New York under the default policy
    schedule = compile_schedule(["30 1 * * *"], NY)
    # When asked about the fall-back day's tick, the first 01:30
    shift = schedule.dst_shift(NY_FALL_BACK_0130_FIRST)
    # Then it is the one run of a wall time that occurs twice
    assert shift is not None
    assert (shift.kind, shift.wall) == ("fold", datetime(2026, 11, 1, 1, 30))
    assert shift.note == "01:30 occurs twice on 2026-11-01, runs once"
    # and the day before is an ordinary tick
    assert schedule.dst_shift(NY_FALL_DAY_BEFORE_0130) is None


def test_policy_argo_and_elapsed_expressions_move_nothing() -> None:
    # Given the Argo policy, and an expression that follows elapsed time
    argo = compile_schedule(["30 1 * * *"], NY, "argo")
    elapsed = compile_schedule(["30 * * * *"], NY)
    # When asked about both 01:30s of the fall-back day
    # Then neither names a shift: both run, as Argo runs them
    for schedule in (argo, elapsed):
        assert schedule.dst_shift(NY_FALL_BACK_0130_FIRST) is None
        assert schedule.dst_shift(NY_FALL_BACK_0130_SECOND) is None


def test_utc_schedules_never_shift() -> None:
    # Given a UTC schedule, When asked about any tick, Then nothing is named
    schedule = compile_schedule(["0 7 * * *"])
    assert schedule.dst_shift(NY_SPRING_FORWARD_0230) is None


def test_a_wall_time_in_the_gap_maps_to_the_tick_that_runs_for_it() -> None:
    # Given a daily 02:30 in New York
    schedule = compile_schedule(["30 2 * * *"], NY)
    # When asked for 02:30 on the spring-forward day, a wall time that never happens
    shift = schedule.gap_shift(datetime(2026, 3, 8, 2, 30))
    # Then the tick for it is the end of the gap, 03:00 EDT
    assert shift is not None
    assert (shift.kind, shift.tick) == ("gap", NY_SPRING_FORWARD_0230)
    # and wall times that exist, or are no slot of the schedule, map to nothing
    assert schedule.gap_shift(datetime(2026, 3, 9, 2, 30)) is None
    assert schedule.gap_shift(datetime(2026, 3, 8, 2, 45)) is None
    assert (
        compile_schedule(["30 2 * * *"], NY, "argo").gap_shift(datetime(2026, 3, 8, 2, 30)) is None
    )


def test_a_gap_slot_is_named_only_in_the_zones_own_offsets() -> None:
    # Given a daily 02:30 in New York (-05:00 before the change, -04:00 after)
    schedule = compile_schedule(["30 2 * * *"], NY)
    # 02:30 written in either of New York's offsets that day names the moved slot
    for hours in (-5, -4):
        shift = schedule.gap_shift(
            datetime(2026, 3, 8, 2, 30, tzinfo=timezone(timedelta(hours=hours)))
        )
        assert shift is not None and shift.tick == NY_SPRING_FORWARD_0230
    # 02:30Z is a real instant (21:30 the evening before in New York), no slot of the gap
    assert schedule.gap_shift(datetime(2026, 3, 8, 2, 30, tzinfo=UTC)) is None
