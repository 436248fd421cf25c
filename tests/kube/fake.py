"""An in-memory Kubernetes API for unit tests of our own logic: the `KubeApi` port
(cronsource.adapters.infrastructure.kube.port) on custom objects, in this process.

It answers as the test kube-apiserver (tests/kube/apiserver.py) does in what cronsource relies
on, and tests/unit/test_kube_fake.py runs the same checks over both (the real one from
tests/integration/test_kube_fake.py):

- objects get a uid, a resourceVersion from one counter of the whole "cluster" and generation 1;
  a create of an existing name is 409 AlreadyExists, a name that is no DNS subdomain 422
  Invalid; get, patch and delete of a missing object 404 NotFound. Any namespace exists, as
  on the test server (it runs without NamespaceLifecycle); with `namespaces=` only those do
  and a create elsewhere is 404, as in a cluster;
- a patch is a JSON merge patch (RFC 7386) of the main resource; a `metadata.resourceVersion`
  in it is a precondition (409 Conflict when stale); any change outside `metadata` bumps the
  generation (Argo's CRDs have no status subresource, so status writes do too); a patch that
  changes nothing changes neither resourceVersion nor generation;
- list: items sorted by namespace and name, the cluster's resourceVersion; label selectors
  `key`, `!key`, `key=value`, `key==value`, `key!=value`, comma-separated;
- watch: every change after the resourceVersion given (all objects as ADDED without one), a
  BOOKMARK with the current resourceVersion, then the end of the watch; an object that stops
  matching the selector is DELETED to that watch, one that starts matching ADDED; a watch from
  a resourceVersion older than the kept history (`expire_history`, as a CRD upgrade or a
  restart renews the watch cache) is 410 Expired.

Errors are the port's `ApiError` with the server's Status body, so `api_reason` works.

Not modelled: CRD schema validation, admission, garbage collection (the test server has none
either), field selectors, set-based selectors, server-side apply, Namespace objects.

Time: with `watch_timeout=0` (the default) a watch ends as soon as it has said what it has,
as if its server-side timeout had passed with nothing more to say: stepped code
(`watch_for`, `sync_once`) runs without waiting. With `watch_timeout=None` a watch waits for
changes for its `timeout_seconds`, for code that runs watches as tasks (`KubeSync.start`);
`settle()` then returns once every open watch has handed over all there is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import itertools
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from cronsource.adapters.infrastructure.kube.port import CM, CWF, GROUP, VERSION, WF, ApiError
from tests.instants import T0

T = TypeVar("T")

KINDS = {CWF: "CronWorkflow", WF: "Workflow", CM: "ConfigMap"}
#: The apiVersion of each kind: ConfigMaps are core v1.
API_VERSIONS = {CM: "v1"}
#: A DNS-1123 subdomain, as the API server checks `metadata.name` of custom objects.
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

Key = tuple[str, str, str]  # plural, namespace, name


def error(status: int, reason: str, message: str, **details: Any) -> ApiError:
    """The ApiError the real client gives for a Status answer of the server."""
    titles = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity"}
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": status,
    }
    return ApiError(status, titles.get(status, reason), json.dumps(body))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality-based label selectors, as the API server reads them."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if " in " in term or " notin " in term or "(" in term:
            raise NotImplementedError(f"set-based selector {term!r}: not in the fake")
        if term.startswith("!"):
            ok = term[1:] not in labels
        elif "!=" in term:
            key, value = term.split("!=", 1)
            ok = labels.get(key) != value
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            ok = labels.get(key) == value
        else:
            ok = term in labels
        if not ok:
            return False
    return True


def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


@dataclass
class Change:
    """One entry of the cluster's history: an object before and after (None: absent)."""

    rv: int
    key: Key
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass
class Failure:
    status: int
    reason: str
    times: int


