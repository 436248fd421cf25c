"""What the CronWorkflow watch last saw of each object's metadata, for the status writer.

Argo's controller patches a CronWorkflow's status from its informer's copy and never reads the
object first; our writer used to GET every CronWorkflow before its PATCH, so a burst of N fires
cost N reads on top of N creations and N patches, all through the same API server. The watch
already delivers every change, so the writer can take `resourceVersion`, labels and our
sequence annotation from here. Nothing here has to be fresh for correctness: the PATCH carries
the resourceVersion as a precondition, so a stale copy is a 409, after which the writer reads
the object and tries again.

Beside the metadata it keeps the schedules the object's `status.resolvedSchedules` lists,
from the same version of the object: a merge patch merges maps key by key, so the writer has
to null the keys of schedules the spec no longer has, and it must know them for the version
its precondition names.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple


def _newer(candidate: str | None, held: str | None) -> bool:
    """Whether `candidate` may replace `held`. resourceVersions are opaque by the API's
    rules, but an etcd-backed server hands out increasing integers; where both are, an older
    one (a watch event that arrives after our own PATCH's answer) does not replace a newer."""
    if held is None or candidate is None:
        return candidate is not None
    if candidate.isdigit() and held.isdigit():
        return int(candidate) >= int(held)
    return True


class Seen(NamedTuple):
    """One version of an object, as far as the status writer needs it."""

    metadata: dict[str, Any]
    #: The keys of its `status.resolvedSchedules` (empty when it has none).
    resolved_schedules: frozenset[str]


def resolved_schedule_keys(obj: dict[str, Any]) -> frozenset[str]:
    """The keys of an object's `status.resolvedSchedules`; empty when absent or not a map."""
    resolved = (obj.get("status") or {}).get("resolvedSchedules")
    return frozenset(resolved) if isinstance(resolved, dict) else frozenset()


class SeenMetadata:
    """(namespace, name) -> the metadata of the newest version seen: written by the watch (the
    scheduler loop's thread) and by the writer's own PATCH answers (the client's loop).

    `keys`: keep only these metadata fields (for many objects of which little is read, such
    as the child Workflows whose uids the status names); None keeps all."""

    def __init__(self, keys: tuple[str, ...] | None = None) -> None:
        self._lock = threading.Lock()
        self._meta: dict[tuple[str, str], Seen] = {}
        self._keys = keys

    def saw(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            return
        if self._keys is not None:
            meta = {k: meta[k] for k in (*self._keys, "name", "namespace") if k in meta}
        key = (meta.get("namespace") or "default", meta["name"])
        seen = Seen(meta, resolved_schedule_keys(obj))
        with self._lock:
            held = None if (h := self._meta.get(key)) is None else h.metadata
            if held is not None and held.get("uid") != meta.get("uid"):
                self._meta[key] = seen  # a new object of that name
            elif _newer(meta.get("resourceVersion"), (held or {}).get("resourceVersion")):
                self._meta[key] = seen

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._meta.pop((namespace, name), None)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        seen = self.get_seen(namespace, name)
        return None if seen is None else seen.metadata

    def get_seen(self, namespace: str, name: str) -> Seen | None:
        """Metadata and resolved-schedule keys of one and the same version."""
        with self._lock:
            return self._meta.get((namespace, name))
