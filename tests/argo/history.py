"""Every version of the CronWorkflows of one namespace and of their Workflows, as the API server
stored them (a list, then a watch from its resourceVersion), to tell which counts Argo's own
controller lost from which a controller handed over.

Why a test needs it: Argo v4.0.5's cron controller (workflow/cron/ of its module) writes
`.status` with merge patches made from copies of the object that may be stale, so it can lose a
count on its own, with no other writer about (argo#4558 is that class):

* `syncAll` (controller.go, every CRON_SYNC_PERIOD = 10 s after the previous one ended) takes
  its lists of CronWorkflows and of Workflows from the informers once, at its start, then
  patches each CronWorkflow in turn (operator.go `reconcileActiveWfs`, whose
  `persistCurrentWorkflowStatus` replaces `active` whole). A run fired after that start is in
  neither list, so a patch made for another reason (a run that ended, counted) writes `active`
  without it. The next `syncAll` adds it back only if it is still running then; a run that has
  ended by then is never counted, since only a run found in `active` is counted.
* A fire (operator.go `run`) persists the whole status of the copy its job was registered with
  (`persistUpdate`), stale counts included; the next `syncAll` counts again what that copy still
  lists as active, so a count comes back. A CronWorkflow Argo has stopped is never registered
  again (its informer filter drops completed objects), and its job goes on writing that copy
  every period: the status flips between the two for as long as the controller runs.

`dropped_by_argo` names the runs of the first kind from the record: taken off `active` by a
write of Argo's while they were still running, and never listed again. Whether a run was still
running at a write is decided by resourceVersion: the test server keeps every resource in one
embedded etcd (tests/kube/apiserver.py), whose revision orders all writes of all resources.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from kubernetes import client, watch

from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF

LABEL_INSTANCE = "workflows.argoproj.io/controller-instanceid"
LABEL_CRON = "workflows.argoproj.io/cron-workflow"
#: cronsource's own annotation: the stream version of the status it wrote last
#: (adapters/infrastructure/kube/status.py). Every status write of cronsource changes it.
ANNOTATION_SEQUENCE = "cronsource.io/status-sequence"
ENDED = ("Succeeded", "Failed", "Error")  # Argo's WorkflowPhase.Fulfilled()


@dataclass(frozen=True)
class Version:
    """One stored version of a CronWorkflow, as far as counting goes."""

    rv: int
    argo_owns: bool  # no instance-id label: Argo's controller owns it (cronsource's otherwise)
    sequence: str | None  # cronsource's status-sequence annotation
    active: frozenset[str]
    succeeded: int
    failed: int

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Version:
        meta, status = obj["metadata"], obj.get("status") or {}
        return cls(
            rv=int(meta["resourceVersion"]),
            argo_owns=LABEL_INSTANCE not in (meta.get("labels") or {}),
            sequence=(meta.get("annotations") or {}).get(ANNOTATION_SEQUENCE),
            active=frozenset(a.get("name", "") for a in status.get("active") or []),
            succeeded=int(status.get("succeeded") or 0),
            failed=int(status.get("failed") or 0),
        )


def dropped_by_argo(versions: Sequence[Version], ended: Mapping[str, int]) -> dict[str, int]:
    """{run: revision of the write} for each run that a write of Argo's controller took off
    `active` while the run was still going (its Workflow ended at a later revision) and that
    no later version listed again. Argo counts a run only when it finds it ended in `active`,
    so it counted none of these (see the module doc: a `syncAll` working from lists taken
    before the run was fired).

    A write is Argo's when the object is Argo's and cronsource's sequence did not change
    (every status write of cronsource changes it; the test's own patches touch no status).
    `versions` are one object's, in order; `ended`: Workflow name -> revision at which it
    ended."""
    out: dict[str, int] = {}
    for i, (prev, cur) in enumerate(pairwise(versions), start=1):
        if not cur.argo_owns or cur.sequence != prev.sequence:
            continue
        for run in prev.active - cur.active:
            end = ended.get(run)
            if end is None or end < cur.rv:
                continue  # ended before the write: a count, not a drop
            if any(run in later.active for later in versions[i + 1 :]):
                continue  # listed again: counted when it ends
            out[run] = cur.rv
    return out


def lost_before_adoption(versions: Sequence[Version], ended: Mapping[str, int]) -> dict[str, int]:
    """`dropped_by_argo`'s runs that had ended before cronsource first took the object: Argo
    lost them while it had the object, and nothing cronsource adopted could count them (a
    run still going when it took the object is cronsource's to count)."""
    taken = next((v.rv for v in versions if not v.argo_owns), None)
    if taken is None:
        return {}
    dropped = dropped_by_argo(versions, ended)
    return {run: rv for run, rv in dropped.items() if ended[run] < taken}


def cronsource_writes_after_release(versions: Sequence[Version]) -> list[int]:
    """Revisions of versions written by cronsource (its sequence changed) while the object was
    Argo's again after cronsource had it: a status written after the release, which may
    overwrite what Argo's controller counted since."""
    out = []
    held = False
    for prev, cur in pairwise(versions):
        held = held or not prev.argo_owns
        if held and cur.argo_owns and prev.argo_owns and cur.sequence != prev.sequence:
            out.append(cur.rv)
    return out


class StatusHistory:
    """Records every version of the namespace's CronWorkflows and Workflows from `start()` to
    `stop()`, each resource with a watch of its own. `gaps` names what was not seen whole (a
    watch that expired and had to list again): a record with gaps proves nothing."""

    def __init__(self, api: client.ApiClient, namespace: str, watch_seconds: int = 5) -> None:
        """`api`: a client of its own, which `stop()` closes."""
        self.client = api
        self.api = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.watch_seconds = watch_seconds
        self.crons: dict[str, list[Version]] = {}
        self.ended: dict[str, int] = {}  # Workflow name -> revision at which it ended
        self.owner: dict[str, str] = {}  # Workflow name -> its CronWorkflow's name
        self.gaps: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for plural in (CWF, WF):
            rv = self._list(plural)
            t = threading.Thread(target=self._watch, args=(plural, rv), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.watch_seconds + 10)
        self.client.close()

    def _list(self, plural: str) -> str:
        listed = self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, plural)
        self._saw(plural, listed["items"])
        return str(listed["metadata"]["resourceVersion"])

    def _watch(self, plural: str, rv: str) -> None:
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self.api.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    plural,
                    resource_version=rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=self.watch_seconds,
                )
                for event in stream:  # an ERROR event (410 Gone) is raised as ApiException
                    obj = event["object"]
                    rv = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._saw(plural, [obj])
            except Exception as e:  # any gap is recorded, none is silent
                if self._stop.is_set():
                    return  # cut off on the way out: nothing was missed before stop()
                with self._lock:
                    self.gaps.append(f"{plural} watch after {rv}: {e}")
                time.sleep(1)
                try:
                    rv = self._list(plural)
                except Exception as e2:
                    with self._lock:
                        self.gaps.append(f"{plural} list: {e2}")

    def _saw(self, plural: str, objs: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            for obj in objs:
                name = obj["metadata"]["name"]
                if plural == CWF:
                    versions = self.crons.setdefault(name, [])
                    version = Version.of(obj)
                    if not versions or versions[-1].rv < version.rv:
                        versions.append(version)
                    continue
                self.owner[name] = (obj["metadata"].get("labels") or {}).get(LABEL_CRON, "")
                if (obj.get("status") or {}).get("phase") in ENDED and name not in self.ended:
                    self.ended[name] = int(obj["metadata"]["resourceVersion"])

    def dropped_by_argo(self, cron: str) -> dict[str, int]:
        """`dropped_by_argo` of one CronWorkflow's record; nothing while the record has gaps."""
        with self._lock:
            if self.gaps:
                return {}
            return dropped_by_argo(list(self.crons.get(cron, [])), dict(self.ended))

    def lost_before_adoption(self, cron: str) -> dict[str, int]:
        """`lost_before_adoption` of one CronWorkflow's record; nothing while it has gaps."""
        with self._lock:
            if self.gaps:
                return {}
            return lost_before_adoption(list(self.crons.get(cron, [])), dict(self.ended))

    def cronsource_writes_after_release(self, cron: str) -> list[int]:
        with self._lock:
            return cronsource_writes_after_release(list(self.crons.get(cron, [])))
