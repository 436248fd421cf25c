"""Unit tests for domain.schedule: syntax, DST semantics (docs/design.md section 4), and the
croniter behaviour the module depends on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter  # type: ignore[import-untyped]

from cronsource.domain.schedule import (
    CompiledSchedule,
    ScheduleError,
    compile_schedule,
    validate_expression,
    validate_timezone,
)
from tests import instants as at


def utc(text: str) -> datetime:
    """`2026-03-07T07:30` (UTC) as an aware datetime; keeps the tables readable."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def first_ticks(schedule: CompiledSchedule, start: datetime, count: int) -> list[datetime]:
    out: list[datetime] = []
    t = start
    for _ in range(count):
        t = schedule.next_after(t)
        out.append(t)
    return out


# --------------------------------------------------------------------------- named instants


@pytest.mark.parametrize(
    ("instant", "zone", "wall", "utc_offset"),
    [
        pytest.param(at.NY_SPRING_FORWARD, "America/New_York", "03:00", "-4", id="NY spring"),
        pytest.param(at.NY_FALL_BACK_0130_FIRST, "America/New_York", "01:30", "-4", id="NY 1st"),
        pytest.param(at.NY_FALL_BACK_0130_SECOND, "America/New_York", "01:30", "-5", id="NY 2nd"),
        pytest.param(at.NY_FALL_BACK, "America/New_York", "01:00", "-5", id="NY fall"),
        pytest.param(at.LORD_HOWE_0157_FIRST, "Australia/Lord_Howe", "01:57", "11", id="LH 1st"),
        pytest.param(at.LORD_HOWE_0157_SECOND, "Australia/Lord_Howe", "01:57", "10.5", id="LH 2nd"),
        pytest.param(at.LORD_HOWE_0217, "Australia/Lord_Howe", "02:17", "10.5", id="LH 02:17"),
        pytest.param(at.LORD_HOWE_FALL_BACK, "Australia/Lord_Howe", "01:30", "10.5", id="LH"),
        pytest.param(at.EU_SPRING_FORWARD, "Europe/Berlin", "03:00", "2", id="Berlin spring"),
        pytest.param(at.EU_FALL_BACK, "Europe/Berlin", "02:00", "1", id="Berlin fall"),
        pytest.param(at.EU_SPRING_FORWARD, "Europe/London", "02:00", "1", id="London spring"),
        pytest.param(at.EU_FALL_BACK, "Europe/Dublin", "01:00", "0", id="Dublin fall"),
        pytest.param(at.SANTIAGO_FALL_BACK, "America/Santiago", "23:00", "-4", id="Santiago"),
        pytest.param(
            at.SANTIAGO_SPRING_FORWARD, "America/Santiago", "01:00", "-3", id="Santiago spring"
        ),
        pytest.param(at.AUCKLAND_FALL_BACK, "Pacific/Auckland", "02:00", "12", id="Auckland"),
        pytest.param(
            at.AUCKLAND_SPRING_FORWARD, "Pacific/Auckland", "03:00", "13", id="Auckland spring"
        ),
    ],
)
def test_named_instants_are_what_their_names_say(
    instant: datetime, zone: str, wall: str, utc_offset: str
) -> None:
    local = instant.astimezone(ZoneInfo(zone))
    assert local.strftime("%H:%M") == wall
    assert local.utcoffset() == timedelta(hours=float(utc_offset))


@pytest.mark.parametrize(
    ("transition", "zone"),
    [
        pytest.param(at.NY_SPRING_FORWARD, "America/New_York", id="NY spring"),
        pytest.param(at.NY_FALL_BACK, "America/New_York", id="NY fall"),
        pytest.param(at.LORD_HOWE_FALL_BACK, "Australia/Lord_Howe", id="Lord Howe fall"),
        pytest.param(at.EU_SPRING_FORWARD, "Europe/Dublin", id="Dublin spring"),
        pytest.param(at.EU_FALL_BACK, "Europe/London", id="London fall"),
        pytest.param(at.SANTIAGO_FALL_BACK, "America/Santiago", id="Santiago fall"),
        pytest.param(at.SANTIAGO_SPRING_FORWARD, "America/Santiago", id="Santiago spring"),
        pytest.param(at.AUCKLAND_FALL_BACK, "Pacific/Auckland", id="Auckland fall"),
        pytest.param(at.AUCKLAND_SPRING_FORWARD, "Pacific/Auckland", id="Auckland spring"),
    ],
)
def test_named_transitions_are_offset_changes(transition: datetime, zone: str) -> None:
    tz = ZoneInfo(zone)
    before = (transition - timedelta(seconds=1)).astimezone(tz).utcoffset()
    assert before != transition.astimezone(tz).utcoffset()


