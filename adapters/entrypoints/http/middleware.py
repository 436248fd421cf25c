"""ASGI middleware of the app: the request body bounded in size and time, and each request
counted in the metrics by its route template."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from fastapi import Request, Response

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.entrypoints.http.problems import problem
from cronsource.adapters.observability.metrics import Metrics

_FIXED = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


class HeadAsGet:
    """ASGI middleware: HEAD is answered as GET, without the body (RFC 9110 9.3.2: a server
    that answers GET answers HEAD). FastAPI routes only the methods a route names, so every
    `curl -I`, and the health checkers that ask with HEAD, got a 405."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Any) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


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


def observe(
    metrics: Metrics,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    """HTTP middleware counting each request in `metrics` by method, route and status."""

    async def _observe(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = SYSTEM_CLOCK.monotonic()
        response = await call_next(request)
        route = request.scope.get("route")
        path = request.url.path
        # route templates only (bounded label values): never the raw path of a request
        template = getattr(route, "path", None) or (
            "/static" if path.startswith("/static/") else path if path in _FIXED else "<unmatched>"
        )
        metrics.observe_request(
            request.method, template, response.status_code, SYSTEM_CLOCK.monotonic() - started
        )
        return response

    return _observe
