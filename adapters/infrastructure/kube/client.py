"""The `KubeApi` port on the official client's asyncio flavour, `kubernetes.aio` (37.x).

The only module of cronsource that imports the Kubernetes client. One `AioKube` owns an event
loop running in a daemon thread and one `kubernetes.aio` ApiClient (one aiohttp session, one
connection pool) created on that loop. The dispatcher, the status writer and the watchers share
it: watches are tasks on the loop, and a burst of creations is many coroutines in flight on the
same pool instead of one request at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar, cast

import aiohttp
from kubernetes.aio import client as aclient
from kubernetes.aio import config as aconfig
from kubernetes.aio import watch as awatch
from kubernetes.aio.client.exceptions import ApiException
from kubernetes.aio.client.models.core_v1_event import CoreV1Event

from cronsource.adapters.infrastructure.kube.port import (
    CM,
    FIELD_MANAGER,
    GROUP,
    VERSION,
    ApiError,
)

T = TypeVar("T")

#: Seconds one ordinary request may take end to end before it counts as a transient failure.
#: The API server answers a create or a patch in milliseconds; 30 s only catches a hung
#: connection, and the caller's backoff retries it.
REQUEST_TIMEOUT = 30.0
#: Extra seconds a watch may run past its server-side timeout before the client gives up.
WATCH_GRACE = 15.0
#: Connections in the pool: the dispatcher's in-flight bound (64 at most) plus the two watches
#: and the status writer, with room to spare.
POOL_SIZE = 100


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


def _obj(got: object) -> dict[str, Any]:
    """The client types custom objects as `object`; they are JSON objects."""
    assert isinstance(got, dict), type(got)
    return got


def _json(got: object) -> dict[str, Any]:
    """A model serialised as the API's JSON (Events come back as the client's models)."""
    assert isinstance(got, dict), type(got)
    return got


def _error(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiException):
        return ApiError(int(exc.status or 0), str(exc.reason or ""), str(exc.body or ""))
    return ApiError(0, f"{type(exc).__name__}: {exc}")


#: What becomes an ApiError: the client's HTTP errors, and "no answer" of every kind.
_FAILURES = (ApiException, aiohttp.ClientError, asyncio.TimeoutError, OSError)


class AioKube:
    """`KubeApi` on `kubernetes.aio`. Build with `connect` (kubeconfig or in-cluster)."""

    def __init__(self, loop: LoopThread, api_client: Any) -> None:
        self._loop = loop
        self.api_client = api_client
        self.api = aclient.CustomObjectsApi(api_client)
        self.core = aclient.CoreV1Api(api_client)

    def _plain(self, got: object) -> dict[str, Any]:
        """A core object (the client's model classes) as the JSON the API sent."""
        return _obj(self.api_client.sanitize_for_serialization(got))

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
        await self.api_client.close()

    # -- the calls --------------------------------------------------------------------------

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        try:
            if plural == CM:
                return self._plain(
                    await self.core.read_namespaced_config_map(
                        name, namespace, _request_timeout=REQUEST_TIMEOUT
                    )
                )
            return _obj(
                await self.api.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT
                )
            )
        except _FAILURES as e:
            raise _error(e) from e

    async def list(self, namespace: str | None, plural: str, label_selector: str) -> dict[str, Any]:
        try:
            if plural == CM:
                if namespace:
                    cms = await self.core.list_namespaced_config_map(
                        namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT
                    )
                else:
                    cms = await self.core.list_config_map_for_all_namespaces(
                        label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT
                    )
                return self._plain(cms)
            if namespace:
                got = await self.api.list_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    plural,
                    label_selector=label_selector,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            else:
                got = await self.api.list_cluster_custom_object(
                    GROUP,
                    VERSION,
                    plural,
                    label_selector=label_selector,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            return _obj(got)
        except _FAILURES as e:
            raise _error(e) from e

    async def create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            if plural == CM:
                return self._plain(
                    await self.core.create_namespaced_config_map(
                        namespace,
                        cast(Any, body),  # the client sends a dict as the JSON it is
                        field_manager=FIELD_MANAGER,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                )
            return _obj(
                await self.api.create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    plural,
                    body,
                    field_manager=FIELD_MANAGER,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            )
        except _FAILURES as e:
            raise _error(e) from e

    async def patch(
        self, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            if plural == CM:
                return self._plain(
                    await self.core.patch_namespaced_config_map(
                        name,
                        namespace,
                        body,
                        _content_type="application/merge-patch+json",
                        field_manager=FIELD_MANAGER,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                )
            return _obj(
                await self.api.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    plural,
                    name,
                    body,
                    _content_type="application/merge-patch+json",
                    field_manager=FIELD_MANAGER,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            )
        except _FAILURES as e:
            raise _error(e) from e

    async def delete(self, namespace: str, plural: str, name: str) -> None:
        try:
            if plural == CM:
                await self.core.delete_namespaced_config_map(
                    name, namespace, _request_timeout=REQUEST_TIMEOUT
                )
                return
            await self.api.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT
            )
        except _FAILURES as e:
            raise _error(e) from e

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """A core v1 Event (adapters/infrastructure/kube/events.py)."""
        model = CoreV1Event.from_dict(body)
        if model is None:
            raise ApiError(400, "Bad Request", "an Event needs a body")
        try:
            got = await self.core.create_namespaced_event(
                namespace,
                model,
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT,
            )
            return _json(self.api_client.sanitize_for_serialization(got))
        except _FAILURES as e:
            raise _error(e) from e

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of a core v1 Event (its count and last timestamp)."""
        try:
            got = await self.core.patch_namespaced_event(
                name,
                namespace,
                body,
                _content_type="application/merge-patch+json",
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT,
            )
            return _json(self.api_client.sanitize_for_serialization(got))
        except _FAILURES as e:
            raise _error(e) from e

    async def watch(
        self,
        namespace: str | None,
        plural: str,
        *,
        label_selector: str,
        resource_version: str | None,
        timeout_seconds: int,
    ) -> AsyncIterator[dict[str, Any]]:
        fn: Any
        args: tuple[Any, ...]
        if plural == CM:
            if namespace:
                fn, args = self.core.list_namespaced_config_map, (namespace,)
            else:
                fn, args = self.core.list_config_map_for_all_namespaces, ()
        elif namespace:
            fn = self.api.list_namespaced_custom_object
            args = (GROUP, VERSION, namespace, plural)
        else:
            fn, args = self.api.list_cluster_custom_object, (GROUP, VERSION, plural)
        kwargs: dict[str, Any] = {
            "label_selector": label_selector,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout_seconds,
            "_request_timeout": timeout_seconds + WATCH_GRACE,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        w = awatch.Watch()
        try:
            async with w.stream(fn, *args, **kwargs) as stream:
                async for event in stream:
                    yield {"type": event["type"], "object": event["raw_object"]}
        except _FAILURES as e:
            raise _error(e) from e
        finally:
            await w.close()


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY and NO_PROXY, as kubectl
    reads them), read once at connect. The client's session would otherwise trust the
    environment per request, and aiohttp then re-reads the proxy variables and parses
    ~/.netrc for every call: a quarter of the client loop's time in a burst of creations
    (py-spy under bench.argo)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def connect(kubeconfig: str | None = None) -> AioKube:
    """An AioKube from a kubeconfig (the path given, else in-cluster, else $KUBECONFIG or
    ~/.kube/config). Raises if none can be loaded."""
    loop = LoopThread()

    async def make() -> Any:
        # A Configuration of its own (not the process-wide default), set before the ApiClient
        # is built: the pool size is read once, when the client makes its connection pool.
        cfg = aclient.Configuration()
        if kubeconfig:
            await aconfig.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            try:
                aconfig.load_incluster_config(client_configuration=cfg)
            except aconfig.ConfigException:
                await aconfig.load_kube_config(client_configuration=cfg)
        cfg.connection_pool_maxsize = POOL_SIZE
        cfg.retries = (
            None  # our own backoff decides what to retry (adapters/infrastructure/kube/target.py)
        )
        if cfg.proxy is None:  # the kubeconfig's proxy-url wins over the environment's
            cfg.proxy = env_proxy(str(cfg.host))
        cfg.client_session_kwargs = {"trust_env": False}
        return aclient.ApiClient(configuration=cfg)

    try:
        return AioKube(loop, loop.run(make()))
    except BaseException:
        loop.stop()
        raise
