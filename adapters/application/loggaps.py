"""Streams with holes, and their repair: what `cronsource check` and `migrate` report.

Since every append checks the stream's last version (adapters/infrastructure/store/recorders/), no
new hole can appear. A store written by an older cronsource may have some: a replica that kept
deciding from copies ahead of a log that had lost its tail (a failover to an asynchronous standby)
saved versions on top of the hole, and every replay of such a stream fails ever after
(`OriginatorVersionError: (9, 8)`). Nothing can say what the lost versions held, so the repair
records each one as lost (a `VersionsLost` event at that version, with the time of the repair
and the note): the stream replays again, and the audit log says what happened and when it
was found.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import VERSIONS_LOST


@dataclass(frozen=True)
class Gap:
    stream: UUID
    after: int  # the last version before the hole
    before: int  # the first version after it
    name: str  # namespace/name, or the stream id when its creation is lost too

    @property
    def missing(self) -> range:
        return range(self.after + 1, self.before)

    def describe(self) -> str:
        first, last = self.missing[0], self.missing[-1]
        versions = f"version {first}" if first == last else f"versions {first}..{last}"
        return f"{self.name}: {versions} missing (stream {self.stream})"


def find_gaps(engine: Engine) -> list[Gap]:
    """Every hole in every stream (a full scan of the log), but for the versions retention
    removes on purpose (adapters/runtime/retention.py: the events at or below a stream's
    second latest snapshot, which no load replays). Those were
    reported as holes, and `--repair` then recorded them as lost from version 1, a stream no
    replay could start: every read of the store failed after it."""
    recorder: Any = engine.service.recorder
    found = [(stream, after, before) for stream, after, before in recorder.gaps()]
    covered = _snapshot_versions(engine, {stream for stream, _, _ in found})
    return [
        Gap(stream, after, before, _name(engine, stream))
        for stream, after, before in found
        if covered.get(stream, 0) < before - 1
    ]


def _snapshot_versions(engine: Engine, streams: set[UUID]) -> dict[UUID, int]:
    """The version of each stream's second latest snapshot, what retention removes up to (a
    load falls back to it when the latest cannot be read); streams without one left out."""
    snapshots = engine.service.snapshots
    latest = getattr(snapshots.recorder, "select_latest_many", None) if snapshots else None
    if latest is None or not streams:
        return {}
    newest = latest(dict.fromkeys(streams))
    before = latest({s: stored.originator_version - 1 for s, stored in newest.items()})
    return {stream: stored.originator_version for stream, stored in before.items()}


def _name(engine: Engine, stream: UUID) -> str:
    try:
        first: Any = engine.service.repository.get(stream, version=1)
    except Exception:
        return str(stream)
    return f"{first.namespace}/{first.name}"


def repair_gaps(engine: Engine, gaps: list[Gap], at: datetime) -> int:
    """Record every missing version as lost; returns how many versions were recorded."""
    svc = engine.service
    recorder: Any = svc.recorder
    stored = []
    for gap in gaps:
        first, last = gap.missing[0], gap.missing[-1]
        for version in gap.missing:
            event = VERSIONS_LOST(
                originator_id=gap.stream,
                originator_version=version,
                timestamp=at,
                first=first,
                last=last,
                note="lost from the log; recorded by `cronsource check --repair`",
            )
            stored.append(svc.mapper.to_stored_event(event))
    if stored:
        recorder.insert_into_gaps(stored)
        svc.forget([g.stream for g in gaps])
    return len(stored)
