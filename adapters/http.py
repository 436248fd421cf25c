"""The HTTP API, metrics, health checks and the status page (`cronsource serve`).

`create_app(engine, settings, clock)` builds one FastAPI app around an engine; nothing is
built at import time, and every app has its own metrics registry. Handlers are thin: the rules
live in `adapters/api.py` (commands with an expected version, audit queries) and the domain.

Contract (docs/http-api.md has the long form):
- Resources under /api/v1/namespaces/{namespace}/cronworkflows; the audit log at
  /api/v1/events; the OpenAPI document at /openapi.json.
- Writes take `If-Match: <version>` (the aggregate version, sent back as `ETag` and
  `metadata.resourceVersion`); a stale one is answered 409 with `currentVersion`, and the
  write is refused by the store's own version check, not by a comparison that could race.
- Errors are application/problem+json (RFC 9457) with `errors[].field` naming the field in
  camelCase, as the client wrote it.
- A bearer token is required whenever one is configured; without one the server only binds to
  loopback (`ServeSettings.check`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import math
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Literal

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from adapters.api import (
    EVENT_TYPES,
    SKIP_REASONS,
    AlreadyExists,
    EventFilter,
    FieldError,
    Operations,
    ReadQueries,
    StaleVersion,
    backfill_result,
    cron_object,
    event_object,
    explain,
    next_fire_times,
    parse_label_selector,
    parse_time,
    select,
    timeline,
)
from adapters.documents import (
    MAX_INPUT_BYTES,
    DocumentError,
    from_client,
    load_json,
    load_yaml,
)
from adapters.engine import Engine
from adapters.logs import scheduling_fields
from adapters.metrics import Metrics
from adapters.statuspage import status_page_router
from adapters.storeintegrity import IntegrityCheck
from domain.cronworkflow import manual_workflow_name
from domain.manifest import CronWorkflowManifest, ManifestError, parse_manifest
from domain.service import Conflict, NotFound
from projections.readmodel import rfc3339

log = logging.getLogger("cronsource.http")

PROBLEM = "application/problem+json"
STATIC = Path(__file__).resolve().parent / "static"
TOKEN_ENV = "CRONSOURCE_TOKEN"
_FIXED = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
_DNS = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
#: Largest startingDeadlineSeconds the API admits (int32, as Kubernetes validates it): larger
#: values overflow the date arithmetic of every tick (see the report on domain/manifest.py).
MAX_DEADLINE_SECONDS = 2**31 - 1


def utc_now() -> datetime:
    """The real clock; tests pass a fixed one to `create_app`."""
    return datetime.now(UTC)


# ---------------------------------------------------------------------- settings


class ServeError(RuntimeError):
    """The server cannot start as configured (the message says why)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def load_token(token_file: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The bearer token from `token_file` (surrounding whitespace dropped), else from
    $CRONSOURCE_TOKEN; None when neither is given."""
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise ServeError(f"--token-file {token_file}: {e.strerror}") from None
        if not token:
            raise ServeError(f"--token-file {token_file}: the file is empty")
        return token
    token = (environ if environ is not None else os.environ).get(TOKEN_ENV, "").strip()
    return token or None


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    #: /readyz fails when a projection in `ready_projections` is more events than this behind.
    max_projection_lag: int = 1000
    #: The projections this server's readiness depends on. The read model: the API reads it.
    #: Not the dispatcher, which runs in `cronsource run` and has its own liveness.
    ready_projections: tuple[str, ...] = ("readmodel",)
    #: Largest backfill in one request; a longer range is refused with 422 (split it).
    max_backfill_ticks: int = 10_000
    #: Largest request body (413 beyond): Kubernetes' 3 MiB.
    max_body_bytes: int = MAX_INPUT_BYTES
    #: Seconds a client may take to send its body (408 after).
    body_timeout: float = 30.0
    #: Seconds a write may take before the client is answered 504 (the work, bounded by
    #: the admission limits, may still finish and take effect, as in Kubernetes).
    request_timeout: float = 60.0

    def check(self) -> None:
        """Refuse to serve a non-loopback address without a token."""
        if not self.token and not is_loopback(self.host):
            raise ServeError(
                f"--host {self.host} is not a loopback address: a bearer token is required"
                f" (--token-file FILE or ${TOKEN_ENV})"
            )


# ---------------------------------------------------------------------- problems


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        type_: str = "about:blank",
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type_
        self.headers = headers or {}
        self.extensions = extensions


def problem(
    status: int,
    title: str,
    detail: str | None = None,
    *,
    type_: str = "about:blank",
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    body: dict[str, Any] = {"type": type_, "title": title, "status": status}
    if detail:
        body["detail"] = detail
    if instance:
        body["instance"] = instance
    body.update(extensions)
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def invalid(errors: list[dict[str, str]], title: str = "Invalid request") -> ApiError:
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return ApiError(422, title, detail, type_="urn:cronsource:problem:invalid", errors=errors)


def _manifest_errors(e: ManifestError) -> list[dict[str, str]]:
    out = []
    for p in e.problems:
        field, _, message = p.partition(": ")
        out.append({"field": field, "in": "body", "message": message or p})
    return out


class FieldProblem(BaseModel):
    field: str
    in_: str = Field(alias="in")
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details; `errors` name each bad field, `currentVersion` is the
    aggregate's version when an If-Match was stale."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldProblem] | None = None
    currentVersion: int | None = None
    expectedVersion: int | None = None
    reason: str | None = Field(default=None, description="AlreadyExists on a create-only 409")


def _problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "The body cannot be parsed",
        401: "No or wrong bearer token",
        404: "No such CronWorkflow",
        409: "Stale If-Match (body has currentVersion), or the CronWorkflow already exists",
        413: "The request body is larger than 3 MiB",
        415: "Unsupported content type",
        422: "Invalid input; errors[].field names each bad field",
    }
    schema = {"$ref": "#/components/schemas/Problem"}
    return {c: {"description": text[c], "content": {PROBLEM: {"schema": schema}}} for c in codes}


# ---------------------------------------------------------------------- API models


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CronWorkflowObject(BaseModel):
    """A CronWorkflow in Argo's shape; `metadata.resourceVersion` is the aggregate version,
    `status.nextScheduledTime` the next due time (cronsource extension)."""

    model_config = ConfigDict(extra="allow")
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]
    status: dict[str, Any]


class CronWorkflowList(BaseModel):
    apiVersion: str = "argoproj.io/v1alpha1"
    kind: str = "CronWorkflowList"
    items: list[CronWorkflowObject]


class Event(BaseModel):
    """One event of the audit log, as `cronsource history -o json` prints it, with its log
    `position`; type-specific fields (trigger, count, lastScheduledTime, message, phase, by,
    note, ...) follow."""

    model_config = ConfigDict(extra="allow")
    position: int
    cronWorkflow: str
    version: int
    type: str
    at: str
    scheduledTime: str | None = None
    workflow: str | None = None
    reason: str | None = None


class EventList(BaseModel):
    items: list[Event]
    nextAfter: int | None = Field(
        description="Pass as `after` for the next page; null when this page is the last"
    )


class Decision(BaseModel):
    at: str
    outcome: str = Field(description="Fired, Skipped, Pending, NotScheduled, NotATick or Unknown")
    reason: str | None = None
    explanation: str
    decisions: list[Event]
    nextTick: str | None = None


class FireTime(BaseModel):
    local: str
    utc: str


class NextTimes(BaseModel):
    timezone: str
    items: list[FireTime]


class SuspendRequest(_Model):
    by: str = Field(default="api", max_length=253)
    note: str = Field(default="", max_length=4096)


class TriggerRequest(_Model):
    requestId: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="Idempotency key: a retried request with the same key starts no second run",
    )


class Triggered(BaseModel):
    workflow: str
    requestId: str
    triggered: bool = Field(description="false when this request id already ran")


class BackfillRequest(_Model):
    start: str = Field(
        description="RFC 3339; ticks at or after it", examples=["2026-05-04T00:00:00Z"]
    )
    end: str = Field(
        description="RFC 3339; ticks at or before it", examples=["2026-05-04T06:00:00Z"]
    )
    dryRun: bool = False
    overlap: Literal["Allow", "Forbid", "Replace", "Queue"] | None = Field(
        default=None,
        description="How backfill runs overlap; default the CronWorkflow's concurrencyPolicy."
        " Queue runs them one after another",
    )
    parallel: int | None = Field(
        default=None, ge=1, le=10_000, description="Allow/Queue: at most this many at once"
    )
    maxTicks: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Refuse a range with more ticks than this (default 10,000)",
    )

    @field_validator("start", "end")
    @classmethod
    def _rfc3339(cls, v: str) -> str:
        try:
            parse_time(v, "time")
        except FieldError as e:
            raise ValueError(e.message) from None
        return v


class BackfillItem(BaseModel):
    scheduledTime: str
    workflow: str
    action: str = Field(description="fire, queue or skip (dry run: would fire, would queue)")


class BackfillResult(BaseModel):
    dryRun: bool
    overlap: str
    parallel: int | None
    ticks: int = Field(description="Ticks of the schedule in the range, up to the last decided")
    count: int = Field(description="Runs this backfill starts, now or queued")
    fired: int
    queued: int
    skipped: int
    skipReason: str | None
    alreadyFired: int
    items: list[BackfillItem]


class Deleted(BaseModel):
    kind: str = "Status"
    status: str = "Success"
    namespace: str
    name: str
    version: int


class TimelineRow(BaseModel):
    namespace: str
    name: str
    cells: list[dict[str, Any]] = Field(
        description="One per bucket, oldest first: {fired, failed, skipped: {reason: n}},"
        " zero counts left out"
    )


class Timeline(BaseModel):
    since: str
    until: str
    bucketSeconds: int
    items: list[TimelineRow]


class Health(BaseModel):
    status: str
    lag: dict[str, int] | None = None
    maxLag: int | None = None
    error: str | None = None


# ---------------------------------------------------------------------- the app


def _if_match(value: str | None) -> int | None:
    """`If-Match: 7`, `"7"`, `W/"7"` or `*` (any version); None without the header."""
    if value is None or value.strip() == "*":
        return None
    versions = []
    for part in value.split(","):
        tag = part.strip().removeprefix("W/").strip('"')
        if not tag.isdigit() or len(tag) > 18:
            raise FieldError(
                "If-Match", f"{part.strip()!r} is not a version (use the ETag value)", "header"
            )
        versions.append(int(tag))
    if len(versions) != 1:
        raise FieldError("If-Match", "give exactly one version", "header")
    return versions[0]


def _check_limits(m: CronWorkflowManifest) -> None:
    d = m.spec.starting_deadline_seconds
    if d is not None and d > MAX_DEADLINE_SECONDS:
        raise invalid(
            [
                {
                    "field": "spec.startingDeadlineSeconds",
                    "in": "body",
                    "message": f"must be at most {MAX_DEADLINE_SECONDS}",
                }
            ],
            "Invalid CronWorkflow",
        )


def _non_finite(doc: Any, path: str = "") -> str | None:
    """The path of the first NaN or infinite number in `doc` (YAML has .nan and .inf): the
    stored spec must render as JSON, which has neither."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return path or "<manifest>"
    if isinstance(doc, dict):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in doc.items())
    elif isinstance(doc, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(doc))
    else:
        return None
    for p, v in items:
        if (found := _non_finite(v, p)) is not None:
            return found
    return None


