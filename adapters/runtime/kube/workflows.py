"""The child Workflows' watch: a run's end (or its Workflow's absence) into a domain command.

The list + watch mechanics are `watch._ListWatch`'s; this module knows which Workflows are
ours (the label and owner of a fire of a live CronWorkflow), when an end becomes a
`RunCompleted` and when a missing Workflow is `RunVanished` (only after the dispatcher has
passed its fire).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast
from uuid import UUID

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.kube.port import WF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.seen import SeenMetadata
from cronsource.adapters.infrastructure.kube.target import Backoff, get_object, owner_uids
from cronsource.adapters.runtime.kube.watch import _key, _ListWatch, log
from cronsource.domain.adoption import ENDED
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.service import CronService, NotFound
from cronsource.domain.timestamps import parse_timestamp
from cronsource.projections.dispatch import LABEL_CRON


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

    view: Any  # adapters.readside.model.ReadModel
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
        kube: KubeApi,
        service: CronService,
        namespace: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        progress: DispatchProgress | None = None,
        workflows: SeenMetadata | None = None,
    ) -> None:
        super().__init__(kube, namespace, LABEL_CRON, clock)
        self.service = service
        self.progress = progress
        self.seen: dict[tuple[str, str], dict[str, Any]] = {}  # unfinished children seen
        #: The metadata of every child seen, for the uids the status writer names
        #: (adapters/kube/status.py `with_uids`).
        self.workflows = workflows
        self.backoff = Backoff()
        #: Runs to read once (`check`): (namespace, name) -> the stream that counts them.
        self.to_check: dict[tuple[str, str], UUID] = {}

    def _cron(self, obj: dict[str, Any]) -> CronWorkflow | None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        cron = (meta.get("labels") or {}).get(LABEL_CRON)
        if not cron:
            return None
        for uid in [*owner_uids(meta), ""]:
            try:
                return self.service.find(ns, cron, uid)
            except NotFound:
                continue
        return None

    def _handle(self, kind: str, obj: dict[str, Any], at: datetime) -> None:
        key = _key(obj)
        if self.workflows is not None:
            if kind == "DELETED":
                self.workflows.forget(*key)
            else:
                self.workflows.saw(obj)
        phase = (obj.get("status") or {}).get("phase")
        if phase in ENDED:
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

    def check(self, cron_id: UUID, namespace: str, names: list[str], at: datetime) -> None:
        """Read these runs of one CronWorkflow now and report what became of them: ended
        (RunCompleted), gone (RunVanished), or running (watched from here on, as a run of
        ours). For runs adopted from another controller: this watch may have seen one end
        before anything counted it as active, and then has nothing left to report. A run
        the API does not answer for is read again at the next drain: left unread, one that
        ended would hold Forbid for good."""
        for name in names:
            self.to_check[(namespace, name)] = cron_id
        self._check_pending(at)

    def drain(
        self, at: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        self._check_pending(at)
        return super().drain(at, budget, stop)

    def _check_pending(self, at: datetime) -> None:
        for (namespace, name), cron_id in list(self.to_check.items()):
            try:
                obj = self.kube.run(get_object(self.kube, self.backoff, namespace, WF, name))
            except ApiError as e:
                if e.status != 404:
                    log.warning(
                        "workflow %s/%s not read (%s): read again later", namespace, name, e
                    )
                    continue
                self.to_check.pop((namespace, name))
                log.info("workflow %s/%s adopted as active is gone: run vanished", namespace, name)
                self.service.run_vanished(cron_id, name, at)
                continue
            self.to_check.pop((namespace, name))
            if self.workflows is not None:
                self.workflows.saw(obj)
            phase = (obj.get("status") or {}).get("phase")
            if phase in ENDED:
                finished = _parse_time((obj.get("status") or {}).get("finishedAt")) or at
                self.service.run_completed(cron_id, name, phase, finished, at)
            else:
                self.seen[(namespace, name)] = obj

    def report_ended(self, items: list[dict[str, Any]], at: datetime) -> None:
        """Report the runs among `items` that already ended (a recovered run that ended
        before the log knew of it)."""
        for obj in items:
            if (obj.get("status") or {}).get("phase") in ENDED:
                self._handle("ADDED", obj, at)

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
    # the cluster's time (Argo's finishedAt), not a user's: read without the user bounds
    return parse_timestamp(text, "finishedAt", naive_is_utc=True, bounded=False)
