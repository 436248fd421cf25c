"""The list + watch of one resource (`_ListWatch`) and the CronWorkflows' watch into domain commands

`_ListWatch` is list + watch of one resource on the client's loop: bookmarks, resume from the
last resourceVersion, a full re-list on 410 Gone that reconciles what changed while blind. What
it sees is delivered as items; the domain commands run on the caller's thread, never on the
loop (the service and its store are synchronous and not shared with the loop):

- stepped (tests, `sync_once`/`watch_for`): the call lists or watches, then handles the items;
- running (`start`): a task on the loop watches for as long as the stop event is clear and
  puts items into a bounded queue, which the scheduler loop's turn `drain`s.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.kube.port import CM, CWF, WF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.adapters.infrastructure.kube.status import ANNOTATION_SEQUENCE, ANNOTATION_STREAM
from cronsource.domain.adoption import ArgoStatus, read_argo_status, with_running_children
from cronsource.domain.calendars import CALENDAR_LABEL, CalendarError, calendar_spec
from cronsource.domain.manifest import ManifestError, parse_manifest
from cronsource.domain.service import CronService, NotFound
from cronsource.projections.dispatch import LABEL_CRON
from cronsource.projections.readmodel import StatusRow

log = logging.getLogger("cronsource.adapters.infrastructure.kube")

LABEL_INSTANCE = "workflows.argoproj.io/controller-instanceid"
#: Watch items waiting for the scheduler loop. Bounded: a replica that is not the projector
#: (nobody drains) stalls its watch instead of growing; it resumes (or re-lists on 410) once
#: drained.
QUEUE_SIZE = 10_000
#: What a watch's failure is when the API server answered an error, or did not answer (the
#: client makes that ApiError(0)), or sent what is not a watch event: logged in one line.
TRANSIENT = (ApiError, ValueError)
#: Failures in a row after which the next watch is a list: see `_run`.
RELIST_AFTER = 3

Deliver = Callable[[str, Any], Any]
#: How often a watch task backing off looks at the stop flag.
WAIT_SLICE = 0.2


class _ListWatch:
    """List + watch of one resource; subclasses handle objects (`_handle`, `_reconcile`)."""

    plural = ""

    def __init__(
        self,
        kube: KubeApi,
        namespace: str | None,
        label_selector: str,
        clock: Clock,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.label_selector = label_selector
        self.clock = clock
        self.resource_version: str | None = None
        self.relists = 0
        self.queue: queue.Queue[tuple[str, Any]] | None = None  # set by `start`
        self._stop: threading.Event | None = None

    # -- stepped: list or watch now, handle on this thread ------------------------------------

    def sync_once(self, at: datetime | None = None) -> int:
        """Full list: every object handled, what vanished reconciled; returns the count."""
        items: list[tuple[str, Any]] = []
        n = self.kube.run(self._list(lambda k, p: items.append((k, p))))
        self._process_all(items, at)
        return n

    def watch_for(self, seconds: int, at: datetime | None = None) -> int:
        """Watch from the last resourceVersion for `seconds` (server side timeout); lists first
        if never listed, re-lists on 410. Returns how many changes were handled."""
        items: list[tuple[str, Any]] = []
        n = self.kube.run(self._watch(seconds, lambda k, p: items.append((k, p))))
        self._process_all(items, at)
        return n

    def _process_all(self, items: list[tuple[str, Any]], at: datetime | None) -> None:
        now = at or self.clock.now()
        for kind, payload in items:
            self._process(kind, payload, now)

    # -- running: a task on the loop feeds the queue, the scheduler loop drains it --------------

    def start(self, stop: threading.Event, watch_seconds: int = 30) -> Any:
        """Watch on the client's loop until `stop` is set; returns the task's future."""
        self.queue = queue.Queue(maxsize=QUEUE_SIZE)
        self._stop = stop
        return self.kube.submit(self._run(stop, watch_seconds))

    async def _run(self, stop: threading.Event, watch_seconds: int) -> None:
        rng = random.Random()
        failures = 0
        while not stop.is_set():
            try:
                await self._watch(watch_seconds, self._enqueue)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if isinstance(e, TRANSIENT):
                    # The API server restarting, refusing, timing out, or an event it sent
                    # that is none: one line each, not a traceback (one restart logged 20).
                    log.warning(
                        "%s watch failed (%d in a row): %s: %s",
                        self.plural,
                        failures,
                        type(e).__name__,
                        " ".join(str(e).split())[:300],
                    )
                else:
                    log.exception("%s watch failed (%d in a row)", self.plural, failures)
                if failures >= RELIST_AFTER:
                    # Watched again from the same resourceVersion, a stream that breaks at one
                    # event breaks there for ever; a list reads past it.
                    self.resource_version = None
                await _wait(stop, rng.uniform(0, min(30.0, 0.5 * 2 ** min(failures, 6))))

    async def _enqueue(self, kind: str, payload: Any) -> None:
        assert self.queue is not None
        while True:
            try:
                self.queue.put_nowait((kind, payload))
                return
            except queue.Full:
                if self._stop is not None and self._stop.is_set():
                    return
                await asyncio.sleep(0.5)

    def drain(
        self, at: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        """Process what the watch task queued; returns how many items."""
        if self.queue is None:
            return 0
        clock = self.clock
        deadline = None if budget is None else clock.monotonic() + budget
        n = 0
        while not (stop is not None and stop()):
            if deadline is not None and clock.monotonic() >= deadline:
                break
            try:
                kind, payload = self.queue.get_nowait()
            except queue.Empty:
                break
            self._process(kind, payload, at)
            n += 1
        return n

    # -- on the loop ---------------------------------------------------------------------------

    async def _list(self, deliver: Deliver) -> int:
        before = await asyncio.to_thread(self._before_list)
        listed = await self.kube.list(self.namespace, self.plural, self.label_selector)
        items = listed.get("items") or []
        await _call(deliver, "LIST", (items, before))
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.relists += 1
        return len(items)

    async def _watch(self, seconds: int, deliver: Deliver) -> int:
        if self.resource_version is None:
            await self._list(deliver)
        handled = 0
        try:
            async for event in self.kube.watch(
                self.namespace,
                self.plural,
                label_selector=self.label_selector,
                resource_version=self.resource_version,
                timeout_seconds=seconds,
            ):
                obj = event["object"]
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if event["type"] != "BOOKMARK":
                    await _call(deliver, event["type"], obj)
                    handled += 1
                if rv:
                    self.resource_version = rv
        except ApiError as e:
            if e.status != 410:
                raise
            log.info("%s watch expired (410): re-listing", self.plural)
            await self._list(deliver)
        return handled

    # -- on the caller's thread ----------------------------------------------------------------

    def _process(self, kind: str, payload: Any, at: datetime) -> None:
        if kind == "LIST":
            items, before = payload
            self._reconcile(items, before, at)
            for obj in items:
                self._handle("ADDED", obj, at)
        else:
            self._handle(kind, payload, at)

    def _before_list(self) -> Any:
        """What a subclass must know about the moment just before a list (see _reconcile).
        Runs in a worker thread, not on the loop: it may read the store."""
        return None

    def _handle(self, kind: str, obj: dict[str, Any], at: datetime) -> None:
        raise NotImplementedError

    def _reconcile(self, items: list[dict[str, Any]], before: Any, at: datetime) -> None:
        raise NotImplementedError


async def _call(deliver: Deliver, kind: str, payload: Any) -> None:
    result = deliver(kind, payload)
    if asyncio.iscoroutine(result):
        await result


async def _wait(stop: threading.Event, seconds: float) -> None:
    """Sleep on the loop, waking early once `stop` is set: slices of at most WAIT_SLICE
    seconds, counted rather than timed, so no clock is read."""
    left = seconds
    while left > 0 and not stop.is_set():
        step = min(WAIT_SLICE, left)
        await asyncio.sleep(step)
        left -= step


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "default", meta["name"]


def manifest_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The CronWorkflow as a manifest: no status, only the metadata the domain reads, and
    without our own status annotations (which change on every status write)."""
    meta = obj.get("metadata") or {}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k not in (ANNOTATION_SEQUENCE, ANNOTATION_STREAM)
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