def admit(doc: Any, namespace: str, name: str | None = None) -> CronWorkflowManifest:
    """A request body as a manifest for `namespace` (and `name`, on PUT), or 422 naming
    each bad field. A manifest without a namespace takes the path's, as kubectl does."""
    try:
        bad = _non_finite(doc)
    except RecursionError:
        bad = "<manifest>"
    if bad is not None:
        raise invalid(
            [{"field": bad, "in": "body", "message": "must be a finite number"}],
            "Invalid CronWorkflow",
        )
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        doc["metadata"].setdefault("namespace", namespace)
    try:
        m = parse_manifest(doc)
    except ManifestError as e:
        raise invalid(_manifest_errors(e), "Invalid CronWorkflow") from None
    except OverflowError:
        # A number too large for date arithmetic escaped the manifest's validators.
        raise invalid(
            [{"field": "<manifest>", "in": "body", "message": "a number is out of range"}],
            "Invalid CronWorkflow",
        ) from None
    _check_limits(m)
    problems = []
    if m.metadata.namespace != namespace:
        problems.append(
            {
                "field": "metadata.namespace",
                "in": "body",
                "message": f"{m.metadata.namespace!r} does not match the path's {namespace!r}",
            }
        )
    if name is not None and m.metadata.name != name:
        problems.append(
            {
                "field": "metadata.name",
                "in": "body",
                "message": f"{m.metadata.name!r} does not match the path's {name!r}",
            }
        )
    if problems:
        raise invalid(problems, "Invalid CronWorkflow")
    return m


