"""The `KubeApi` port over aiohttp, with lightkube's configuration and credentials.

The only module of cronsource that knows how the cluster is reached. What is hard about a
Kubernetes client (kubeconfig contexts, client certificates, bearer tokens, in-cluster service
account tokens re-read when the kubelet rotates them, exec credential plugins) comes from
lightkube: `KubeConfig` for the configuration, its `verify_cluster` for the TLS context (CA and
client certificate) and its `user_auth` for the Authorization header. The six calls cronsource
makes on custom objects are plain REST requests, below. The official `kubernetes` client was
126 MB of the image's 393 MB for these six calls (issue 25).

Why not lightkube's own client for the requests:
- its typed watch has no bookmarks (`allowWatchBookmarks`: a quiet label-selected watch would
  keep an old resourceVersion and expire into a re-list) and never ends (it re-opens the watch
  itself; the runtime's watcher decides what to do between watches:
  adapters/runtime/kube/watch.py);
- it runs on httpx2, whose client costs about 1 ms of CPU per request here against 0.3 ms for
  aiohttp (the official client's transport too): a burst of creations went from about 450 to
  about 290 Workflows/s on the 2-core test machine, where the API server shares the CPU
  (docs/operator-guide.md, "Throughput of Workflow creation").

Which cluster, which credentials and which proxy are read by `kubeconfig.py` (kubectl's
habits lightkube lacks: $KUBECONFIG merged, a cluster's proxy-url).

One `AioKube` owns an event loop running in a daemon thread and one aiohttp session (one
connection pool) created on that loop. The dispatcher, the status writer and the watchers
share it: watches are tasks on the loop, and a burst of creations is many coroutines in flight
on the same pool instead of one request at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import ssl
import threading
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import aiohttp
import httpx2
from aiohttp_socks import (
    ProxyConnectionError,
    ProxyConnector,
    ProxyError,
    ProxyTimeoutError,
    ProxyType,
)
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.config.models import User

from cronsource.adapters.infrastructure.kube.kubeconfig import load_config
from cronsource.adapters.infrastructure.kube.port import (
    CM,
    FIELD_MANAGER,
    GROUP,
    VERSION,
    ApiError,
)

EVENTS = "events"

T = TypeVar("T")

#: Seconds one ordinary request may take end to end before it counts as a transient failure.
#: The API server answers a create or a patch in milliseconds; 30 s only catches a hung
#: connection, and the caller's backoff retries it.
REQUEST_TIMEOUT = 30.0
#: Extra seconds a watch may stay silent past its server-side timeout before the client gives
#: up on it (with bookmarks the server speaks at least once a minute on a live watch).
WATCH_GRACE = 15.0
#: Connections in the pool: the dispatcher's in-flight bound (64 at most) plus the two watches
#: and the status writer, with room to spare.
POOL_SIZE = 100
#: Seconds an idle connection of the pool stays open: long enough for the connections opened
#: ahead of a burst (`warm`, a couple of seconds before its instant) to be there at it, and
#: well inside the API server's own idle timeout (90 s), so that it is never the server that
#: closes one under a request.
KEEPALIVE = 30.0

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


#: What becomes ApiError(0): "no answer" of every kind (refused, reset, timed out, TLS, and
#: a socks5 proxy that cannot be reached or does not connect us, which aiohttp-socks raises as
#: its own exceptions; an http proxy's failures are aiohttp's ClientErrors).
_NO_ANSWER = (
    aiohttp.ClientError,
    asyncio.TimeoutError,
    OSError,
    ProxyConnectionError,
    ProxyError,
    ProxyTimeoutError,
)


def _no_answer(exc: BaseException) -> ApiError:
    return ApiError(0, f"{type(exc).__name__}: {exc}")


def _object(status: int, reason: str, data: bytes) -> dict[str, Any]:
    """The JSON object of a successful answer; an ApiError with the status otherwise."""
    if status >= 400:
        raise ApiError(status, reason, data.decode(errors="replace"))
    got = json.loads(data)
    if not isinstance(got, dict):
        raise ApiError(status, "not a JSON object", data[:2000].decode(errors="replace"))
    return got


class Credentials:
    """The Authorization header of lightkube's `user_auth` (bearer token, token file, exec
    plugin, basic), taken from its httpx2 auth flow once and again after a 401: a rotated
    service-account token is re-read, an exec plugin run again."""

    def __init__(self, auth: httpx2.Auth | None, server: str) -> None:
        self._auth = auth
        self._server = server
        self.header: dict[str, str] = {}

    async def refresh(self, *, after_401: bool = False) -> bool:
        """Ask the flow for the header (after a 401: for a new one); whether it changed."""
        if self._auth is None:
            return False
        flow = self._auth.async_auth_flow(httpx2.Request("GET", self._server))
        try:
            request = await flow.__anext__()
            if after_401:
                try:
                    request = await flow.asend(httpx2.Response(401, request=request))
                except StopAsyncIteration:
                    pass
        finally:
            await flow.aclose()
        value = request.headers.get("Authorization")
        before = self.header
        self.header = {"Authorization": value} if value else {}
        return self.header != before


#: Core v1 resources cronsource reads or writes: the calendars' ConfigMaps and Events.
_CORE = (CM, EVENTS)


#: The longest watch event read: an object may be 1.5 MiB in etcd (its request limit), which
#: JSON with its escapes may double; past this the stream is broken, not an object.
MAX_EVENT_BYTES = 16 * 1024 * 1024


async def _lines(content: Any) -> AsyncIterator[bytes]:
    """The newline-separated events of a watch stream, each however long. aiohttp's own line
    iteration stops at 512 KiB (LineTooLong): one CronWorkflow of 600 KB, or its Workflows,
    broke the watch at the same event again and again, and no change of any object in the
    cluster was seen (a suspend ignored for minutes)."""
    buf = bytearray()
    searched = 0
    async for chunk in content.iter_any():
        buf += chunk
        while (i := buf.find(b"\n", searched)) >= 0:
            yield bytes(buf[:i])
            del buf[: i + 1]
            searched = 0
        searched = len(buf)
        if len(buf) > MAX_EVENT_BYTES:
            raise ValueError(f"a watch event longer than {MAX_EVENT_BYTES} bytes")
    if buf.strip():
        yield bytes(buf)


def _path(namespace: str | None, plural: str, name: str | None = None) -> str:
    """The path of a custom resource (or of a core v1 one, `_CORE`), after the server's URL
    (which may carry a path)."""
    parts = ["", "api", "v1"] if plural in _CORE else ["", "apis", GROUP, VERSION]
    if namespace:
        parts += ["namespaces", urllib.parse.quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(urllib.parse.quote(name, safe=""))
    return "/".join(parts)


class AioKube:
    """`KubeApi` on an aiohttp session set up from lightkube's configuration. Build with
    `connect`."""

    def __init__(
        self,
        loop: LoopThread,
        session: aiohttp.ClientSession,
        server: str,
        credentials: Credentials,
        proxy: str | None = None,
    ) -> None:
        self._loop = loop
        self.session = session
        self._server = server.rstrip("/")
        self._credentials = credentials
        self._proxy = proxy

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
        await self.session.close()

    # -- the calls --------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        headers = {"Accept": JSON}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            try:
                async with self.session.request(
                    method,
                    self._server + path,
                    params=params,
                    data=data,
                    headers={**headers, **self._credentials.header},
                    proxy=self._proxy,
                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                ) as resp:
                    raw = await resp.read()
                    status, reason = resp.status, resp.reason or ""
            except _NO_ANSWER as e:
                raise _no_answer(e) from e
            if status == 401 and attempt == 1 and await self._credentials.refresh(after_401=True):
                continue
            break
        return _object(status, reason, raw)

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        return await self._request("GET", _path(namespace, plural, name))

    async def list(self, namespace: str | None, plural: str, label_selector: str) -> dict[str, Any]:
        params = {"labelSelector": label_selector} if label_selector else None
        return await self._request("GET", _path(namespace, plural), params=params)

    async def create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._request(
            "POST", _path(namespace, plural), params={"fieldManager": FIELD_MANAGER}, body=body
        )

    async def patch(
        self, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._request(
            "PATCH",
            _path(namespace, plural, name),
            params={"fieldManager": FIELD_MANAGER},
            body=body,
            content_type=MERGE_PATCH,
        )

    async def delete(self, namespace: str, plural: str, name: str) -> None:
        await self._request("DELETE", _path(namespace, plural, name))

    async def warm(self, connections: int) -> None:
        """`connections` cheap requests at once (`GET /version`, which every authenticated
        client may read): each takes a connection of the pool, opening it if none is idle,
        and leaves it open for the next `KEEPALIVE` seconds."""

        async def one() -> None:
            with contextlib.suppress(ApiError, ValueError):
                await self._request("GET", "/version")

        await asyncio.gather(*(one() for _ in range(connections)))

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """A core v1 Event (adapters/infrastructure/kube/events.py)."""
        return await self.create(namespace, EVENTS, body)

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of a core v1 Event (its count and last timestamp)."""
        return await self.patch(namespace, EVENTS, name, body)

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
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=REQUEST_TIMEOUT, sock_read=timeout_seconds + WATCH_GRACE
        )
        try:
            async with self.session.get(
                self._server + _path(namespace, plural),
                params=params,
                headers={"Accept": JSON, **self._credentials.header},
                proxy=self._proxy,
                timeout=timeout,
            ) as resp:
                if resp.status >= 400:
                    if resp.status == 401:  # a rotated token: the next watch has the new one
                        await self._credentials.refresh(after_401=True)
                    raise ApiError(resp.status, resp.reason or "", await resp.text())
                async for line in _lines(resp.content):
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