# --------------------------------------------------------------------------- end-to-end values


@pytest.mark.parametrize(
    ("expressions", "zone", "policy", "start", "expected"),
    [
        pytest.param(
            ["30 2 * * *"],
            "America/New_York",
            "once",
            at.SCENARIO_DST_SPRING_START,
            [at.NY_SPRING_DAY_BEFORE_0230, at.NY_SPRING_FORWARD_0230, at.NY_SPRING_DAY_AFTER_0230],
            id="spring-forward gap fires once at 03:00 EDT",
        ),
        pytest.param(
            ["30 2 * * *"],
            "America/New_York",
            "argo",
            at.SCENARIO_DST_SPRING_START,
            [at.NY_SPRING_DAY_BEFORE_0230, at.NY_SPRING_DAY_AFTER_0230],
            id="argo policy skips the gap",
        ),
        pytest.param(
            ["30 1 * * *"],
            "America/New_York",
            "once",
            at.SCENARIO_DST_FALL_START,
            [at.NY_FALL_DAY_BEFORE_0130, at.NY_FALL_BACK_0130_FIRST, at.NY_FALL_DAY_AFTER_0130],
            id="fall-back repeat fires once, at the first 01:30",
        ),
        pytest.param(
            ["30 1 * * *"],
            "America/New_York",
            "argo",
            at.SCENARIO_DST_FALL_START,
            [
                at.NY_FALL_DAY_BEFORE_0130,
                at.NY_FALL_BACK_0130_FIRST,
                at.NY_FALL_BACK_0130_SECOND,
                at.NY_FALL_DAY_AFTER_0130,
            ],
            id="argo policy fires both 01:30s",
        ),
        pytest.param(
            ["35 5 * * *"],
            "Etc/GMT-1",
            "once",
            at.SCENARIO_FIXED_OFFSET_START,
            [utc("2026-01-01T04:35"), utc("2026-01-02T04:35"), utc("2026-01-03T04:35")],
            id="Etc/GMT-1 is UTC+1 (argo#2328)",
        ),
        pytest.param(
            ["0 * * * *", "*/30 * * * *"],
            "",
            "once",
            at.SCENARIO_MULTIPLE_START,
            [
                utc("2026-05-04T10:00"),
                utc("2026-05-04T10:30"),
                utc("2026-05-04T11:00"),
                utc("2026-05-04T11:30"),
                utc("2026-05-04T12:00"),
            ],
            id="two schedules meeting on the hour are one tick",
        ),
        pytest.param(
            ["3-59/10 * * * *"],
            "",
            "once",
            utc("2026-05-04T09:59"),
            [utc(f"2026-05-04T10:{m:02}") for m in (3, 13, 23, 33, 43, 53)]
            + [utc("2026-05-04T11:03")],
            id="stepped range starts at its low end",
        ),
    ],
)
def test_known_ticks(
    expressions: list[str], zone: str, policy: str, start: datetime, expected: list[datetime]
) -> None:
    schedule = compile_schedule(expressions, zone, policy)
    assert first_ticks(schedule, start, len(expected)) == expected
    assert list(schedule.ticks_between(start, expected[-1])) == expected


# --------------------------------------------------------------------------- DST semantics


def ticks(
    expr: str, zone: str, after: datetime, until: datetime, policy: str = "once"
) -> list[datetime]:
    return list(compile_schedule([expr], zone, policy).ticks_between(after, until))


def test_lord_howe_fold_returns_the_repeated_0157() -> None:
    """croniter's aware iteration jumps to 02:17+10:30 here (pinned below); we do not."""
    schedule = compile_schedule(["17,29,57 * * * *"], "Australia/Lord_Howe")
    assert schedule.next_after(at.LORD_HOWE_0157_FIRST) == at.LORD_HOWE_0157_SECOND
    assert schedule.next_after(at.LORD_HOWE_0157_SECOND) == at.LORD_HOWE_0217


