"""The status writer (adapters/infrastructure/kube/status.py) on the in-memory API
(tests/kube/fake.py): at least once and idempotent by our sequence annotation, a merge patch with
a resourceVersion precondition that a concurrent edit turns into a 409 it retries, patched
from the watch's copy of the metadata, touching only status, our annotations and Argo's completed
label. The same writer against the real server: tests/integration/test_kube_contract.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from cronsource.adapters.infrastructure.kube import (
    ANNOTATION_SEQUENCE,
    CWF,
    KubeApi,
    SeenMetadata,
    StatusWriter,
)
from cronsource.adapters.infrastructure.kube.status import ANNOTATION_STREAM
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import CronWorkflowWatcher
from cronsource.projections.readmodel import LABEL_COMPLETED, status_row
from tests.instants import T0
from tests.kube.fake import FakeKube
from tests.unit.test_kube_watch import NS, TICK, admitted


class EditsAfterRead:
    """The KubeApi port, with a user's edit landing between each read and the next call."""

    def __init__(self, kube: KubeApi, edit: Callable[[], None]) -> None:
        self.kube, self.edit = kube, edit

    async def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        obj = await self.kube.get(namespace, plural, name)
        await asyncio.to_thread(self.edit)
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)


def fired(engine: Engine, cron_id: UUID) -> None:
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)


def test_a_status_is_written_once_by_its_sequence(engine: Engine, kube: FakeKube) -> None:
    cron_id = admitted(engine, kube)
    old = status_row(engine.service.load(cron_id))
    fired(engine, cron_id)
    new = status_row(engine.service.load(cron_id))
    writer = StatusWriter(kube)
    assert writer.write(new)
    obj = kube.user.get(NS, CWF, "job")
    assert obj["status"]["lastScheduledTime"] == "2026-05-04T10:01:00Z"
    assert obj["metadata"]["annotations"][ANNOTATION_SEQUENCE] == str(new.version)
    assert not writer.write(old)  # an older sequence: dropped
    assert not writer.write(new)  # the same one: dropped, nothing written
    again = kube.user.get(NS, CWF, "job")
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_only_status_our_annotation_and_the_completed_label_are_written(
    engine: Engine, kube: FakeKube
) -> None:
    cron_id = admitted(engine, kube, stopStrategy={"expression": "cronworkflow.failed == 0"})
    kube.user.patch(NS, CWF, "job", {"metadata": {"labels": {"team": "a"}}})
    before = kube.user.get(NS, CWF, "job")
    engine.service.tick([cron_id], TICK)  # the stop strategy is met at the first tick
    assert StatusWriter(kube).write_aggregate(engine.service.load(cron_id))
    obj = kube.user.get(NS, CWF, "job")
    assert obj["status"]["phase"] == "Stopped"
    assert obj["metadata"]["labels"] == {"team": "a", LABEL_COMPLETED: "true"}
    assert obj["spec"] == before["spec"]
    assert obj["metadata"]["annotations"] == {
        ANNOTATION_SEQUENCE: str(engine.service.load(cron_id).version),
        ANNOTATION_STREAM: str(cron_id),
    }


def test_a_409_from_a_concurrent_edit_is_retried_and_loses_neither(
    engine: Engine, kube: FakeKube
) -> None:
    cron_id = admitted(engine, kube)
    edits = iter([{"metadata": {"labels": {"user": "edit"}}}, {"spec": {"suspend": True}}])

    def user_edits() -> None:
        edit = next(edits, None)
        if edit is not None:
            kube.user.patch(NS, CWF, "job", edit)

    writer = StatusWriter(EditsAfterRead(kube, user_edits))
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert writer.conflicts == 2
    obj = kube.user.get(NS, CWF, "job")
    assert obj["metadata"]["labels"] == {"user": "edit"}
    assert obj["spec"]["suspend"] is True
    assert obj["status"]["phase"] == "Active"


def test_the_writer_patches_from_the_watchs_copy_and_reads_only_after_a_409(
    engine: Engine, kube: FakeKube
) -> None:
    cron_id = admitted(engine, kube)
    seen = SeenMetadata()
    CronWorkflowWatcher(kube, engine.service, namespace=NS, seen=seen).sync_once(T0)
    writer = StatusWriter(kube, seen=seen)
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert (writer.reads, writer.conflicts) == (0, 0)
    assert [c for c in kube.calls if c[0] == "get"] == []

    kube.user.patch(NS, CWF, "job", {"metadata": {"labels": {"user": "edit"}}})  # not watched
    fired(engine, cron_id)
    new = status_row(engine.service.load(cron_id))
    assert writer.write(new)
    assert (writer.reads, writer.conflicts) == (1, 1)
    obj = kube.user.get(NS, CWF, "job")
    assert obj["metadata"]["labels"] == {"user": "edit"}
    assert obj["metadata"]["annotations"][ANNOTATION_SEQUENCE] == str(new.version)
    # Dropping the same write again is confirmed by a read, never decided on the copy alone.
    assert not writer.write(new)
    assert writer.reads == 2


