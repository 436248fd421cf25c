"""The HTTP API, metrics, health checks and the status page (`cronsource serve`).

`create_app(engine, settings, clock)` builds one FastAPI app around an engine; nothing is
built at import time, and every app has its own metrics registry. The app is its routers
(adapters/entrypoints/http/routers/, one per resource group), the dependencies that hand them the
engine's collaborators (adapters/entrypoints/http/dependencies.py), one table from domain errors to
problem responses (adapters/entrypoints/http/problems.py) and two middlewares (body limits,
metrics). The rules live in the domain and `adapters/application/operations.py`.

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

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.clock import Clock
from cronsource.adapters.entrypoints.http import problems
from cronsource.adapters.entrypoints.http.middleware import BodyLimit, HeadAsGet, observe
from cronsource.adapters.entrypoints.http.problems import Problem
from cronsource.adapters.entrypoints.http.routers import (
    audit,
    calendars,
    commands,
    cronworkflows,
    operations,
    statuspage,
)
from cronsource.adapters.entrypoints.http.settings import ServeSettings
from cronsource.adapters.observability.integrity import IntegrityCheck
from cronsource.adapters.observability.metrics import Metrics
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import CronWorkflowManifest

STATIC = Path(__file__).resolve().parent / "static"


def create_app(
    engine: Engine,
    settings: ServeSettings | None = None,
    clock: Clock | None = None,
) -> FastAPI:
    """The app over `engine` (which the caller owns and closes). `clock` gives the time of
    every command and of "now" in reads: the engine's unless given (tests pass one of their
    own)."""
    clock = clock if clock is not None else engine.clock
    settings = settings or ServeSettings()
    settings.check()
    ops = Operations(engine, clock)
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
    # What adapters/entrypoints/http/dependencies.py hands to handlers.
    app.state.settings = settings
    app.state.engine = engine
    app.state.clock = clock
    app.state.ops = ops
    app.state.queries = engine.view
    app.state.metrics = metrics
    app.state.store_check = IntegrityCheck(engine)

    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, timeout=settings.body_timeout)
    problems.install(app)
    app.middleware("http")(observe(metrics))
    app.add_middleware(HeadAsGet)  # outermost: every route's GET answers HEAD

    app.include_router(cronworkflows.router)
    app.include_router(calendars.router)
    app.include_router(commands.router)
    app.include_router(audit.router)
    app.include_router(statuspage.router)
    app.include_router(operations.router)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, plus the schemas it cannot see: the manifest a write's body is
    (read by hand, as JSON or YAML) and the problem every error is."""
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