@pytest.mark.parametrize("policy", ["once", "argo"])
def test_elapsed_time_schedule_fires_in_both_repeated_hours(policy: str) -> None:
    got = ticks(
        "*/30 * * * *", "America/New_York", utc("2026-11-01T04:45"), utc("2026-11-01T07:00"), policy
    )
    assert got == [utc(f"2026-11-01T0{h}:{m}") for h in (5, 6) for m in ("00", "30")] + [
        utc("2026-11-01T07:00")
    ]


@pytest.mark.parametrize("policy", ["once", "argo"])
def test_elapsed_time_schedule_has_no_ticks_in_the_gap(policy: str) -> None:
    got = ticks(
        "15 */1 * * *", "America/New_York", utc("2026-03-08T05:30"), utc("2026-03-08T08:00"), policy
    )
    # 01:15 EST, then 03:15 EDT: 02:15 does not exist.
    assert got == [utc("2026-03-08T06:15"), utc("2026-03-08T07:15")]


def test_hourly_descriptor_is_elapsed_time() -> None:
    got = ticks("@hourly", "America/New_York", utc("2026-11-01T04:30"), utc("2026-11-01T07:00"))
    assert got == [utc("2026-11-01T05:00"), utc("2026-11-01T06:00"), utc("2026-11-01T07:00")]


@pytest.mark.parametrize(
    ("expr", "zone", "policy", "after", "until", "expected"),
    [
        pytest.param(
            "0,15,30,45 2 * * *",
            "America/New_York",
            "once",
            utc("2026-03-08T00:00"),
            utc("2026-03-09T00:00"),
            [at.NY_SPRING_FORWARD],
            id="several slots in one gap fire once, together",
        ),
        pytest.param(
            "0 2,3 * * *",
            "America/New_York",
            "once",
            utc("2026-03-08T00:00"),
            utc("2026-03-09T00:00"),
            [at.NY_SPRING_FORWARD],
            id="gap slot and 03:00 itself are one tick",
        ),
        pytest.param(
            "*/30 1 * * *",
            "America/New_York",
            "once",
            utc("2026-11-01T00:00"),
            utc("2026-11-02T00:00"),
            [utc("2026-11-01T05:00"), utc("2026-11-01T05:30")],
            id="wall-clock minutes in the repeat fire at their first occurrence only",
        ),
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "once",
            at.NY_FALL_BACK_0130_FIRST,
            at.NY_FALL_DAY_AFTER_0130,
            [at.NY_FALL_DAY_AFTER_0130],
            id="from inside the repeat, the second 01:30 is not a tick",
        ),
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "argo",
            at.NY_FALL_BACK_0130_FIRST,
            at.NY_FALL_DAY_AFTER_0130,
            [at.NY_FALL_BACK_0130_SECOND, at.NY_FALL_DAY_AFTER_0130],
            id="argo: from inside the repeat, the second 01:30 is next",
        ),
        pytest.param(
            "0 0 * * *",
            "America/Santiago",
            "once",
            utc("2026-09-05T00:00"),
            utc("2026-09-07T12:00"),
            [utc("2026-09-05T04:00"), at.SANTIAGO_SPRING_FORWARD, utc("2026-09-07T03:00")],
            id="Santiago: a missing midnight fires at 01:00",
        ),
        pytest.param(
            "0 0 * * *",
            "America/Santiago",
            "argo",
            utc("2026-09-05T00:00"),
            utc("2026-09-07T12:00"),
            [utc("2026-09-05T04:00"), utc("2026-09-07T03:00")],
            id="Santiago argo: a missing midnight is skipped",
        ),
        pytest.param(
            "30 23 * * *",
            "America/Santiago",
            "once",
            utc("2026-04-04T12:00"),
            utc("2026-04-06T12:00"),
            [utc("2026-04-05T02:30"), utc("2026-04-06T03:30")],
            id="Santiago: the repeated Saturday 23:30 fires once",
        ),
        pytest.param(
            "30 23 * * *",
            "America/Santiago",
            "argo",
            utc("2026-04-04T12:00"),
            utc("2026-04-06T12:00"),
            [utc("2026-04-05T02:30"), utc("2026-04-05T03:30"), utc("2026-04-06T03:30")],
            id="Santiago argo: the repeated Saturday 23:30 fires twice",
        ),
        pytest.param(
            "30 1 * * *",
            "Europe/Dublin",
            "once",
            utc("2026-10-24T12:00"),
            utc("2026-10-26T12:00"),
            [utc("2026-10-25T00:30"), utc("2026-10-26T01:30")],
            id="Dublin's negative DST: first 01:30 is IST",
        ),
        pytest.param(
            "30 2 * * *",
            "Pacific/Auckland",
            "once",
            utc("2026-09-25T00:00"),
            utc("2026-09-27T14:00"),
            [utc("2026-09-25T14:30"), at.AUCKLAND_SPRING_FORWARD, utc("2026-09-27T13:30")],
            id="Auckland: 02:30 in the gap fires at 03:00 NZDT",
        ),
        pytest.param(
            "45 1 * * *",
            "Australia/Lord_Howe",
            "once",
            utc("2026-04-03T12:00"),
            utc("2026-04-05T18:00"),
            [utc("2026-04-03T14:45"), utc("2026-04-04T14:45"), utc("2026-04-05T15:15")],
            id="Lord Howe: 30-minute repeat fires once",
        ),
        pytest.param(
            "15 2 * * *",
            "Australia/Lord_Howe",
            "once",
            utc("2026-10-02T12:00"),
            utc("2026-10-04T18:00"),
            [utc("2026-10-02T15:45"), utc("2026-10-03T15:30"), utc("2026-10-04T15:15")],
            id="Lord Howe: 02:15 in the 30-minute gap fires at 02:30 +11",
        ),
    ],
)
def test_dst_policy(
    expr: str,
    zone: str,
    policy: str,
    after: datetime,
    until: datetime,
    expected: list[datetime],
) -> None:
    assert ticks(expr, zone, after, until, policy) == expected


