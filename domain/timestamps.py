"""Times as users write them, read in one place: `user_time` is the one rule for every CLI
flag, HTTP parameter or body field and simulate scenario time (RFC 3339, or a date alone:
midnight in the CronWorkflow's time zone), and `parse_timestamp` the RFC 3339 reader under it.

Every entrypoint that takes a time from a user reads it here, so all accept the same texts,
refuse the same texts with the same message and all keep the same bounds: cron arithmetic
near year 9999 overflows `datetime` (a `backfill --start 9999-12-31T23:00:00Z` ended in an
OverflowError traceback), and no schedule question needs times before 1970 or after 2199.
Times a program wrote (the cluster's, our own annotations) are read by `parse_timestamp`
without the user bounds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: The smallest step between two datetimes. A schedule's `next_after` and `ticks_between` are
#: strict after their bound: asked from `t - SMALLEST_STEP`, they take `t` itself too.
SMALLEST_STEP: Final = timedelta(microseconds=1)
#: The instants users may name: TIME_MIN <= t < TIME_MAX.
TIME_MIN: Final = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX: Final = datetime(2200, 1, 1, tzinfo=UTC)
_EXAMPLE: Final = "2026-05-04T10:00:00Z"
_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
#: RFC 3339's date-time (section 5.6), its offset optional (`naive_is_utc`), its seconds too.
_RFC3339: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?"
)

#: The rule of `user_time`, in the words `--help` and the docs use.
TIME_RULE: Final = (
    "RFC 3339 (2026-05-04T10:00:00Z, or with an offset), or a date alone (2026-05-04):"
    " midnight that day"
)


class TimestampError(ValueError):
    """A text that is not an instant we accept; one line naming the field and the value.

    `reason` is the message without the field, for callers that name the field their own
    way (a pydantic location, an HTTP problem's field)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def parse_timestamp(
    value: str, field: str, *, naive_is_utc: bool = False, bounded: bool = True
) -> datetime:
    """The aware UTC instant `value` names; TimestampError naming `field` and `value` else.

    `value` is RFC 3339 with a `Z` or an offset (seconds may be left out, a space may stand
    for the `T`; surrounding blanks are ignored). The other forms of ISO 8601 that Python's
    `fromisoformat` reads (a week date `2026-W50-1`, the basic `20261207T100000Z`, an hour
    alone, a comma before the fraction) are refused, as the API server refuses them: read,
    they named an instant the user may not have meant. Without an offset it is refused,
    or read as UTC with `naive_is_utc` (the HTTP API and CLI have always done so). `bounded`
    (the default, for user input) keeps it within TIME_MIN..TIME_MAX.
    """
    if not isinstance(value, str) or not _RFC3339.fullmatch(value.strip()):
        raise TimestampError(field, f"{value!r} is not an RFC 3339 time (e.g. {_EXAMPLE})")
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise TimestampError(
            field, f"{value!r} is not an RFC 3339 time (e.g. {_EXAMPLE})"
        ) from None
    if t.tzinfo is None or t.utcoffset() is None:
        if not naive_is_utc:
            raise TimestampError(field, f"{value!r} needs a time zone offset, e.g. {_EXAMPLE}")
        t = t.replace(tzinfo=UTC)
    try:
        t = t.astimezone(UTC)
    except (OverflowError, ValueError):
        raise TimestampError(field, f"{value!r} is out of range") from None
    if bounded and not TIME_MIN <= t < TIME_MAX:
        raise TimestampError(field, f"{value!r} must be between 1970-01-01 and 2199-12-31")
    return t


def is_date(value: object) -> bool:
    """Whether `value` is a date alone (`2026-05-04`), which `user_time` reads in a zone."""
    return isinstance(value, str) and _DATE.fullmatch(value.strip()) is not None


def user_time(value: str, field: str, zone: str | None = None) -> datetime:
    """The instant a person means by `value`, the one rule of every entrypoint.

    RFC 3339 with a `Z` or an offset is that instant. A date alone (`2026-11-28`) is
    midnight starting that day in `zone`: the time zone of the CronWorkflow the request
    names (its `spec.timezone`, a backfill's ticks are that zone's days), UTC where it names
    none (None or ""). A date and time without an offset is refused: whether it meant UTC,
    the CronWorkflow's zone or the machine's is a guess, and a wrong guess moves a
    backfill or a `why` by hours. Bounds and messages are `parse_timestamp`'s.
    """
    if not is_date(value):
        if isinstance(value, str) and _no_offset(value):
            raise TimestampError(
                field,
                f"{value!r} needs a time zone offset, e.g. {_EXAMPLE}, or is a date alone"
                f" ({value.strip()[:10]}: midnight {_zone_words(zone)})",
            )
        return parse_timestamp(value, field)
    try:
        day = datetime.fromisoformat(value.strip())
    except ValueError:
        raise TimestampError(field, f"{value!r} is not a date (e.g. 2026-05-04)") from None
    try:
        tz = ZoneInfo(zone) if zone else UTC
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimestampError(field, f"{value!r}: unknown time zone {zone!r}") from None
    # A midnight that a clock change skips is read with the offset before it: the first
    # instant of that day.
    t = day.replace(tzinfo=tz).astimezone(UTC)
    if not TIME_MIN <= t < TIME_MAX:
        # Say which instant: midnight of 1970-01-01 east of UTC is in 1969, and the bare
        # bound message contradicted the date it refused.
        raise TimestampError(
            field,
            f"{value!r} (midnight {_zone_words(zone)}, {t.isoformat().replace('+00:00', 'Z')})"
            " must be between 1970-01-01T00:00:00Z and 2199-12-31",
        )
    return t


def _zone_words(zone: str | None) -> str:
    return f"in {zone}" if zone else "in the CronWorkflow's time zone, or UTC"


def _no_offset(value: str) -> bool:
    """A text that reads as a date and time but names no offset."""
    if not _RFC3339.fullmatch(value.strip()):
        return False
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return t.tzinfo is None
