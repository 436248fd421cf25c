"""The request parameters the routes share (path, headers, query), with their bounds and
the descriptions the OpenAPI document shows. FastAPI validates them before a handler runs;
what fails is a 422 naming the parameter (adapters/entrypoints/http/problems.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Query
from fastapi import Path as PathParam

from cronsource.adapters.application.inputs import DNS

Namespace = Annotated[
    str,
    PathParam(pattern=DNS, max_length=63, description="Kubernetes namespace", examples=["default"]),
]
Name = Annotated[str, PathParam(pattern=DNS, max_length=253, description="CronWorkflow name")]
IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description="Expected aggregate version (the ETag); 409 with currentVersion if stale",
    ),
]
Since = Annotated[str | None, Query(description="RFC 3339; events at or after it")]
Until = Annotated[str | None, Query(description="RFC 3339; events at or before it")]
Types = Annotated[
    list[str] | None,
    Query(alias="type", description="Event type, e.g. ScheduleSkipped (repeatable)"),
]
Reasons = Annotated[
    list[str] | None,
    Query(alias="reason", description="Skip reason, e.g. Suspended (repeatable)"),
]
FieldManager = Annotated[
    str | None,
    Query(
        alias="fieldManager",
        min_length=1,
        max_length=128,
        pattern=r"^[ -~]+$",
        description="Server-side apply: who applies (as Kubernetes' `fieldManager`)",
    ),
]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=253)]
After = Annotated[int, Query(ge=0, le=2**62, description="Log position: events after it (paging)")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Newest = Annotated[
    bool,
    Query(
        description="The newest `limit` events that match (after `after`), still oldest first;"
        " `nextAfter` is null"
    ),
]
Days = Annotated[float, Query(gt=0, le=90, description="How many days back")]
Buckets = Annotated[int, Query(ge=1, le=2000, description="Cells per CronWorkflow")]
Selector = Annotated[
    str | None,
    Query(
        alias="labelSelector",
        max_length=4096,
        description="Kubernetes label selector, e.g. `team=data,tier in (a,b),!legacy`",
    ),
]


@dataclass(frozen=True)
class EventPage:
    """The window, filters and page of an audit query, as the request gave them (parsed and
    checked by the router's `event_filter`)."""

    since: str | None
    until: str | None
    types: list[str] | None
    reasons: list[str] | None
    after: int
    limit: int
    newest: bool = False


def event_page(
    since: Since = None,
    until: Until = None,
    types: Types = None,
    reasons: Reasons = None,
    after: After = 0,
    limit: Limit = 100,
    newest: Newest = False,
) -> EventPage:
    return EventPage(since, until, types, reasons, after, limit, newest)


#: The seven query parameters /history and /events share, declared once.
EventPageQuery = Annotated[EventPage, Depends(event_page)]
