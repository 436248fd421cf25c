"""The status page's own reads: is a scheduler deciding, and which Workflows a CronWorkflow
made (the queries are adapters/application/statuspage.py's)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from cronsource.adapters.application.models import ChildWorkflowList, SchedulerHealth
from cronsource.adapters.application.statuspage import child_workflows, scheduler_health
from cronsource.adapters.entrypoints.http.dependencies import (
    API_CHECKS,
    Clock,
    EngineDep,
    Ops,
    Queries,
)
from cronsource.adapters.entrypoints.http.params import Name, Namespace
from cronsource.adapters.entrypoints.http.problems import problem_responses
from cronsource.domain.service import NotFound

router = APIRouter(prefix="/api/v1", dependencies=API_CHECKS, tags=["status page"])


@router.get(
    "/scheduler",
    response_model=SchedulerHealth,
    summary="Is a scheduler deciding: ticks overdue past the late tolerance, last decision",
    responses=problem_responses(401),
)
def scheduler(engine: EngineDep, ops: Ops, clock: Clock) -> dict[str, Any]:
    ops.refresh()
    return scheduler_health(engine, clock.now())


@router.get(
    "/namespaces/{namespace}/cronworkflows/{name}/workflows",
    response_model=ChildWorkflowList,
    summary="The Workflows a CronWorkflow made, newest first, with their phases",
    responses=problem_responses(401, 422, 404),
)
def workflows(
    namespace: Namespace,
    name: Name,
    engine: EngineDep,
    ops: Ops,
    queries: Queries,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    ops.refresh()
    row = queries.status(namespace, name)
    if row is None:
        raise NotFound(f"cronworkflow {namespace}/{name} not found")
    active = [ref["name"] for ref in row.status.get("active") or []]
    return {"items": child_workflows(engine.view, namespace, name, active, limit)}