def choose_proxy(server: str, proxy_url: str | None) -> str | None:
    """The proxy for every request to `server`: the cluster's proxy-url when the kubeconfig
    sets one (NO_PROXY does not apply to it: client-go's `http.ProxyURL`), else the
    environment's (`env_proxy`)."""
    return proxy_url or env_proxy(server)


#: The port of a socks5 proxy-url that names none (Go's net/http: 1080).
SOCKS_PORT = 1080


def _connector(
    proxy: str | None, ssl_context: ssl.SSLContext | bool
) -> tuple[aiohttp.TCPConnector, str | None]:
    """The session's connection pool, and the proxy each request names. aiohttp speaks to
    http and https proxies itself (`proxy=` per request, a CONNECT tunnel to an https
    server); a socks5 proxy is the connector's (aiohttp-socks), which opens every pooled
    connection through it and hands the server's host name to the proxy to resolve, as Go's
    socks5 dialer does."""
    parts = urllib.parse.urlsplit(proxy or "")
    if parts.scheme != "socks5":
        return (
            aiohttp.TCPConnector(limit=POOL_SIZE, ssl=ssl_context, keepalive_timeout=KEEPALIVE),
            proxy,
        )
    unquote = urllib.parse.unquote
    connector = ProxyConnector(
        host=parts.hostname or "",
        port=parts.port or SOCKS_PORT,
        proxy_type=ProxyType.SOCKS5,
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
        rdns=True,
        limit=POOL_SIZE,
        ssl=ssl_context,
        keepalive_timeout=KEEPALIVE,
    )
    return connector, None


def connect(kubeconfig: str | None = None) -> AioKube:
    """An AioKube from a kubeconfig (see `load_config`). Raises if none can be loaded."""
    found = load_config(kubeconfig)
    config = found.config
    server = config.cluster.server
    user = config.user or User()
    # The CA (file or data, else the system's) and the client certificate, if any.
    ssl_context: ssl.SSLContext | bool = True  # plain http: unused
    if server.startswith("https:"):
        ssl_context = verify_cluster(config.cluster, user, config.abs_file, trust_env=False)
    credentials = Credentials(user_auth(user), server)
    # The environment is read once (env_proxy), not per request (trust_env off).
    proxy = choose_proxy(server, found.proxy_url)
    loop = LoopThread()

    async def make() -> tuple[aiohttp.ClientSession, str | None]:
        await credentials.refresh()  # an exec plugin runs here, once, not per request
        connector, request_proxy = _connector(proxy, ssl_context)
        return aiohttp.ClientSession(connector=connector, trust_env=False), request_proxy

    try:
        session, request_proxy = loop.run(make())
    except BaseException:
        loop.stop()
        raise
    return AioKube(loop, session, server, credentials, request_proxy)
