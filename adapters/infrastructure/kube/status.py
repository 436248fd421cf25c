"""The status writer: the projected CronWorkflowStatus onto the CronWorkflow object.

At least once and idempotent: the object carries the sequence (aggregate version) of the status
it shows, in our own annotation; a write whose sequence is not newer is dropped. Each write is
a merge patch of the main resource (Argo's CRD has no /status subresource) with
`metadata.resourceVersion` as precondition, so a concurrent change (a user's edit of spec or
labels, another writer) makes it 409; it then re-reads, re-checks the sequence and tries again.
It sends only `status`, its own annotation and Argo's completed label, never spec or other
labels (Argo #15877). `status.resolvedSchedules` is a map, which a merge patch merges key by
key: the patch nulls the keys the object shows and the status no longer has (a schedule edited
away), and drops the whole map when no schedule has an `H` any more, as Argo's controller does
(PR #16604, persistResolvedSchedules).

With a `SeenMetadata` (the CronWorkflow watch's copy, as Argo patches from its informer's),
the first try takes the object's metadata from there instead of reading it: a burst's status
writes then cost one request each, not two. A stale copy costs a 409 and one read.

The sequence is a stream's (an aggregate version), so the stream that wrote it is named beside
it (`cronsource.io/status-stream`): after an object was handed back to Argo and taken again,
the new stream's first versions are lower than what the old one left, and must not be dropped
as stale. Each active run is named with its Workflow's uid where the Workflow was seen (created
by the dispatcher or seen by the run watch): Argo's controller matches active runs by uid
(`reconcileActiveWfs`), so a run that ends just after the object was handed back is counted
by Argo instead of dropped.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from uuid import UUID

from cronsource.adapters.infrastructure.kube.port import CWF, ApiError, KubeApi
from cronsource.adapters.infrastructure.kube.seen import Seen, SeenMetadata, resolved_schedule_keys
from cronsource.adapters.infrastructure.kube.target import Backoff, get_object, owner_uids
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.projections.readmodel import LABEL_COMPLETED, StatusRow, status_row

ANNOTATION_SEQUENCE = "cronsource.io/status-sequence"
ANNOTATION_STREAM = "cronsource.io/status-stream"
#: Status writes in flight at once when many CronWorkflows changed in one turn.
IN_FLIGHT = 16


def shown_sequence(cron_id: str, meta: dict[str, Any]) -> int | None:
    """The sequence of the status the object shows, when this stream wrote it (or a
    cronsource that did not name the stream); None when another stream did, or none."""
    annotations = meta.get("annotations") or {}
    shown = annotations.get(ANNOTATION_SEQUENCE, "")
    stream = annotations.get(ANNOTATION_STREAM)
    if not shown.isdigit() or stream not in (None, cron_id):
        return None
    return int(shown)


def with_uids(row: StatusRow, workflows: SeenMetadata | None) -> dict[str, Any]:
    """The row's status, each active run with its Workflow's uid where a Workflow of that
    name, owned by this CronWorkflow, was seen (Argo's `corev1.ObjectReference`)."""
    owner = row.metadata.get("uid")
    if workflows is None or not owner or not row.status.get("active"):
        return row.status
    active = []
    for ref in row.status["active"]:
        seen = workflows.get(ref.get("namespace") or row.namespace, ref["name"]) or {}
        if seen.get("uid") and owner in owner_uids(seen):
            ref = {**ref, "uid": seen["uid"]}
        active.append(ref)
    return {**row.status, "active": active}


def status_patch(
    row: StatusRow,
    meta: dict[str, Any],
    shown_resolved: frozenset[str] = frozenset(),
    workflows: SeenMetadata | None = None,
) -> dict[str, Any]:
    """The merge patch for one status write. Besides status and our annotations it sets
    only Argo's completed label, as Argo does when the stop strategy is met, and removes it
    once resumed; no other label is touched. `shown_resolved` are the keys of the object's
    `status.resolvedSchedules` at `meta`'s version: those the status no longer has are
    nulled, or the map dropped when it is empty."""
    status = dict(with_uids(row, workflows))
    ours: dict[str, Any] = status.get("resolvedSchedules") or {}
    if ours:
        status["resolvedSchedules"] = {**dict.fromkeys(shown_resolved - ours.keys()), **ours}
    elif shown_resolved:
        status["resolvedSchedules"] = None
    body: dict[str, Any] = {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "annotations": {ANNOTATION_SEQUENCE: str(row.version), ANNOTATION_STREAM: row.cron_id},
        },
        "status": status,
    }
    shown = (meta.get("labels") or {}).get(LABEL_COMPLETED)
    if row.status.get("phase") == "Stopped" and shown != "true":
        body["metadata"]["labels"] = {LABEL_COMPLETED: "true"}
    elif row.status.get("phase") != "Stopped" and shown is not None:
        body["metadata"]["labels"] = {LABEL_COMPLETED: None}
    return body


