"""Our port to the Kubernetes API: the few calls cronsource makes, on custom objects and
(to write Kubernetes Events) core v1 Events.

Everything else in adapters/infrastructure/kube/ talks to a `KubeApi`; only
adapters/infrastructure/kube/client.py knows how the cluster is reached (lightkube's
configuration and credentials, requests on aiohttp). The calls are coroutines that run on
one event loop owned by the client, in a thread of its own: the rest of the engine is
synchronous threads, so `run` hands a coroutine to that loop and waits for its result.

Errors come out as `ApiError` only: an HTTP status, or status 0 for "no answer" (connection
refused or reset, timeout), so callers never see aiohttp's exception types.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Protocol, TypeVar

GROUP, VERSION = "argoproj.io", "v1alpha1"
#: The field manager of every write (`metadata.managedFields`), so that the cluster itself
#: says which Workflows cronsource created and which status fields it wrote, beside Argo's
#: `workflow-controller` (tests/e2e/test_argo_controller_interop.py identifies the creator of
#: each Workflow by it).
FIELD_MANAGER = "cronsource"
CWF, WF = "cronworkflows", "workflows"
#: Calendars are ConfigMaps (core v1) labelled `cronsource.io/calendar: "true"`: the one
#: core resource the port reaches, with the same calls.
CM = "configmaps"

T = TypeVar("T")


class ApiError(Exception):
    """An API call that failed: `status` is the HTTP status, 0 when there was no answer."""

    def __init__(self, status: int, reason: str = "", body: str = "") -> None:
        super().__init__(f"{status} {reason}".strip())
        self.status = status
        self.reason = reason
        self.body = body

    @property
    def api_reason(self) -> str:
        """The Status object's `reason` (AlreadyExists, Conflict, Invalid...), if any."""
        try:
            return str(json.loads(self.body or "{}").get("reason", ""))
        except (ValueError, AttributeError):
            return ""


class KubeApi(Protocol):
    """Custom objects of argoproj.io/v1alpha1 and ConfigMaps (plural CM), as dicts.
    `namespace=None` lists and watches across all namespaces."""

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]: ...

    async def list(
        self, namespace: str | None, plural: str, label_selector: str
    ) -> dict[str, Any]: ...

    async def create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def patch(
        self, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386) on the main resource."""
        ...

    async def delete(self, namespace: str, plural: str, name: str) -> None: ...

    async def warm(self, connections: int) -> None:
        """Have `connections` connections to the API server open, ahead of a burst; never
        raises (a server that does not answer is the burst's to meet)."""
        ...

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """A core v1 Event (adapters/infrastructure/kube/events.py)."""
        ...

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a core v1 Event (its count, last timestamp and message)."""
        ...

    def watch(
        self,
        namespace: str | None,
        plural: str,
        *,
        label_selector: str,
        resource_version: str | None,
        timeout_seconds: int,
    ) -> AsyncIterator[dict[str, Any]]:
        """Events `{"type": ..., "object": {...}}` with bookmarks, until the server ends the
        watch after `timeout_seconds`. An expired resourceVersion raises ApiError(410)."""
        ...

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the client's loop from another thread; return its result."""
        ...

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start a coroutine on the client's loop; the caller decides when to wait."""
        ...
