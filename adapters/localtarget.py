"""The local target: Workflows as manifest files in a directory, for running without a cluster.

`<dir>/<namespace>/<name>.yaml` is the Workflow; `<name>.phase` holds its phase once it ends
(written by us after the run duration, by Replace's terminate, or by hand). A manifest that
disappears while the run is active is a run deleted by hand (RunVanished).

A file is created exclusively and atomically (written aside, then hard-linked into place), so a
dispatcher that replays an event after a crash finds the file and never writes a second one,
and nobody ever sees half a manifest.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from projections.dispatch import ANNOTATION_SCHEDULED, PermanentSubmissionError

ANNOTATION_CREATED = "cronsource.io/created-at"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster
PHASES = ("Succeeded", "Failed", "Error")


class WorkflowConflict(PermanentSubmissionError):
    """A Workflow of that name exists and is not ours (another owner or scheduled time)."""


@dataclass(frozen=True)
class RunObservation:
    namespace: str
    name: str
    phase: str | None  # None: the manifest is gone (deleted by hand)
    finished_at: datetime | None


def _write_atomically(path: Path, text: str, exclusive: bool) -> bool:
    """Write `text` to `path`; with `exclusive`, False if the file already exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
            tmp = ""
        return True
    finally:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


class LocalTarget:
    def __init__(self, directory: str | Path, run_duration: timedelta = timedelta(seconds=1)):
        self.dir = Path(directory)
        self.run_duration = run_duration
        self.dir.mkdir(parents=True, exist_ok=True)
        self._created: dict[Path, datetime] = {}  # creation times read once per manifest

    def manifest_path(self, namespace: str, name: str) -> Path:
        return self.dir / namespace / f"{name}.yaml"

    def phase_path(self, namespace: str, name: str) -> Path:
        return self.dir / namespace / f"{name}.phase"

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime) -> None:
        meta = workflow["metadata"]
        meta.setdefault("annotations", {})[ANNOTATION_CREATED] = at.astimezone(UTC).isoformat()
        path = self.manifest_path(meta["namespace"], meta["name"])
        if _write_atomically(path, yaml.safe_dump(workflow, sort_keys=False), exclusive=True):
            return
        # AlreadyExists is success only if it is the same Workflow: our owner, our tick.
        existing = yaml.safe_load(path.read_text()) or {}
        emeta = existing.get("metadata") or {}
        owners = {o.get("uid") for o in emeta.get("ownerReferences") or []}
        ours = {o.get("uid") for o in meta.get("ownerReferences") or []}
        same_tick = (emeta.get("annotations") or {}).get(ANNOTATION_SCHEDULED) == meta[
            "annotations"
        ].get(ANNOTATION_SCHEDULED)
        if not (owners & ours and same_tick):
            raise WorkflowConflict(
                f"workflow {meta['namespace']}/{meta['name']} exists and is not ours"
            )

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        """Replace's terminate: the run ends Failed; one that already ended is left alone."""
        if self.manifest_path(namespace, name).exists():
            _write_atomically(self.phase_path(namespace, name), "Failed\n", exclusive=True)

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        for p in (self.manifest_path(namespace, name), self.phase_path(namespace, name)):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def exists(self, namespace: str, name: str) -> bool:
        return self.manifest_path(namespace, name).exists()

    def observe(self, namespace: str, name: str, now: datetime) -> RunObservation | None:
        """The run's state if it ended or vanished; None while it is still running."""
        path = self.manifest_path(namespace, name)
        phase_file = self.phase_path(namespace, name)
        try:
            created_text = yaml.safe_load(path.read_text())["metadata"]["annotations"][
                ANNOTATION_CREATED
            ]
        except FileNotFoundError:
            return RunObservation(namespace, name, None, None)
        created = datetime.fromisoformat(created_text)
        try:
            phase = phase_file.read_text().strip()
            finished = datetime.fromtimestamp(phase_file.stat().st_mtime, UTC)
            if phase not in PHASES:
                phase = "Error"
            self._created.pop(path, None)
            return RunObservation(namespace, name, phase, max(finished, created))
        except FileNotFoundError:
            pass
        ends = created + self.run_duration
        if now >= ends:
            # Persist the outcome first, so a restart reports the same phase and time.
            _write_atomically(phase_file, "Succeeded\n", exclusive=True)
            os.utime(phase_file, (ends.timestamp(), ends.timestamp()))
            return self.observe(namespace, name, now)
        return None
