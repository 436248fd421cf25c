"""Errors as RFC 9457 problem responses (application/problem+json), from one table.

`PROBLEMS` maps each domain error to its problem: status, title, type, detail and the
extensions a client acts on (`currentVersion` on a stale If-Match, `errors[].field` naming
each bad field in camelCase, as the client wrote it). The handlers `install` puts on the app
all render through it, so a status code for an error is decided in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from cronsource.adapters.application.documents import DocumentError
from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.infrastructure.store.check import (
    StoreUnavailable,
    describe,
    is_store_fault,
    store_faults,
)
from cronsource.domain.lastapplied import ApplyConflict
from cronsource.domain.manifest import ManifestError
from cronsource.domain.service import AlreadyExists, Conflict, NotFound, StaleVersion

log = logging.getLogger("cronsource.http")

PROBLEM = "application/problem+json"
INVALID = "urn:cronsource:problem:invalid"


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
    return ApiError(422, title, _joined(errors), type_=INVALID, errors=errors)


def _joined(errors: list[dict[str, str]]) -> str:
    return "; ".join(f"{e['field']}: {e['message']}" for e in errors)


def manifest_errors(e: ManifestError) -> list[dict[str, str]]:
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
    reason: str | None = Field(
        default=None,
        description="Kubernetes' StatusReason of a 409: AlreadyExists (a create of a live"
        " name) or Conflict (a server-side apply that another field manager's fields refuse)",
    )


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "The body cannot be parsed",
        401: "No or wrong bearer token",
        404: "No such CronWorkflow",
        409: "Stale If-Match (body has currentVersion), the CronWorkflow already exists"
        " (reason AlreadyExists), or a server-side apply conflicts with another field"
        " manager (reason Conflict, errors[].field naming each field)",
        413: "The request body is larger than 3 MiB",
        415: "Unsupported content type",
        422: "Invalid input; errors[].field names each bad field",
    }
    schema = {"$ref": "#/components/schemas/Problem"}
    return {c: {"description": text[c], "content": {PROBLEM: {"schema": schema}}} for c in codes}


# ---------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    """How one domain error is answered; `detail`, `headers` and `extensions` read the error."""

    status: int
    title: str
    type: str = "about:blank"
    detail: Callable[[Any], str | None] = str
    headers: Callable[[Any], dict[str, str] | None] = lambda e: None
    extensions: Callable[[Any], dict[str, Any]] = lambda e: {}

    def error(self, e: Exception) -> ApiError:
        return ApiError(
            self.status,
            self.title,
            self.detail(e),
            type_=self.type,
            headers=self.headers(e),
            **self.extensions(e),
        )


def _stale_detail(e: StaleVersion) -> str:
    if e.current is None:
        return f"If-Match {e.expected}: the CronWorkflow does not exist"
    return f"If-Match {e.expected} is stale: the current version is {e.current}"


#: Every domain error the API answers, and how; an error not here is a 500.
PROBLEMS: dict[type[Exception], Row] = {
    NotFound: Row(404, "Not found"),
    AlreadyExists: Row(
        409,
        "Already exists",
        type="urn:cronsource:problem:already-exists",
        # Kubernetes' StatusReason for the same refusal
        extensions=lambda e: {"reason": "AlreadyExists", "currentVersion": e.version},
    ),
    StaleVersion: Row(
        409,
        "Version conflict",
        type="urn:cronsource:problem:stale-version",
        detail=_stale_detail,
        headers=lambda e: {"ETag": f'"{e.current}"'} if e.current is not None else None,
        extensions=lambda e: {"currentVersion": e.current, "expectedVersion": e.expected},
    ),
    Conflict: Row(409, "Conflict", detail=lambda e: f"{e}; try again"),
    ApplyConflict: Row(
        409,
        "Conflict",
        type="urn:cronsource:problem:apply-conflict",
        # Kubernetes' StatusReason for a server-side apply's field-manager conflict
        extensions=lambda e: {
            "reason": "Conflict",
            "errors": [
                {"field": c.path, "in": "body", "message": e.describe(c)} for c in e.conflicts
            ],
        },
    ),
    FieldError: Row(
        422,
        "Invalid request",
        type=INVALID,
        detail=lambda e: f"{e.field}: {e.message}",
        extensions=lambda e: {
            "errors": [{"field": e.field, "in": e.location, "message": e.message}]
        },
    ),
    ManifestError: Row(
        422,
        "Invalid CronWorkflow",
        type=INVALID,
        detail=lambda e: _joined(manifest_errors(e)),
        extensions=lambda e: {"errors": manifest_errors(e)},
    ),
    DocumentError: Row(400, "Bad request"),
    StoreUnavailable: Row(503, "Service unavailable"),
}


def to_problem(e: Exception) -> ApiError:
    """The problem for `e`: its own row, or its nearest base class's."""
    for cls in type(e).__mro__:
        if (row := PROBLEMS.get(cls)) is not None:
            return row.error(e)
    raise LookupError(f"no problem row for {type(e).__name__}")


