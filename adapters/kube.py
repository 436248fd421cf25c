"""The Kubernetes adapter: Workflows created in a cluster, status written back to CronWorkflows,
CronWorkflows and child Workflows watched into domain commands.

First cut on the official *synchronous* client (`kubernetes.client`); every class takes an
`ApiClient`, so the domain and projections never import the client. The dispatcher target runs
inside the projection thread, the watchers are steppable (`sync_once`, `watch_for`) so a loop or
a test drives them.

- `KubeTarget`: the WorkflowTarget of projections/dispatch.py. Create is idempotent on the
  deterministic name: 409 AlreadyExists is success only with our owner uid and scheduled time.
- `StatusWriter`: merge patch of the CronWorkflow's main resource (Argo's CRD has no /status
  subresource) with a resourceVersion precondition and a monotonic sequence annotation.
- `CronWorkflowWatcher`: list + watch with bookmarks, resume from the last resourceVersion,
  re-list on 410 and reconcile deletions made while blind.
- `WorkflowWatcher`: children -> RunCompleted / RunVanished.
"""

from __future__ import annotations

import functools
import json
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast
from uuid import UUID

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from domain.cronworkflow import CronWorkflow
from domain.manifest import ManifestError, parse_manifest
from domain.service import CronService, NotFound
from projections.dispatch import ANNOTATION_SCHEDULED, LABEL_CRON, PermanentSubmissionError
from projections.readmodel import StatusRow, status_row

log = logging.getLogger(__name__)

GROUP, VERSION = "argoproj.io", "v1alpha1"
CWF, WF = "cronworkflows", "workflows"
LABEL_INSTANCE = "workflows.argoproj.io/controller-instanceid"
ANNOTATION_SEQUENCE = "cronsource.io/status-sequence"
FINISHED = ("Succeeded", "Failed", "Error")
PERMANENT = (400, 403, 422)
QUEUE_SIZE = 10_000  # watch items waiting for the loop thread

T = TypeVar("T")


def utcnow() -> datetime:
    return datetime.now(UTC)