def test_next_after_is_strictly_increasing_through_a_fold() -> None:
    schedule = compile_schedule(["*/20 * * * *", "30 1 * * *"], "America/New_York", "argo")
    t = utc("2026-11-01T04:00")
    for _ in range(20):
        following = schedule.next_after(t)
        assert following > t
        t = following


def test_results_are_utc_for_any_aware_input() -> None:
    schedule = compile_schedule(["30 2 * * *"], "Europe/Berlin")
    start = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=-7)))
    got = schedule.next_after(start)
    assert got.tzinfo is UTC
    assert got == utc("2026-01-02T01:30")


def test_naive_instants_are_refused() -> None:
    schedule = compile_schedule(["* * * * *"])
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.ticks_between(datetime(2026, 1, 1), utc("2026-01-02T00:00"))


def test_ticks_between_is_half_open_and_empty_when_reversed() -> None:
    schedule = compile_schedule(["0 * * * *"])
    got = list(schedule.ticks_between(utc("2026-01-01T00:00"), utc("2026-01-01T02:00")))
    assert got == [utc("2026-01-01T01:00"), utc("2026-01-01T02:00")]
    assert list(schedule.ticks_between(utc("2026-01-01T02:00"), utc("2026-01-01T00:00"))) == []


def test_empty_timezone_is_utc_not_the_host_zone() -> None:
    assert compile_schedule(["0 9 * * *"], "").next_after(utc("2026-06-01T00:00")) == utc(
        "2026-06-01T09:00"
    )


# --------------------------------------------------------------------------- syntax accepted


