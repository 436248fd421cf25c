"""domain/timestamps.py: the one RFC 3339 reader every entrypoint uses, and its bounds.

Properties: what the read model's formatter writes reads back as the same instant, in any
offset; anything outside 1970-01-01 .. 2199-12-31 is refused with one line naming the field
and the value. Then each entrypoint (CLI flags, a simulate scenario, the HTTP API's query
and body) refuses a year-9999 time that way: a non-zero exit or a 422, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.domain.timestamps import TIME_MAX, TimestampError, parse_timestamp
from cronsource.projections.readmodel import rfc3339

ROOT = Path(__file__).resolve().parents[2]
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

_EXE = shutil.which("cronsource", path=str(Path(sys.executable).parent))
_YEAR_9999 = "9999-12-31T23:00:00Z"


def _cronsource(*args: str) -> subprocess.CompletedProcess[str]:
    assert _EXE, "the cronsource entry point is not installed in this venv"
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    return subprocess.run(
        [_EXE, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_cli_backfill_in_year_9999_is_one_line_naming_the_flag_and_value(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'cs.db'}"
    assert _cronsource("--store", store, "apply", "-f", "examples/hello.yaml").returncode == 0
    result = _cronsource(
        "--store", store, "backfill", "hello", "--start", _YEAR_9999,
        "--end", "9999-12-31T23:30:00Z",
    )  # fmt: skip
    line = _one_error_line(result)
    assert line == f"error: --start: {_YEAR_9999!r} must be between 1970-01-01 and 2199-12-31"


@pytest.mark.parametrize("quoted", [True, False], ids=["string", "yaml timestamp"])
def test_simulate_with_a_year_9999_scenario_time_names_the_field_and_value(
    tmp_path: Path, quoted: bool
) -> None:
    start = f'"{_YEAR_9999}"' if quoted else _YEAR_9999
    scenario = tmp_path / "far.yaml"
    scenario.write_text(f"start: {start}\nend: 9999-12-31T23:30:00Z\ncronWorkflows: []\n")
    line = _one_error_line(_cronsource("simulate", str(scenario)))
    assert "start: '9999-12-31T23:00:00" in line
    assert "must be between 1970-01-01 and 2199-12-31" in line


def test_http_api_refuses_a_year_9999_query_or_body_time_naming_the_field() -> None:
    engine = bootstrap("memory:")
    try:
        with TestClient(create_app(engine, ServeSettings())) as http:
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
