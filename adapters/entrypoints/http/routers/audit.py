"""The audit log: one CronWorkflow's history, the whole log filtered and paged, "why did
(or didn't) it run at T", and the fired / failed / skipped timelines."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from cronsource.adapters.application.inputs import DNS, parse_time, written_wall
from cronsource.adapters.application.models import Decision, EventList, Timeline
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.clock import Clock as RuntimeClock
from cronsource.adapters.entrypoints.http.dependencies import (
    API_CHECKS,
    Clock,
    EngineDep,
    Ops,
    Queries,
)
from cronsource.adapters.entrypoints.http.params import (
    Buckets,
    Days,
    EventPage,
    EventPageQuery,
    Name,
    Namespace,
)
from cronsource.adapters.entrypoints.http.problems import problem_responses
from cronsource.adapters.entrypoints.http.replies import warn
from cronsource.adapters.entrypoints.http.timeline import timeline, window_bounds
from cronsource.adapters.infrastructure.readside.queries import Queries as ReadQueries
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.service import NotFound
from cronsource.domain.timestamps import is_date
from cronsource.projections.readmodel import rfc3339

BASE = "/namespaces/{namespace}/cronworkflows/{name}"
router = APIRouter(prefix="/api/v1", dependencies=API_CHECKS, responses=problem_responses(401))


def events_page(
    ops: Operations, namespace: str | None, name: str | None, page: EventPage, response: Response
) -> dict[str, Any]:
    found = ops.events_page(
        namespace,
        name,
        since=page.since,
        until=page.until,
        types=page.types or (),
        reasons=page.reasons or (),
        after=page.after,
        limit=page.limit,
        newest=page.newest,
    )
    if found.removed is not None:
        warn(response, [found.removed])
    return {"items": found.items, "nextAfter": found.next_after}


@router.get(
    BASE + "/history",
    response_model=EventList,
    responses=problem_responses(404, 422),
    summary="The audit log of one CronWorkflow (all its incarnations)",
    tags=["audit"],
)
def history(
    namespace: Namespace,
    name: Name,
    ops: Ops,
    queries: Queries,
    page: EventPageQuery,
    response: Response,
) -> dict[str, Any]:
    return events_page(ops, namespace, name, page, response)


@router.get(
    BASE + "/decision",
    response_model=Decision,
    responses=problem_responses(404, 422),
    summary="Why did (or didn't) it run at a time: the decision recorded for that tick",
    tags=["audit"],
)
def decision(
    namespace: Namespace,
    name: Name,
    ops: Ops,
    queries: Queries,
    at: Annotated[
        str,
        Query(
            description="The tick in question: RFC 3339, or a date alone (midnight in the"
            " CronWorkflow's time zone)"
        ),
    ],
) -> dict[str, Any]:
    zone = ops.time_zone(namespace, name) if is_date(at) else None
    return ops.why(namespace, name, parse_time(at, "at", zone), wall=written_wall(at))


def _timeline(
    engine: Engine,
    ops: Operations,
    queries: ReadQueries,
    clock: RuntimeClock,
    namespace: str | None,
    name: str | None,
    days: float,
    buckets: int,
) -> dict[str, Any]:
    since, until, bucket = window_bounds(clock.now(), days, buckets)
    ops.refresh()
    rows = engine.view.statuses(namespace)
    if name is not None:
        rows = [r for r in rows if r.name == name]
        if not rows:
            raise NotFound(f"cronworkflow {namespace}/{name} not found")
    window = queries.window(namespace, name, since, until, bucket)
    return {
        "since": rfc3339(since),
        "until": rfc3339(until),
        "bucketSeconds": int(bucket.total_seconds()),
        "items": timeline(rows, window, since, until, bucket),
    }


@router.get(
    "/timeline",
    response_model=Timeline,
    responses=problem_responses(422),
    summary="Per CronWorkflow, fired / failed / skipped-by-reason ticks per time bucket",
    tags=["audit"],
)
def timeline_all(
    engine: EngineDep,
    ops: Ops,
    queries: Queries,
    clock: Clock,
    namespace: Annotated[str | None, Query(pattern=DNS, max_length=63)] = None,
    days: Days = 7,
    buckets: Buckets = 168,
) -> dict[str, Any]:
    return _timeline(engine, ops, queries, clock, namespace, None, days, buckets)


@router.get(
    BASE + "/timeline",
    response_model=Timeline,
    responses=problem_responses(404, 422),
    summary="The timeline of one CronWorkflow",
    tags=["audit"],
)
def timeline_one(
    namespace: Namespace,
    name: Name,
    engine: EngineDep,
    ops: Ops,
    queries: Queries,
    clock: Clock,
    days: Days = 7,
    buckets: Buckets = 168,
) -> dict[str, Any]:
    return _timeline(engine, ops, queries, clock, namespace, name, days, buckets)


@router.get(
    "/events",
    response_model=EventList,
    responses=problem_responses(422),
    summary="The whole audit log, filtered, paged by log position",
    tags=["audit"],
)
def events(
    ops: Ops,
    queries: Queries,
    page: EventPageQuery,
    response: Response,
    namespace: Annotated[str | None, Query(max_length=253)] = None,
    name: Annotated[str | None, Query(max_length=253)] = None,
) -> dict[str, Any]:
    return events_page(ops, namespace, name, page, response)