@pytest.mark.parametrize(
    ("expr", "same_as"),
    [
        pytest.param("0 9 * * MON-FRI", "0 9 * * 1-5", id="day names"),
        pytest.param("0 9 * * mon,Wed,FRI", "0 9 * * 1,3,5", id="names any case"),
        pytest.param("0 9 1 JAN-MAR *", "0 9 1 1-3 *", id="month names"),
        pytest.param("0 9 ? * ?", "0 9 * * *", id="question mark is star"),
        pytest.param("0 9 * * SUN/2", "0 9 * * 0,2,4,6", id="name with step"),
        pytest.param("59/1 * * * *", "59 * * * *", id="N/1 is N to max: only 59"),
        pytest.param("50/5 * * * *", "50,55 * * * *", id="N/step runs to the field max"),
        pytest.param("0 5-5 * * *", "0 5 * * *", id="a one-value range is that value"),
        pytest.param("0-10/20 * * * *", "0 * * * *", id="step wider than its range"),
        pytest.param("  0   9 * *  *  ", "0 9 * * *", id="extra whitespace"),
        pytest.param("@yearly", "0 0 1 1 *", id="@yearly"),
        pytest.param("@annually", "0 0 1 1 *", id="@annually"),
        pytest.param("@monthly", "0 0 1 * *", id="@monthly"),
        pytest.param("@weekly", "0 0 * * 0", id="@weekly"),
        pytest.param("@daily", "0 0 * * *", id="@daily"),
        pytest.param("@midnight", "0 0 * * *", id="@midnight"),
        pytest.param("@hourly", "0 * * * *", id="@hourly"),
    ],
)
def test_equivalent_spellings(expr: str, same_as: str) -> None:
    validate_expression(expr)
    start = utc("2026-01-01T00:00")
    for zone in ("", "Europe/Berlin"):
        a = compile_schedule([expr], zone)
        b = compile_schedule([same_as], zone)
        assert first_ticks(a, start, 30) == first_ticks(b, start, 30)


@pytest.mark.parametrize(
    ("expr", "start", "expected"),
    [
        pytest.param(
            "0 0 13 * 5",
            utc("2026-02-10T00:00"),
            ["2026-02-13", "2026-02-20", "2026-02-27", "2026-03-06", "2026-03-13", "2026-03-20"],
            id="both restricted: 13th OR Friday",
        ),
        pytest.param(
            "0 0 */10 * 1",
            utc("2026-02-28T00:00"),
            ["2026-03-01", "2026-03-02", "2026-03-09", "2026-03-11", "2026-03-16", "2026-03-21"],
            id="stepped star is restricted (robfig): 1st/11th/21st/31st OR Monday",
        ),
        pytest.param(
            "0 0 * * 1",
            utc("2026-02-28T00:00"),
            ["2026-03-02", "2026-03-09", "2026-03-16"],
            id="day-of-month star: Mondays only",
        ),
        pytest.param(
            "0 0 13 * ?",
            utc("2026-02-28T00:00"),
            ["2026-03-13", "2026-04-13"],
            id="day-of-week ?: the 13th only",
        ),
        pytest.param(
            "0 0 */1 * 1",
            utc("2026-02-28T00:00"),
            ["2026-03-02", "2026-03-09"],
            id="star with step 1 is still star (robfig): Mondays only",
        ),
        pytest.param(
            "0 0 1-31 * 1",
            utc("2026-02-28T00:00"),
            ["2026-03-01", "2026-03-02", "2026-03-03"],
            id="an explicit full range is restricted: every day",
        ),
        pytest.param(
            "0 0 31 2,4 0-6",
            utc("2026-02-28T00:00"),
            ["2026-04-01", "2026-04-02"],
            id="a day that never occurs ORed with every weekday",
        ),
        pytest.param(
            "0 0 29 2 *",
            utc("2026-01-01T00:00"),
            ["2028-02-29", "2032-02-29"],
            id="leap day",
        ),
    ],
)
def test_day_of_month_and_day_of_week(expr: str, start: datetime, expected: list[str]) -> None:
    schedule = compile_schedule([expr])
    got = [t.date().isoformat() for t in first_ticks(schedule, start, len(expected))]
    assert got == expected


@pytest.mark.parametrize(
    ("duration", "start", "expected"),
    [
        pytest.param(
            "90s", utc("2026-01-01T00:00"), ["00:01:30", "00:03:00", "00:04:30"], id="90s"
        ),
        pytest.param("1h30m", utc("2026-01-01T00:00"), ["01:30:00", "03:00:00"], id="1h30m"),
        pytest.param("5m", utc("2025-12-31T23:00"), ["00:05:00", "00:10:00"], id="before anchor"),
        pytest.param("5m", utc("2026-01-01T00:10"), ["00:15:00", "00:20:00"], id="on a tick"),
        pytest.param("2h", utc("2026-01-01T03:59:59"), ["04:00:00", "06:00:00"], id="2h"),
    ],
)
def test_every_ticks_from_the_anchor(duration: str, start: datetime, expected: list[str]) -> None:
    anchor = utc("2026-01-01T00:00")
    for zone in ("", "America/New_York"):  # @every ignores the zone
        schedule = compile_schedule([f"@every {duration}"], zone, anchor=anchor)
        got = [t.strftime("%H:%M:%S") for t in first_ticks(schedule, start, len(expected))]
        assert got == expected


