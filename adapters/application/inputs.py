"""What a request may say, checked once for every entrypoint: times (RFC 3339, within the
bounds of domain/timestamps.py), the audit's vocabulary (event types, skip reasons: a filter
naming anything else is a typo, refused rather than answered empty), and the one error bad
input becomes, naming the field as the client wrote it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import get_args

from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.decisions import SkipReason
from cronsource.domain.service import topic_type
from cronsource.domain.timestamps import TimestampError, parse_timestamp

_TICK = timedelta(microseconds=1)
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


class FieldError(ValueError):
    """Bad input, naming the field (camelCase, as the client wrote it) and where it was."""

    def __init__(self, field: str, message: str, location: str = "query") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.location = location


def parse_time(value: str, field: str) -> datetime:
    """RFC 3339 (a `Z` or an offset; no offset means UTC), within the bounds of
    domain/timestamps.py, as a FieldError for the API's problem responses."""
    try:
        return parse_timestamp(value, field, naive_is_utc=True)
    except TimestampError as e:
        raise FieldError(field, e.reason) from None
