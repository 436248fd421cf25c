"""RFC 3339 instants as users write them (`2026-05-04T10:00:00Z`), read in one place.

Every entrypoint that takes a time from a user (CLI flags, HTTP query parameters and bodies,
simulate scenarios) reads it here, so all refuse the same texts with the same message and
all keep the same bounds: cron arithmetic near year 9999 overflows `datetime` (a
`backfill --start 9999-12-31T23:00:00Z` ended in an OverflowError traceback), and no
schedule question needs times before 1970 or after 2199. Times a program wrote (the
cluster's, our own annotations) are read by the same function without the user bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

#: The instants users may name: TIME_MIN <= t < TIME_MAX.
TIME_MIN: Final = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX: Final = datetime(2200, 1, 1, tzinfo=UTC)
_EXAMPLE: Final = "2026-05-04T10:00:00Z"


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

    `value` is RFC 3339 with a `Z` or an offset (any ISO 8601 form Python's `fromisoformat`
    reads is accepted too; surrounding blanks are ignored). Without an offset it is refused,
    or read as UTC with `naive_is_utc` (the HTTP API and CLI have always done so). `bounded`
    (the default, for user input) keeps it within TIME_MIN..TIME_MAX.
    """
    if not isinstance(value, str):
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