#: What the CronWorkflow watch asks of the run watch once it adopted runs another controller
#: started: (stream id, namespace, Workflow names, now).
RunsAdopted = Callable[[UUID, str, list[str], datetime], None]


class CronWorkflowWatcher(_ListWatch):
    """CronWorkflows -> apply / reject_spec / delete. Selects by Argo's instance-id label:
    with `instance_id` the objects labelled with it, without it the objects with no label.

    The first time it takes an object (the store has no live stream for it), it adopts the
    status the object carries (domain/adoption.py): Argo's counts, active runs, last tick and
    conditions, in the save that creates the stream. Active runs are also the object's child
    Workflows still running that the status does not list, as Argo's controller reads them.
    Fields it cannot read are named in a warning and in the event, and the rest is taken.
    The adopted active runs are handed to `on_runs_adopted` (the run watch's `check`): one may
    have ended before this watch took the object, when the run watch still had nobody to
    tell."""

    plural = CWF

    def __init__(
        self,
        kube: KubeApi,
        service: CronService,
        namespace: str | None = None,
        instance_id: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        seen: SeenMetadata | None = None,
        on_runs_adopted: RunsAdopted | None = None,
    ) -> None:
        selector = f"{LABEL_INSTANCE}={instance_id}" if instance_id else f"!{LABEL_INSTANCE}"
        super().__init__(kube, namespace, selector, clock)
        self.service = service
        self.instance_id = instance_id
        self.seen = seen  # the status writer's copy of each object's metadata
        self.known: dict[tuple[str, str], str] = {}  # (namespace, name) -> uid
        self.rejected: dict[tuple[str, str], str] = {}  # invalid objects never admitted
        self.on_runs_adopted = on_runs_adopted

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether an object with these labels is ours (the label selector, in Python)."""
        if self.instance_id:
            return labels.get(LABEL_INSTANCE) == self.instance_id
        return LABEL_INSTANCE not in labels

    def seed(self, statuses: Iterable[StatusRow]) -> int:
        """Remember the live CronWorkflows the store knows from the cluster (rows of
        `ReadModel.statuses()`), so that the first list after a restart also reconciles
        deletions made while no watcher ran. Rows without a uid (applied by the CLI) and rows
        of the other instance are left alone."""
        n = 0
        for row in statuses:
            meta = row.metadata
            if row.deleted or not meta.get("uid") or not self.selects(meta.get("labels") or {}):
                continue
            if self.namespace and row.namespace != self.namespace:
                continue
            self.known[(row.namespace, row.name)] = str(meta["uid"])
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
            if self.seen is not None:
                self.seen.forget(*key)
            self._delete(key, uid, at)
            return
        if self.seen is not None:
            self.seen.saw(obj)
        first = self.known.get(key) != uid  # not taken by this process yet: maybe adopted now
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
        adopt = read_argo_status(obj, key[0], at)
        if first and not adopt.empty and not self._taken(key, uid):
            adopt = self._with_running_children(key, uid, adopt, at)
        cron_id, what = self.service.apply(manifest, at, adopt=adopt)
        if what == "created" and not adopt.empty:
            self._adopted(cron_id, key, adopt, at)

    def _taken(self, key: tuple[str, str], uid: str) -> bool:
        """Whether the store has a live stream of this object already: then `apply` is an
        update, which ignores the adopted status, and listing its children for it would
        only cost every restart one request per CronWorkflow (the copy `find` loads is the
        one `apply` then uses)."""
        try:
            self.service.find(key[0], key[1], uid)
        except NotFound:
            return False
        return True

    def _with_running_children(
        self, key: tuple[str, str], uid: str, status: ArgoStatus, at: datetime
    ) -> ArgoStatus:
        """`status` with the object's child Workflows that are still running and that it does
        not list (domain/adoption.py `with_running_children`: Argo's controller would list
        them again at its next reconciliation). One list of the children, when an object
        with a status is first taken; if the cluster does not answer, the status alone."""
        try:
            listed = self.kube.run(self.kube.list(key[0], WF, f"{LABEL_CRON}={key[1]}"))
        except ApiError as e:
            log.warning(
                "cronworkflow %s/%s: its Workflows not listed (%s): adopting the status alone",
                *key,
                e,
            )
            return status
        status, added = with_running_children(status, listed.get("items") or [], uid, at)
        for name in added:
            log.warning(
                "cronworkflow %s/%s: adopted run %s as active: it is running and the status"
                " does not list it (Argo's controller would list it again at its next"
                " reconciliation)",
                *key,
                name,
            )
        return status

    def _adopted(
        self, cron_id: UUID, key: tuple[str, str], status: ArgoStatus, at: datetime
    ) -> None:
        for problem in status.unreadable:
            log.warning(
                "cronworkflow %s/%s: adopted its status without %s", key[0], key[1], problem
            )
        log.info(
            "cronworkflow %s/%s: adopted its status: succeeded=%d failed=%d active=%d"
            " lastScheduledTime=%s%s",
            key[0],
            key[1],
            status.succeeded,
            status.failed,
            len(status.active),
            status.last_scheduled_time.isoformat() if status.last_scheduled_time else "-",
            " (stopped)" if status.stopped else "",
        )
        if status.active and self.on_runs_adopted is not None:
            self.on_runs_adopted(cron_id, key[0], [name for name, _ in status.active], at)


class CalendarWatcher(_ListWatch):
    """ConfigMaps labelled `cronsource.io/calendar: "true"` -> apply_calendar /
    delete_calendar: each change of one is a new version of its calendar's stream, read by
    the next decision of every CronWorkflow that names it.

    The API server cannot refuse a bad calendar for us: a ConfigMap that is not one we admit
    (a malformed date, 100,000 dates, a rule that matches nothing) is logged in one line
    naming the field and kept in `rejected`; the calendar keeps its last admitted version,
    and nothing half of the bad one is stored. A CronWorkflow naming a calendar that does
    not exist skips its ticks as SpecError naming it (domain/cronworkflow.py `_exclusion`)."""

    plural = CM

    def __init__(
        self,
        kube: KubeApi,
        service: CronService,
        namespace: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(kube, namespace, f"{CALENDAR_LABEL}=true", clock)
        self.service = service
        self.known: set[tuple[str, str]] = set()
        self.rejected: dict[tuple[str, str], str] = {}

    def seed(self) -> int:
        """Remember the live calendars the store knows, so that the first list after a
        restart deletes those removed from the cluster while no watcher ran."""
        for cal in self.service.known_calendars():
            if cal.deleted or (self.namespace and cal.namespace != self.namespace):
                continue
            self.known.add((cal.namespace, cal.name))
        return len(self.known)

    def _reconcile(self, items: list[dict[str, Any]], before: Any, at: datetime) -> None:
        present = {_key(o) for o in items}
        for key in list(self.known - present):
            self._delete(key, at)

    def _delete(self, key: tuple[str, str], at: datetime) -> None:
        self.known.discard(key)
        self.rejected.pop(key, None)
        try:
            self.service.delete_calendar(key[0], key[1], at)
        except NotFound:
            return

    def _handle(self, kind: str, obj: dict[str, Any], at: datetime) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self._delete(key, at)
            return
        self.known.add(key)
        try:
            spec = calendar_spec(obj, key[0])
        except CalendarError as e:
            self.rejected[key] = str(e)
            log.warning("calendar %s/%s not admitted: %s", key[0], key[1], e)
            return
        self.rejected.pop(key, None)
        version, what = self.service.apply_calendar(spec, at)
        if what != "unchanged":
            log.info("calendar %s/%s %s (version %d)", key[0], key[1], what, version)
