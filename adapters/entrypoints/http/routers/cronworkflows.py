"""The CronWorkflow resources with Kubernetes' verbs: create (POST), list, get, replace
(PUT), patch (PATCH: merge patch, JSON patch, server-side apply), delete, and the next fire
times. Writes parse and admit their body and run their command in the threadpool, bounded by
`ServeSettings.request_timeout` (504 past it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from cronsource.adapters.application.admission import delete_precondition, resource_version
from cronsource.adapters.application.documents import load_json
from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.application.models import (
    CronWorkflowList,
    CronWorkflowObject,
    Deleted,
    NextTimes,
)
from cronsource.adapters.application.patches import apply_json_patch, apply_merge_patch
from cronsource.adapters.entrypoints.http.admission import (
    APPLY_PATCH,
    MANIFEST_BODY,
    MERGE_PATCH,
    PATCH_BODY,
    admit,
    content_type,
    if_match_version,
    parse_body,
    parse_patch,
)
from cronsource.adapters.entrypoints.http.dependencies import (
    API_CHECKS,
    Ops,
    Queries,
    Settings,
)
from cronsource.adapters.entrypoints.http.params import (
    FieldManager,
    IfMatch,
    IfNoneMatch,
    Name,
    Namespace,
    Selector,
)
from cronsource.adapters.entrypoints.http.problems import ApiError, problem_responses, to_problem
from cronsource.adapters.entrypoints.http.replies import answer, current, log_command, warn
from cronsource.domain.manifest import CronWorkflowManifest, manifest_warnings
from cronsource.domain.service import AlreadyExists

T = TypeVar("T")

BASE = "/namespaces/{namespace}/cronworkflows"
router = APIRouter(prefix="/api/v1", dependencies=API_CHECKS, responses=problem_responses(401))


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
    responses=problem_responses(400, 409, 415, 422),
    summary="Create a CronWorkflow",
    description="As Kubernetes' create: 201 with the object and its `Location`; a live"
    " CronWorkflow of that name is a 409 with `reason: AlreadyExists` (nothing changed)."
    " To update, send PUT (the object as given) or PATCH (a merge or JSON patch, or a"
    " server-side apply: `application/apply-patch+yaml`). The manifest is kept as the"
    " last applied configuration of the default field manager (`cronsource`), as"
    " `cronsource apply` keeps it. A version (`If-Match`, `metadata.resourceVersion`) is"
    " refused: it names an object that exists.",
    tags=["cronworkflows"],
)
async def create(
    namespace: Namespace,
    request: Request,
    response: Response,
    ops: Ops,
    queries: Queries,
    settings: Settings,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> dict[str, Any]:
    header_version = if_match_version(if_match)
    raw, ctype = await request.body(), content_type(request)

    def run() -> dict[str, Any]:
        doc = parse_body(raw, ctype)
        expected = resource_version(doc, header_version)
        if expected is not None and (if_none_match or "").strip() != "*":
            # With `If-None-Match: *` the facade names the combination, as the library does.
            field, where = (
                ("If-Match", "header")
                if header_version is not None
                else ("metadata.resourceVersion", "body")
            )
            raise FieldError(
                field, "a create takes no version; to update, send PUT or PATCH", where
            )
        manifest = admit(doc, namespace)
        name = manifest.metadata.name
        try:
            ops.apply(manifest, expected=expected, must_not_exist=True, three_way=True)
        except AlreadyExists as e:
            # The table's 409, with the way to update: POST used to update (an upsert).
            refused = to_problem(e)
            refused.detail = f"{refused.detail}; to change it, send PUT or PATCH"
            raise refused from None
        row = current(ops, queries, namespace, name)
        log_command("created", namespace, name, row.version)
        warn(response, manifest_warnings(manifest))
        response.headers["Location"] = f"/api/v1/namespaces/{namespace}/cronworkflows/{name}"
        return answer(response, row, 201)

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
        warn(response, manifest_warnings(manifest))
        return answer(response, row)

    return await bounded(run, settings.request_timeout)


@router.patch(
    BASE + "/{name}",
    response_model=CronWorkflowObject,
    openapi_extra=PATCH_BODY,
    responses={
        201: {"description": "Created (server-side apply)", "model": CronWorkflowObject},
        **problem_responses(400, 404, 409, 415, 422),
    },
    summary="Patch a CronWorkflow: merge patch, JSON patch or server-side apply",
    description="By `Content-Type`, as Kubernetes patches:"
    " `application/merge-patch+json` (RFC 7386) and `application/json-patch+json`"
    " (RFC 6902) change the live object as `GET` shows it (404 if there is none; a patch"
    " cannot change `metadata.name`, `namespace` or `uid`; a JSON patch's bad path or"
    " failed `test` is a 422 naming the path). `application/apply-patch+yaml` is a"
    " server-side apply of a manifest by `?fieldManager=NAME` (required): created if"
    " absent (201), else the three-way apply of `cronsource apply` against this manager's"
    " last apply, with a `Warning` for each field another writer changed since that it"
    " keeps. When another manager applied last, a field it set that this apply would change"
    " is a 409 Conflict naming the field, unless `?force=true`. Any other `Content-Type`"
    " is a 415. `If-Match` or a `metadata.resourceVersion` in the patch demands that"
    " version (409 when stale); without one a write in between makes the patch re-read.",
    tags=["cronworkflows"],
)
async def patch(
    namespace: Namespace,
    name: Name,
    request: Request,
    response: Response,
    ops: Ops,
    queries: Queries,
    settings: Settings,
    if_match: IfMatch = None,
    field_manager: FieldManager = None,
    force: Annotated[
        bool,
        Query(
            description="server-side apply only: take this manifest's values also for fields"
            " another field manager set (`--force-conflicts`)"
        ),
    ] = False,
) -> dict[str, Any]:
    header_version = if_match_version(if_match)
    raw, ctype = await request.body(), content_type(request)

    def run() -> dict[str, Any]:
        body = parse_patch(raw, ctype)
        if ctype == APPLY_PATCH:
            return server_side_apply(body)
        if force:
            raise FieldError("force", f"applies to {APPLY_PATCH} only", "query")
        change = apply_merge_patch if ctype == MERGE_PATCH else apply_json_patch

        def edit(live: dict[str, Any]) -> tuple[CronWorkflowManifest, int | None]:
            read = live["metadata"]["resourceVersion"]
            patched = change(live, body)
            meta = patched.get("metadata") if isinstance(patched, dict) else None
            if isinstance(meta, dict) and meta.get("resourceVersion") == read:
                # The version the patch was applied to, not one the client demanded: only
                # If-Match or a resourceVersion the patch itself set is a precondition.
                meta.pop("resourceVersion")
            demanded = resource_version(patched, header_version)
            return admit(patched, namespace, name), demanded

        what = ops.patch(namespace, name, edit).what
        row = current(ops, queries, namespace, name)
        log_command(what, namespace, name, row.version)
        return answer(response, row)

    def server_side_apply(doc: Any) -> dict[str, Any]:
        if field_manager is None:
            raise FieldError("fieldManager", f"is required for {APPLY_PATCH}", "query")
        expected = resource_version(doc, header_version)
        manifest = admit(doc, namespace, name)
        result = ops.apply(
            manifest, expected=expected, three_way=True, force=force, manager=field_manager
        )
        row = current(ops, queries, namespace, name)
        log_command(result.what, namespace, name, row.version)
        warn(response, [*manifest_warnings(manifest), *result.notes])
        if result.what == "created":
            response.headers["Location"] = f"/api/v1/namespaces/{namespace}/cronworkflows/{name}"
        return answer(response, row, 201 if result.what == "created" else 200)

    return await bounded(run, settings.request_timeout)


@router.delete(
    BASE + "/{name}",
    response_model=Deleted,
    responses=problem_responses(404, 409, 422),
    summary="Delete a CronWorkflow (its history stays queryable)",
    tags=["cronworkflows"],
)
async def delete(
    namespace: Namespace,
    name: Name,
    request: Request,
    ops: Ops,
    settings: Settings,
    if_match: IfMatch = None,
) -> dict[str, Any]:
    header_version = if_match_version(if_match)
    raw = await request.body()

    def run() -> dict[str, Any]:
        doc = load_json(raw, "body") if raw.strip() else None
        expected = delete_precondition(doc, header_version)
        version = ops.delete(namespace, name, expected=expected)
        log_command("deleted", namespace, name, version)
        return {"namespace": namespace, "name": name, "version": version}

    return await bounded(run, settings.request_timeout)


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
    timezone, items, held = ops.next_times(namespace, name, count)
    return {"timezone": timezone, "items": items, "heldBy": held}