def test_every_keeps_its_period_across_dst() -> None:
    anchor = at.NY_FALL_BACK - timedelta(hours=2)
    schedule = compile_schedule(["@every 1h"], "America/New_York", anchor=anchor)
    got = first_ticks(schedule, anchor, 4)
    assert [b - a for a, b in zip(got, got[1:], strict=False)] == [timedelta(hours=1)] * 3


def test_every_with_an_anchor_off_the_minute() -> None:
    anchor = datetime(2026, 1, 1, 0, 0, 7, 500000, tzinfo=UTC)
    schedule = compile_schedule(["@every 1m"], anchor=anchor)
    assert schedule.next_after(anchor) == anchor + timedelta(minutes=1)


def test_every_and_cron_together_are_a_union() -> None:
    anchor = utc("2026-01-01T00:00")
    schedule = compile_schedule(["@every 20m", "*/30 * * * *"], anchor=anchor)
    got = list(schedule.ticks_between(anchor, utc("2026-01-01T01:00")))
    assert [t.strftime("%H:%M") for t in got] == ["00:20", "00:30", "00:40", "01:00"]


# --------------------------------------------------------------------------- syntax rejected


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        pytest.param("0 0 L * *", "unsupported cron syntax 'L' in '0 0 L * *'", id="L"),
        pytest.param("0 0 * * 5L", "unsupported cron syntax 'L'", id="last weekday L"),
        pytest.param("0 0 15W * *", "unsupported cron syntax 'W'", id="W"),
        pytest.param("0 0 LW * *", "unsupported cron syntax 'LW'", id="LW"),
        pytest.param("0 0 * * 1#2", "unsupported cron syntax '#' in '0 0 * * 1#2'", id="#"),
        pytest.param("h * * * *", "unsupported cron syntax 'H'", id="lower-case h"),
        pytest.param("R * * * *", "unsupported cron syntax 'H'", id="croniter random R"),
        pytest.param("@every H", "H (hash) cannot be used with @every", id="H in @every"),
        pytest.param("@daily H", "H (hash) cannot be used with @daily", id="H after @daily"),
        pytest.param("H(30-10) * * * *", 'range "30-10" is inverted', id="H inverted range"),
        pytest.param("H 24 * * *", "value 24 out of range 0-23 for hour in 'H 24", id="H, hour 24"),
        pytest.param("0 0 0 * * *", "got 6", id="seconds field"),
        pytest.param("0 0 0 * * * 2026", "got 7", id="seconds and years fields"),
        pytest.param("0 0 *", "got 3", id="too few fields"),
        pytest.param("@reboot", "unsupported descriptor '@reboot'", id="@reboot"),
        pytest.param("@fortnightly", "unknown descriptor '@fortnightly'", id="unknown descriptor"),
        pytest.param("@Daily", "unknown descriptor '@Daily'", id="descriptors are lower case"),
        pytest.param("@daily 1", "unexpected text after @daily", id="descriptor with extra"),
        pytest.param("61 * * * *", "value 61 out of range 0-59 for minute", id="minute 61"),
        pytest.param("0 24 * * *", "value 24 out of range 0-23 for hour", id="hour 24"),
        pytest.param("0 0 32 * *", "value 32 out of range 1-31 for day-of-month", id="day 32"),
        pytest.param("0 0 0 * *", "value 0 out of range 1-31 for day-of-month", id="day 0"),
        pytest.param("0 0 * 13 *", "value 13 out of range 1-12 for month", id="month 13"),
        pytest.param("0 0 * * 7", "value 7 out of range 0-6 for day-of-week", id="weekday 7"),
        pytest.param("0 22-2 * * *", "runs backwards", id="wrapping range"),
        pytest.param("0 0 * * FRI-MON", "runs backwards", id="wrapping day names"),
        pytest.param("*/0 * * * *", "invalid step '0'", id="step 0"),
        pytest.param("*/x * * * *", "invalid step 'x'", id="step not a number"),
        pytest.param("1/2/3 * * * *", "invalid step", id="two steps"),
        pytest.param("1,,2 * * * *", "invalid minute value ''", id="empty list item"),
        pytest.param("-5 * * * *", "invalid minute value", id="negative"),
        pytest.param("0 0 * JANUARY *", "invalid month value 'JANUARY'", id="long month name"),
        pytest.param("MON * * * *", "invalid minute value 'MON'", id="name in wrong field"),
        pytest.param("*-5 * * * *", "invalid minute value", id="star range"),
        pytest.param("0 0 30 2 *", "never fires", id="February 30th"),
        pytest.param("0 0 31 4,6,9,11 *", "never fires", id="31st of short months"),
        pytest.param("", "empty cron expression", id="empty"),
        pytest.param("   ", "empty cron expression", id="blank"),
        pytest.param("garbage", "got 1", id="garbage"),
        pytest.param("a b c d e", "invalid minute value 'a'", id="five garbage fields"),
        pytest.param("@every", "one duration after @every", id="@every without duration"),
        pytest.param("@every 0s", "must be greater than zero", id="@every zero"),
        pytest.param("@every -5m", "invalid @every duration", id="@every negative"),
        pytest.param("@every 5x", "invalid @every duration", id="@every bad unit"),
        pytest.param("@every 1h 30m", "one duration after @every", id="@every with a space"),
    ],
)
def test_rejected_expressions(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError) as excinfo:
        validate_expression(expr)
    assert message in str(excinfo.value)
    with pytest.raises(ScheduleError):
        compile_schedule([expr], anchor=utc("2026-01-01T00:00"))


