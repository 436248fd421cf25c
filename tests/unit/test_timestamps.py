"""domain/timestamps.py: the one rule every entrypoint reads a user's time by (`user_time`:
RFC 3339, or a date alone, midnight in the CronWorkflow's zone), the RFC 3339 reader under
it, and its bounds.

Properties: what the read model's formatter writes reads back as the same instant, in any
offset; anything outside 1970-01-01 .. 2199-12-31 is refused with one line naming the field
and the value. The HTTP API's query and body refuse a year-9999 time that way (a 422); the
CLI's flags and a simulate scenario, as processes: tests/integration/test_timestamps.py."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.timestamps import TIME_MAX, TimestampError, parse_timestamp, user_time
from cronsource.projections.readmodel import rfc3339, rfc3339_exact

_IN_BOUNDS = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2199, 12, 31, 23, 59, 59)
).map(lambda t: t.replace(microsecond=0, tzinfo=UTC))
_OFFSETS = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
_OUT_OF_BOUNDS = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(1969, 12, 31, 23, 59, 59)),
    st.datetimes(min_value=datetime(2200, 1, 1), max_value=datetime(9999, 12, 30)),
).map(lambda t: t.replace(tzinfo=UTC))


@given(_IN_BOUNDS)
def test_what_the_formatter_writes_reads_back(t: datetime) -> None:
    text = rfc3339(t)
    assert text is not None
    assert parse_timestamp(text, "at") == t


@given(_IN_BOUNDS, st.integers(0, 999_999))
def test_the_exact_formatter_keeps_the_fraction_and_reads_back(t: datetime, us: int) -> None:
    t = t.replace(microsecond=us)
    text = rfc3339_exact(t)
    assert parse_timestamp(text, "at") == t
    assert ("." in text) == (us != 0) and text.endswith("Z")


@given(_IN_BOUNDS, _OFFSETS)
def test_any_offset_names_the_same_instant(t: datetime, offset: timezone) -> None:
    parsed = parse_timestamp(t.astimezone(offset).isoformat(), "at")
    assert parsed == t and parsed.tzinfo is UTC


@given(_OUT_OF_BOUNDS)
def test_out_of_bounds_is_refused_in_one_line_naming_field_and_value(t: datetime) -> None:
    text = t.isoformat().replace("+00:00", "Z")
    with pytest.raises(TimestampError) as error:
        parse_timestamp(text, "--start")
    message = str(error.value)
    assert message == f"--start: {text!r} must be between 1970-01-01 and 2199-12-31"
    assert error.value.field == "--start"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tomorrow", "is not an RFC 3339 time"),
        ("", "is not an RFC 3339 time"),
        ("2026-05-04T10:00:00", "needs a time zone offset"),
        ("9999-12-31T23:30:00-01:00", "is out of range"),  # past year 9999 in UTC
        ("0001-01-01T00:00:00+01:00", "is out of range"),
    ],
)
def test_texts_that_are_no_instant_are_refused_naming_field_and_value(text: str, says: str) -> None:
    with pytest.raises(TimestampError) as error:
        parse_timestamp(text, "end")
    assert str(error.value).startswith(f"end: {text!r} {says}")
    assert "\n" not in str(error.value)


def test_without_an_offset_utc_only_when_asked_and_unbounded_only_when_asked() -> None:
    assert parse_timestamp(" 2026-05-04T10:00:00 ", "at", naive_is_utc=True) == datetime(
        2026, 5, 4, 10, tzinfo=UTC
    )
    far = parse_timestamp("9999-12-31T23:00:00Z", "finishedAt", bounded=False)
    assert far == datetime(9999, 12, 31, 23, tzinfo=UTC)
    assert parse_timestamp("2199-12-31T23:59:59.999999Z", "at") < TIME_MAX
    with pytest.raises(TimestampError):
        parse_timestamp("2200-01-01T00:00:00Z", "at")


# ------------------------------------------------------------------ the entrypoints

_YEAR_9999 = "9999-12-31T23:00:00Z"


def test_http_api_refuses_a_year_9999_query_or_body_time_naming_the_field() -> None:
    engine = bootstrap("memory:")
    try:
        with TestClient(create_app(engine, ServeSettings()), base_url="http://127.0.0.1") as http:
            events = http.get("/api/v1/events", params={"since": _YEAR_9999})
            assert events.status_code == 422
            [error] = events.json()["errors"]
            assert error["field"] == "since" and _YEAR_9999 in error["message"]
            assert "between 1970-01-01 and 2199-12-31" in error["message"]
            backfill = http.post(
                "/api/v1/namespaces/default/cronworkflows/hello/backfill",
                json={"start": _YEAR_9999, "end": "9999-12-31T23:30:00Z"},
            )
            assert backfill.status_code == 422
            fields = {e["field"] for e in backfill.json()["errors"]}
            assert fields == {"start", "end"}
            assert all("2199-12-31" in e["message"] for e in backfill.json()["errors"])
    finally:
        engine.close()


# ------------------------------------------------------------------ the rule of every flag

_ZONES = st.sampled_from(
    ["Europe/Berlin", "America/New_York", "America/Santiago", "Asia/Kolkata", "Pacific/Apia"]
)
_DAYS = st.dates(min_value=date(1971, 1, 1), max_value=date(2199, 12, 30))


@given(_DAYS, _ZONES)
def test_a_date_alone_is_the_first_instant_of_that_day_in_the_zone(day: date, zone: str) -> None:
    """Midnight in the zone; where a clock change skips midnight (Santiago's spring), the
    first instant the day has: never an instant of the day before."""
    t = user_time(day.isoformat(), "--start", zone)
    local = t.astimezone(ZoneInfo(zone))
    assert t.tzinfo is UTC
    assert local.date() == day and local.time() <= time(1, 0)
    assert (t - timedelta(seconds=1)).astimezone(ZoneInfo(zone)).date() < day


@given(_DAYS)
def test_a_date_alone_without_a_zone_is_midnight_utc(day: date) -> None:
    assert user_time(day.isoformat(), "--before") == datetime.combine(day, time(0), UTC)
    assert user_time(f" {day.isoformat()} ", "--before", "") == datetime.combine(day, time(0), UTC)


@given(_IN_BOUNDS, _OFFSETS, _ZONES)
def test_a_time_with_an_offset_is_that_instant_whatever_the_zone(
    t: datetime, offset: timezone, zone: str
) -> None:
    assert user_time(t.astimezone(offset).isoformat(), "--at", zone) == t


def test_known_days_in_known_zones() -> None:
    assert user_time("2026-11-28", "--start", "Europe/Berlin") == datetime(
        2026, 11, 27, 23, tzinfo=UTC
    )
    assert user_time("2026-07-01", "--start", "Europe/Berlin") == datetime(
        2026, 6, 30, 22, tzinfo=UTC
    )
    # Chile moves its clocks from 00:00 to 01:00 on 2026-09-06: the day starts at 01:00 -03.
    assert user_time("2026-09-06", "--start", "America/Santiago") == datetime(
        2026, 9, 6, 4, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("2026-11-28T10:00", "needs a time zone offset, e.g. 2026-05-04T10:00:00Z, or is a date"),
        ("2026-11-28 10:00:00", "needs a time zone offset"),
        ("2026-02-30", "is not a date (e.g. 2026-05-04)"),
        # A date alone names the instant it is: midnight in Berlin of 1970-01-01 is in 1969.
        (
            "1970-01-01",
            "(midnight in Europe/Berlin, 1969-12-31T23:00:00Z) must be between"
            " 1970-01-01T00:00:00Z and 2199-12-31",
        ),
        ("1969-12-31", "(midnight in Europe/Berlin, 1969-12-30T23:00:00Z) must be between"),
        ("2200-01-02", "(midnight in Europe/Berlin, 2200-01-01T23:00:00Z) must be between"),
        ("tomorrow", "is not an RFC 3339 time"),
        ("9999-12-31T23:00:00Z", "must be between 1970-01-01 and 2199-12-31"),
        # ISO 8601 forms Python reads and RFC 3339 does not: each named an instant.
        ("2026-W50-1T10:00:00Z", "is not an RFC 3339 time"),  # 2026-12-07, a week date
        ("2026-W50-1", "is not an RFC 3339 time"),  # said "needs a time zone offset"
        ("20261207T100000Z", "is not an RFC 3339 time"),
        ("2026-12-07T10Z", "is not an RFC 3339 time"),
        ("2026-12-07T10:00:00,5Z", "is not an RFC 3339 time"),
        ("2026-12-07T10:00:00Z\x00", "is not an RFC 3339 time"),
    ],
)
def test_what_the_rule_refuses_is_one_line_naming_field_and_value(text: str, says: str) -> None:
    with pytest.raises(TimestampError) as error:
        user_time(text, "--start", "Europe/Berlin")
    assert str(error.value).startswith(f"--start: {text!r} {says}"), str(error.value)
    assert "\n" not in str(error.value)


def test_the_http_api_reads_a_date_alone_in_the_cronworkflows_zone() -> None:
    """POST .../backfill, GET .../decision and .../history take the rule too: a date alone
    is midnight in the named CronWorkflow's zone; a time without an offset is a 422."""
    engine = bootstrap("memory:")
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {
            "schedules": ["0 * * * *"],
            "timezone": "Europe/Berlin",
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }
    try:
        Operations(engine).apply(parse_manifest(doc))
        with TestClient(create_app(engine, ServeSettings()), base_url="http://127.0.0.1") as http:
            base = "/api/v1/namespaces/default/cronworkflows/hello"
            plan = http.post(
                base + "/backfill",
                json={"start": "2026-11-28", "end": "2026-11-28", "dryRun": True},
            )
            assert plan.status_code == 200, plan.text
            assert [i["scheduledTime"] for i in plan.json()["items"]] == ["2026-11-27T23:00:00Z"]
            why = http.get(base + "/decision", params={"at": "2026-11-28"})
            assert why.status_code == 200 and why.json()["at"] == "2026-11-27T23:00:00Z"
            history = http.get(base + "/history", params={"since": "2026-11-28"})
            assert history.status_code == 200, history.text
            naive = http.get(base + "/decision", params={"at": "2026-11-28T10:00:00"})
            assert naive.status_code == 422
            [error] = naive.json()["errors"]
            assert error["field"] == "at" and "needs a time zone offset" in error["message"]
    finally:
        engine.close()