def load_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient from a kubeconfig (path, $KUBECONFIG, ~/.kube/config) or in-cluster."""
    from kubernetes import config

    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        return config.new_client_from_config()


def _reason(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("reason", ""))
    except (ValueError, AttributeError):
        return ""


def is_transient(exc: BaseException) -> bool:
    """5xx, 429, timeouts and connection errors: worth another try."""
    if isinstance(exc, ApiException):
        return exc.status is None or exc.status == 0 or exc.status == 429 or exc.status >= 500
    try:
        import urllib3.exceptions as u3

        if isinstance(exc, (u3.HTTPError,)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, (ConnectionError, TimeoutError, OSError))


@dataclass
class Backoff:
    """Bounded exponential backoff with full jitter for transient API errors."""

    attempts: int = 5
    base: float = 0.1
    cap: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def call(self, op: Callable[[], T]) -> T:
        for attempt in range(self.attempts):
            try:
                return op()
            except Exception as e:
                if not is_transient(e) or attempt == self.attempts - 1:
                    raise
                delay = self.rng.uniform(0, min(self.cap, self.base * 2**attempt))
                log.warning("transient API error (%s), retrying in %.2fs", e, delay)
                self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover


def _get(
    api: client.CustomObjectsApi, backoff: Backoff, namespace: str, plural: str, name: str
) -> dict[str, Any]:
    """One object, as a dict, with transient errors retried."""
    obj = backoff.call(
        lambda: api.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
    )
    return cast(dict[str, Any], obj)


def _owner_uids(meta: dict[str, Any]) -> set[str]:
    return {str(o.get("uid")) for o in meta.get("ownerReferences") or [] if o.get("uid")}


# ---------------------------------------------------------------------------- dispatcher target


class KubeTarget:
    """WorkflowTarget on a cluster (projections/dispatch.py)."""

    def __init__(self, api_client: client.ApiClient, backoff: Backoff | None = None) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.backoff = backoff or Backoff()
        self._owner_uid: dict[str, str] = {}  # cron_id -> CronWorkflow uid, when looked up

    def _owner(self, namespace: str, name: str, cron_id: str) -> str:
        """The CronWorkflow's uid from the API (for aggregates applied without one)."""
        if cron_id not in self._owner_uid:
            try:
                obj = _get(self.api, self.backoff, namespace, CWF, name)
            except ApiException as e:
                if e.status == 404:
                    raise PermanentSubmissionError(
                        f"cronworkflow {namespace}/{name} not found in the cluster"
                    ) from e
                raise
            self._owner_uid[cron_id] = str(obj["metadata"]["uid"])
        return self._owner_uid[cron_id]

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime) -> None:
        meta = workflow["metadata"]
        ns, name = meta["namespace"], meta["name"]
        refs = meta.get("ownerReferences") or []
        for ref in refs:
            # build_workflow falls back to the aggregate id when the aggregate has no uid.
            if ref.get("kind") == "CronWorkflow" and ref.get("uid") == cron_id:
                ref["uid"] = self._owner(ns, ref["name"], cron_id)
        for _ in range(3):
            try:
                self.backoff.call(
                    lambda: self.api.create_namespaced_custom_object(
                        GROUP, VERSION, ns, WF, workflow
                    )
                )
                return
            except ApiException as e:
                if e.status in PERMANENT:
                    raise PermanentSubmissionError(
                        f"workflow {ns}/{name} refused ({e.status} {_reason(e) or e.reason})"
                    ) from e
                if e.status != 409:
                    raise
            # 409 AlreadyExists: done only if it is the same Workflow (our owner, our tick).
            try:
                existing = _get(self.api, self.backoff, ns, WF, name)
            except ApiException as e:
                if e.status == 404:
                    continue  # deleted in between: create again
                raise
            emeta = existing.get("metadata") or {}
            same_tick = (emeta.get("annotations") or {}).get(ANNOTATION_SCHEDULED) == (
                meta.get("annotations") or {}
            ).get(ANNOTATION_SCHEDULED)
            if _owner_uids(emeta) & _owner_uids(meta) and same_tick:
                return
            raise PermanentSubmissionError(f"workflow {ns}/{name} exists and is not ours")
        raise PermanentSubmissionError(f"workflow {ns}/{name}: create keeps racing a delete")

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        """Replace: `spec.shutdown: Terminate`; gone or already finished is fine."""
        try:
            obj = _get(self.api, self.backoff, namespace, WF, name)
            if (obj.get("status") or {}).get("phase") in FINISHED:
                return
            self.backoff.call(
                lambda: self.api.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, WF, name, {"spec": {"shutdown": "Terminate"}}
                )
            )
        except ApiException as e:
            if e.status != 404:
                raise

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        try:
            self.backoff.call(
                lambda: self.api.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, WF, name
                )
            )
        except ApiException as e:
            if e.status != 404:
                raise


# ---------------------------------------------------------------------------- status writer