def test_a_stale_copy_of_a_recreated_object_does_not_drop_its_status(
    engine: Engine, kube: FakeKube
) -> None:
    admitted(engine, kube)
    seen = SeenMetadata()
    seen.saw(kube.user.get(NS, CWF, "job"))  # the watch's copy of the first object of the name
    kube.user.delete(NS, CWF, "job")
    cron_id = admitted(engine, kube)
    writer = StatusWriter(kube, seen=seen)
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert writer.reads == 1
    assert kube.user.get(NS, CWF, "job")["status"]["phase"] == "Active"


def test_a_deleted_object_drops_the_write_and_a_transient_error_is_retried(
    engine: Engine, kube: FakeKube
) -> None:
    cron_id = admitted(engine, kube)
    row = status_row(engine.service.load(cron_id))
    writer = StatusWriter(kube)
    writer.backoff.sleep = lambda s: None
    kube.fail("patch", 503)
    assert writer.write(row)
    assert [v for v, _ in kube.calls].count("patch") == 2
    kube.user.delete(NS, CWF, "job")
    fired(engine, cron_id)
    assert not writer.write(status_row(engine.service.load(cron_id)))


def test_resolved_schedules_edited_away_are_removed_from_the_map(
    engine: Engine, kube: FakeKube
) -> None:
    """A merge patch merges `status.resolvedSchedules` key by key: the writer nulls the
    schedules the spec no longer has, and drops the map once no schedule has an H."""
    cron_id = admitted(engine, kube, schedules=["H * * * *", "H 3 * * *"])
    writer = StatusWriter(kube)
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert set(kube.user.get(NS, CWF, "job")["status"]["resolvedSchedules"]) == {
        "H * * * *",
        "H 3 * * *",
    }
    kube.user.patch(NS, CWF, "job", {"spec": {"schedules": ["H * * * *"]}})
    CronWorkflowWatcher(kube, engine.service, namespace=NS).sync_once(T0 + timedelta(seconds=1))
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert set(kube.user.get(NS, CWF, "job")["status"]["resolvedSchedules"]) == {"H * * * *"}
    kube.user.patch(NS, CWF, "job", {"spec": {"schedules": ["0 * * * *"]}})
    CronWorkflowWatcher(kube, engine.service, namespace=NS).sync_once(T0 + timedelta(seconds=2))
    assert writer.write_aggregate(engine.service.load(cron_id))
    assert "resolvedSchedules" not in kube.user.get(NS, CWF, "job")["status"]


def test_a_sequence_this_log_does_not_hold_is_overwritten(engine: Engine, kube: FakeKube) -> None:
    """After a failover that lost the log's tail, or a new store that took the same object
    (the stream's id comes from its uid), the object shows a sequence past the stream's head:
    a status this log never had. Dropping writes below it froze the status until the log grew
    past it; it is overwritten. A sequence the log holds (another replica's newer write) is
    still dropped."""
    cron_id = admitted(engine, kube)
    fired(engine, cron_id)
    row = status_row(engine.service.load(cron_id))
    head = engine.service.head_version(cron_id)
    assert head == row.version
    writer = StatusWriter(kube, heads=engine.service.head_version)

    def shows(sequence: int) -> None:
        annotations = {ANNOTATION_SEQUENCE: str(sequence), ANNOTATION_STREAM: str(cron_id)}
        kube.user.patch(NS, CWF, "job", {"metadata": {"annotations": annotations}})

    shows(head + 500)  # written from the log before it lost its tail
    assert writer.write(row)
    obj = kube.user.get(NS, CWF, "job")
    assert obj["metadata"]["annotations"][ANNOTATION_SEQUENCE] == str(row.version)
    assert obj["status"]["lastScheduledTime"] == "2026-05-04T10:01:00Z"

    shows(head)  # this log holds it: a newer write than `older`, kept
    assert not writer.write(dataclasses.replace(row, version=row.version - 1))
    assert not StatusWriter(kube).write(row)  # without the log to ask: dropped, as before
