"""The local target: Workflows as manifest files in a directory, for running without a cluster.

`<dir>/<namespace>/<name>.json` is the Workflow, as JSON in a file named for it: `kubectl
apply -f`, `jq` and every YAML reader take it, and the C JSON encoder is 20x faster than
PyYAML's representer (6 against 100 us a Workflow), which was most of the dispatcher's
time. Earlier versions wrote JSON into `<name>.yaml`, which surprised whoever opened one
expecting YAML; such files are still read, followed and deleted as the Workflows they are
(`_path`), and a dispatch replayed after the upgrade finds them and writes no second one.
`<name>.phase` holds its phase once it ends (written by us after the run duration, by
Replace's terminate, or by hand). A manifest that disappears while the run is active is a
run deleted by hand (RunVanished).

A file is created exclusively and atomically (written aside, then hard-linked into place), so a
dispatcher that replays an event after a crash finds the file and never writes a second one,
and nobody ever sees half a manifest.

Before a burst the scheduler has decided in advance (`warm`), the files it will be written
into are created empty, hidden, in the workflows directory: creating a file (its inode and
directory entry) is most of what a Workflow costs on a journaled disk, and that part then
happens before the instant instead of in it. They hold nothing and are named like any other
file written aside, so a crash leaves nothing a reader could take for a Workflow.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.domain.timestamps import parse_timestamp
from cronsource.projections.dispatch import (
    Creation,
    PermanentSubmissionError,
    is_same_workflow,
)

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


def _libc_syncfs() -> Any:
    """libc's `syncfs`, or None where there is none (not Linux)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_SYNCFS = _libc_syncfs()
log = logging.getLogger(__name__)

#: Empty files `warm` creates per call: it runs on the dispatch thread between its steps, so
#: a fire committed meanwhile waits for one chunk at most (256 files: 5-90 ms on a disk).
WARM_CHUNK = 256
#: At most this many empty files are held ready (one per fire of the burst expected).
POOL_MAX = 20_000