class FakeKube:
    """`KubeApi` in memory; its coroutines run on an event loop in a thread of its own, as
    the real client's do (cronsource.adapters.infrastructure.kube.client.AioKube)."""

    def __init__(
        self,
        namespaces: tuple[str, ...] | None = None,
        *,
        watch_timeout: float | None = 0,
        now: Callable[[], datetime] = lambda: T0,
    ) -> None:
        self.namespaces = None if namespaces is None else set(namespaces)
        self.watch_timeout = watch_timeout
        self.now = now
        self.calls: list[tuple[str, str]] = []  # (verb, plural): what our code asked, in order
        self.warmed: list[int] = []  # `warm` calls: the connections asked for, in order
        self._objects: dict[Key, dict[str, Any]] = {}
        self._history: list[Change] = []
        self._rv = itertools.count(1000)
        self._head = 999
        self._floor = 0  # a watch from a resourceVersion below this is 410 Expired
        self._failures: dict[str, list[Failure]] = {}
        self._open_watches: dict[int, int] = {}  # watch -> resourceVersion it waits after
        self._watch_ids = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="fake-kube", daemon=True)
        self._thread.start()
        self._changed = self.run(self._condition())

    # -- the loop -----------------------------------------------------------------------------

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    async def _condition(self) -> asyncio.Condition:
        return asyncio.Condition()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("FakeKube.run called on its own loop: await the coroutine instead")
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        if self._loop.is_closed():
            return

        async def cancel_all() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(cancel_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    # -- what a test does to the cluster ------------------------------------------------------

    @property
    def user(self) -> User:
        """The cluster as a user (kubectl, another controller) changes it: the same answers,
        neither counted in `calls` nor failed by `fail`."""
        return User(self)

    def fail(self, verb: str, status: int, *, times: int = 1, reason: str = "") -> None:
        """The next `times` calls of `verb` (get, list, create, patch, delete, watch) fail with
        `status` (0: no answer, as a reset connection)."""
        self._failures.setdefault(verb, []).append(Failure(status, reason, times))

    def expire_history(self) -> None:
        """Forget the history, as a CRD upgrade or a restart renews the watch cache: a watch
        from an older resourceVersion is 410 Expired, open watches end."""
        self.run(self._expire())

    def settle(self, watches: int = 0, timeout: float = 30.0) -> None:
        """Return once at least `watches` watches are open and each waits after the last
        change: all they saw has been handed to their callers. `timeout` guards a hang (a
        watch that never starts), it is no wait for time to pass."""
        self.run(asyncio.wait_for(self._settled(watches), timeout))

    def objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored objects of a kind (copies), by namespace and name."""
        return [
            copy.deepcopy(o)
            for (p, ns, _), o in sorted(self._objects.items())
            if p == plural and (namespace is None or ns == namespace)
        ]

    # -- the port -----------------------------------------------------------------------------

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        await self._call("get", plural)
        return await self._get(namespace, plural, name)

    async def _get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        obj = self._objects.get((plural, namespace, name))
        if obj is None:
            raise self._not_found(plural, name)
        return copy.deepcopy(obj)

    async def list(self, namespace: str | None, plural: str, label_selector: str) -> dict[str, Any]:
        await self._call("list", plural)
        return await self._list(namespace, plural, label_selector)

    async def _list(
        self, namespace: str | None, plural: str, label_selector: str
    ) -> dict[str, Any]:
        items = [
            copy.deepcopy(o)
            for (p, ns, _), o in sorted(self._objects.items())
            if p == plural
            and (not namespace or ns == namespace)
            and selector_matches(label_selector, _labels(o))
        ]
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": f"{KINDS.get(plural, plural)}List",
            "items": items,
            "metadata": {"resourceVersion": str(self._head)},
        }

    async def create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._call("create", plural)
        return await self._create(namespace, plural, body)

    async def _create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name") or ""
        if meta.get("namespace", namespace) != namespace:
            raise error(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on"
                " the request",
            )
        api_version = API_VERSIONS.get(plural, f"{GROUP}/{VERSION}")
        if (obj.get("apiVersion"), obj.get("kind")) != (api_version, KINDS.get(plural)):
            raise error(400, "BadRequest", f"the object is not a {KINDS.get(plural)}")
        if not name or len(name) > 253 or not NAME.fullmatch(name):
            raise error(
                422,
                "Invalid",
                f'{KINDS.get(plural)}.argoproj.io "{name}" is invalid: metadata.name: Invalid'
                " value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric"
                " characters, '-' or '.'",
                name=name,
                group=GROUP,
                kind=KINDS.get(plural),
            )
        if self.namespaces is not None and namespace not in self.namespaces:
            raise error(404, "NotFound", f'namespaces "{namespace}" not found', name=namespace)
        key = (plural, namespace, name)
        if key in self._objects:
            raise error(
                409,
                "AlreadyExists",
                f'{plural}.{GROUP} "{name}" already exists',
                name=name,
                group=GROUP,
                kind=plural,
            )
        meta.update(
            namespace=namespace,
            uid=str(uuid.uuid4()),
            generation=1,
            creationTimestamp=self.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        meta.pop("resourceVersion", None)
        await self._commit(key, obj)
        return copy.deepcopy(obj)

    async def patch(
        self, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        await self._call("patch", plural)
        return await self._patch(namespace, plural, name, body)

    async def _patch(
        self, namespace: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        key = (plural, namespace, name)
        old = self._objects.get(key)
        if old is None:
            raise self._not_found(plural, name)
        patch = copy.deepcopy(body)
        wanted = (patch.get("metadata") or {}).pop("resourceVersion", None)
        if wanted is not None and str(wanted) != old["metadata"]["resourceVersion"]:
            raise error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {plural}.{GROUP} "{name}": the object has'
                " been modified; please apply your changes to the latest version and try again",
                name=name,
                group=GROUP,
                kind=plural,
            )
        new = merge_patch(old, patch)
        server_owned = ("name", "namespace", "uid", "creationTimestamp", "generation")
        new.setdefault("metadata", {}).update({k: old["metadata"][k] for k in server_owned})
        if new == old:  # nothing changed: no new resourceVersion, no event
            return copy.deepcopy(old)
        if {k: v for k, v in new.items() if k != "metadata"} != {
            k: v for k, v in old.items() if k != "metadata"
        }:
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        await self._commit(key, new)
        return copy.deepcopy(new)

    async def delete(self, namespace: str, plural: str, name: str) -> None:
        await self._call("delete", plural)
        await self._delete(namespace, plural, name)

    async def warm(self, connections: int) -> None:
        """No connections to open: the request is recorded (`warmed`), nothing else."""
        self.warmed.append(connections)

    async def _delete(self, namespace: str, plural: str, name: str) -> None:
        key = (plural, namespace, name)
        if key not in self._objects:
            raise self._not_found(plural, name)
        await self._commit(key, None)

    async def watch(
        self,
        namespace: str | None,
        plural: str,
        *,
        label_selector: str,
        resource_version: str | None,
        timeout_seconds: int,
    ) -> AsyncIterator[dict[str, Any]]:
        await self._call("watch", plural)
        if resource_version is not None and int(resource_version) < self._floor:
            raise ApiError(
                410,
                f"Expired: too old resource version: {resource_version} ({self._floor})",
                json.dumps({"kind": "Status", "reason": "Expired", "code": 410}),
            )
        me = next(self._watch_ids)
        floor = self._floor
        loop = asyncio.get_running_loop()
        ends = None if self.watch_timeout is None else loop.time() + self.watch_timeout
        if ends is None:
            ends = loop.time() + timeout_seconds

        def mine(key: Key) -> bool:
            return key[0] == plural and (not namespace or key[1] == namespace)

        try:
            if resource_version is None:
                at = self._head
                for key, obj in sorted(self._objects.items()):
                    if mine(key) and selector_matches(label_selector, _labels(obj)):
                        yield {"type": "ADDED", "object": copy.deepcopy(obj)}
            else:
                at = int(resource_version)
            while True:
                if self._floor != floor:
                    return  # the watch cache was renewed: open watches end
                for change in [c for c in self._history if c.rv > at]:
                    at = change.rv
                    event = self._event(change, label_selector) if mine(change.key) else None
                    if event is not None:
                        yield event
                left = ends - loop.time()
                if left <= 0:
                    break
                async with self._changed:
                    self._open_watches[me] = at
                    self._changed.notify_all()  # settle() may be waiting for this
                    try:
                        await asyncio.wait_for(self._news(at, floor), left)
                    except TimeoutError:
                        pass
                    finally:
                        self._open_watches.pop(me, None)
            yield {
                "type": "BOOKMARK",
                "object": {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": KINDS.get(plural, plural),
                    "metadata": {"resourceVersion": str(self._head)},
                },
            }
        finally:
            self._open_watches.pop(me, None)

    # -- core v1 Events (adapters/infrastructure/kube/events.py) -------------------------------

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Stored by namespace and name (`kube_events`); 409 for a name taken. Failures are
        queued with `fail("create_event", ...)`."""
        await self._call("create_event", "events")
        key = ("events", namespace, body["metadata"]["name"])
        if key in self._objects:
            raise error(409, "AlreadyExists", f'events "{key[2]}" already exists')
        self._objects[key] = copy.deepcopy(body)
        return copy.deepcopy(body)

    async def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._call("patch_event", "events")
        key = ("events", namespace, name)
        if key not in self._objects:
            raise error(404, "NotFound", f'events "{name}" not found', name=name, kind="events")
        self._objects[key] = merge_patch(self._objects[key], body)
        return copy.deepcopy(self._objects[key])

    def kube_events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """The core v1 Events written, by namespace and name."""
        return self.objects("events", namespace)

    # -- inside ---------------------------------------------------------------------------------

    async def _call(self, verb: str, plural: str) -> None:
        self.calls.append((verb, plural))
        await asyncio.sleep(0)  # a round trip: other coroutines run meanwhile
        queued = self._failures.get(verb) or []
        if queued:
            failure = queued[0]
            failure.times -= 1
            if failure.times <= 0:
                queued.pop(0)
            raise ApiError(failure.status, failure.reason or "injected by FakeKube.fail")

    def _not_found(self, plural: str, name: str) -> ApiError:
        return error(
            404, "NotFound", f'{plural}.{GROUP} "{name}" not found', name=name, kind=plural
        )

    async def _commit(self, key: Key, new: dict[str, Any] | None) -> None:
        """Store `new` under `key` (None: delete) at the next resourceVersion and tell the
        watches. A DELETED event carries the object at the deletion's resourceVersion."""
        rv = next(self._rv)
        before = self._objects.get(key)
        if new is None:
            assert before is not None
            gone = copy.deepcopy(before)
            gone["metadata"]["resourceVersion"] = str(rv)
            del self._objects[key]
            self._history.append(Change(rv, key, gone, None))
        else:
            new["metadata"]["resourceVersion"] = str(rv)
            self._objects[key] = copy.deepcopy(new)
            self._history.append(Change(rv, key, before, copy.deepcopy(new)))
        async with self._changed:
            self._head = rv
            self._changed.notify_all()

    def _event(self, change: Change, selector: str) -> dict[str, Any] | None:
        was = change.before is not None and selector_matches(selector, _labels(change.before))
        now = change.after is not None and selector_matches(selector, _labels(change.after))
        if change.after is None:
            return {"type": "DELETED", "object": copy.deepcopy(change.before)} if was else None
        if was and now:
            kind = "MODIFIED"
        elif now:
            kind = "ADDED"
        elif was:
            kind = "DELETED"  # it stopped matching this watch's selector
        else:
            return None
        return {"type": kind, "object": copy.deepcopy(change.after)}

    async def _news(self, at: int, floor: int) -> None:
        """Wait (the condition held) for a change after `at` or a renewed history."""
        await self._changed.wait_for(lambda: self._head > at or self._floor != floor)

    async def _expire(self) -> None:
        # The renewal is itself a change of the cluster (the CRD's): the new history starts
        # after it, so every resourceVersion handed out before is too old.
        async with self._changed:
            self._history.clear()
            self._head = self._floor = next(self._rv)
            self._changed.notify_all()

    async def _settled(self, watches: int) -> None:
        async with self._changed:
            await self._changed.wait_for(
                lambda: (
                    len(self._open_watches) >= watches
                    and all(at >= self._head for at in self._open_watches.values())
                )
            )


class User:
    """Synchronous calls on a FakeKube from the test's thread, outside our code's traffic."""

    def __init__(self, fake: FakeKube) -> None:
        self.fake = fake

    def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        return self.fake.run(self.fake._get(namespace, plural, name))

    def list(self, namespace: str | None, plural: str, label_selector: str = "") -> list[Any]:
        return list(self.fake.run(self.fake._list(namespace, plural, label_selector))["items"])

    def create(self, namespace: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.fake.run(self.fake._create(namespace, plural, body))

    def patch(self, namespace: str, plural: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.fake.run(self.fake._patch(namespace, plural, name, body))

    def delete(self, namespace: str, plural: str, name: str) -> None:
        self.fake.run(self.fake._delete(namespace, plural, name))
