"""The arguments every method of the Python API checks before it calls anything, the same in
`cronsource.open` and `cronsource.Client`: names as Kubernetes takes them, aware datetimes,
counts and pages within the HTTP API's bounds. A bad one raises `Invalid` naming it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from cronsource.adapters.application.inputs import DNS, MAX_NAME, MAX_NAMESPACE
from cronsource.errors import Invalid

_DNS = re.compile(DNS)
#: Bounds of `next(count=)` and of a page of events (`limit=`), as the HTTP API's.
MAX_COUNT = MAX_LIMIT = 1000
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
    """An aware datetime: a naive one would be read in some unstated zone."""
    if not isinstance(value, datetime):
        raise Invalid(field, f"must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise Invalid(field, f"{value.isoformat()} has no time zone (give tzinfo, e.g. UTC)")
    return value


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