def _sync_file_system(directory: Path) -> None:
    """Make what was written under `directory` durable: its file system alone, flushed
    (syncfs(2); Python's `os` has no binding for it). `os.sync()` flushes every file system
    of the machine and waits for all of it: in a burst, for the store's commits on the
    machine's disk, 265 ms against 1-3 ms for the batches after it (bench.peers, 5,000
    Workflows on tmpfs, PostgreSQL on the disk). Where there is no syncfs, `os.sync()`."""
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _SYNCFS(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
    finally:
        os.close(fd)


def _link_all_exclusively(
    files: list[tuple[Path, str]], pool: list[str] | None = None, pool_device: int = -1
) -> list[bool]:
    """Create many files exclusively with one flush to disk instead of one per file.

    Every text is written aside first and made durable with one flush of their file system
    (`_sync_file_system`, once per file system of the batch); only then are the
    final names linked, so no name ever points at a half-written file, even after a power cut.
    The directories are synced after the links, so the caller may record the batch as done.
    Returns, per file, False where the name already existed.

    `pool`: empty files made ahead (`LocalTarget.warm`) on the file system `pool_device`,
    taken (and removed from it) for files of a directory on that file system instead of new
    ones; one gone meanwhile (a starting process's sweep of old temp files) is replaced.
    """
    devices = {d: _device(d) for d in {path.parent for path, _ in files}}
    temps: list[str] = []
    # One random name for the batch, numbered per file: a random draw per file was a system
    # call each.
    token = secrets.token_hex(8)
    try:
        for k, (path, text) in enumerate(files):
            fd = -1
            while pool and devices[path.parent] == pool_device and fd < 0:
                tmp = pool.pop()
                # Empty, made by this process and never written before: no O_TRUNC, which on
                # ext4 marks the file as replaced by truncation and makes `close` start
                # writing it out (auto_da_alloc): the costliest call of the burst with it.
                with contextlib.suppress(FileNotFoundError):
                    fd = os.open(tmp, os.O_WRONLY)
            if fd < 0:
                # Plain system calls: tempfile.mkstemp and a text-mode file object cost half
                # as much again as the inode itself, which is the bulk of a Workflow file's
                # cost.
                tmp = str(path.parent / f".tmp-{token}-{k}")
                fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            temps.append(tmp)
            try:
                data = memoryview(text.encode())
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        for d in _one_per_file_system(devices):
            _sync_file_system(d)
        created = []
        for (path, text), tmp in zip(files, temps, strict=True):
            try:
                os.link(tmp, path)
                created.append(True)
            except FileExistsError:
                created.append(False)
            except FileNotFoundError:
                # Its temp name was swept away after it was written (a process starting on
                # this directory removes old temp files): written again, on its own.
                created.append(_write_atomically(path, text, exclusive=True))
        for d in devices:
            dfd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return created
    finally:
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _device(directory: Path) -> int:
    """The file system `directory` is on, made first if it does not exist."""
    directory.mkdir(parents=True, exist_ok=True)
    return directory.stat().st_dev


def _one_per_file_system(devices: dict[Path, int]) -> list[Path]:
    """One directory for each file system they are on (namespaces are directories of one
    workflows directory, so nearly always one; a namespace that is a mount is another)."""
    by_device: dict[int, Path] = {}
    for d in sorted(devices):
        by_device.setdefault(devices[d], d)
    return list(by_device.values())


class _AlreadyThere(Exception):
    """`create_many`'s note that an older version's `.yaml` of this Workflow of ours exists:
    created already, so success, and no `.json` beside it."""


class OutsideDirectory(PermanentSubmissionError):
    """The Workflow's path leaves the workflows directory (a namespace directory that is a
    symlink elsewhere): refused, never followed."""


#: Temp files older than this at start are left over from a process killed mid-write.
STALE_TEMP_SECONDS = 60.0


class LocalTarget:
    def __init__(self, directory: str | Path, run_duration: timedelta = timedelta(seconds=1)):
        self.dir = Path(directory)
        self.run_duration = run_duration
        self.dir.mkdir(parents=True, exist_ok=True)
        self.root = self.dir.resolve()
        self._created: dict[Path, datetime] = {}  # creation times read once per manifest
        #: Directories without an earlier version's `.yaml` Workflow (`_without_legacy`).
        self._legacy_free: set[Path] = set()
        self.removed_temps = self._remove_stale_temps()
        #: Empty files made ahead of a burst (`warm`), in the workflows directory.
        self._pool: list[str] = []
        self._pool_token = secrets.token_hex(8)
        self._pool_made = 0
        self._pool_device = self.root.stat().st_dev

    def warm(self, creations: int) -> int:
        """Get ready for about `creations` fires decided for an instant a moment away: make
        the empty files they will be written into, up to WARM_CHUNK a call. Returns how many
        are still to be made (the dispatch thread calls again between its steps).

        On a journaled disk, creating a file is most of a Workflow's cost (70-200 us a file
        in a quiet minute against 16-19 us to write and link one made ahead, 5,000 files on
        this machine's ext4); made now, that part is out of the burst. The files are empty
        and named as files written aside are, so nothing could take one for a Workflow and a
        restart's sweep removes those a crash left. A disk that refuses (full, read-only)
        only means the burst creates its files as before: logged, never raised."""
        wanted = min(creations, POOL_MAX) - len(self._pool)
        made = 0
        try:
            while made < min(wanted, WARM_CHUNK):
                tmp = str(self.root / f".tmp-{self._pool_token}-pool-{self._pool_made}")
                self._pool_made += 1
                os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                self._pool.append(tmp)
                made += 1
        except OSError as e:
            log.warning("cannot make files ahead of a burst in %s: %s", self.root, e)
            return 0
        return max(0, wanted - made)

    def cool(self) -> None:
        """Remove the files made ahead and not used (the burst expected did not come)."""
        while self._pool:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._pool.pop())

    def _remove_stale_temps(self) -> int:
        """Delete `.tmp-*` files a `kill -9` left between write and link. Only old ones: a
        second process on this directory may be writing a fresh one right now."""

        removed = 0
        cutoff = SYSTEM_CLOCK.now().timestamp() - STALE_TEMP_SECONDS
        for tmp in [*self.root.glob(".tmp-*"), *self.root.glob("*/.tmp-*")]:
            with contextlib.suppress(OSError):
                if tmp.is_file() and not tmp.is_symlink() and tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    removed += 1
        return removed

    def outside(self, path: Path) -> OutsideDirectory | None:
        """Why `path` may not be written (its directory resolves outside ours), or None."""
        if path.parent.resolve().is_relative_to(self.root):
            return None
        return OutsideDirectory(
            f"{path.parent} resolves to {path.parent.resolve()}, outside the workflows"
            f" directory {self.root}: refused"
        )

    def manifest_path(self, namespace: str, name: str) -> Path:
        """Where a Workflow is written: `<namespace>/<name>.json`."""
        return self.dir / namespace / f"{name}.json"

    def _path(self, namespace: str, name: str) -> Path:
        """Where the Workflow is: its `.json`, or the `.yaml` an older version wrote (JSON
        inside) when only that exists."""
        path = self.manifest_path(namespace, name)
        if path.exists():
            return path
        legacy = path.with_suffix(".yaml")
        return legacy if legacy.exists() else path

    def phase_path(self, namespace: str, name: str) -> Path:
        return self.dir / namespace / f"{name}.phase"

    def _without_legacy(self, directory: Path) -> bool:
        """Whether `directory` held no `.yaml` Workflow of an earlier version when this target
        first created a Workflow in it: then no create there needs to look for one (a look
        for a name that is not there was a sixth of the dispatcher's time). Only earlier
        versions wrote `.yaml` files, so a directory without one stays without."""
        if directory in self._legacy_free:
            return True
        try:
            with os.scandir(directory) as entries:
                if any(e.name.endswith(".yaml") for e in entries):
                    return False
        except FileNotFoundError:
            pass
        self._legacy_free.add(directory)
        return True

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: datetime) -> None:
        error = self.create_many([Creation(workflow, cron_id, trigger)], at)[0]
        if error is not None:
            raise error

    def create_many(
        self, creations: Sequence[Creation], at: datetime
    ) -> list[BaseException | None]:
        """Create them all; per creation None, or why it was refused."""
        created_at = at.astimezone(UTC).isoformat()
        files = []
        errors: list[BaseException | None] = []
        # Whether a directory resolves outside ours, asked once per directory of the batch
        # (each asking resolves every component of the path: most of a create's own time).
        outside: dict[Path, OutsideDirectory | None] = {}
        for c in creations:
            meta = c.workflow["metadata"]
            meta.setdefault("annotations", {})[ANNOTATION_CREATED] = created_at
            path = self.manifest_path(meta["namespace"], meta["name"])
            if path.parent not in outside:
                outside[path.parent] = self.outside(path)
            errors.append(outside[path.parent])
            legacy = path.with_suffix(".yaml")
            if (
                errors[-1] is None
                and not self._without_legacy(path.parent)
                and legacy.exists()  # an older version created it
            ):
                errors[-1] = self._conflict(meta, legacy) or _AlreadyThere()
            if errors[-1] is None:
                files.append((path, json.dumps(c.workflow, default=str) + "\n"))
        linked = _link_all_exclusively(files, self._pool, self._pool_device)
        made = iter(zip(files, linked, strict=True))
        out: list[BaseException | None] = []
        for c, error in zip(creations, errors, strict=True):
            if error is not None:
                out.append(None if isinstance(error, _AlreadyThere) else error)
                continue
            (path, _), created = next(made)
            out.append(None if created else self._conflict(c.workflow["metadata"], path))
        return out

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        """Whether this Workflow of ours exists (ours: `is_same_workflow`)."""
        meta = workflow["metadata"]
        path = self._path(meta["namespace"], meta["name"])
        if self.outside(path) is not None:
            return False
        try:
            existing = yaml.load(path.read_text(), Loader=_Loader) or {}
        except FileNotFoundError:
            return False
        return isinstance(existing, dict) and is_same_workflow(existing.get("metadata") or {}, meta)

    @staticmethod
    def _conflict(meta: dict[str, Any], path: Path) -> PermanentSubmissionError | None:
        """AlreadyExists is success only if it is the same Workflow: our owner, our tick."""
        existing = yaml.load(path.read_text(), Loader=_Loader) or {}
        if is_same_workflow(existing.get("metadata") or {}, meta):
            return None
        return WorkflowConflict(
            f"workflow {meta['namespace']}/{meta['name']} exists and is not ours"
        )

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        """Replace's terminate: the run ends Failed; one that already ended is left alone."""
        path = self._path(namespace, name)
        if self.outside(path) is None and path.exists():
            _write_atomically(self.phase_path(namespace, name), "Failed\n", exclusive=True)

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        path = self.manifest_path(namespace, name)
        for p in (path, path.with_suffix(".yaml"), self.phase_path(namespace, name)):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def workflows(self) -> list[dict[str, Any]]:
        """The metadata of every Workflow in the directory, each with its creation time as
        `creationTimestamp` (as the cluster would give it): what exists, for the recovery of
        runs the log lost (adapters/runtime/recovery.py). Unreadable files are left out."""
        out = []
        for path in [*self.root.glob("*/*.json"), *self.root.glob("*/*.yaml")]:
            try:
                text = path.read_text()
                doc = (
                    json.loads(text)
                    if text.lstrip().startswith("{")
                    else yaml.load(text, Loader=_Loader)
                )
                meta = dict(doc["metadata"])
                meta["creationTimestamp"] = meta["annotations"][ANNOTATION_CREATED]
            except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
                continue
            out.append(meta)
        return out

    def exists(self, namespace: str, name: str) -> bool:
        return self._path(namespace, name).exists()

    def observe(self, namespace: str, name: str, now: datetime) -> RunObservation | None:
        """The run's state if it ended or vanished; None while it is still running.

        Called for every active run on every turn, so a running one costs two `stat`s: its
        creation time is read from the manifest once and remembered.
        """
        path = self.manifest_path(namespace, name)
        if path not in self._created:  # first look, or an older version's `.yaml`
            path = self._path(namespace, name)
        phase_file = self.phase_path(namespace, name)
        created = self._created.get(path)
        if created is None:
            try:
                created = _created_at(path.read_text())
            except FileNotFoundError:
                return RunObservation(namespace, name, None, None)
            self._created[path] = created
        elif not path.exists():
            self._created.pop(path, None)
            return RunObservation(namespace, name, None, None)
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
        if now >= ends and self.outside(phase_file) is None:
            # Persist the outcome first, so a restart reports the same phase and time.
            _write_atomically(phase_file, "Succeeded\n", exclusive=True)
            os.utime(phase_file, (ends.timestamp(), ends.timestamp()))
            return self.observe(namespace, name, now)
        return None


def _created_at(text: str) -> datetime:
    """The creation annotation of a manifest: ours are JSON, one edited by hand may be YAML."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = yaml.load(text, Loader=_Loader)
    created = doc["metadata"]["annotations"][ANNOTATION_CREATED]
    return parse_timestamp(created, ANNOTATION_CREATED, bounded=False)  # ours, not a user's