def test_schedule_error_is_a_value_error() -> None:
    assert issubclass(ScheduleError, ValueError)


def test_non_string_expression_is_a_schedule_error() -> None:
    with pytest.raises(ScheduleError, match="must be a string"):
        validate_expression(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- time zones


@pytest.mark.parametrize(
    "name",
    ["", "UTC", "CET", "Europe/Dublin", "Etc/GMT-1", "America/Argentina/Buenos_Aires"],
)
def test_valid_timezones(name: str) -> None:
    validate_timezone(name)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("Mars/Olympus", id="unknown"),
        pytest.param("europe/berlin", id="wrong case"),
        pytest.param("Europe/Berlin ", id="trailing space"),
        pytest.param("America", id="a directory"),
        pytest.param("/etc/localtime", id="absolute path"),
        pytest.param("../etc/passwd", id="escaping path"),
        pytest.param("right/Europe/Berlin", id="leap-second variant"),
        pytest.param("Europe/Berlin\x00", id="NUL"),
    ],
)
def test_invalid_timezones(name: str) -> None:
    with pytest.raises(ScheduleError, match="unknown time zone"):
        validate_timezone(name)


@pytest.mark.parametrize("name", ["Local", "localtime", "posixrules"])
def test_the_hosts_own_zone_is_refused_saying_so(name: str) -> None:
    """Go reads `Local` as the controller's zone; "unknown time zone 'Local'" misled."""
    with pytest.raises(ScheduleError, match=f"time zone '{name}' is the host's own"):
        validate_timezone(name)


# --------------------------------------------------------------------------- compile_schedule


def test_every_needs_an_anchor() -> None:
    with pytest.raises(ScheduleError, match="anchor"):
        compile_schedule(["@every 5m"])


def test_compile_refuses_bad_arguments() -> None:
    with pytest.raises(ScheduleError, match="DST policy"):
        compile_schedule(["* * * * *"], dst_policy="twice")
    with pytest.raises(ScheduleError, match="unknown time zone"):
        compile_schedule(["* * * * *"], "Mars/Olympus")
    with pytest.raises(ScheduleError, match="at least one"):
        compile_schedule([])
    with pytest.raises(ScheduleError, match="timezone-aware"):
        compile_schedule(["* * * * *"], anchor=datetime(2026, 1, 1))
    with pytest.raises(TypeError):
        compile_schedule("* * * * *")


def test_compiled_schedules_compare_by_value() -> None:
    a = compile_schedule(["0 * * * *", "@every 5m"], "CET", anchor=utc("2026-01-01T00:00"))
    b = compile_schedule(
        ("0 * * * *", "@every 5m"), "CET", anchor=datetime(2026, 1, 1, 1, tzinfo=ZoneInfo("CET"))
    )
    assert a == b
    assert hash(a) == hash(b)
    assert a.anchor.tzinfo is UTC
    assert a != compile_schedule(["0 * * * *", "@every 5m"], "CET", "argo", a.anchor)


