"""What operators and their tools ask: liveness, readiness and the Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from cronsource.adapters.application.models import Health
from cronsource.adapters.entrypoints.http.dependencies import (
    TOKEN,
    EngineDep,
    Integrity,
    MetricsDep,
    Settings,
)
from cronsource.adapters.entrypoints.http.problems import problem_responses

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="The process is up")
async def healthz() -> dict[str, Any]:
    # On the event loop itself, not in the threadpool: busy worker threads (a large
    # admission, a slow store) never delay the liveness answer.
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Health,
    response_model_exclude_unset=True,  # each answer has its own fields, none null
    summary="Store reachable and projections within the lag threshold",
    responses={503: {"description": "Not ready", "model": Health}},
)
def readyz(
    response: Response, engine: EngineDep, settings: Settings, store_check: Integrity
) -> dict[str, Any]:

    if (unreadable := store_check.problem()) is not None:
        response.status_code = 503
        return {"status": "store unreadable", "error": unreadable}
    try:
        behind = engine.projector.lag()
    except Exception as e:
        response.status_code = 503
        return {"status": "store unreachable", "error": f"{type(e).__name__}: {e}"}
    late = {
        p: n
        for p, n in behind.items()
        if p in settings.ready_projections and n > settings.max_projection_lag
    }
    response.status_code = 200 if not late else 503
    return {
        "status": "ready" if not late else "projections behind",
        "lag": behind,
        "maxLag": settings.max_projection_lag,
    }


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    dependencies=[TOKEN],
    response_class=PlainTextResponse,
    responses=problem_responses(401),
)
def metrics_endpoint(metrics: MetricsDep) -> Response:
    metrics.refresh()
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
