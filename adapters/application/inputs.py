"""What a request may say, checked once for every entrypoint: times (domain/timestamps.py
`user_time`: RFC 3339, or a date alone, midnight in the CronWorkflow's zone), the audit's
vocabulary (event types, skip reasons: a filter naming anything else is a typo, refused
rather than answered empty), and the one error bad input becomes, naming the field as the
client wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import get_args

from cronsource.adapters.infrastructure.readside.queries import EventFilter
from cronsource.domain.backfill import MAX_BACKFILL_TICKS, Overlap
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import SkipReason
from cronsource.domain.service import topic_type
from cronsource.domain.timestamps import TimestampError, is_date, user_time
from cronsource.projections.readmodel import rfc3339

DECISION_TYPES = ("ScheduleFired", "ScheduleSkipped")
#: Every event type of the audit log, read from the aggregate's event classes, and every
#: skip reason: a filter naming anything else is a typo, refused rather than answered empty.
EVENT_TYPES: tuple[str, ...] = tuple(
    sorted(
        topic_type(v.TOPIC)
        for v in vars(CronWorkflow).values()
        if isinstance(v, type) and hasattr(v, "TOPIC") and v is not CronWorkflow
    )
)
SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)


#: A Kubernetes DNS subdomain name (namespaces use the label form, at most 63 characters).
DNS = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
MAX_NAMESPACE, MAX_NAME = 63, 253
#: A suspend's or resume's `note`, and the most backfill runs at once (`parallel`): the
#: bounds of the HTTP API's bodies, which the Python API checks the same.
MAX_NOTE, MAX_PARALLEL = 4096, 10_000
#: How a backfill's runs may overlap (`overlap`), as concurrencyPolicy, and Queue.
OVERLAPS = ("Allow", "Forbid", "Replace", "Queue")


class FieldError(ValueError):
    """Bad input, naming the field (camelCase, as the client wrote it) and where it was."""

    def __init__(self, field: str, message: str, location: str = "query") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.location = location


class FieldErrors(ValueError):
    """Several bad fields at once (a manifest's): each a dict with `field`, `in` (where it
    was: body, query, header) and `message`."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


def parse_time(value: str, field: str, zone: str | None = None) -> datetime:
    """A time as a person writes it (domain/timestamps.py `user_time`: RFC 3339, or a date
    alone, midnight in `zone`, the named CronWorkflow's time zone, else UTC), as a
    FieldError for the API's problem responses."""
    try:
        return user_time(value, field, zone)
    except TimestampError as e:
        raise FieldError(field, e.reason) from None


def written_wall(value: str) -> datetime | None:
    """The time a person wrote, as written: wall clock and offset (`2027-03-14T02:30:00-05:00`
    is 02:30 at -05:00), for `why`: a time written inside a zone's spring-forward gap names a
    slot the schedule moved, which the instant alone (03:30 EDT) no longer says. None for a
    date alone or text that is no time."""
    if is_date(value):
        return None
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def event_filter(
    namespace: str | None,
    name: str | None,
    since: str | None,
    until: str | None,
    types: Sequence[str],
    reasons: Sequence[str],
    after: int,
    limit: int,
    zone: str | None = None,
) -> EventFilter:
    """An audit query as a request gives it, checked field by field (`zone`: what a date
    alone in `since`/`until` is midnight in)."""
    for field, values in (
        ("namespace", [namespace or ""]),
        ("name", [name or ""]),
        ("type", types),
        ("reason", reasons),
    ):
        if any("\x00" in v for v in values):
            raise FieldError(field, "must not contain NUL characters")
    for field, values, known in (
        ("type", types, EVENT_TYPES),
        ("reason", reasons, SKIP_REASONS),
    ):
        for v in values:
            if v not in known:
                # A typo would otherwise answer an empty page, as if nothing happened.
                raise FieldError(field, f"unknown {field} {v!r} (one of: {', '.join(known)})")
    s = parse_time(since, "since", zone) if since else None
    u = parse_time(until, "until", zone) if until else None
    if s and u and u < s:
        raise FieldError("until", "is before since")
    return EventFilter(
        namespace, name, s, through_second(u), tuple(types), tuple(reasons), after, limit
    )


def through_second(until: datetime | None) -> datetime | None:
    """An audit query's end as the end of its second: events are shown to the second, and
    one shown at T (stored at T and a half) is at T for whoever copies T into `--until`; it
    was left out. A fraction counts the same (T.5 is the second T): taken as it was, it cut
    that second's later events, and gave fewer than T itself."""
    if until is None:
        return until
    return until.replace(microsecond=0) + timedelta(seconds=1) - timedelta(microseconds=1)


def check_range(since: datetime | None, until: datetime | None) -> None:
    """An end before the start is a mistake, not an empty answer."""
    if since is not None and until is not None and until < since:
        raise FieldError("until", f"{rfc3339(until)} is before since {rfc3339(since)}")


def check_backfill(
    start: datetime,
    end: datetime,
    overlap: Overlap | None,
    parallel: int | None,
    *,
    shown: tuple[str, str] | None = None,
    max_ticks: int | None = None,
) -> None:
    """The backfill rules a request can break before anything is read (domain/backfill.py
    has the rest). `shown`: start and end as the client wrote them, for the message."""
    if max_ticks is not None and not 1 <= max_ticks <= MAX_BACKFILL_TICKS:
        raise FieldError(
            "maxTicks", f"{max_ticks} is not between 1 and {MAX_BACKFILL_TICKS:,}", "body"
        )
    if end < start:
        s, e = shown or (rfc3339(start), rfc3339(end))
        raise FieldError("end", f"{e} is before start {s}", "body")
    if parallel is not None and overlap in ("Forbid", "Replace"):
        raise FieldError("parallel", f"applies to overlap Allow or Queue, not {overlap}", "body")
