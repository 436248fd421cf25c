"""The local target's files (adapters/infrastructure/localtarget.py): a Workflow is JSON in a
`.json` file, as its name says (it was JSON in a `.yaml` file), and the `.yaml` files an
earlier version wrote stay Workflows: followed to their end, listed, deleted, and never
created a second time."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.infrastructure import localtarget
from cronsource.adapters.infrastructure.localtarget import ANNOTATION_CREATED, LocalTarget
from cronsource.projections.dispatch import ANNOTATION_SCHEDULED, Creation

AT = datetime(2026, 5, 4, 10, tzinfo=UTC)


def _workflow(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [{"kind": "CronWorkflow", "name": "hello", "uid": "u-1"}],
            "annotations": {ANNOTATION_SCHEDULED: "2026-05-04T10:00:00Z"},
        },
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    }


def test_a_workflow_is_written_as_json_in_a_json_file(tmp_path: Path) -> None:
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    assert target.create_many([Creation(_workflow("hello-1"), "id", "schedule")], AT) == [None]
    files = sorted(p.name for p in (tmp_path / "default").iterdir())
    assert files == ["hello-1.json"]
    doc = json.loads((tmp_path / "default" / "hello-1.json").read_text())
    assert doc["metadata"]["name"] == "hello-1" and doc["kind"] == "Workflow"
    assert target.exists("default", "hello-1")


def test_a_batch_flushes_its_own_file_system_not_the_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files of a batch are made durable before their names are linked, by one syncfs of
    the file system they are on; `os.sync()`, every file system of the machine, waited in a
    burst for the store's commits on another disk."""
    assert sys.platform != "linux" or localtarget._SYNCFS is not None
    synced: list[tuple[int, list[str]]] = []

    def syncfs(fd: int) -> int:
        synced.append((os.fstat(fd).st_dev, sorted(os.listdir(tmp_path / "default"))))
        return 0

    def no_sync() -> None:
        raise AssertionError("os.sync() flushes every file system")

    monkeypatch.setattr(localtarget, "_SYNCFS", syncfs)
    monkeypatch.setattr(os, "sync", no_sync)
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    creations = [Creation(_workflow(f"hello-{k}"), "id", "schedule") for k in range(3)]
    assert target.create_many(creations, AT) == [None, None, None]
    ((device, seen),) = synced
    assert device == tmp_path.stat().st_dev
    assert len(seen) == 3 and not any(name.endswith(".json") for name in seen)  # not linked yet
    files = sorted(p.name for p in (tmp_path / "default").iterdir())
    assert files == [f"hello-{k}.json" for k in range(3)]


