"""Calendars (docs/user-guide.md, "Calendars"): a ConfigMap labelled
`cronsource.io/calendar: "true"`, replaced with PUT, read with GET, deleted with DELETE. Each
change is a version of the calendar's stream; the CronWorkflows that name it read it at
their next decision."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from cronsource.adapters.application.admission import admit_calendar, resource_version
from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.application.models import CalendarObject
from cronsource.adapters.entrypoints.http.admission import (
    content_type,
    if_match_version,
    parse_body,
)
from cronsource.adapters.entrypoints.http.dependencies import API_CHECKS, Ops, Settings
from cronsource.adapters.entrypoints.http.params import IfMatch, Name, Namespace
from cronsource.adapters.entrypoints.http.problems import problem_responses
from cronsource.adapters.entrypoints.http.replies import log_command, warn
from cronsource.adapters.entrypoints.http.routers.cronworkflows import bounded

BASE = "/namespaces/{namespace}/calendars"
router = APIRouter(prefix="/api/v1", dependencies=API_CHECKS, responses=problem_responses(401))


@router.put(
    BASE + "/{name}",
    response_model=CalendarObject,
    responses=problem_responses(400, 409, 415, 422),
    summary="Create or replace a calendar (a ConfigMap labelled cronsource.io/calendar)",
    description="The body is the ConfigMap: `data.dates` (dates and YYYY-MM-DD..YYYY-MM-DD"
    " ranges, at most 10,000 entries) and optionally `data.rrule` (RFC 5545 lines, DAILY or"
    " coarser). A change is a new version; an unchanged body changes nothing.",
    tags=["calendars"],
)
async def put(
    namespace: Namespace,
    name: Name,
    request: Request,
    ops: Ops,
    settings: Settings,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    header_version = if_match_version(if_match)
    raw, ctype = await request.body(), content_type(request)

    def run() -> dict[str, Any]:
        doc = parse_body(raw, ctype)
        if not isinstance(doc, dict):
            raise FieldError("<body>", "a ConfigMap is required", "body")
        # If-Match or metadata.resourceVersion: a precondition, 409 when stale (they were
        # ignored: a PUT with a stale version replaced a newer calendar).
        expected = resource_version(doc, header_version)
        meta = doc.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta.setdefault("namespace", namespace)
            meta.setdefault("name", name)
            if (meta.get("namespace"), meta.get("name")) != (namespace, name):
                raise FieldError("metadata", "namespace and name must match the path", "body")
        version, what = ops.apply_calendar(admit_calendar(doc, namespace), expected=expected)
        log_command(f"calendar {what}", namespace, name, version)
        return dict(ops.calendar(namespace, name), outcome=what)

    return await bounded(run, settings.request_timeout)


@router.get(
    BASE + "/{name}",
    response_model=CalendarObject,
    responses=problem_responses(404),
    summary="A calendar as it is now, with its version",
    tags=["calendars"],
)
def get(namespace: Namespace, name: Name, ops: Ops) -> dict[str, Any]:
    return ops.calendar(namespace, name, live=True)


@router.delete(
    BASE + "/{name}",
    response_model=CalendarObject,
    responses=problem_responses(404, 409),
    summary="Delete a calendar (its stream and versions stay)",
    description="A CronWorkflow that still names it skips its ticks as SpecError, naming it,"
    " until the calendar exists again or the annotation goes.",
    tags=["calendars"],
)
def delete(
    namespace: Namespace, name: Name, ops: Ops, response: Response, if_match: IfMatch = None
) -> dict[str, Any]:
    version = ops.delete_calendar(namespace, name, expected=if_match_version(if_match))
    log_command("calendar deleted", namespace, name, version)
    # Said, as the API server says an admission warning (see calendar_deleted_warnings).
    warn(response, ops.calendar_deleted_warnings(namespace, name))
    return ops.calendar(namespace, name)
