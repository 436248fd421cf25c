"""The CronWorkflow resources: apply (create or update), list, get, replace, delete, and the
next fire times. Writes parse and admit their body and run their command in the threadpool,
bounded by `ServeSettings.request_timeout` (504 past it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from cronsource.adapters.application.admission import resource_version
from cronsource.adapters.application.models import (
    CronWorkflowList,
    CronWorkflowObject,
    Deleted,
    NextTimes,
)
from cronsource.adapters.entrypoints.http.admission import (
    MANIFEST_BODY,
    admit,
    content_type,
    if_match_version,
    parse_body,
)
from cronsource.adapters.entrypoints.http.dependencies import (
    TOKEN,
    Ops,
    Queries,
    Settings,
)
from cronsource.adapters.entrypoints.http.params import (
    IfMatch,
    IfNoneMatch,
    Name,
    Namespace,
    Selector,
)
from cronsource.adapters.entrypoints.http.problems import ApiError, problem_responses
from cronsource.adapters.entrypoints.http.replies import answer, current, log_command, warn
from cronsource.domain.manifest import name_warnings

T = TypeVar("T")

BASE = "/namespaces/{namespace}/cronworkflows"
router = APIRouter(prefix="/api/v1", dependencies=[TOKEN], responses=problem_responses(401))


async def bounded(run: Callable[[], T], timeout: float) -> T:
    """Parsing, admission and the command in the threadpool (the event loop keeps
    answering /healthz and other requests), answered 504 past `timeout`."""
    try:
        return await asyncio.wait_for(run_in_threadpool(run), timeout)
    except TimeoutError:
        raise ApiError(
            504,
            "Gateway timeout",
            f"the request took longer than {timeout:g}s; it may still"
            " take effect (GET the CronWorkflow to see)",
        ) from None


@router.post(
    BASE,
    status_code=201,
    response_model=CronWorkflowObject,
    openapi_extra=MANIFEST_BODY,
    responses={
        200: {"description": "Updated or unchanged", "model": CronWorkflowObject},
        **problem_responses(400, 409, 415, 422),
    },
    summary="Create or update (apply) a CronWorkflow",
    description="201 when created, 200 when an existing one was updated or unchanged."
    " As `kubectl apply`: a three-way merge of the last applied manifest, this one and the"
    " live object, so a field another writer changed since the last apply keeps its value"
    " while this manifest's value for it is unchanged (`force=true`: this manifest's"
    " values). What the client should know (such a field, a name `when` reads that Argo"
    " does not define) comes back in `Warning` headers."
    " `If-None-Match: *` demands creation (409 if it exists); `If-Match` demands that"
    " version.",
    tags=["cronworkflows"],
)
async def apply(
    namespace: Namespace,
    request: Request,
    response: Response,
    ops: Ops,
    queries: Queries,
    settings: Settings,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
    force: Annotated[
        bool,
        Query(
            description="take this manifest's values also where another writer changed a"
            " field since the last apply (`--force-conflicts`)"
        ),
    ] = False,
) -> dict[str, Any]:
    header_version = if_match_version(if_match)
    raw, ctype = await request.body(), content_type(request)

    def run() -> dict[str, Any]:
        doc = parse_body(raw, ctype)
        expected = resource_version(doc, header_version)
        manifest = admit(doc, namespace)
        name = manifest.metadata.name
        result = ops.apply(
            manifest,
            expected=expected,
            must_not_exist=(if_none_match or "").strip() == "*",
            three_way=True,
            force=force,
        )
        what = result.what
        row = current(ops, queries, namespace, name)
        log_command(what, namespace, name, row.version)
        warn(response, [*name_warnings(manifest), *result.notes])
        body = answer(response, row, 201 if what == "created" else 200)
        if what == "created":
            response.headers["Location"] = f"/api/v1/namespaces/{namespace}/cronworkflows/{name}"
        return body

    return await bounded(run, settings.request_timeout)


@router.get(
    BASE,
    response_model=CronWorkflowList,
    responses=problem_responses(422),
    summary="List the CronWorkflows of a namespace",
    tags=["cronworkflows"],
)
def list_namespaced(
    namespace: Namespace, ops: Ops, label_selector: Selector = None
) -> dict[str, Any]:
    rows = ops.statuses(namespace, selector=label_selector)
    return {"items": [r.as_object() for r in rows]}


@router.get(
    "/cronworkflows",
    response_model=CronWorkflowList,
    responses=problem_responses(422),
    summary="List the CronWorkflows of all namespaces",
    tags=["cronworkflows"],
)
def list_all(ops: Ops, label_selector: Selector = None) -> dict[str, Any]:
    rows = ops.statuses(None, selector=label_selector)
    return {"items": [r.as_object() for r in rows]}


@router.get(
    BASE + "/{name}",
    response_model=CronWorkflowObject,
    responses=problem_responses(404, 422),
    summary="Get one CronWorkflow (ETag: its version)",
    tags=["cronworkflows"],
)
def get(
    namespace: Namespace, name: Name, response: Response, ops: Ops, queries: Queries
) -> dict[str, Any]:
    return answer(response, current(ops, queries, namespace, name))


@router.put(
    BASE + "/{name}",
    response_model=CronWorkflowObject,
    openapi_extra=MANIFEST_BODY,
    responses=problem_responses(400, 404, 409, 415, 422),
    summary="Update an existing CronWorkflow",
    tags=["cronworkflows"],
)
async def replace(
    namespace: Namespace,
    name: Name,
    request: Request,
    response: Response,
    ops: Ops,
    queries: Queries,
    settings: Settings,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    header_version = if_match_version(if_match)
    raw, ctype = await request.body(), content_type(request)

    def run() -> dict[str, Any]:
        doc = parse_body(raw, ctype)
        expected = resource_version(doc, header_version)
        manifest = admit(doc, namespace, name)
        what = ops.apply(manifest, expected=expected, must_exist=True).what
        row = current(ops, queries, namespace, name)
        log_command(what, namespace, name, row.version)
        warn(response, name_warnings(manifest))
        return answer(response, row)

    return await bounded(run, settings.request_timeout)


@router.delete(
    BASE + "/{name}",
    response_model=Deleted,
    responses=problem_responses(404, 409, 422),
    summary="Delete a CronWorkflow (its history stays queryable)",
    tags=["cronworkflows"],
)
def delete(namespace: Namespace, name: Name, ops: Ops, if_match: IfMatch = None) -> dict[str, Any]:
    version = ops.delete(namespace, name, expected=if_match_version(if_match))
    log_command("deleted", namespace, name, version)
    return {"namespace": namespace, "name": name, "version": version}


@router.get(
    BASE + "/{name}/next",
    response_model=NextTimes,
    responses=problem_responses(404, 422),
    summary="The next fire times, in the CronWorkflow's zone and in UTC",
    tags=["cronworkflows"],
)
def next_times(
    namespace: Namespace,
    name: Name,
    ops: Ops,
    count: Annotated[int, Query(ge=1, le=1000)] = 5,
) -> dict[str, Any]:
    timezone, items = ops.next_times(namespace, name, count)
    return {"timezone": timezone, "items": items}