def test_a_file_system_that_cannot_be_flushed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed flush publishes nothing: no name points at a file that may not be on disk."""
    monkeypatch.setattr(localtarget, "_SYNCFS", lambda fd: -1)
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    with pytest.raises(OSError):
        target.create_many([Creation(_workflow("hello-1"), "id", "schedule")], AT)
    assert list((tmp_path / "default").iterdir()) == []


def _legacy(tmp_path: Path, name: str) -> Path:
    """A Workflow file as an earlier version wrote it: JSON inside `<name>.yaml`."""
    wf = _workflow(name)
    wf["metadata"]["annotations"][ANNOTATION_CREATED] = AT.isoformat()
    path = tmp_path / "default" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(wf) + "\n")
    return path


def test_an_earlier_versions_yaml_file_is_still_that_workflow(tmp_path: Path) -> None:
    legacy = _legacy(tmp_path, "hello-1")
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    assert target.exists("default", "hello-1")
    assert target.created(_workflow("hello-1"), cron_id="id")
    # A dispatch replayed after the upgrade finds it: success, and no second file.
    assert target.create_many([Creation(_workflow("hello-1"), "id", "schedule")], AT) == [None]
    assert not (tmp_path / "default" / "hello-1.json").exists()
    assert [m["name"] for m in target.workflows()] == ["hello-1"]
    # The run watcher follows it to its end rather than calling it deleted by hand.
    assert target.observe("default", "hello-1", AT + timedelta(seconds=10)) is None
    done = target.observe("default", "hello-1", AT + timedelta(seconds=31))
    assert done is not None and done.phase == "Succeeded"
    target.delete("default", "hello-1", AT)
    assert not legacy.exists() and not target.exists("default", "hello-1")


def test_someone_elses_yaml_file_of_the_name_is_a_conflict(tmp_path: Path) -> None:
    legacy = _legacy(tmp_path, "hello-1")
    doc = json.loads(legacy.read_text())
    doc["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    legacy.write_text(json.dumps(doc))
    target = LocalTarget(tmp_path)
    [error] = target.create_many([Creation(_workflow("hello-1"), "id", "schedule")], AT)
    assert error is not None and "is not ours" in str(error)
    assert not (tmp_path / "default" / "hello-1.json").exists()


def _hidden(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.rglob(".tmp-*"))


def test_files_made_ahead_of_a_burst_are_the_ones_its_workflows_are_written_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`warm` makes the burst's empty files ahead, a chunk a call; the Workflows are written
    into them and linked, none created at the instant, and nothing hidden is left after."""
    monkeypatch.setattr(localtarget, "WARM_CHUNK", 2)
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    assert [target.warm(3), target.warm(3), target.warm(3)] == [1, 0, 0]
    made = _hidden(tmp_path)
    assert len(made) == 3 and all((tmp_path / name).stat().st_size == 0 for name in made)
    inodes = {(tmp_path / name).stat().st_ino for name in made}
    created: list[str] = []
    real_open = os.open

    def watched_open(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_CREAT:
            created.append(str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", watched_open)
    creations = [Creation(_workflow(f"hello-{k}"), "id", "schedule") for k in range(3)]
    assert target.create_many(creations, AT) == [None, None, None]
    assert created == []
    workflows = sorted((tmp_path / "default").iterdir())
    assert {p.stat().st_ino for p in workflows} == inodes
    assert [json.loads(p.read_text())["metadata"]["name"] for p in workflows] == [
        f"hello-{k}" for k in range(3)
    ]
    assert _hidden(tmp_path) == []


def test_a_file_made_ahead_and_swept_away_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process starting on the directory sweeps old temp files, the ones made ahead
    among them, before they are written or between the write and the link: each Workflow
    is still created, once."""
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    assert target.warm(4) == 0
    (tmp_path / _hidden(tmp_path)[0]).unlink()  # before its write
    real_sync = localtarget._sync_file_system

    def sweep_then_sync(directory: Path) -> None:
        for name in _hidden(tmp_path)[:1]:  # after the writes, before the links
            (tmp_path / name).unlink()
        real_sync(directory)

    monkeypatch.setattr(localtarget, "_sync_file_system", sweep_then_sync)
    creations = [Creation(_workflow(f"hello-{k}"), "id", "schedule") for k in range(3)]
    assert target.create_many(creations, AT) == [None, None, None]
    workflows = sorted((tmp_path / "default").iterdir())
    assert [json.loads(p.read_text())["metadata"]["name"] for p in workflows] == [
        f"hello-{k}" for k in range(3)
    ]
    assert _hidden(tmp_path) == []


def test_files_made_ahead_for_a_burst_that_did_not_come_are_removed(tmp_path: Path) -> None:
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))
    assert target.warm(3) == 0
    assert len(_hidden(tmp_path)) == 3
    target.cool()
    assert _hidden(tmp_path) == []


def test_a_disk_that_refuses_the_files_made_ahead_leaves_the_burst_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = LocalTarget(tmp_path, run_duration=timedelta(seconds=30))

    def full(*args: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "open", full)
    assert target.warm(3) == 0  # logged, not raised: nothing more to try for this burst
    monkeypatch.undo()
    assert target.create_many([Creation(_workflow("hello-1"), "id", "schedule")], AT) == [None]
    assert (tmp_path / "default" / "hello-1.json").exists()
