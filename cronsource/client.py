"""`cronsource.Client(base_url, token=...)`: the Python API over HTTP, against `cronsource serve`.

The same methods, arguments, results and errors as `cronsource.open` (cronsource/library.py):
arguments are checked here first (cronsource/arguments.py), each call is one request of the
HTTP API (docs/http-api.md), results are the API's own pydantic models, and each RFC 9457
problem becomes the error of cronsource/errors.py it stands for. tests/e2e/test_python_api.py runs
one set of tests over both.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel

from cronsource import arguments
from cronsource.adapters.application.admission import admit_calendar
from cronsource.adapters.application.documents import DocumentError, load_yaml
from cronsource.adapters.application.inputs import DNS, MAX_NAME, FieldError
from cronsource.adapters.application.models import (
    BackfillResult,
    CalendarObject,
    CronWorkflowList,
    CronWorkflowObject,
    Decision,
    Deleted,
    EventList,
    NextTimes,
    Triggered,
)
from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.domain.lastapplied import DEFAULT_MANAGER
from cronsource.errors import (
    AlreadyExists,
    Conflict,
    CronsourceError,
    IncompatibleServer,
    Invalid,
    NotFound,
    Unauthorized,
    Unavailable,
)

M = TypeVar("M", bound=BaseModel)
Overlap = Literal["Allow", "Forbid", "Replace", "Queue"]
#: The HTTP API version this client speaks (the server's OpenAPI `info.version`).
API_VERSION = "1"
DEFAULT_BY = "api"
API = "/api/v1"
APPLY_PATCH = "application/apply-patch+yaml"


class Client:
    """The HTTP API of one `cronsource serve`. `token`: the bearer token it asks for (see
    `serve --token-file`). `timeout`: seconds per request."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._checked = False
        self._closed = False

    # ------------------------------------------------------------------ commands

    def apply(
        self,
        manifest: Mapping[str, Any] | str,
        *,
        namespace: str | None = None,
        force: bool = False,
        create_only: bool = False,
        expected_version: int | None = None,
    ) -> CronWorkflowObject:
        """Create or update, as `kubectl apply` (see `cronsource.open(...).apply`): a
        server-side apply (`PATCH` with `application/apply-patch+yaml`) by the field manager
        `cronsource apply` is, so it merges with the CLI's applies three-way as they merge
        with each other. `create_only`: a create (`POST`)."""
        content, body, parsed = _manifest_body(manifest)
        ns = _manifest_namespace(parsed, namespace)
        arguments.version("expected_version", expected_version)
        arguments.flag("force", force)
        arguments.flag("create_only", create_only)
        name = _manifest_name(parsed)
        if create_only or name is None:
            # Without a usable name the server's create names what is wrong with it, as
            # the library's admission does (nothing is created: admission refuses it).
            return self._create(ns, content, body, expected_version)
        params = {"fieldManager": DEFAULT_MANAGER, **({"force": "true"} if force else {})}
        return self._call(
            CronWorkflowObject,
            "PATCH",
            self._path(ns, name),
            content=body,
            headers={"Content-Type": APPLY_PATCH, **(_if_match(expected_version) or {})},
            params=params,
        )

    def create(
        self, manifest: Mapping[str, Any] | str, *, namespace: str | None = None
    ) -> CronWorkflowObject:
        """Create only (`POST`): AlreadyExists when a live CronWorkflow has that name."""
        content, body, parsed = _manifest_body(manifest)
        return self._create(_manifest_namespace(parsed, namespace), content, body, None)

    def _create(
        self, namespace: str, content: str, body: bytes, expected_version: int | None
    ) -> CronWorkflowObject:
        # `If-None-Match: *` makes the server name a version given with a create as the
        # library does (`create_only` with `expected_version`).
        headers = {"Content-Type": content, "If-None-Match": "*"}
        return self._call(
            CronWorkflowObject,
            "POST",
            f"{API}/namespaces/{namespace}/cronworkflows",
            content=body,
            headers={**headers, **(_if_match(expected_version) or {})},
        )

    def suspend(
        self,
        namespace: str,
        name: str,
        *,
        by: str = DEFAULT_BY,
        note: str = "",
        expected_version: int | None = None,
    ) -> CronWorkflowObject:
        return self._command("suspend", namespace, name, {"by": by, "note": note}, expected_version)

    def resume(
        self,
        namespace: str,
        name: str,
        *,
        by: str = DEFAULT_BY,
        note: str = "",
        expected_version: int | None = None,
    ) -> CronWorkflowObject:
        return self._command("resume", namespace, name, {"by": by, "note": note}, expected_version)

    def trigger(
        self,
        namespace: str,
        name: str,
        *,
        request_id: str | None = None,
        expected_version: int | None = None,
    ) -> Triggered:
        self._names(namespace, name)
        rid = arguments.request_id(request_id) or uuid.uuid4().hex
        return self._call(
            Triggered,
            "POST",
            f"{self._path(namespace, name)}/trigger",
            json={"requestId": rid},
            headers=_if_match(expected_version),
        )

    def backfill(
        self,
        namespace: str,
        name: str,
        start: datetime,
        end: datetime,
        *,
        dry_run: bool = False,
        overlap: Overlap | None = None,
        parallel: int | None = None,
        max_ticks: int | None = None,
    ) -> BackfillResult:
        self._names(namespace, name)
        arguments.moment("start", start)
        arguments.moment("end", end)
        arguments.backfill(dry_run, overlap, parallel, max_ticks)
        body = {
            "start": arguments.rfc3339(start),
            "end": arguments.rfc3339(end),
            "dryRun": dry_run,
            "overlap": overlap,
            "parallel": parallel,
            "maxTicks": max_ticks,
        }
        return self._call(
            BackfillResult, "POST", f"{self._path(namespace, name)}/backfill", json=body
        )

    def delete(self, namespace: str, name: str, *, expected_version: int | None = None) -> Deleted:
        self._names(namespace, name)
        return self._call(
            Deleted, "DELETE", self._path(namespace, name), headers=_if_match(expected_version)
        )

    # ------------------------------------------------------------------ calendars

    def apply_calendar(
        self, manifest: Mapping[str, Any] | str, *, namespace: str | None = None
    ) -> CalendarObject:
        """Create or replace a calendar (`PUT .../calendars/NAME`; see
        `cronsource.open(...).apply_calendar`)."""
        content, body, parsed = _manifest_body(manifest)
        if not isinstance(parsed, Mapping):
            raise Invalid("manifest", "must be a mapping (a calendar ConfigMap)")
        ns = _manifest_namespace(parsed, namespace)
        name = _manifest_name(parsed)
        if name is None:
            # No path without a name: the admission's own words for what is wrong with it,
            # as the library says them.
            try:
                admit_calendar(parsed, ns)
            except FieldError as e:
                raise Invalid(e.field, e.message) from None
            raise Invalid("metadata.name", "is not a ConfigMap name")
        return self._call(
            CalendarObject,
            "PUT",
            self._calendar_path(ns, name),
            content=body,
            headers={"Content-Type": content},
        )

    def get_calendar(self, namespace: str, name: str) -> CalendarObject:
        self._names(namespace, name)
        return self._call(CalendarObject, "GET", self._calendar_path(namespace, name))

    def delete_calendar(self, namespace: str, name: str) -> CalendarObject:
        self._names(namespace, name)
        return self._call(CalendarObject, "DELETE", self._calendar_path(namespace, name))

    # ------------------------------------------------------------------ reads

    def get(self, namespace: str, name: str) -> CronWorkflowObject:
        self._names(namespace, name)
        return self._call(CronWorkflowObject, "GET", self._path(namespace, name))

    def list(
        self, namespace: str | None = None, *, selector: str | None = None
    ) -> CronWorkflowList:
        if selector is not None:
            arguments.text("selector", selector, arguments.MAX_SELECTOR)
        params = {"labelSelector": selector} if selector is not None else None
        if namespace is None:
            return self._call(CronWorkflowList, "GET", f"{API}/cronworkflows", params=params)
        arguments.namespace(namespace)
        found = self._call(
            CronWorkflowList, "GET", f"{API}/namespaces/{namespace}/cronworkflows", params=params
        )
        if not found.items:
            self._known(namespace)
        return found

    def next(self, namespace: str, name: str, count: int = 5) -> NextTimes:
        self._names(namespace, name)
        arguments.bounded("count", count, 1, arguments.MAX_COUNT)
        return self._call(
            NextTimes, "GET", f"{self._path(namespace, name)}/next", params={"count": count}
        )

    def history(
        self,
        namespace: str,
        name: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] = (),
        reasons: Sequence[str] = (),
        after: int = 0,
        limit: int = 100,
    ) -> EventList:
        self._names(namespace, name)
        params = _page(since, until, types, reasons, after, limit)
        return self._call(EventList, "GET", f"{self._path(namespace, name)}/history", params=params)

    def events(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] = (),
        reasons: Sequence[str] = (),
        after: int = 0,
        limit: int = 100,
    ) -> EventList:
        if namespace is not None:
            arguments.namespace(namespace)
        if name is not None:
            arguments.name("name", name)
        params = _page(since, until, types, reasons, after, limit)
        if namespace is not None:
            params.append(("namespace", namespace))
        if name is not None:
            params.append(("name", name))
        found = self._call(EventList, "GET", f"{API}/events", params=params)
        if namespace is not None and not found.items:
            self._known(namespace)
        return found

    def why(self, namespace: str, name: str, at: datetime) -> Decision:
        self._names(namespace, name)
        arguments.moment("at", at)
        return self._call(
            Decision,
            "GET",
            f"{self._path(namespace, name)}/decision",
            # As written, with its own offset: a wall time in a spring-forward gap (02:30
            # Europe/Berlin) names the slot the schedule moved, which its UTC instant does not.
            params={"at": at.isoformat()},
        )

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait until the server's read side has caught up with its log (every call here
        already answers after its own write shows); True when it has."""
        deadline = SYSTEM_CLOCK.monotonic() + arguments.seconds("timeout", timeout)
        while True:
            r = self._request("GET", "/readyz")
            lag = (r.json() or {}).get("lag") or {}
            if r.status_code == 200 and not lag.get("readmodel"):
                return True
            if SYSTEM_CLOCK.monotonic() >= deadline:
                return False
            SYSTEM_CLOCK.wait(0.05)

    # ------------------------------------------------------------------ the rest

    def close(self) -> None:
        self._closed = True
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self, namespace: str, name: str) -> str:
        return f"{API}/namespaces/{namespace}/cronworkflows/{name}"

    @staticmethod
    def _calendar_path(namespace: str, name: str) -> str:
        return f"{API}/namespaces/{namespace}/calendars/{name}"

    def _names(self, namespace: str, name: str) -> None:
        arguments.namespace(namespace)
        arguments.name("name", name)

    def _known(self, namespace: str) -> None:
        """A namespace with no event ever is one that never held a CronWorkflow."""
        seen = self._call(
            EventList, "GET", f"{API}/events", params={"namespace": namespace, "limit": 1}
        )
        if not seen.items:
            raise Invalid("namespace", f"{namespace!r} never held a CronWorkflow")

    def _command(
        self,
        verb: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        expected_version: int | None,
    ) -> CronWorkflowObject:
        self._names(namespace, name)
        arguments.who(body["by"], body["note"])
        return self._call(
            CronWorkflowObject,
            "POST",
            f"{self._path(namespace, name)}/{verb}",
            json=body,
            headers=_if_match(expected_version),
        )

    def _call(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        self._check_server()
        r = self._request(method, path, **kwargs)
        if r.status_code >= 400:
            raise _error(r)
        return model.model_validate(r.json())

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if self._closed:
            raise Unavailable("this client is closed (close() or the end of its `with` block)")
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TransportError as e:
            raise Unavailable(f"{self.base_url}: {type(e).__name__}: {e}") from None

    def _check_server(self) -> None:
        """Once: is this a cronsource server speaking our API version? One line if not."""
        if self._checked:
            return
        r = self._request("GET", "/openapi.json")
        info: dict[str, Any] = {}
        if r.status_code == 200:
            try:
                info = r.json().get("info") or {}
            except ValueError:
                info = {}
        if info.get("title") != "cronsource":
            raise IncompatibleServer(
                f"{self.base_url} is not a cronsource server (GET /openapi.json: {r.status_code})"
            )
        if str(info.get("version")) != API_VERSION:
            raise IncompatibleServer(
                f"{self.base_url} speaks cronsource API version {info.get('version')!r};"
                f" this client speaks {API_VERSION!r}"
            )
        self._checked = True


def _manifest_body(manifest: Mapping[str, Any] | str) -> tuple[str, bytes, Any]:
    """(Content-Type, body, the manifest as data or None when it does not parse) of a
    manifest given as a mapping or as YAML/JSON text (parsed by the server's own loader, so
    the name read here is the name the server reads)."""
    if isinstance(manifest, str):
        try:
            docs = load_yaml(manifest, "manifest")
        except DocumentError:
            docs = []  # the server names what is wrong with it
        parsed = docs[0] if len(docs) == 1 else None
        return "application/yaml", manifest.encode(), parsed
    if isinstance(manifest, Mapping):
        return "application/json", httpx.Request("POST", "/", json=manifest).content, manifest
    raise Invalid("manifest", f"must be a mapping or YAML text, not {type(manifest).__name__}")


def _manifest_namespace(parsed: Any, namespace: str | None) -> str:
    meta = parsed.get("metadata") if isinstance(parsed, Mapping) else None
    given = meta.get("namespace") if isinstance(meta, Mapping) else None
    return arguments.namespace(
        namespace or (given if isinstance(given, str) else None) or "default"
    )


def _manifest_name(parsed: Any) -> str | None:
    """The manifest's name when it can be a path's (else None: the server's admission says
    what is wrong with it)."""
    meta = parsed.get("metadata") if isinstance(parsed, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or len(name) > MAX_NAME or not re.match(DNS, name):
        return None
    return name


def _if_match(expected_version: int | None) -> dict[str, str] | None:
    arguments.version("expected_version", expected_version)
    return None if expected_version is None else {"If-Match": f'"{expected_version}"'}


def _page(
    since: datetime | None,
    until: datetime | None,
    types: Sequence[str],
    reasons: Sequence[str],
    after: int,
    limit: int,
) -> list[tuple[str, str | int]]:
    arguments.window(since, until)
    arguments.bounded("after", after, 0, arguments.MAX_AFTER)
    arguments.bounded("limit", limit, 1, arguments.MAX_LIMIT)
    types, reasons = arguments.words("types", types), arguments.words("reasons", reasons)
    params: list[tuple[str, str | int]] = [("after", after), ("limit", limit)]
    if since is not None:
        params.append(("since", arguments.rfc3339(since)))
    if until is not None:
        params.append(("until", arguments.rfc3339(until)))
    params += [("type", t) for t in types] + [("reason", x) for x in reasons]
    return params


def _error(r: httpx.Response) -> CronsourceError:
    """The problem the server answered, as the error it stands for."""
    try:
        body: dict[str, Any] = r.json()
    except ValueError:
        body = {}
    detail = str(body.get("detail") or body.get("title") or r.reason_phrase)
    status = r.status_code
    if status == 404:
        return NotFound(detail)
    if status == 409:
        if body.get("reason") == "AlreadyExists":
            return AlreadyExists(detail, body.get("currentVersion"))
        if body.get("reason") is None and "currentVersion" in body:
            return Conflict(detail, body.get("currentVersion"), body.get("expectedVersion"))
        return Conflict(detail)
    if status in (400, 422):
        errors = [(str(e.get("field")), str(e.get("message"))) for e in body.get("errors") or []]
        if not errors:
            errors = [("manifest", detail)]
        return Invalid(errors[0][0], errors[0][1], errors)
    if status == 401:
        return Unauthorized(detail)
    if status in (502, 503, 504):
        return Unavailable(detail)
    return CronsourceError(f"{status} {detail}")