class StatusWriter:
    """Writes the projected CronWorkflowStatus to the CronWorkflow's main resource.

    At least once and idempotent: the object carries the sequence (aggregate version) of the
    status it shows; a write whose sequence is not newer is dropped. Each write is a merge patch
    with `metadata.resourceVersion` as precondition, so a concurrent change (a user's edit of
    spec or labels, another writer) makes it 409; it then re-reads, re-checks the sequence and
    tries again. It sends only `status` and its own annotation, never spec or labels.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        backoff: Backoff | None = None,
        max_conflicts: int = 10,
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.backoff = backoff or Backoff()
        self.max_conflicts = max_conflicts
        self.conflicts = 0  # 409s absorbed, for tests and metrics

    def write_aggregate(self, agg: CronWorkflow) -> bool:
        return self.write(status_row(agg))

    def write_many(self, rows: Iterable[StatusRow]) -> int:
        return sum(1 for row in rows if self.write(row))

    def write(self, row: StatusRow) -> bool:
        """True if the status was written; False if dropped (stale, deleted, other object)."""
        if row.deleted:
            return False
        uid = row.metadata.get("uid")
        for _ in range(self.max_conflicts):
            try:
                obj = _get(self.api, self.backoff, row.namespace, CWF, row.name)
            except ApiException as e:
                if e.status == 404:
                    return False
                raise
            meta = obj["metadata"]
            if uid and meta.get("uid") != uid:
                return False  # another incarnation of the name
            shown = (meta.get("annotations") or {}).get(ANNOTATION_SEQUENCE, "")
            if shown.isdigit() and int(shown) >= row.version:
                return False
            body: dict[str, Any] = {
                "metadata": {
                    "resourceVersion": meta["resourceVersion"],
                    "annotations": {ANNOTATION_SEQUENCE: str(row.version)},
                },
                "status": row.status,
            }
            try:
                self.backoff.call(
                    functools.partial(
                        self.api.patch_namespaced_custom_object,
                        GROUP,
                        VERSION,
                        row.namespace,
                        CWF,
                        row.name,
                        body,
                    )
                )
                return True
            except ApiException as e:
                if e.status == 404:
                    return False
                if e.status != 409:
                    raise
                self.conflicts += 1
        raise RuntimeError(f"status of {row.namespace}/{row.name}: too many conflicts")


# ---------------------------------------------------------------------------- watchers


class _ListWatch:
    """List + watch of one resource with bookmarks, resuming from the last resourceVersion and
    re-listing on 410 Gone. Subclasses handle objects."""

    plural = ""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str | None,
        label_selector: str,
        clock: Callable[[], datetime],
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.label_selector = label_selector
        self.clock = clock
        self.resource_version: str | None = None
        self.relists = 0
        self.queue: queue.Queue[tuple[str, Any]] | None = None  # set by `start`
        self._stop: threading.Event | None = None

    def _list_fn(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        if self.namespace:
            return self.api.list_namespaced_custom_object, (
                GROUP,
                VERSION,
                self.namespace,
                self.plural,
            )
        return self.api.list_cluster_custom_object, (GROUP, VERSION, self.plural)

    def sync_once(self, at: datetime | None = None) -> int:
        """Full list: every object handled, what vanished reconciled; returns the count."""
        before = self._before_list()
        fn, args = self._list_fn()
        listed = fn(*args, label_selector=self.label_selector)
        items = listed.get("items") or []
        self._deliver("LIST", (items, before), at)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.relists += 1
        return len(items)

    def _deliver(self, kind: str, payload: Any, at: datetime | None) -> None:
        """Handle now, or (threaded, see `start`) queue for `drain` on the caller's thread."""
        if self.queue is not None:
            # Bounded: a replica that is not the projector (nobody drains) stalls its watch
            # here instead of growing; it resumes (or re-lists on 410) once drained.
            while True:
                try:
                    self.queue.put((kind, payload), timeout=0.5)
                    return
                except queue.Full:
                    if self._stop is not None and self._stop.is_set():
                        return
        else:
            self._process(kind, payload, at or self.clock())

    def _process(self, kind: str, payload: Any, at: datetime) -> None:
        if kind == "LIST":
            items, before = payload
            self._reconcile(items, before, at)
            for obj in items:
                self._handle("ADDED", obj, at)
        else:
            self._handle(kind, payload, at)

    def drain(
        self, at: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        """Process what the watch thread queued; returns how many items."""
        if self.queue is None:
            return 0
        deadline = None if budget is None else time.monotonic() + budget
        n = 0
        while not (stop is not None and stop()):
            if deadline is not None and time.monotonic() >= deadline:
                break
            try:
                kind, payload = self.queue.get_nowait()
            except queue.Empty:
                break
            self._process(kind, payload, at)
            n += 1
        return n

    def start(self, stop: threading.Event, watch_seconds: int = 30) -> threading.Thread:
        """Watch in a daemon thread that only talks HTTP and queues what it sees; domain
        commands run in `drain`, on the thread that owns the service."""
        self.queue = queue.Queue(maxsize=QUEUE_SIZE)
        self._stop = stop
        backoff = Backoff()

        def loop() -> None:
            failures = 0
            while not stop.is_set():
                try:
                    self.watch_for(watch_seconds)
                    failures = 0
                except Exception:
                    failures += 1
                    log.exception("%s watch failed (%d in a row)", self.plural, failures)
                    stop.wait(backoff.rng.uniform(0, min(30.0, 0.5 * 2 ** min(failures, 6))))

        t = threading.Thread(target=loop, name=f"watch-{self.plural}", daemon=True)
        t.start()
        return t

    def watch_for(self, seconds: int, at: datetime | None = None) -> int:
        """Watch from the last resourceVersion for `seconds` (server side timeout); lists first
        if never listed, re-lists on 410. Returns how many changes were handled."""
        if self.resource_version is None:
            self.sync_once(at)
        fn, args = self._list_fn()
        handled = 0
        w = watch.Watch()
        try:
            for event in w.stream(
                fn,
                *args,
                label_selector=self.label_selector,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=seconds,
            ):
                obj = event["object"]
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if event["type"] != "BOOKMARK":
                    self._deliver(event["type"], obj, at)
                    handled += 1
                if rv:
                    self.resource_version = rv
        except ApiException as e:
            if e.status != 410:
                raise
            log.info("%s watch expired (410): re-listing", self.plural)
            self.sync_once(at)
        finally:
            w.stop()
        return handled

    def _before_list(self) -> Any:
        """What a subclass must know about the moment just before a list (see _reconcile)."""
        return None

    def _handle(self, kind: str, obj: dict[str, Any], at: datetime) -> None:
        raise NotImplementedError

    def _reconcile(self, items: list[dict[str, Any]], before: Any, at: datetime) -> None:
        raise NotImplementedError


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "default", meta["name"]


def manifest_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The CronWorkflow as a manifest: no status, only the metadata the domain reads, and
    without our own status annotation (which changes on every status write)."""
    meta = obj.get("metadata") or {}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_SEQUENCE
    }
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace") or "default",
            "uid": meta.get("uid"),
            "generation": meta.get("generation"),
            "labels": dict(meta.get("labels") or {}),
            "annotations": annotations,
        },
        "spec": obj.get("spec"),
    }


class CronWorkflowWatcher(_ListWatch):
    """CronWorkflows -> apply / reject_spec / delete. Selects by Argo's instance-id label:
    with `instance_id` the objects labelled with it, without it the objects with no label."""

    plural = CWF

    def __init__(
        self,
        api_client: client.ApiClient,
        service: CronService,
        namespace: str | None = None,
        instance_id: str | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        selector = f"{LABEL_INSTANCE}={instance_id}" if instance_id else f"!{LABEL_INSTANCE}"
        super().__init__(api_client, namespace, selector, clock)
        self.service = service
        self.instance_id = instance_id
        self.known: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid
        self.rejected: dict[tuple[str, str], str] = {}  # invalid objects never admitted

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether an object with these labels is ours (the label selector, in Python)."""
        if self.instance_id:
            return labels.get(LABEL_INSTANCE) == self.instance_id
        return LABEL_INSTANCE not in labels

    def seed(self, statuses: Iterable[dict[str, Any]]) -> int:
        """Remember the live CronWorkflows the store knows from the cluster (rows of
        `SqlReadModel.statuses()`), so that the first list after a restart also reconciles
        deletions made while no watcher ran. Rows without a uid (applied by the CLI) and rows
        of the other instance are left alone."""
        n = 0
        for row in statuses:
            meta = row.get("metadata") or {}
            if (
                row.get("deleted")
                or not meta.get("uid")
                or not self.selects(meta.get("labels") or {})
            ):
                continue
            if self.namespace and row["namespace"] != self.namespace:
                continue
            self.known[(row["namespace"], row["name"])] = str(meta["uid"])
            n += 1
        return n

    def _reconcile(self, items: list[dict[str, Any]], before: Any, at: datetime) -> None:
        present = {_key(o): str(o["metadata"].get("uid") or "") for o in items}
        for key, uid in list(self.known.items()):
            if present.get(key) != uid:  # gone, or replaced by a new object of that name
                self._delete(key, uid, at)

    def _delete(self, key: tuple[str, str], uid: str, at: datetime) -> None:
        self.known.pop(key, None)
        self.rejected.pop(key, None)
        try:
            agg = self.service.find(key[0], key[1], uid)
        except NotFound:
            return
        self.service.delete(agg.id, at)

    def _handle(self, kind: str, obj: dict[str, Any], at: datetime) -> None:
        key = _key(obj)
        uid = str(obj["metadata"].get("uid") or "")
        if kind == "DELETED":
            self._delete(key, uid, at)
            return
        if self.known.get(key, uid) != uid:
            self._delete(key, self.known[key], at)
        self.known[key] = uid
        try:
            manifest = parse_manifest(manifest_of(obj), f"{key[0]}/{key[1]}")
        except ManifestError as e:
            try:
                agg = self.service.find(key[0], key[1], uid)
            except NotFound:
                self.rejected[key] = str(e)
                log.warning("cronworkflow %s/%s not admitted: %s", *key, e)
                return
            generation = int(obj["metadata"].get("generation") or agg.generation + 1)
            self.service.reject_spec(agg.id, generation, str(e), at)
            return
        self.rejected.pop(key, None)
        self.service.apply(manifest, at)


class DispatchProgress(Protocol):
    """What the Workflow watcher must know of the store to tell a vanished run from one whose
    Workflow is not created yet: how far the dispatcher got, and where each run was fired."""

    def dispatched(self) -> int:
        """Log position up to which every fire's Workflow has been created (or refused)."""
        ...

    def fired_position(self, namespace: str, workflow: str) -> int | None: ...

    def active_runs(self) -> list[tuple[str, str, str]]:
        """(cron id, namespace, workflow) of the runs the store counts as active."""
        ...


@dataclass
class ViewProgress:
    """DispatchProgress from the read model (thread-safe: the watch thread asks it)."""

    view: Any  # adapters.sqlview.SqlReadModel
    application_name: str

    def dispatched(self) -> int:
        return self.view.max_tracking_id(self.application_name, "dispatch") or 0

    def fired_position(self, namespace: str, workflow: str) -> int | None:
        return cast(int | None, self.view.fired_position(namespace, workflow))

    def active_runs(self) -> list[tuple[str, str, str]]:
        return cast(list[tuple[str, str, str]], self.view.active_runs())


class WorkflowWatcher(_ListWatch):
    """Child Workflows (label workflows.argoproj.io/cron-workflow) -> run_completed when they
    end Succeeded/Failed/Error, run_vanished when deleted before they ended.

    With `progress`, every (re)list also reconciles the store against the cluster: a run the
    store counts as active whose Workflow is not in the list was deleted while nobody watched
    (the watcher was down, or its watch expired), so it becomes RunVanished. Without that, a
    Forbid CronWorkflow would wait forever on a child that no longer exists."""

    plural = WF

    def __init__(
        self,
        api_client: client.ApiClient,
        service: CronService,
        namespace: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        progress: DispatchProgress | None = None,
    ) -> None:
        super().__init__(api_client, namespace, LABEL_CRON, clock)
        self.service = service
        self.progress = progress
        self.seen: dict[tuple[str, str], dict[str, Any]] = {}  # unfinished children seen

    def _cron(self, obj: dict[str, Any]) -> CronWorkflow | None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        cron = (meta.get("labels") or {}).get(LABEL_CRON)
        if not cron:
            return None
        for uid in [*_owner_uids(meta), ""]:
            try:
                return self.service.find(ns, cron, uid)
            except NotFound:
                continue
        return None

    def _handle(self, kind: str, obj: dict[str, Any], at: datetime) -> None:
        key = _key(obj)
        phase = (obj.get("status") or {}).get("phase")
        if phase in FINISHED:
            self.seen.pop(key, None)
            agg = self._cron(obj)
            if agg is None or key[1] not in agg.active:
                return
            finished = _parse_time((obj.get("status") or {}).get("finishedAt")) or at
            self.service.run_completed(agg.id, key[1], phase, finished, at)
        elif kind == "DELETED":
            self.seen.pop(key, None)
            self._vanished(obj, at)
        else:
            self.seen[key] = obj

    def _vanished(self, obj: dict[str, Any], at: datetime) -> None:
        agg = self._cron(obj)
        name = obj["metadata"]["name"]
        if agg is not None and name in agg.active:
            self.service.run_vanished(agg.id, name, at)

    def _before_list(self) -> int | None:
        # Read before the list is requested: every fire at or below this position had its
        # Workflow created before the list began, so the list must show it if it still
        # exists. A fire above it may be created after the list was taken (the dispatcher
        # runs meanwhile): its absence from the list proves nothing.
        return None if self.progress is None else self.progress.dispatched()

    def _reconcile(self, items: list[dict[str, Any]], before: Any, at: datetime) -> None:
        present = {_key(o) for o in items}
        for key, obj in list(self.seen.items()):
            if key not in present:  # deleted while we were blind, before it ended
                self.seen.pop(key)
                self._vanished(obj, at)
        if self.progress is None or before is None:
            return
        for cron_id, ns, name in self.progress.active_runs():
            if (self.namespace and ns != self.namespace) or (ns, name) in present:
                continue
            fired = self.progress.fired_position(ns, name)
            if fired is None or fired > before:
                continue  # not dispatched when the list began
            try:
                agg = self.service.load(UUID(cron_id))
            except NotFound:
                continue
            if name in agg.active:  # the view may lag the store: ask the aggregate
                log.info("workflow %s/%s is gone from the cluster: run vanished", ns, name)
                self.service.run_vanished(agg.id, name, at)


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


# ---------------------------------------------------------------------------- composition


class KubeSync:
    """Everything the cluster side needs beside the dispatcher, driven from the scheduler
    loop: `start()` begins both watches in threads, `poll()` (the RunWatcher interface of
    adapters/runtime.py) applies what they saw and writes changed statuses back."""

    def __init__(
        self,
        engine: Any,
        api_client: client.ApiClient,
        namespace: str | None = None,
        instance_id: str | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.engine = engine
        self.namespace = namespace
        self.crons = CronWorkflowWatcher(
            api_client, engine.service, namespace, instance_id, clock=clock
        )
        self.runs = WorkflowWatcher(
            api_client,
            engine.service,
            namespace,
            clock=clock,
            progress=ViewProgress(engine.view, engine.service.name),
        )
        self.status = StatusWriter(api_client)
        self._written: dict[str, int] = {}
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self, watch_seconds: int = 30) -> None:
        self.crons.seed(self.engine.view.statuses(self.namespace))
        self.threads = [
            self.crons.start(self._stop, watch_seconds),
            self.runs.start(self._stop, watch_seconds),
        ]

    def stop(self) -> None:
        self._stop.set()

    def write_statuses(self) -> int:
        """Write the status of every CronWorkflow whose view row is newer than what this
        process last wrote (the writer itself drops what the object already shows)."""
        written = 0
        for row in self.engine.view.statuses(self.namespace):
            if self._written.get(row["id"], -1) >= row["version"]:
                continue
            status = StatusRow(
                cron_id=row["id"],
                namespace=row["namespace"],
                name=row["name"],
                deleted=row["deleted"],
                next_due=row["nextDue"],
                status=row["status"],
                spec=row["spec"],
                metadata=row["metadata"],
                version=row["version"],
            )
            written += self.status.write(status)
            self._written[row["id"]] = row["version"]
        return written

    def poll(
        self, now: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        n = self.crons.drain(now, budget, stop) + self.runs.drain(now, budget, stop)
        if n:
            self.engine.catch_up(now, budget=budget, stop=stop)
        return n + self.write_statuses()