class StatusWriter:
    def __init__(
        self,
        kube: KubeApi,
        backoff: Backoff | None = None,
        max_conflicts: int = 10,
        seen: SeenMetadata | None = None,
        workflows: SeenMetadata | None = None,
        heads: Callable[[UUID], int | None] | None = None,
    ):
        self.kube = kube
        #: The stream's latest version in the log (`CronService.head_version`), asked when
        #: the object shows a sequence not older than the write's: see `_from_this_log`.
        self.heads = heads
        self.workflows = workflows  # the Workflows seen, for the uids of active runs
        self.backoff = backoff or Backoff()
        self.max_conflicts = max_conflicts
        self.seen = seen
        self.conflicts = 0  # 409s absorbed, for tests and metrics
        self.reads = 0  # GETs made before a write (none when `seen` had the object)

    def write_aggregate(self, agg: CronWorkflow) -> bool:
        return self.write(status_row(agg))

    def write(self, row: StatusRow) -> bool:
        """True if the status was written; False if dropped (stale, deleted, other object)."""
        return self.kube.run(self.write_async(row))

    def write_many(
        self, rows: Iterable[StatusRow], budget: float | None = None
    ) -> list[bool | BaseException | None]:
        """Write these statuses, IN_FLIGHT at a time: for each, whether it was written, the
        error of the write, or None when it had not finished within `budget` seconds (it is
        cancelled, and written at a later call)."""
        return self.kube.run(self._write_many(list(rows), budget))

    async def _write_many(
        self, rows: Sequence[StatusRow], budget: float | None
    ) -> list[bool | BaseException | None]:
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(row: StatusRow) -> bool:
            async with gate:
                return await self.write_async(row)

        tasks = [asyncio.ensure_future(one(r)) for r in rows]
        if not tasks:
            return []
        _, pending = await asyncio.wait(tasks, timeout=budget)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        out: list[bool | BaseException | None] = []
        for task in tasks:
            if task.cancelled():
                out.append(None)
                continue
            error = task.exception()
            if error is not None and not isinstance(error, Exception):
                raise error
            out.append(error if error is not None else task.result())
        return out

    async def write_async(self, row: StatusRow) -> bool:
        if row.deleted:
            return False
        uid = row.metadata.get("uid")
        seen = None if self.seen is None else self.seen.get_seen(row.namespace, row.name)
        fresh = False
        for _ in range(self.max_conflicts):
            if seen is None:
                seen, fresh = await self._read(row), True
                if seen is None:
                    return False
            meta = seen.metadata
            shown = shown_sequence(row.cron_id, meta)
            other = bool(uid) and meta.get("uid") != uid  # another incarnation of the name
            stale = shown is not None and shown >= row.version
            if stale and fresh and shown is not None and not await self._from_this_log(row, shown):
                stale = False  # shown from a log that is not this one: overwritten
            if other or stale:
                if fresh:
                    return False
                seen = None  # dropped only on what the API says, not on the watch's copy
                continue
            body = status_patch(row, meta, seen.resolved_schedules, self.workflows)
            try:
                written = await self.backoff.call(
                    functools.partial(self.kube.patch, row.namespace, CWF, row.name, body)
                )
            except ApiError as e:
                if e.status == 404:
                    return False
                if e.status != 409:
                    raise
                self.conflicts += 1
                seen, fresh = None, False  # read it next try
                continue
            if self.seen is not None:
                self.seen.saw(written)
            return True
        raise RuntimeError(f"status of {row.namespace}/{row.name}: too many conflicts")

    async def _from_this_log(self, row: StatusRow, shown: int) -> bool:
        """Whether the sequence the object shows is one this log holds. A status written from
        a log that lost its tail (a failover, a restore from a backup) or from another store
        that took the same object shows versions this log does not have yet, and the stream
        is the same (its id comes from the object's uid): dropping every write below it froze
        the object's status until the new log grew past it. Asked only on what the API says,
        after reading it: a status another replica wrote from this log was committed to it
        first, so the log's head seen now is at least its sequence."""
        if self.heads is None:
            return True
        head = await asyncio.to_thread(self.heads, UUID(row.cron_id))
        return head is None or shown <= head

    async def _read(self, row: StatusRow) -> Seen | None:
        """The object's metadata (and resolved-schedule keys) from the API; None when gone."""
        self.reads += 1
        try:
            obj = await get_object(self.kube, self.backoff, row.namespace, CWF, row.name)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        if self.seen is not None:
            self.seen.saw(obj)
        return Seen(dict(obj["metadata"]), resolved_schedule_keys(obj))