def test_compiled_schedule_fields() -> None:
    s = compile_schedule(["0 * * * *"])
    assert s.expressions == ("0 * * * *",)
    assert s.timezone == ""
    assert s.dst_policy == "once"
    assert s.anchor.tzinfo is UTC


# --------------------------------------------------------------------------- croniter pins
# The module hands croniter 5-field expressions of explicit value lists (or `*`) and naive
# datetimes, and relies on the behaviours below. If an upgrade breaks one, the module needs a
# change, not the test.


def croniter_next(expr: str, start: datetime, **kwargs: object) -> datetime:
    result: datetime = croniter(expr, start, **kwargs).get_next(datetime)
    return result


def test_croniter_day_or_is_the_default_we_depend_on_this() -> None:
    """robfig's OR of day-of-month and day-of-week comes from croniter's default day_or=True."""
    start = datetime(2026, 1, 1)
    assert croniter_next("0 0 13 * 5", start) == datetime(2026, 1, 2)  # a Friday, not the 13th
    assert croniter_next("0 0 13 * 5", start, day_or=False) == datetime(2026, 2, 13)


def test_croniter_day_or_keeps_a_full_explicit_list_we_depend_on_this() -> None:
    """`0 0 1-31 * MON` must fire daily (robfig): an explicit full day list stays an OR operand."""
    days = ",".join(str(d) for d in range(1, 32))
    assert croniter_next(f"0 0 {days} * 1", datetime(2026, 1, 1)) == datetime(2026, 1, 2)
    weekdays = ",".join(str(d) for d in range(7))
    assert croniter_next(f"0 0 13 * {weekdays}", datetime(2026, 1, 1)) == datetime(2026, 1, 2)


def test_croniter_or_survives_a_day_that_never_occurs_we_depend_on_this() -> None:
    assert croniter_next("0 0 31 2 1", datetime(2026, 1, 1)) == datetime(2026, 2, 2)


def test_croniter_skips_months_without_the_day_we_depend_on_this() -> None:
    assert croniter_next("0 0 31 * *", datetime(2026, 2, 1)) == datetime(2026, 3, 31)


def test_croniter_naive_iteration_is_plain_calendar_arithmetic_we_depend_on_this() -> None:
    """A naive start gives naive results with no zone applied: 02:30 on New York's
    spring-forward day comes back even though it never happens there."""
    got = croniter_next("30 2 * * *", datetime(2026, 3, 8, 1, 59))
    assert got == datetime(2026, 3, 8, 2, 30)
    assert got.tzinfo is None


def test_croniter_get_next_is_strictly_after_a_whole_minute_we_depend_on_this() -> None:
    assert croniter_next("*/5 * * * *", datetime(2026, 1, 1, 10, 5)) == datetime(2026, 1, 1, 10, 10)
    assert croniter_next("*/5 * * * *", datetime(2026, 1, 1, 10, 4)) == datetime(2026, 1, 1, 10, 5)


def test_croniter_steps_from_a_field_max_we_do_not_rely_on_this() -> None:
    """croniter 7 reads `59/1` as minute 59 only (6.x read it as every minute). We agree, but
    parse steps ourselves, so croniter never sees one."""
    assert croniter.expand("59/1 * * * *")[0][0] == [59]


def test_croniter_equal_range_means_the_whole_field_we_do_not_rely_on_this() -> None:
    """croniter 7 widens `5-5` to the whole field (robfig: just 5): why croniter only ever
    receives explicit value lists from us."""
    assert croniter.expand("0 5-5 * * *")[0][1] == ["*"]


def test_croniter_aware_iteration_skips_a_repeated_match_why_we_do_not_use_it() -> None:
    """The bug our own DST layer exists for (Lord Howe, 30-minute fall-back)."""
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    start = at.LORD_HOWE_0157_FIRST.astimezone(lord_howe)
    got = croniter_next("17,29,57 * * * *", start)
    assert got.astimezone(UTC) == at.LORD_HOWE_0217  # not LORD_HOWE_0157_SECOND
