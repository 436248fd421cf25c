"""Commands on one CronWorkflow: suspend, resume, trigger (run now) and backfill."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Response

from cronsource.adapters.application.inputs import FieldError, check_backfill, parse_time
from cronsource.adapters.application.models import (
    BackfillRequest,
    BackfillResult,
    CronWorkflowObject,
    SuspendRequest,
    Triggered,
    TriggerRequest,
)
from cronsource.adapters.application.objects import backfill_result
from cronsource.adapters.application.operations import Operations
from cronsource.adapters.entrypoints.http.admission import command_body, if_match_version
from cronsource.adapters.entrypoints.http.dependencies import (
    API_CHECKS,
    Ops,
    Queries,
    Settings,
)
from cronsource.adapters.entrypoints.http.params import IdempotencyKey, IfMatch, Name, Namespace
from cronsource.adapters.entrypoints.http.problems import problem_responses
from cronsource.adapters.entrypoints.http.replies import answer, current, log_command
from cronsource.adapters.infrastructure.logs import scheduling_fields
from cronsource.adapters.infrastructure.readside.queries import Queries as ReadQueries
from cronsource.domain.cronworkflow import manual_workflow_name
from cronsource.domain.timestamps import is_date

log = logging.getLogger("cronsource.http")

BASE = "/namespaces/{namespace}/cronworkflows/{name}"
#: Every command's body is read by the shared loader's rules first (`command_body`).
COMMAND_BODY = Depends(command_body)
router = APIRouter(prefix="/api/v1", dependencies=API_CHECKS, responses=problem_responses(401))


def _suspend_or_resume(
    ops: Operations,
    queries: ReadQueries,
    response: Response,
    namespace: str,
    name: str,
    body: SuspendRequest | None,
    if_match: str | None,
    resume: bool,
) -> dict[str, Any]:
    req = body or SuspendRequest()

    command = ops.resume if resume else ops.suspend
    _, version = command(
        namespace, name, by=req.by, note=req.note, expected=if_match_version(if_match)
    )
    log_command("resumed" if resume else "suspended", namespace, name, version, by=req.by)
    return answer(response, current(ops, queries, namespace, name))


@router.post(
    BASE + "/suspend",
    response_model=CronWorkflowObject,
    responses=problem_responses(404, 409, 422),
    summary="Suspend: no tick runs until resumed",
    tags=["commands"],
    dependencies=[COMMAND_BODY],
)
def suspend(
    namespace: Namespace,
    name: Name,
    response: Response,
    ops: Ops,
    queries: Queries,
    body: SuspendRequest | None = None,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    return _suspend_or_resume(ops, queries, response, namespace, name, body, if_match, False)


@router.post(
    BASE + "/resume",
    response_model=CronWorkflowObject,
    responses=problem_responses(404, 409, 422),
    summary="Resume: the suspension's ticks are decided, at most one runs",
    tags=["commands"],
    dependencies=[COMMAND_BODY],
)
def resume(
    namespace: Namespace,
    name: Name,
    response: Response,
    ops: Ops,
    queries: Queries,
    body: SuspendRequest | None = None,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    return _suspend_or_resume(ops, queries, response, namespace, name, body, if_match, True)


@router.post(
    BASE + "/trigger",
    status_code=201,
    response_model=Triggered,
    responses={
        200: {"description": "This request id already ran", "model": Triggered},
        **problem_responses(404, 409, 422),
    },
    summary="Run now (a manual fire); idempotent per request id",
    tags=["commands"],
    dependencies=[COMMAND_BODY],
)
def trigger(
    namespace: Namespace,
    name: Name,
    response: Response,
    ops: Ops,
    body: TriggerRequest | None = None,
    if_match: IfMatch = None,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:
    given = body.requestId if body else None
    if given is not None and idempotency_key is not None and given != idempotency_key:
        # Two keys for one request: taking either silently may start the run the other
        # already started.
        raise FieldError(
            "requestId", "differs from the Idempotency-Key header; send one of them", "body"
        )
    rid = given or idempotency_key or uuid.uuid4().hex
    wf, version = ops.trigger(namespace, name, rid, expected=if_match_version(if_match))
    log_command("triggered", namespace, name, version, workflow=wf, requestId=rid)
    response.status_code = 201 if wf else 200
    response.headers["ETag"] = f'"{version}"'
    return {
        "workflow": wf or manual_workflow_name(name, rid),
        "requestId": rid,
        "triggered": wf is not None,
    }


@router.post(
    BASE + "/backfill",
    response_model=BackfillResult,
    responses=problem_responses(404, 409, 422),
    summary="Fire every tick in [start, end] that never fired (dryRun: only list them)",
    tags=["commands"],
    dependencies=[COMMAND_BODY],
)
def backfill(
    namespace: Namespace,
    name: Name,
    body: BackfillRequest,
    ops: Ops,
    settings: Settings,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    zone = ops.time_zone(namespace, name) if is_date(body.start) or is_date(body.end) else None
    s, e = parse_time(body.start, "start", zone), parse_time(body.end, "end", zone)
    check_backfill(s, e, body.overlap, body.parallel, shown=(body.start, body.end))
    plan = ops.backfill(
        namespace,
        name,
        s,
        e,
        body.dryRun,
        body.maxTicks or settings.max_backfill_ticks,
        overlap=body.overlap,
        parallel=body.parallel,
        expected=if_match_version(if_match),
    )
    times = plan.runs
    if not body.dryRun and times:
        log.info(
            "%s/%s backfilled %d ticks",
            namespace,
            name,
            len(times),
            extra=scheduling_fields(namespace, name, times[0], None, count=len(times)),
        )
    return backfill_result(name, plan, body.dryRun)
