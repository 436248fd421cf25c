"""FastAPI dependencies: what a handler needs, from the app it serves.

`create_app` builds the engine's collaborators once and keeps them on `app.state`; these
providers hand them to handlers (`ops: Ops`), so a handler is a small function of its inputs
and a test can replace any of them (`app.dependency_overrides`). The providers are `async`:
they only read attributes, and a sync provider would cost a threadpool hop per request.
"""

from __future__ import annotations

import hmac
from typing import Annotated, cast, get_args, get_origin

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.clock import Clock as RuntimeClock
from cronsource.adapters.entrypoints.http.problems import INVALID, ApiError
from cronsource.adapters.entrypoints.http.settings import ServeSettings, is_loopback
from cronsource.adapters.infrastructure.readside.queries import Queries as ReadQueries
from cronsource.adapters.observability.integrity import IntegrityCheck
from cronsource.adapters.observability.metrics import Metrics
from cronsource.adapters.runtime.engine import Engine

_BEARER = HTTPBearer(
    auto_error=False,
    description="`Authorization: Bearer <token>`; required when the server has a token",
)
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]


async def get_settings(request: Request) -> ServeSettings:
    return cast(ServeSettings, request.app.state.settings)


async def get_engine(request: Request) -> Engine:
    return cast(Engine, request.app.state.engine)


async def get_operations(request: Request) -> Operations:
    return cast(Operations, request.app.state.ops)


async def get_queries(request: Request) -> ReadQueries:
    return cast(ReadQueries, request.app.state.queries)


async def get_clock(request: Request) -> RuntimeClock:
    return cast(RuntimeClock, request.app.state.clock)


async def get_metrics(request: Request) -> Metrics:
    return cast(Metrics, request.app.state.metrics)


async def get_integrity(request: Request) -> IntegrityCheck:
    return cast(IntegrityCheck, request.app.state.store_check)


Settings = Annotated[ServeSettings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]
Ops = Annotated[Operations, Depends(get_operations)]
Queries = Annotated[ReadQueries, Depends(get_queries)]
Clock = Annotated[RuntimeClock, Depends(get_clock)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
Integrity = Annotated[IntegrityCheck, Depends(get_integrity)]


async def require_token(request: Request, settings: Settings, creds: BearerCredentials) -> None:
    """401 unless the request carries the server's bearer token (when it has one); compared
    in constant time. Without a token (a server bound to loopback), 403 for a request a
    browser sent on a web page's behalf (`_loopback_request`)."""
    if settings.token is None:
        _loopback_request(request)
        return
    given = creds.credentials if creds is not None else ""
    if not hmac.compare_digest(given.encode(), settings.token.encode()):
        raise ApiError(
            401,
            "Unauthorized",
            "a valid bearer token is required",
            headers={"WWW-Authenticate": 'Bearer realm="cronsource"'},
        )


def _hostname(value: str) -> str:
    """The host of a `Host` header or of an origin URL, without scheme, port or brackets.
    By hand, not `urlsplit`: that one raises on `[::1` and reads `127.0.0.1:1:junk` as
    127.0.0.1, where a malformed header must name no loopback host."""
    host = value.split("://", 1)[-1].split("/", 1)[0]
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _loopback_request(request: Request) -> None:
    """Without a token only loopback can reach the server, but a browser on the same machine
    can be made to: a web page's form or fetch POSTs a command cross-origin without a
    preflight (an empty body suspended and triggered CronWorkflows), and a page whose name
    an attacker re-points at 127.0.0.1 (DNS rebinding) reads the API as its own origin. So
    the `Host` must name loopback (what a client of 127.0.0.1 or localhost sends; a name that
    resolved there does not), and an `Origin`, when a browser sends one, too."""
    host = _hostname(request.headers.get("host", ""))
    origin = request.headers.get("origin")
    if not is_loopback(host):
        raise ApiError(
            403,
            "Forbidden",
            f"Host {host!r}: without a token this server answers only requests to a loopback"
            " address (127.0.0.1, ::1 or localhost)",
        )
    if origin is not None and not is_loopback(_hostname(origin)):
        raise ApiError(
            403,
            "Forbidden",
            f"Origin {origin!r}: a request from a web page of another site is refused (without"
            " a token, only loopback pages may call this server)",
        )


#: The token check as a route or router dependency.
TOKEN = Depends(require_token)


def _query_names(dependant: Dependant) -> dict[str, bool]:
    """The query parameters a route takes, each with whether it may repeat (a list)."""
    names = {f.alias: _is_list(f.field_info.annotation) for f in dependant.query_params}
    for sub in dependant.dependencies:
        names.update(_query_names(sub))
    return names


def _is_list(annotation: object) -> bool:
    if get_origin(annotation) in (list, tuple, set):
        return True
    return any(_is_list(arg) for arg in get_args(annotation) if arg is not type(None))


_TAKEN: dict[int, dict[str, bool]] = {}


async def known_query_only(request: Request) -> None:
    """422 for a query parameter the route does not take. FastAPI drops such a parameter
    without a word: `?dryRun=All` (kubectl's server-side dry run) wrote for real, and
    `?fieldSelector=...` or `?limit=1` answered with every object, unfiltered and unpaged."""
    route = request.scope.get("route")
    if not request.query_params or not isinstance(route, APIRoute):
        return
    taken = _TAKEN.get(id(route))
    if taken is None:
        taken = _TAKEN[id(route)] = _query_names(route.dependant)
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen and not taken.get(key):
            # Starlette keeps the last of them: `?labelSelector=a&labelSelector=b` dropped
            # the first filter without a word, as an unknown parameter was dropped.
            raise _refused(key, "given more than once; give it once")
        seen.add(key)
        if key not in taken:
            said = (
                "this server has no dry run: nothing was done"
                if key == "dryRun"
                else "not a parameter of this request"
            )
            takes = ", ".join(sorted(taken)) or "none"
            raise _refused(key, f"{said} (it takes: {takes})")


def _refused(key: str, message: str) -> ApiError:
    """The 422 for query parameter `key`."""
    return ApiError(
        422,
        "Invalid request",
        f"{key}: {message}",
        type_=INVALID,
        errors=[{"field": key, "in": "query", "message": message}],
    )


#: The check of the query's parameters as a router dependency.
KNOWN_QUERY = Depends(known_query_only)
#: What every /api/v1 router depends on: the token, and no parameter it does not take.
API_CHECKS = [TOKEN, KNOWN_QUERY]
