"""domain/durations.py: one Go-duration parser, two ranges. The positive, bounded one is
what schedules (`@every`), annotations and flags take; `signed` is Go's whole range for
expr-lang's `duration()` (its agreement with Go:
tests/integration/test_argo_duration_differential.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronsource.domain.durations import MAX_DURATION_CHARS, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("500ms", timedelta(milliseconds=500)),
        ("1.5h", timedelta(minutes=90)),
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
        ("+2s", timedelta(seconds=2)),
        ("1500us", timedelta(microseconds=1500)),
        ("1\u00b5s", timedelta(microseconds=1)),
        ("1\u03bcs", timedelta(microseconds=1)),
        (" 5m ", timedelta(minutes=5)),  # blanks around a flag or annotation value
    ],
)
def test_positive_durations_in_go_spelling(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid duration ''"),
        ("5", "invalid duration '5'"),
        ("5d", "invalid duration '5d'"),
        (".s", "invalid duration '.s'"),
        ("1h 30m", "invalid duration '1h 30m'"),
        ("0", "must be greater than zero"),
        ("0s", "must be greater than zero"),
        ("-5s", "must be greater than zero"),
        ("999ns", "must be greater than zero"),  # below the microsecond a timedelta holds
        ("878401h", "longer than 100 years"),
        ("9" * 30 + "h", "longer than 100 years"),
        ("1" * (MAX_DURATION_CHARS + 1) + "s", f"longer than the limit of {MAX_DURATION_CHARS}"),
    ],
)
def test_positive_durations_refuse_with_the_text_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        parse_duration(text)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("-0", timedelta(0)),
        ("-1.5h", -timedelta(minutes=90)),
        ("-1500ns", -timedelta(microseconds=1)),  # toward zero, as Go's integer division
        ("1999ns", timedelta(microseconds=1)),
        ("2562047h47m16.854775807s", timedelta(hours=2562047, minutes=47, seconds=16.854775)),
        ("-2562047h47m16.854775808s", -timedelta(hours=2562047, minutes=47, seconds=16.854775)),
    ],
)
def test_signed_durations_take_gos_whole_range(text: str, expected: timedelta) -> None:
    assert parse_duration(text, signed=True) == expected


@pytest.mark.parametrize("text", ["2562047h47m16.854775808s", "2562048h", " 1s", "1s ", "-"])
def test_signed_durations_refuse_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text, signed=True)
