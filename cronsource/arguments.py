"""The arguments every method of the Python API checks before it calls anything, the same in
`cronsource.open` and `cronsource.Client`: names as Kubernetes takes them, aware datetimes,
counts and pages within the HTTP API's bounds. A bad one raises `Invalid` naming it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from cronsource.adapters.application.inputs import (
    DNS,
    MAX_NAME,
    MAX_NAMESPACE,
    MAX_NOTE,
    MAX_PARALLEL,
    OVERLAPS,
)
from cronsource.domain.backfill import MAX_BACKFILL_TICKS
from cronsource.domain.timestamps import TIME_MAX, TIME_MIN
from cronsource.errors import Invalid

_DNS = re.compile(DNS)
#: Bounds of `next(count=)` and of a page of events (`limit=`), as the HTTP API's.
MAX_COUNT = MAX_LIMIT = 1000
#: The longest label selector taken (far beyond any real one; a bound, not a rule).
MAX_SELECTOR = 4096
MAX_AFTER = 2**62


def name(field: str, value: Any, longest: int = MAX_NAME) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid(field, f"must be a non-empty string, not {value!r}")
    if len(value) > longest or not _DNS.match(value):
        raise Invalid(field, f"{value!r} is not a Kubernetes name (lower case, digits, '-', '.')")
    return value


def namespace(value: Any) -> str:
    return name("namespace", value, MAX_NAMESPACE)


def moment(field: str, value: Any) -> datetime:
    """An aware datetime within the instants every entrypoint takes (domain/timestamps.py): a
    naive one would be read in some unstated zone, and one near year 1 or 9999 overflowed in
    the arithmetic of a schedule (OverflowError, not Invalid)."""
    if not isinstance(value, datetime):
        raise Invalid(field, f"must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise Invalid(field, f"{value.isoformat()} has no time zone (give tzinfo, e.g. UTC)")
    try:
        inside = TIME_MIN <= value.astimezone(UTC) < TIME_MAX
    except OverflowError:
        inside = False
    if not inside:
        raise Invalid(field, f"{value.isoformat()} must be between 1970-01-01 and 2199-12-31")
    return value


def text(field: str, value: Any, longest: int, *, empty: bool = True) -> str:
    """A string of at most `longest` characters (the HTTP API's bound): a number or a list
    was stored as given, `by=5` in the audit."""
    if not isinstance(value, str):
        raise Invalid(field, f"must be a string, not {value!r}")
    if len(value) > longest or (not empty and not value):
        raise Invalid(field, f"must be 1 to {longest} characters, not {value[:40]!r}")
    return value


def flag(field: str, value: Any) -> bool:
    """True or False itself: `dry_run="no"` is truthy, and ran as a dry run that said it
    was not one."""
    if not isinstance(value, bool):
        raise Invalid(field, f"must be True or False, not {value!r}")
    return value


def choice(field: str, value: Any, allowed: Sequence[str]) -> str | None:
    if value is not None and value not in allowed:
        raise Invalid(field, f"{value!r} is not one of {', '.join(allowed)}")
    return cast(str | None, value)


def optional_bounded(field: str, value: Any, low: int, high: int) -> int | None:
    return None if value is None else bounded(field, value, low, high)


def words(field: str, value: Any) -> list[str]:
    """A list of strings (event types, skip reasons): a string alone is a sequence of its
    letters, and was refused as unknown type 'S'."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise Invalid(field, f"must be a list of strings, not {value!r}")
    for v in value:
        if not isinstance(v, str):
            raise Invalid(field, f"must be a list of strings, not {value!r}")
    return list(value)


def seconds(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e9:
        raise Invalid(field, f"must be a number of seconds, 0 or more, not {value!r}")
    return float(value)


def rfc3339(value: datetime) -> str:
    """What the HTTP API takes: UTC, to the microsecond."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def window(since: datetime | None, until: datetime | None) -> None:
    if since is not None:
        moment("since", since)
    if until is not None:
        moment("until", until)
    if since is not None and until is not None and until < since:
        raise Invalid("until", "is before since")


def bounded(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Invalid(field, f"must be an integer from {low} to {high}, not {value!r}")
    return value


def version(field: str, value: Any) -> int | None:
    if value is None:
        return None
    return bounded(field, value, 0, 10**18 - 1)


def who(by: Any, note: Any) -> None:
    """A suspend's or resume's `by` and `note`, as the HTTP API's body takes them."""
    text("by", by, MAX_NAME)
    text("note", note, MAX_NOTE)


def request_id(value: Any) -> str | None:
    """None (a new run each call), or an idempotency key: an empty one was taken as None, so
    each retry of a call that meant one run started another."""
    return None if value is None else text("request_id", value, MAX_NAME, empty=False)


def backfill(dry_run: Any, overlap: Any, parallel: Any, max_ticks: Any) -> None:
    flag("dry_run", dry_run)
    choice("overlap", overlap, OVERLAPS)
    optional_bounded("parallel", parallel, 1, MAX_PARALLEL)
    optional_bounded("max_ticks", max_ticks, 1, MAX_BACKFILL_TICKS)