# ---------------------------------------------------------------------- handlers


def _render(request: Request, e: ApiError) -> JSONResponse:
    return problem(
        e.status,
        e.title,
        e.detail,
        type_=e.type,
        instance=request.url.path,
        headers=e.headers,
        **e.extensions,
    )


async def _api_error(request: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, ApiError)
    return _render(request, e)


async def _domain_error(request: Request, e: Exception) -> JSONResponse:
    return _render(request, to_problem(e))


async def _validation(request: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, RequestValidationError)
    for err in e.errors():
        if err.get("type") == "json_invalid":
            # A body that is not JSON is a 400, as the manifest routes answer it (and the
            # docs say); FastAPI's own model bodies made it a 422 of a field named "0".
            why = (err.get("ctx") or {}).get("error") or err.get("msg") or "invalid"
            return _render(request, ApiError(400, "Bad request", f"body: not valid JSON: {why}"))
    errors = []
    for err in e.errors():
        loc = [str(p) for p in err.get("loc", ())]
        where = loc[0] if loc else "request"
        field_ = ".".join(loc[1:]) or where
        if where == "header":
            field_ = field_.title()
        errors.append({"field": field_, "in": where, "message": _message(err)})
    return _render(request, invalid(errors))


def _message(err: Any) -> str:
    """pydantic's message, but for a value that does not match a pattern: the value and
    what it must be, in words (`name: String should match pattern '^[a-z0-9]...'` named
    neither the value nor the rule a person reads)."""
    if err.get("type") == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern", "")
        rule = (
            "lowercase letters, digits, '-' or '.', starting and ending with a letter or digit"
            " (a Kubernetes name)"
            if pattern.startswith("^[a-z0-9]")
            else "printable ASCII"
            if pattern == "^[ -~]+$"
            else f"text matching {pattern}"
        )
        return f"{err.get('input')!r} must be {rule}"
    return str(err.get("msg", "invalid")).removeprefix("Value error, ")


async def _http(request: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, StarletteHTTPException)
    title = HTTPStatus(e.status_code).phrase
    detail = e.detail if isinstance(e.detail, str) and e.detail != title else None
    return problem(
        e.status_code,
        title,
        detail,
        instance=request.url.path,
        headers=getattr(e, "headers", None),
    )


async def _store_fault(request: Request, e: Exception) -> JSONResponse:
    """The store went away under a request (PostgreSQL stopped or restarted, SQLite locked
    past its timeout): as `StoreUnavailable`, a 503 naming the cause, which a client retries.
    It was a 500 with the exception's class name, read as our bug, and a traceback logged
    twice for each request."""
    detail = describe(e)
    log.warning("store fault on %s %s: %s", request.method, request.url.path, detail)
    return problem(503, "Service unavailable", detail, instance=request.url.path)


async def _unexpected(request: Request, e: Exception) -> JSONResponse:
    if is_store_fault(e):  # one wrapped in another error: its cause
        return await _store_fault(request, e)
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(500, "Internal server error", type(e).__name__, instance=request.url.path)


def install(app: FastAPI) -> None:
    """Answer every error on `app` as a problem: ours, the table's, FastAPI's, the rest."""
    app.add_exception_handler(ApiError, _api_error)
    for error in PROBLEMS:
        app.add_exception_handler(error, _domain_error)
    for fault in store_faults():  # the drivers the engine loaded, before the app
        app.add_exception_handler(fault, _store_fault)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
