"""The `KubeApi` port over HTTP, with lightkube's configuration and authentication.

The only module of cronsource that knows how the cluster is reached. What is hard about a
Kubernetes client (kubeconfig contexts, client certificates, bearer tokens, in-cluster service
account tokens re-read when the kubelet rotates them, exec credential plugins) comes from
lightkube (`KubeConfig` and its connection parameters, giving an `httpx2.AsyncClient`); the six
calls cronsource makes on custom objects are plain REST requests on that client, below. The
official `kubernetes` client was 126 MB of the image's 393 MB for these six calls (issue 25).

The requests are ours rather than lightkube's `AsyncClient` methods because the port needs two
things its typed API does not give: watch bookmarks (`allowWatchBookmarks`, so a quiet
label-selected watch keeps a current resourceVersion instead of expiring into a re-list) and a
watch that ends when the server ends it (lightkube re-opens it forever; the runtime's watcher
decides what to do between watches: adapters/runtime/kube/watch.py).

One `AioKube` owns an event loop running in a daemon thread and one HTTP client (one
connection pool) created on that loop. The dispatcher, the status writer and the watchers
share it: watches are tasks on the loop, and a burst of creations is many coroutines in flight
on the same pool instead of one request at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import httpx2
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import DEFAULT_KUBECONFIG, KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError

from cronsource.adapters.infrastructure.kube.port import FIELD_MANAGER, GROUP, VERSION, ApiError

T = TypeVar("T")

#: Seconds one ordinary request may wait on each step (connect, send, each read, a free
#: connection) before it counts as a transient failure. The API server answers a create or a
#: patch in milliseconds; 30 s only catches a hung connection, and the caller's backoff
#: retries it.
REQUEST_TIMEOUT = 30.0
#: Extra seconds a watch may stay silent past its server-side timeout before the client gives
#: up on it (with bookmarks the server speaks at least once a minute on a live watch).
WATCH_GRACE = 15.0
#: Connections in the pool: the dispatcher's in-flight bound (64 at most) plus the two watches
#: and the status writer, with room to spare.
POOL_SIZE = 100

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"


class LoopThread:
    """An asyncio event loop running forever in a daemon thread."""

    def __init__(self, name: str = "kube-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("AioKube.run called on its own loop: await the coroutine instead")
        return self.submit(coro).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


#: What becomes ApiError(0): "no answer" of every kind (refused, reset, timed out, TLS).
_NO_ANSWER = (httpx2.HTTPError, asyncio.TimeoutError, OSError)


def _no_answer(exc: BaseException) -> ApiError:
    return ApiError(0, f"{type(exc).__name__}: {exc}")


def _object(resp: httpx2.Response) -> dict[str, Any]:
    """The JSON object of a successful answer; an ApiError with the status otherwise."""
    if resp.status_code >= 400:
        raise ApiError(resp.status_code, resp.reason_phrase, resp.text)
    got = json.loads(resp.content)
    if not isinstance(got, dict):
        raise ApiError(resp.status_code, "not a JSON object", resp.text[:2000])
    return got


def _path(namespace: str | None, plural: str, name: str | None = None) -> str:
    """The URL of a custom resource, relative to the server's (which may carry a path)."""
    parts = ["apis", GROUP, VERSION]
    if namespace:
        parts += ["namespaces", urllib.parse.quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(urllib.parse.quote(name, safe=""))
    return "/".join(parts)


class AioKube:
    """`KubeApi` on an `httpx2.AsyncClient` set up by lightkube. Build with `connect`."""

    def __init__(self, loop: LoopThread, http: httpx2.AsyncClient) -> None:
        self._loop = loop
        self.http = http

    # -- the loop ---------------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return self._loop.submit(coro)

    def close(self) -> None:
        """Cancel what still runs on the loop (watches), close the pool, stop the loop."""
        if not self._loop.loop.is_closed():
            self.run(self._shutdown())
            self._loop.stop()

    async def _shutdown(self) -> None:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.http.aclose()

    # -- the calls --------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str = JSON,
    ) -> httpx2.Response:
        headers = {"Accept": JSON}
        content = None
        if body is not None:
            content = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = content_type
        try:
            return await self.http.request(
                method, path, params=params, content=content, headers=headers
            )
        except _NO_ANSWER as e:
            raise _no_answer(e) from e

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        return _object(await self._request("GET", _path(namespace, plural, name)))

    async def list(self, namespace: str | None, plural: str, label_selector: str) -> dict[str, Any]:
        params = {"labelSelector": label_selector} if label_selector else None
        return _object(await self._request("GET", _path(namespace, plural), params=params))

    async def create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self._request(
            "POST", _path(namespace, plural), params={"fieldManager": FIELD_MANAGER}, body=body
        )
        return _object(resp)

    async def patch(
        self, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        resp = await self._request(
            "PATCH",
            _path(namespace, plural, name),
            params={"fieldManager": FIELD_MANAGER},
            body=body,
            content_type=MERGE_PATCH,
        )
        return _object(resp)

    async def delete(self, namespace: str, plural: str, name: str) -> None:
        _object(await self._request("DELETE", _path(namespace, plural, name)))

    async def watch(
        self,
        namespace: str | None,
        plural: str,
        *,
        label_selector: str,
        resource_version: str | None,
        timeout_seconds: int,
    ) -> AsyncIterator[dict[str, Any]]:
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        if resource_version:
            params["resourceVersion"] = resource_version
        timeout = httpx2.Timeout(REQUEST_TIMEOUT, read=timeout_seconds + WATCH_GRACE)
        try:
            async with self.http.stream(
                "GET",
                _path(namespace, plural),
                params=params,
                headers={"Accept": JSON},
                timeout=timeout,
            ) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise ApiError(resp.status_code, resp.reason_phrase, resp.text)
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        # A Status in the stream: 410 Gone when resource_version has expired.
                        status = event.get("object") or {}
                        raise ApiError(
                            int(status.get("code") or 0),
                            str(status.get("reason") or ""),
                            json.dumps(status),
                        )
                    yield event
        except _NO_ANSWER as e:
            raise _no_answer(e) from e


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY and NO_PROXY, as kubectl
    reads them), read once at connect. A client that trusts the environment re-reads the
    proxy variables (and ~/.netrc) per request: a quarter of the client loop's time in a
    burst of creations with the previous client (py-spy under bench.argo)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def load_config(kubeconfig: str | None = None) -> SingleConfig:
    """The cluster and credentials to use: the kubeconfig given, else in-cluster (the pod's
    service account), else $KUBECONFIG or ~/.kube/config; its current context. Raises
    ConfigError (or OSError for a file that cannot be read) if none can be loaded."""
    if kubeconfig:
        found = KubeConfig.from_file(kubeconfig)
    else:
        try:
            found = KubeConfig.from_service_account()
        except (ConfigError, KeyError):  # KeyError: no KUBERNETES_SERVICE_HOST/_PORT
            found = KubeConfig.from_file(os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG)
    single = found.get()
    if single is None:
        raise ConfigError("the kubeconfig has no current context")
    return single


def connect(kubeconfig: str | None = None) -> AioKube:
    """An AioKube from a kubeconfig (see `load_config`). Raises if none can be loaded."""
    config = load_config(kubeconfig)
    loop = LoopThread()

    async def make() -> httpx2.AsyncClient:
        # The environment is read here, once (env_proxy), not per request (trust_env off).
        params = ConnectionParams(
            timeout=httpx2.Timeout(REQUEST_TIMEOUT),
            trust_env=False,
            proxy=env_proxy(config.cluster.server),
        ).httpx_params(config)
        limits = httpx2.Limits(max_connections=POOL_SIZE, max_keepalive_connections=POOL_SIZE)
        return httpx2.AsyncClient(**params, limits=limits)

    try:
        return AioKube(loop, loop.run(make()))
    except BaseException:
        loop.stop()
        raise