def _resource_version(doc: Any, if_match: int | None) -> int | None:
    """The expected version: `If-Match`, or `metadata.resourceVersion` in the body (as
    Kubernetes takes it: a precondition, 409 when stale). Taken out of the body, since it
    is ours to set. Both given and different is a 422 naming the body field."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or meta.get("resourceVersion") in (None, ""):
        return if_match
    given = meta.pop("resourceVersion")
    text = str(given)
    if isinstance(given, bool) or not text.isdigit() or len(text) > 18:
        raise FieldError(
            "metadata.resourceVersion", f"{given!r} is not a version (use the ETag value)", "body"
        )
    version = int(text)
    if if_match is not None and if_match != version:
        raise FieldError(
            "metadata.resourceVersion",
            f"{version} disagrees with If-Match {if_match}; give one of them",
            "body",
        )
    return version


def _ctype(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


def _parse_body(raw: bytes, ctype: str) -> Any:
    """The request body as data: JSON (default) or YAML by Content-Type, through the loader
    every entrypoint shares (adapters/documents.py: strict scalars, no duplicate keys,
    bounded aliases and depth). CPU-bound: called in the threadpool, never on the loop."""
    if not raw.strip():
        raise invalid([{"field": "<body>", "in": "body", "message": "a manifest is required"}])
    try:
        if ctype in ("application/json", "") or ctype.endswith("+json"):
            return from_client(load_json(raw, "body"))
        if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
            docs = load_yaml(raw, "body")
            if len(docs) > 1:
                raise DocumentError(f"body: {len(docs)} YAML documents, send one")
            return from_client(docs[0] if docs else None)
    except DocumentError as e:
        raise ApiError(400, "Bad request", str(e)) from None
    raise ApiError(
        415, "Unsupported media type", f"{ctype}: send application/json or application/yaml"
    )


class BodyLimit:
    """ASGI middleware: the whole request body is read here, at most `max_bytes` (413
    beyond, from Content-Length before reading when it is given) and within `timeout`
    seconds (408: a client trickling bytes holds no handler), then handed on.

    Kubernetes' API server refuses bodies over 3 MiB the same way; without a limit one
    100 MB POST held the server for minutes at 5.7 GB.
    """

    def __init__(self, app: Any, max_bytes: int, timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def _refuse(self, scope: Any, receive: Any, send: Any, status: int, detail: str) -> None:
        title = HTTPStatus(status).phrase
        response = problem(status, title, detail, instance=scope.get("path"))
        response.headers["Connection"] = "close"
        await response(scope, receive, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = f"the request body is larger than {self.max_bytes} bytes (3 MiB)"
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(scope, receive, send, 413, too_big)
            return
        chunks, size, more = [], 0, True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                detail = f"the request body did not arrive within {self.timeout:g}s"
                await self._refuse(scope, receive, send, 408, detail)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send, 413, too_big)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


MANIFEST_BODY = {
    "requestBody": {
        "required": True,
        "description": "An Argo CronWorkflow manifest (argoproj.io/v1alpha1)",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/CronWorkflowManifest"}},
            "application/yaml": {"schema": {"$ref": "#/components/schemas/CronWorkflowManifest"}},
        },
    }
}

_BEARER = HTTPBearer(
    auto_error=False,
    description="`Authorization: Bearer <token>`; required when the server has a token",
)
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
Namespace = Annotated[
    str,
    PathParam(
        pattern=_DNS, max_length=63, description="Kubernetes namespace", examples=["default"]
    ),
]
Name = Annotated[str, PathParam(pattern=_DNS, max_length=253, description="CronWorkflow name")]
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
After = Annotated[int, Query(ge=0, le=2**62, description="Log position: events after it (paging)")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
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


def create_app(
    engine: Engine,
    settings: ServeSettings | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> FastAPI:
    """The app over `engine` (which the caller owns and closes). `clock` gives the time of
    every command and of "now" in reads; tests pass a fixed one."""
    settings = settings or ServeSettings()
    settings.check()
    ops = Operations(engine, clock)
    queries = ReadQueries(engine)
    store_check = IntegrityCheck(engine)
    metrics = Metrics(engine, clock, rejected_by_api=lambda: ops.if_match_rejections)
    # Swagger UI and ReDoc from assets in the fastapi-offline wheel: /docs and /redoc work in
    # a cluster without internet access (FastAPI's own pages load them from a CDN).
    app = FastAPIOffline(
        title="cronsource",
        version="1",
        summary="Event-sourced scheduler for Argo CronWorkflows: commands, audit log, metrics",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url="/redoc",
        static_url="/static-offline-docs",
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.ops = ops
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, timeout=settings.body_timeout)

    # -------------------------------------------------------------- errors

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return problem(
            e.status,
            e.title,
            e.detail,
            type_=e.type,
            instance=request.url.path,
            headers=e.headers,
            **e.extensions,
        )

    @app.exception_handler(FieldError)
    async def _field_error(request: Request, e: FieldError) -> JSONResponse:
        err = invalid([{"field": e.field, "in": e.location, "message": e.message}])
        return await _api_error(request, err)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, e: NotFound) -> JSONResponse:
        return problem(404, "Not found", str(e), instance=request.url.path)

    @app.exception_handler(StaleVersion)
    async def _stale(request: Request, e: StaleVersion) -> JSONResponse:
        detail = (
            f"If-Match {e.expected} is stale: the current version is {e.current}"
            if e.current is not None
            else f"If-Match {e.expected}: the CronWorkflow does not exist"
        )
        headers = {"ETag": f'"{e.current}"'} if e.current is not None else None
        return problem(
            409,
            "Version conflict",
            detail,
            type_="urn:cronsource:problem:stale-version",
            instance=request.url.path,
            headers=headers,
            currentVersion=e.current,
            expectedVersion=e.expected,
        )

    @app.exception_handler(AlreadyExists)
    async def _exists(request: Request, e: AlreadyExists) -> JSONResponse:
        return problem(
            409,
            "Already exists",
            str(e),
            type_="urn:cronsource:problem:already-exists",
            instance=request.url.path,
            reason="AlreadyExists",  # Kubernetes' StatusReason for the same refusal
            currentVersion=e.version,
        )

    @app.exception_handler(Conflict)
    async def _conflict(request: Request, e: Conflict) -> JSONResponse:
        return problem(409, "Conflict", f"{e}; try again", instance=request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, e: RequestValidationError) -> JSONResponse:
        errors = []
        for err in e.errors():
            loc = [str(p) for p in err.get("loc", ())]
            where = loc[0] if loc else "request"
            field = ".".join(loc[1:]) or where
            if where == "header":
                field = field.title()
            errors.append(
                {
                    "field": field,
                    "in": where,
                    "message": str(err.get("msg", "invalid")).removeprefix("Value error, "),
                }
            )
        return await _api_error(request, invalid(errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        title = HTTPStatus(e.status_code).phrase
        detail = e.detail if isinstance(e.detail, str) and e.detail != title else None
        return problem(
            e.status_code,
            title,
            detail,
            instance=request.url.path,
            headers=getattr(e, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "Internal server error", type(e).__name__, instance=request.url.path)

    # -------------------------------------------------------------- metrics middleware

    @app.middleware("http")
    async def _observe(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.monotonic()
        response = await call_next(request)
        route = request.scope.get("route")
        path = request.url.path
        # route templates only (bounded label values): never the raw path of a request
        template = getattr(route, "path", None) or (
            "/static" if path.startswith("/static/") else path if path in _FIXED else "<unmatched>"
        )
        metrics.observe_request(
            request.method, template, response.status_code, time.monotonic() - started
        )
        return response

    # -------------------------------------------------------------- auth

    def require_token(creds: BearerCredentials) -> None:
        if settings.token is None:
            return
        given = creds.credentials if creds is not None else ""
        if not hmac.compare_digest(given.encode(), settings.token.encode()):
            raise ApiError(
                401,
                "Unauthorized",
                "a valid bearer token is required",
                headers={"WWW-Authenticate": 'Bearer realm="cronsource"'},
            )

    api = APIRouter(
        prefix="/api/v1", dependencies=[Depends(require_token)], responses=_problem_responses(401)
    )
    base = "/namespaces/{namespace}/cronworkflows"

    # -------------------------------------------------------------- helpers

    async def bounded(run: Callable[[], JSONResponse]) -> JSONResponse:
        """Parsing, admission and the command in the threadpool (the event loop keeps
        answering /healthz and other requests), answered 504 past `request_timeout`."""
        try:
            return await asyncio.wait_for(run_in_threadpool(run), settings.request_timeout)
        except TimeoutError:
            raise ApiError(
                504,
                "Gateway timeout",
                f"the request took longer than {settings.request_timeout:g}s; it may still"
                " take effect (GET the CronWorkflow to see)",
            ) from None

    def current(namespace: str, name: str) -> dict[str, Any]:
        ops.catch_up(wait=False)
        row = queries.status(namespace, name)
        if row is None:
            raise NotFound(f"cronworkflow {namespace}/{name} not found")
        return row

    def respond(row: dict[str, Any], status_code: int = 200) -> JSONResponse:
        return JSONResponse(
            cron_object(row), status_code=status_code, headers={"ETag": f'"{row["version"]}"'}
        )

    def log_command(what: str, namespace: str, name: str, version: int, **more: Any) -> None:
        log.info(
            "%s/%s %s",
            namespace,
            name,
            what,
            extra=scheduling_fields(namespace, name, None, version, **more),
        )

    def events_page(f: EventFilter) -> dict[str, Any]:
        ops.catch_up(wait=False)
        rows = queries.events(f)
        return {
            "items": [event_object(r) for r in rows],
            "nextAfter": rows[-1].notification_id if len(rows) == f.limit else None,
        }

    def event_filter(
        namespace: str | None,
        name: str | None,
        since: str | None,
        until: str | None,
        types: list[str] | None,
        reasons: list[str] | None,
        after: int,
        limit: int,
    ) -> EventFilter:
        for field, values in (
            ("namespace", [namespace or ""]),
            ("name", [name or ""]),
            ("type", types or []),
            ("reason", reasons or []),
        ):
            if any("\x00" in v for v in values):
                raise FieldError(field, "must not contain NUL characters")
        for field, values, known in (
            ("type", types or [], EVENT_TYPES),
            ("reason", reasons or [], SKIP_REASONS),
        ):
            for v in values:
                if v not in known:
                    # A typo would otherwise answer an empty page, as if nothing happened.
                    raise FieldError(field, f"unknown {field} {v!r} (one of: {', '.join(known)})")
        s = parse_time(since, "since") if since else None
        u = parse_time(until, "until") if until else None
        if s and u and u < s:
            raise FieldError("until", "is before since")
        return EventFilter(
            namespace, name, s, u, tuple(types or ()), tuple(reasons or ()), after, limit
        )

    # -------------------------------------------------------------- CronWorkflows

    @api.post(
        base,
        status_code=201,
        response_model=CronWorkflowObject,
        openapi_extra=MANIFEST_BODY,
        responses={
            200: {"description": "Updated or unchanged", "model": CronWorkflowObject},
            **_problem_responses(400, 409, 415, 422),
        },
        summary="Create or update (apply) a CronWorkflow",
        description="201 when created, 200 when an existing one was updated or unchanged."
        " `If-None-Match: *` demands creation (409 if it exists); `If-Match` demands that"
        " version.",
        tags=["cronworkflows"],
    )
    async def apply(
        namespace: Namespace,
        request: Request,
        if_match: IfMatch = None,
        if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
    ) -> JSONResponse:
        header_version = _if_match(if_match)
        raw, ctype = await request.body(), _ctype(request)

        def run() -> JSONResponse:
            doc = _parse_body(raw, ctype)
            expected = _resource_version(doc, header_version)
            manifest = admit(doc, namespace)
            _, what = ops.apply(
                manifest, expected=expected, must_not_exist=(if_none_match or "").strip() == "*"
            )
            row = current(namespace, manifest.metadata.name)
            log_command(what, namespace, manifest.metadata.name, row["version"])
            resp = respond(row, 201 if what == "created" else 200)
            if what == "created":
                resp.headers["Location"] = (
                    f"/api/v1/namespaces/{namespace}/cronworkflows/{manifest.metadata.name}"
                )
            return resp

        return await bounded(run)

    @api.get(
        base,
        response_model=CronWorkflowList,
        responses=_problem_responses(422),
        summary="List the CronWorkflows of a namespace",
        tags=["cronworkflows"],
    )
    def list_namespaced(namespace: Namespace, label_selector: Selector = None) -> dict[str, Any]:
        selector = parse_label_selector(label_selector)
        ops.catch_up(wait=False)
        rows = select(engine.view.statuses(namespace), selector)
        return {"items": [cron_object(r) for r in rows]}

    @api.get(
        "/cronworkflows",
        response_model=CronWorkflowList,
        responses=_problem_responses(422),
        summary="List the CronWorkflows of all namespaces",
        tags=["cronworkflows"],
    )
    def list_all(label_selector: Selector = None) -> dict[str, Any]:
        selector = parse_label_selector(label_selector)
        ops.catch_up(wait=False)
        rows = select(engine.view.statuses(None), selector)
        return {"items": [cron_object(r) for r in rows]}

    @api.get(
        base + "/{name}",
        response_model=CronWorkflowObject,
        responses=_problem_responses(404, 422),
        summary="Get one CronWorkflow (ETag: its version)",
        tags=["cronworkflows"],
    )
    def get(namespace: Namespace, name: Name) -> JSONResponse:
        return respond(current(namespace, name))

    @api.put(
        base + "/{name}",
        response_model=CronWorkflowObject,
        openapi_extra=MANIFEST_BODY,
        responses=_problem_responses(400, 404, 409, 415, 422),
        summary="Update an existing CronWorkflow",
        tags=["cronworkflows"],
    )
    async def replace(
        namespace: Namespace, name: Name, request: Request, if_match: IfMatch = None
    ) -> JSONResponse:
        header_version = _if_match(if_match)
        raw, ctype = await request.body(), _ctype(request)

        def run() -> JSONResponse:
            doc = _parse_body(raw, ctype)
            expected = _resource_version(doc, header_version)
            manifest = admit(doc, namespace, name)
            _, what = ops.apply(manifest, expected=expected, must_exist=True)
            row = current(namespace, name)
            log_command(what, namespace, name, row["version"])
            return respond(row)

        return await bounded(run)

    @api.delete(
        base + "/{name}",
        response_model=Deleted,
        responses=_problem_responses(404, 409, 422),
        summary="Delete a CronWorkflow (its history stays queryable)",
        tags=["cronworkflows"],
    )
    def delete(namespace: Namespace, name: Name, if_match: IfMatch = None) -> dict[str, Any]:
        _, version = ops.command(namespace, name, lambda a, at: a.delete(at), _if_match(if_match))
        log_command("deleted", namespace, name, version)
        return {"namespace": namespace, "name": name, "version": version}

    def _suspend_or_resume(
        namespace: str, name: str, body: SuspendRequest | None, if_match: str | None, resume: bool
    ) -> JSONResponse:
        req = body or SuspendRequest()

        def do(a: Any, at: datetime) -> Any:
            if resume:
                return a.resume(at, by=req.by, note=req.note)
            return a.suspend(at, by=req.by, note=req.note)

        _, version = ops.command(namespace, name, do, _if_match(if_match))
        log_command("resumed" if resume else "suspended", namespace, name, version, by=req.by)
        return respond(current(namespace, name))

    @api.post(
        base + "/{name}/suspend",
        response_model=CronWorkflowObject,
        responses=_problem_responses(404, 409, 422),
        summary="Suspend: no tick runs until resumed",
        tags=["commands"],
    )
    def suspend(
        namespace: Namespace,
        name: Name,
        body: SuspendRequest | None = None,
        if_match: IfMatch = None,
    ) -> JSONResponse:
        return _suspend_or_resume(namespace, name, body, if_match, resume=False)

    @api.post(
        base + "/{name}/resume",
        response_model=CronWorkflowObject,
        responses=_problem_responses(404, 409, 422),
        summary="Resume: the suspension's ticks are decided, at most one runs",
        tags=["commands"],
    )
    def resume(
        namespace: Namespace,
        name: Name,
        body: SuspendRequest | None = None,
        if_match: IfMatch = None,
    ) -> JSONResponse:
        return _suspend_or_resume(namespace, name, body, if_match, resume=True)

    @api.post(
        base + "/{name}/trigger",
        status_code=201,
        response_model=Triggered,
        responses={
            200: {"description": "This request id already ran", "model": Triggered},
            **_problem_responses(404, 409, 422),
        },
        summary="Run now (a manual fire); idempotent per request id",
        tags=["commands"],
    )
    def trigger(
        namespace: Namespace,
        name: Name,
        body: TriggerRequest | None = None,
        if_match: IfMatch = None,
        idempotency_key: Annotated[
            str | None, Header(alias="Idempotency-Key", max_length=253)
        ] = None,
    ) -> JSONResponse:
        rid = (body.requestId if body else None) or idempotency_key or uuid.uuid4().hex
        wf, version = ops.command(
            namespace, name, lambda a, at: a.trigger(at, rid), _if_match(if_match)
        )
        log_command("triggered", namespace, name, version, workflow=wf, requestId=rid)
        out = {
            "workflow": wf or manual_workflow_name(name, rid),
            "requestId": rid,
            "triggered": wf is not None,
        }
        return JSONResponse(out, status_code=201 if wf else 200, headers={"ETag": f'"{version}"'})

    @api.post(
        base + "/{name}/backfill",
        response_model=BackfillResult,
        responses=_problem_responses(404, 409, 422),
        summary="Fire every tick in [start, end] that never fired (dryRun: only list them)",
        tags=["commands"],
    )
    def backfill(namespace: Namespace, name: Name, body: BackfillRequest) -> dict[str, Any]:
        s, e = parse_time(body.start, "start"), parse_time(body.end, "end")
        if e < s:
            raise FieldError("end", f"{body.end} is before start {body.start}", "body")
        if body.parallel is not None and body.overlap in ("Forbid", "Replace"):
            raise FieldError(
                "parallel", f"applies to overlap Allow or Queue, not {body.overlap}", "body"
            )
        plan = ops.backfill(
            namespace,
            name,
            s,
            e,
            body.dryRun,
            body.maxTicks or settings.max_backfill_ticks,
            overlap=body.overlap,
            parallel=body.parallel,
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

    @api.get(
        base + "/{name}/next",
        response_model=NextTimes,
        responses=_problem_responses(404, 422),
        summary="The next fire times, in the CronWorkflow's zone and in UTC",
        tags=["cronworkflows"],
    )
    def next_times(
        namespace: Namespace,
        name: Name,
        count: Annotated[int, Query(ge=1, le=1000)] = 5,
    ) -> dict[str, Any]:
        agg = ops.find(namespace, name)
        return {
            "timezone": agg.spec_model.timezone or "UTC",
            "items": next_fire_times(agg, clock(), count),
        }

    @api.get(
        base + "/{name}/history",
        response_model=EventList,
        responses=_problem_responses(404, 422),
        summary="The audit log of one CronWorkflow (all its incarnations)",
        tags=["audit"],
    )
    def history(
        namespace: Namespace,
        name: Name,
        since: Since = None,
        until: Until = None,
        types: Types = None,
        reasons: Reasons = None,
        after: After = 0,
        limit: Limit = 100,
    ) -> dict[str, Any]:
        f = event_filter(namespace, name, since, until, types, reasons, after, limit)
        page = events_page(f)
        if not page["items"] and not queries.ever_existed(namespace, name):
            raise NotFound(f"cronworkflow {namespace}/{name} not found")
        return page

    @api.get(
        base + "/{name}/decision",
        response_model=Decision,
        responses=_problem_responses(404, 422),
        summary="Why did (or didn't) it run at a time: the decision recorded for that tick",
        tags=["audit"],
    )
    def decision(
        namespace: Namespace,
        name: Name,
        at: Annotated[str, Query(description="RFC 3339 time of the tick in question")],
    ) -> dict[str, Any]:
        t = parse_time(at, "at")
        ops.catch_up(wait=False)
        rows = queries.decisions_at(namespace, name, t)
        try:
            agg = ops.find(namespace, name)
        except NotFound:
            if not queries.ever_existed(namespace, name):
                raise
            agg = None
        return explain(agg, t, rows)

    def _timeline(
        namespace: str | None, name: str | None, days: float, buckets: int
    ) -> dict[str, Any]:
        bucket = timedelta(seconds=max(60, round(days * 86400 / buckets)))
        step = bucket.total_seconds()
        now = clock().timestamp()
        until = datetime.fromtimestamp((now // step + 1) * step, UTC)
        since = until - bucket * buckets
        ops.catch_up(wait=False)
        rows = engine.view.statuses(namespace)
        if name is not None:
            rows = [r for r in rows if r["name"] == name]
            if not rows:
                raise NotFound(f"cronworkflow {namespace}/{name} not found")
        window = queries.window(namespace, name, since, until, bucket)
        return {
            "since": rfc3339(since),
            "until": rfc3339(until),
            "bucketSeconds": int(step),
            "items": timeline(rows, window, since, until, bucket),
        }

    @api.get(
        "/timeline",
        response_model=Timeline,
        responses=_problem_responses(422),
        summary="Per CronWorkflow, fired / failed / skipped-by-reason ticks per time bucket",
        tags=["audit"],
    )
    def timeline_all(
        namespace: Annotated[str | None, Query(pattern=_DNS, max_length=63)] = None,
        days: Days = 7,
        buckets: Buckets = 168,
    ) -> dict[str, Any]:
        return _timeline(namespace, None, days, buckets)

    @api.get(
        base + "/{name}/timeline",
        response_model=Timeline,
        responses=_problem_responses(404, 422),
        summary="The timeline of one CronWorkflow",
        tags=["audit"],
    )
    def timeline_one(
        namespace: Namespace, name: Name, days: Days = 7, buckets: Buckets = 168
    ) -> dict[str, Any]:
        return _timeline(namespace, name, days, buckets)

    @api.get(
        "/events",
        response_model=EventList,
        responses=_problem_responses(422),
        summary="The whole audit log, filtered, paged by log position",
        tags=["audit"],
    )
    def events(
        namespace: Annotated[str | None, Query(max_length=253)] = None,
        name: Annotated[str | None, Query(max_length=253)] = None,
        since: Since = None,
        until: Until = None,
        types: Types = None,
        reasons: Reasons = None,
        after: After = 0,
        limit: Limit = 100,
    ) -> dict[str, Any]:
        return events_page(
            event_filter(namespace, name, since, until, types, reasons, after, limit)
        )

    app.include_router(api)
    app.include_router(status_page_router(engine, ops, clock, Depends(require_token)))

    # -------------------------------------------------------------- operations

    @app.get("/healthz", response_model=Health, tags=["operations"], summary="The process is up")
    async def healthz() -> dict[str, Any]:
        # On the event loop itself, not in the threadpool: busy worker threads (a large
        # admission, a slow store) never delay the liveness answer.
        return {"status": "ok"}

    @app.get(
        "/readyz",
        response_model=Health,
        tags=["operations"],
        summary="Store reachable and projections within the lag threshold",
        responses={503: {"description": "Not ready", "model": Health}},
    )
    def readyz() -> JSONResponse:
        from adapters.runtime.projection import lag

        if (unreadable := store_check.problem()) is not None:
            body = {"status": "store unreadable", "error": unreadable}
            return JSONResponse(body, status_code=503)
        try:
            behind = lag(engine)
        except Exception as e:
            error = {"status": "store unreachable", "error": f"{type(e).__name__}: {e}"}
            return JSONResponse(error, status_code=503)
        late = {
            p: n
            for p, n in behind.items()
            if p in settings.ready_projections and n > settings.max_projection_lag
        }
        body: dict[str, Any] = {
            "status": "ready" if not late else "projections behind",
            "lag": behind,
            "maxLag": settings.max_projection_lag,
        }
        return JSONResponse(body, status_code=200 if not late else 503)

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics",
        dependencies=[Depends(require_token)],
        response_class=PlainTextResponse,
        responses=_problem_responses(401),
    )
    def metrics_endpoint() -> Response:
        metrics.refresh()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # -------------------------------------------------------------- the status page

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # -------------------------------------------------------------- OpenAPI

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            description=(
                "Errors are application/problem+json; `errors[].field` names the field."
                " Writes accept `If-Match: <version>` (the ETag) and answer 409 with"
                " `currentVersion` when it is stale."
            ),
            routes=app.routes,
        )
        manifest = CronWorkflowManifest.model_json_schema(
            by_alias=True, ref_template="#/components/schemas/{model}"
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(manifest.pop("$defs", {}))
        components["CronWorkflowManifest"] = manifest
        components["Problem"] = Problem.model_json_schema(
            by_alias=True, ref_template="#/components/schemas/{model}"
        )
        components.update(components["Problem"].pop("$defs", {}))
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


# ---------------------------------------------------------------------- `cronsource serve`


def serve(
    store: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token_file: str | None = None,
    verbose: bool = False,
) -> None:
    """Run the API server until SIGTERM/Ctrl-C. Raises ServeError for a bad configuration."""
    from adapters.engine import build_engine
    from adapters.logs import configure_logging
    from adapters.store import StoreConfig, StoreURLError

    settings = ServeSettings(host=host, port=port, token=load_token(token_file))
    settings.check()
    try:
        config = StoreConfig.parse(store)
    except StoreURLError as e:
        raise ServeError(str(e)) from None
    try:
        engine = build_engine(config)
        engine.view.next_due()
    except Exception as e:
        hint = " (run `cronsource migrate` first)" if config.kind == "postgresql" else ""
        raise ServeError(f"cannot open store {config.url}: {e}{hint}") from None
    configure_logging(logging.DEBUG if verbose else logging.INFO)
    try:
        app = create_app(engine, settings)
        log.info(
            "serving on http://%s:%d (store %s, auth %s)",
            host,
            port,
            config.url,
            "bearer token" if settings.token else "off (loopback only)",
        )
        _Server(
            uvicorn.Config(app, host=host, port=port, log_config=None, access_log=verbose)
        ).run()
    finally:
        engine.close()


class _Server(uvicorn.Server):
    """uvicorn, except that SIGTERM/SIGINT end in a clean exit 0 (as `cronsource run` does)
    after the graceful shutdown and our `finally` (closing the store), instead of uvicorn
    re-raising the signal once it has stopped."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {s: signal.signal(s, self.handle_exit) for s in signals}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
