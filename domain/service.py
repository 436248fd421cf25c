"""The application service: commands over CronWorkflow aggregates, saved with a version check.

Every command loads, decides and saves with the version it loaded. When another writer saved
first, the store raises IntegrityError; the command reloads and decides again on fresh state,
where an already decided tick is a no-op (docs/design.md invariants 1 and 6). Which store is used is
the caller's business (the `env` given by adapters); nothing here names a database or a clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, cast
from uuid import UUID

from eventsourcing.application import (
    AggregateNotFoundError,
    Application,
    Cache,
    LRUCache,
)
from eventsourcing.persistence import (
    ApplicationRecorder,
    EventStore,
    IntegrityError,
    Notification,
    Recording,
    StoredEvent,
)

from cronsource.domain.adoption import ArgoStatus
from cronsource.domain.backfill import BackfillPlan, Overlap, plan_backfill
from cronsource.domain.calendars import (
    CALENDAR_CREATED_TOPIC,
    Calendar,
    CalendarDates,
    CalendarSpec,
    calendar_id,
    calendar_names,
)
from cronsource.domain.cronworkflow import CronWorkflow, CronWorkflowSnapshot, Phase, stream_id
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from cronsource.domain.lastapplied import DEFAULT_MANAGER, applied_config, with_manager
from cronsource.domain.manifest import CronWorkflowManifest

T = TypeVar("T")

#: How often a command re-decides after losing a race before giving up. Each retry follows a
#: save that someone else won, so exhausting these means constant contention on one stream.
MAX_RETRIES = 20
#: How often a refused batch of decisions is decided again and appended as a batch before
#: each of it is saved on its own (`CronService.append_batch`).
BATCH_RETRIES = 2


class NotFound(LookupError):
    pass


class Conflict(RuntimeError):
    """Still losing the race after MAX_RETRIES; the caller may try again later."""


class AlreadyExists(RuntimeError):
    """A create-only command found a live CronWorkflow of that name (Kubernetes' 409
    AlreadyExists); `version` is the existing one's version (0 when unknown)."""

    def __init__(self, namespace: str, name: str, version: int) -> None:
        super().__init__(f"cronworkflow {namespace}/{name} already exists")
        self.namespace = namespace
        self.name = name
        self.version = version


class StaleVersion(RuntimeError):
    """The caller's expected version (an HTTP `If-Match`) is not the aggregate's: someone
    wrote in between. `current` is None when no live CronWorkflow is there."""

    def __init__(self, expected: int, current: int | None) -> None:
        super().__init__(f"expected version {expected}, current version is {current}")
        self.expected = expected
        self.current = current


def _live_version(obj: CronWorkflow | Calendar | None) -> int | None:
    """The version StaleVersion names as current: None when nothing live is there."""
    return None if obj is None or obj.deleted else obj.version


def _check_version(obj: CronWorkflow | Calendar | None, expected: int | None) -> None:
    """StaleVersion unless `obj` is live at `expected` (None: no precondition), the If-Match
    check of every command, calendars' included."""
    if expected is not None and _live_version(obj) != expected:
        raise StaleVersion(expected, _live_version(obj))


@dataclass
class Receipt:
    """Where a command's events went in the log: the highest notification id it wrote (0:
    it wrote nothing). A reader that must see its own write waits for the projections to
    pass this position (adapters/runtime/projector.py) instead of projecting itself."""

    position: int = 0


@dataclass(frozen=True)
class Applied:
    """What an apply did: "created", "updated" or "unchanged", and lines the user should
    read (a field kept at the value another writer set, a fallback to a two-way apply)."""

    id: UUID
    what: str
    notes: tuple[str, ...] = ()


@dataclass
class TickReport:
    """What a batch of ticks did: aggregates saved, fires made, stale saves re-decided."""

    saved: int = 0
    fires: int = 0
    rejected: int = 0
    next_due: dict[UUID, datetime | None] = field(default_factory=dict)
    versions: dict[UUID, int] = field(default_factory=dict)


@dataclass
class StagedBatch:
    """Decided CronWorkflows made ready to append (`CronService.stage_batch`): their events
    taken out and encoded, and what the append and its aftermath need. A burst stages batch
    k+1 on the deciding thread while batch k is at the store."""

    aggs: Sequence[CronWorkflow]
    #: Those with events to append (their events are in `events`, no longer pending).
    pending: Sequence[CronWorkflow]
    fires: int = 0
    #: `commit_deadline` of the batch.
    deadline: datetime | None = None
    events: list[Any] = field(default_factory=list)
    stored: list[StoredEvent] = field(default_factory=list)
    #: The copy `encode_ahead` made for each of `pending`, or None: one is made when kept.
    copies: list[CronWorkflow | None] = field(default_factory=list)
    named: list[tuple[str, str, Any]] = field(default_factory=list)
    #: Those whose save crosses a multiple of SNAPSHOT_INTERVAL.
    crossed: list[CronWorkflow] = field(default_factory=list)
    #: The notification ids the store gave, once appended.
    ids: Sequence[int] | None = None


@dataclass(frozen=True)
class RunEnd:
    """A run the run watcher saw end: completed with `phase` at `finished_at`, or vanished
    (deleted by hand before it ended: `phase` None)."""

    cron_id: UUID
    workflow: str
    phase: Phase | None = None
    finished_at: datetime | None = None


#: Run ends recorded per transaction at most (`CronService.runs_ended`), as the scheduler's
#: BATCH of decisions.
RUN_END_BATCH = 500

#: Events between snapshots of a CronWorkflow. A load reads the latest snapshot and at most
#: this many events after it, whatever the stream's age: about 6 ms of replay at 60 µs an
#: event, against a command's 0.4 s, so a command on a stream of a million events costs what
#: it costs on a fresh one. A snapshot is about 3 KB and events are about 300 bytes, so they
#: add a tenth to the log; a minutely CronWorkflow (a fire and a completion a minute) takes
#: one about every 50 minutes.
SNAPSHOT_INTERVAL = 100

log = logging.getLogger("cronsource")


class ForgivingSnapshots(EventStore[UUID]):
    """The snapshot store, where a snapshot that cannot be read is no snapshot: the load
    replays the stream instead (slower, never wrong), and the log says which one. A
    half-written snapshot cannot exist (each is one row, written in its own transaction);
    one corrupted later, or one whose upcaster fails, must not make a CronWorkflow
    unloadable."""

    def get(
        self,
        originator_id: UUID,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Iterator[Any]:
        # A load asks for the latest snapshot (desc, limit 1); when it cannot be read, the one
        # before it is the next best (retention keeps two), then a replay of the stream.
        # Read `limit` at a time, not every snapshot of the stream: a stream of a million
        # events has 10,000 of them, and reading them all made every load of it cost 60 ms
        # more than a fresh one's (bench/history.py).
        good = []
        while True:
            stored = self.recorder.select_events(
                originator_id, gt=gt, lte=lte, desc=desc, limit=limit
            )
            for s in stored:
                snapshot = self.decode(s)
                if snapshot is not None:
                    good.append(snapshot)
                    if limit is not None and len(good) >= limit:
                        return iter(good)
            if limit is None or len(stored) < limit:
                return iter(good)
            # Fewer than `limit` of this page could be read: the page before (or after) it.
            if desc:
                lte = stored[-1].originator_version - 1
            else:
                gt = stored[-1].originator_version

    def decode(self, stored: StoredEvent) -> Any:
        """The snapshot, checked by rebuilding an aggregate from it; None when it fails."""
        try:
            snapshot: Any = self.mapper.to_domain_event(stored)
            snapshot.mutate(None)
        except Exception as e:
            log.warning(
                "snapshot of %s at version %d cannot be read (%s): loading from the one"
                " before it, or replaying the stream",
                stored.originator_id,
                stored.originator_version,
                f"{type(e).__name__}: {e}",
            )
            return None
        return snapshot


class LogIndex(Protocol):
    """What the adapters index of the log beyond a single stream (the read model's status and
    audit rows plus the events they have not projected yet), so that a lookup by name and a
    backfill's fired ticks cost what an index lookup costs, not a read of whole streams."""

    def ids_named(self, namespace: str, name: str) -> Iterable[UUID]:
        """Streams that may hold a CronWorkflow of this namespace and name, whatever its
        Kubernetes uid (a stream id includes the uid)."""
        ...

    def fired_ticks(self, cron_id: UUID, start: datetime, end: datetime) -> set[datetime]:
        """The ticks in [start, end] that fired in this stream (manual runs aside)."""
        ...


class CronService(Application[UUID]):
    """The domain service. `rejected_writes` counts saves the store refused as stale."""

    name = "cronsource"
    #: Snapshots are taken by `save` (every SNAPSHOT_INTERVAL events, from the aggregate just
    #: saved: no reload) and read by every load.
    is_snapshotting_enabled = True
    # Commands (run completions, suspends) go through the repository's cache; the scheduler
    # keeps its own copies (adapters/runtime/decision_cache.py). Both are bounded so that
    # 100,000 CronWorkflows fit in well under 1 GiB (about 5 KB per aggregate).
    env = {"AGGREGATE_CACHE_MAXSIZE": "10000", "DEEPCOPY_FROM_AGGREGATE_CACHE": "y"}

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        recorder: ApplicationRecorder | None = None,
        late_tolerance: timedelta = DEFAULT_LATE_TOLERANCE,
        index: Callable[[CronService], LogIndex] | None = None,
        decided_by: str | None = None,
    ) -> None:
        """`recorder`: share another instance's store (an in-memory store has no other way to
        be shared, and simulated replicas must see one log). `index`: builds the adapters'
        LogIndex over this service's log (adapters/runtime/indexes.py); without one, a name
        alone cannot reach an object exported from a cluster or seen by the watcher, and
        fired ticks are read from the whole stream. `decided_by`: the identity of the
        replica this service decides for (`run`), recorded on the decisions a run's
        completion or recovery makes; the scheduler's batches name it themselves."""
        self._shared_recorder = recorder
        self.decided_by = decided_by
        try:
            super().__init__(env)
        except BaseException:
            # The store's pool was opened before what failed (a server the URL rules out is
            # found by the first connection). Closed here: left to the garbage collector,
            # `__del__` could run on one of the pool's own threads, which cannot join itself.
            factory = getattr(self, "factory", None)
            if factory is not None:
                with suppress(Exception):  # the error to report is the first one
                    factory.close()
            raise
        self.late_tolerance = late_tolerance
        self.rejected_writes = 0
        self._receipts = threading.local()
        self.index: LogIndex | None = index(self) if index is not None else None
        #: The version this service last saved of each stream: what a copy decided before
        #: it must not be older than. A copy older than this service's own write is stale by
        #: this process's own doing (a run completion, a command), which it can see without
        #: asking the store; only a second writer's saves are left for the store to refuse.
        self.saved_versions: dict[UUID, int] = {}
        #: The version of the latest snapshot of each stream this service read or took: what
        #: `snapshot_tails` need not write again.
        self.snapshot_versions: dict[UUID, int] = {}
        self._on_saved: list[Callable[[Sequence[CronWorkflow]], None]] = []
        #: The calendars read so far, each brought up to date when asked (`calendar`).
        self._calendars: dict[UUID, Calendar] = {}
        self._calendar_lock = threading.Lock()
        self._on_recorded: list[Callable[[list[tuple[str, str, Any]]], None]] = []
        #: What `encode_ahead` prepared for a save to come, by stream: the pending events it
        #: was made from, their stored form and the copy to cache once they are saved.
        self._ahead: dict[UUID, tuple[tuple[Any, ...], list[StoredEvent], CronWorkflow]] = {}

    def on_saved(self, callback: Callable[[Sequence[CronWorkflow]], None]) -> None:
        """Call `callback` with the aggregates of every save, as saved: the scheduler keeps
        them as its copies (adapters/runtime/decision_cache.py), so a run completion this
        process recorded does not cost a reload before the next decision."""
        self._on_saved.append(callback)

    def construct_recorder(self) -> ApplicationRecorder:
        return self._shared_recorder or super().construct_recorder()

    def construct_snapshot_store(self) -> EventStore[UUID]:
        if self._shared_recorder is not None and hasattr(self._shared_recorder, "snapshots"):
            recorder = self._shared_recorder.snapshots  # a replica of an in-memory store
        else:
            recorder = self.factory.aggregate_recorder(purpose="snapshots")
        return ForgivingSnapshots(mapper=self.mapper, recorder=recorder)

    # ------------------------------------------------------------------ lookup

    def load(self, cron_id: UUID) -> CronWorkflow:
        try:
            agg: CronWorkflow = self.repository.get(cron_id, projector_func=_replay)
        except AggregateNotFoundError:
            raise NotFound(str(cron_id)) from None
        self.resolve_calendars([agg])
        return agg

    def head_version(self, cron_id: UUID) -> int | None:
        """The stream's latest version in this log (its newest event, or the snapshot that
        stands for events retention removed); None when the log has no such stream. What a
        status written elsewhere is held against: a sequence past it came from a log that is
        not this one (adapters/infrastructure/kube/status.py)."""
        versions = [
            e.originator_version for e in self.recorder.select_events(cron_id, desc=True, limit=1)
        ]
        if self.snapshots is not None:
            versions += [
                s.originator_version
                for s in self.snapshots.recorder.select_events(cron_id, desc=True, limit=1)
            ]
        return max(versions, default=None)

    # ------------------------------------------------------------------ calendars

    def calendar(self, namespace: str, name: str) -> Calendar | None:
        """The calendar's stream at its latest version (deleted ones too); None if never
        applied. A copy is kept between calls and brought up to date by reading only the
        events after it: one short query per calendar and decision batch. The caller gets
        a copy of its own (a command's change is kept only once saved: `_keep_calendar`),
        and the kept one is moved on under a lock (the scheduler and HTTP threads share
        it)."""
        cal_id = calendar_id(namespace, name)
        with self._calendar_lock:
            held = self._calendars.get(cal_id)
            if held is None:
                try:
                    held = cast(Calendar, self.repository.get(cal_id, projector_func=_replay))
                except AggregateNotFoundError:
                    return None
            else:
                held = cast(Calendar, self.fast_forward(held))  # type: ignore[arg-type]
            self._calendars[cal_id] = held
            return deepcopy(held)

    def _keep_calendar(self, cal: Calendar) -> None:
        """Keep a copy just saved (no pending events) as the one `calendar` moves on."""
        with self._calendar_lock:
            held = self._calendars.get(cal.id)
            if held is None or held.version < cal.version:
                self._calendars[cal.id] = deepcopy(cal)

    def apply_calendar(
        self, spec: CalendarSpec, at: datetime, expected: int | None = None
    ) -> tuple[int, str]:
        """Create or update a calendar (an admitted ConfigMap); returns (version, outcome:
        created, updated or unchanged). A change is seen by the next decision of every
        CronWorkflow naming it (`resolve_calendars`). `expected`: the live calendar must be
        at exactly that version (an HTTP If-Match), else StaleVersion."""

        def attempt() -> tuple[int, str]:
            cal = self.calendar(spec.namespace, spec.name)
            _check_version(cal, expected)
            if cal is None:
                cal = Calendar(spec.namespace, spec.name, spec.dates, spec.rrule, at, timestamp=at)
                self.save(cal)
                outcome = "created"
            elif (was_deleted := cal.deleted) or cal.apply(spec, at):
                if was_deleted:  # made again after a delete: created, as Kubernetes says
                    cal.apply(spec, at)
                self.save(cal)
                outcome = "created" if was_deleted else "updated"
            else:
                outcome = "unchanged"
            self._keep_calendar(cal)
            return cal.version, outcome

        return self._retrying(attempt, calendar_id(spec.namespace, spec.name))

    def delete_calendar(
        self, namespace: str, name: str, at: datetime, expected: int | None = None
    ) -> int:
        """Delete a calendar (its stream goes on); NotFound when there is none, StaleVersion
        when it is not at `expected`."""

        def attempt() -> int:
            cal = self.calendar(namespace, name)
            if cal is None or cal.deleted:
                raise NotFound(f"calendar {namespace}/{name} not found")
            _check_version(cal, expected)
            cal.delete(at)
            self.save(cal)
            self._keep_calendar(cal)
            return cal.version

        return self._retrying(attempt, calendar_id(namespace, name))

    def known_calendars(self) -> list[Calendar]:
        """Every calendar ever created in this store, at its latest version (the watcher
        seeds from it, to delete what vanished from the cluster while nobody watched).
        Read by the creation events' topic: calendars are few."""
        start, names = 1, []
        while True:
            notes = self.recorder.select_notifications(
                start=start, limit=1000, topics=[CALENDAR_CREATED_TOPIC]
            )
            for n in notes:
                created: Any = self.mapper.to_domain_event(n)
                names.append((created.namespace, created.name))
            if len(notes) < 1000:
                break
            start = notes[-1].id + 1
        found = (self.calendar(ns, name) for ns, name in dict.fromkeys(names))
        return [cal for cal in found if cal is not None]

    def calendars_changed(self, agg: CronWorkflow) -> bool:
        """Whether a calendar this aggregate's decision read has changed since (a version
        later, deleted, or created): a decision made in advance with it is stale, though
        the aggregate's own version check would take it."""
        names = calendar_names(agg.annotations)
        if not names:
            return False
        held = agg.calendar_states
        for name in names:
            before = held.get(name)
            cal = self.calendar(agg.namespace, name)
            now = cal.state() if cal is not None else None
            if (before and before.version) != (now and now.version):
                return True
        return False

    def resolve_calendars(self, aggs: Iterable[CronWorkflow]) -> None:
        """Give each CronWorkflow that names calendars their state as of now (each
        calendar read once per call), for the decisions it makes next."""
        seen: dict[tuple[str, str], CalendarDates | None] = {}
        for agg in aggs:
            names = calendar_names(agg.annotations)
            if not names:
                continue
            states: dict[str, CalendarDates | None] = {}
            for n in names:
                key = (agg.namespace, n)
                if key not in seen:
                    cal = self.calendar(*key)
                    seen[key] = cal.state() if cal is not None else None
                states[n] = seen[key]
            agg.calendar_states = states

    def load_many(self, versions: Mapping[UUID, int | None]) -> dict[UUID, CronWorkflow]:
        """Many aggregates at once (`None`: the latest version), missing ones left out.

        Where the store can read many streams in one query (`select_latest_many` and
        `select_events_many`, see adapters/infrastructure/store/recorders/) this is two round
        trips per thousand aggregates, each the latest snapshot and the events after it, instead
        of a load each; otherwise it loads them one by one.
        """
        select_many = getattr(self.recorder, "select_events_many", None)
        snapshots = self.snapshots
        latest_many = getattr(snapshots.recorder, "select_latest_many", None) if snapshots else None
        out: dict[UUID, CronWorkflow] = {}
        if select_many is None or latest_many is None:
            for cron_id, version in versions.items():
                try:
                    out[cron_id] = self.repository.get(cron_id, version=version)
                except AggregateNotFoundError:
                    pass
            return out
        assert isinstance(snapshots, ForgivingSnapshots)
        starts: dict[UUID, CronWorkflow] = {}
        for cron_id, stored in latest_many(versions).items():
            snapshot = snapshots.decode(stored)
            if snapshot is None:  # unreadable: the one before it, as a single load does
                snapshot = next(
                    snapshots.get(cron_id, lte=stored.originator_version - 1, desc=True, limit=1),
                    None,
                )
            if snapshot is not None:
                starts[cron_id] = snapshot.mutate(None)
                self.snapshot_versions[cron_id] = snapshot.originator_version
        after = {cron_id: agg.version for cron_id, agg in starts.items()}
        to_domain = self.mapper.to_domain_event
        tails = select_many(list(versions), after)
        for cron_id in versions:
            upto = versions[cron_id]
            agg: CronWorkflow | None = starts.get(cron_id)
            for s in tails.get(cron_id, ()):
                if upto is not None and s.originator_version > upto:
                    break
                event: Any = to_domain(s)
                agg = event.mutate(agg)
            if agg is not None:
                out[cron_id] = agg
        return out

    @contextmanager
    def receipt(self) -> Iterator[Receipt]:
        """The log position of what this thread saves inside the block: `with
        svc.receipt() as r: svc.suspend(...)`, then wait for `r` before reading the status."""
        receipt = Receipt()
        open_receipts: list[Receipt] = self._receipts.__dict__.setdefault("open", [])
        open_receipts.append(receipt)
        try:
            yield receipt
        finally:
            # By identity: receipts are values, and an outer block's may equal this one's.
            open_receipts[:] = [r for r in open_receipts if r is not receipt]

    def on_recorded(self, callback: Callable[[list[tuple[str, str, Any]]], None]) -> None:
        """Call `callback` with the events of each save the store took, as (namespace, name,
        event) in order: a replica logs the decisions it made from here, once they are
        made (a save the store refused calls nothing)."""
        self._on_recorded.append(callback)

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        """Save aggregates through the event store's recorder, without eventsourcing's
        per-object protocol checks (`isinstance` against runtime protocols was a tenth of a
        burst), then snapshot each CronWorkflow whose save crossed a multiple of
        SNAPSHOT_INTERVAL, from the aggregate just saved (the library's own snapshotting
        reloads it first). What `encode_ahead` prepared for exactly these pending events is
        used as it is."""
        if kwargs or not all(type(o) is CronWorkflow for o in objs):
            recordings = super().save(*objs, **kwargs)
            open_receipts = self._receipts.__dict__.get("open")
            if open_receipts and recordings:
                self._note_position(max(r.notification.id for r in recordings))
            return recordings
        staged = StagedBatch(objs, objs)
        self._stage_events(staged)
        self._append(staged)
        self._after_append(staged)
        return _recordings(staged.events, staged.stored, staged.ids)

    def stage_batch(self, aggs: Sequence[CronWorkflow]) -> StagedBatch:
        """Decided aggregates made ready for `append_batch`: what a save does before the
        store is asked, done by the caller's thread."""
        pending = [a for a in aggs if a.pending_events]
        staged = StagedBatch(
            aggs,
            pending,
            fires=sum(_count_fires(a) for a in pending),
            deadline=commit_deadline(pending, self.late_tolerance),
        )
        self._stage_events(staged)
        return staged

    def _stage_events(self, staged: StagedBatch) -> None:
        """Take the pending events out of `staged.pending` and encode them (or take what
        `encode_ahead` prepared for exactly these events)."""
        to_stored = self.mapper.to_stored_event
        for agg in staged.pending:
            pending = agg.collect_events()
            ahead = self._ahead.pop(agg.id, None)
            if ahead is not None and _same_events(ahead[0], pending):
                staged.stored.extend(ahead[1])
                staged.copies.append(ahead[2])
            else:
                staged.stored.extend(map(to_stored, pending))
                staged.copies.append(None)
            staged.events.extend(pending)
            if self._on_recorded:
                staged.named.extend((agg.namespace, agg.name, e) for e in pending)
            if (
                pending
                and agg.version // SNAPSHOT_INTERVAL
                > (agg.version - len(pending)) // SNAPSHOT_INTERVAL
            ):
                staged.crossed.append(agg)

    def _append(self, staged: StagedBatch) -> None:
        """The store's part of a save: the staged events appended in one transaction."""
        staged.ids = ids = self.recorder.insert_events(staged.stored)
        if ids and self._receipts.__dict__.get("open"):
            self._note_position(max(ids))  # the receipts of the thread that saves

    def _after_append(self, staged: StagedBatch) -> None:
        """What this service keeps about CronWorkflows just appended: the versions it saved,
        the repository's copies, its callbacks, the snapshots due."""
        saved = self.saved_versions
        kept = self.repository.cache
        for agg, copy in zip(staged.pending, staged.copies, strict=True):
            # Never back: a command may have saved a later version since the append.
            if saved.get(agg.id, 0) < agg.version:
                saved[agg.id] = agg.version
            if kept is not None:
                # The next command's load starts from what was just saved instead of
                # reading and replaying it (a load still reads what others saved since).
                kept.put(agg.id, copy if copy is not None else deepcopy(agg))
        for callback in self._on_saved:
            callback(staged.pending)
        for recorded in self._on_recorded:
            recorded(staged.named)
        if staged.crossed:
            self.take_snapshots(staged.crossed)

    def _note_position(self, position: int) -> None:
        """Move this thread's open receipts (`receipt`) to a position just saved."""
        for receipt in self._receipts.__dict__.get("open", ()):
            receipt.position = max(receipt.position, position)

    def encode_ahead(self, aggs: Sequence[CronWorkflow]) -> None:
        """Do now what saving these decided aggregates will need (their events' stored form,
        the copy the cache keeps) when they are decided before their instant: the save at
        the instant is then the store's work alone. A save uses it only for the very event
        objects it was made from; anything else is encoded as it is saved.

        It replaces what was prepared before: decisions for an earlier instant that were not
        saved by now never will be (dropped as changed since, or decided again), and a
        CronWorkflow deleted since must not keep its copy here."""
        to_stored = self.mapper.to_stored_event
        self._ahead.clear()
        for agg in aggs:
            pending = tuple(agg.pending_events)
            if not pending:
                continue
            agg.next_due()  # the save's report asks for it (kept for this version)
            copy = deepcopy(agg)
            copy._pending_events.clear()  # as it is once saved (`collect_events`)
            self._ahead[agg.id] = (pending, [to_stored(e) for e in pending], copy)

    def take_snapshots(self, aggs: Sequence[CronWorkflow]) -> bool:
        """Store snapshots of these aggregates as saved (no pending events): after a save that
        crossed SNAPSHOT_INTERVAL, and for retention, which removes only what a snapshot
        covers. A failure costs only speed (loads replay from an older snapshot), so it is
        logged, never raised."""
        assert self.snapshots is not None
        try:
            self.snapshots.put([CronWorkflowSnapshot.take(a) for a in aggs])
        except Exception as e:
            log.warning("snapshots of %d CronWorkflow(s) not stored: %s", len(aggs), e)
            return False
        for a in aggs:
            # The highest: a copy of the version before the last may be among them.
            self.snapshot_versions[a.id] = max(self.snapshot_versions.get(a.id, 0), a.version)
        return True

    def snapshot_to_cover(self, aggs: Sequence[CronWorkflow]) -> None:
        """Snapshots that make these streams' old events removable (retention covers an event
        by a stream's second latest snapshot, the one a load falls back to). A stream with
        events after its latest snapshot gets one as it is now. One whose latest snapshot is
        of its last version already (idle since), and a deleted one (it changes no more),
        get one of the version before the last too. Taking that same last version again was
        refused as a duplicate: such a stream kept its whole history for ever, and the
        refusal cost every other snapshot of the batch."""
        snapshots = self.snapshots
        if snapshots is None or not aggs:
            return
        latest_many = getattr(snapshots.recorder, "select_latest_many", None)
        stored = latest_many(dict.fromkeys(a.id for a in aggs)) if latest_many else {}
        shown = {i: s.originator_version for i, s in stored.items()}
        fresh = [a for a in aggs if a.version > shown.get(a.id, 0)]
        last_but_one = {
            a.id: a.version - 1
            for a in aggs
            if a.version > 1
            and (a.version == shown.get(a.id) or (a.deleted and shown.get(a.id, 0) < a.version - 1))
        }
        before = [
            a for a in self.load_many(last_but_one).values() if a.version == last_but_one[a.id]
        ]
        if fresh or before:
            self.take_snapshots(fresh + before)

    def snapshot_tails(self, aggs: Sequence[CronWorkflow]) -> int:
        """Snapshot those of `aggs` (copies as saved, no pending events) that have events
        after their latest snapshot: a replica that stops this way leaves the next start-up
        nothing to replay. The store is asked for the latest snapshots first (another replica,
        or this one's loads by id, may have taken one this service never saw). Returns how
        many were taken."""
        if self.snapshots is None:
            return 0
        known = self.snapshot_versions
        tails = [a for a in aggs if a.version > known.get(a.id, 0) and not a.pending_events]
        latest_many = getattr(self.snapshots.recorder, "select_latest_many", None)
        if tails and latest_many is not None:
            stored = latest_many(dict.fromkeys(a.id for a in tails))
            known.update((i, s.originator_version) for i, s in stored.items())
            tails = [a for a in tails if a.version > known.get(a.id, 0)]
        if tails and self.take_snapshots(tails):
            return len(tails)
        return 0

    def find(self, namespace: str, name: str, uid: str = "") -> CronWorkflow:
        """The live (not deleted) CronWorkflow of that name; NotFound if there is none.

        Without `uid`, the live incarnation is found whatever uid it was created with: a
        user addresses a CronWorkflow by name, never by the uid the cluster gave it.
        """
        agg = self._latest_incarnation(namespace, name, uid)
        if (agg is None or agg.deleted) and not uid:
            agg = self._live_by_name(namespace, name)
        if agg is None or agg.deleted:
            raise NotFound(f"cronworkflow {namespace}/{name} not found")
        return agg

    def _live_by_name(self, namespace: str, name: str) -> CronWorkflow | None:
        if self.index is None:
            return None
        live = []
        for cron_id in self.index.ids_named(namespace, name):
            try:
                agg = self.load(cron_id)
            except NotFound:
                continue
            if not agg.deleted and (agg.namespace, agg.name) == (namespace, name):
                live.append(agg)
        # Two live streams of one name only arise from two uids applied by hand; the one
        # that changed last is the one the user is looking at.
        return max(live, key=lambda a: a.modified_on, default=None)

    def _latest_incarnation(self, namespace: str, name: str, uid: str) -> CronWorkflow | None:
        latest = None
        k = 0
        while True:
            try:
                latest = self.load(stream_id(namespace, name, uid, k))
            except NotFound:
                return latest
            k += 1

    # ------------------------------------------------------------------ the retry loop

    def _retrying(self, attempt: Callable[[], T], cron_id: UUID | None = None) -> T:
        for _ in range(MAX_RETRIES):
            try:
                return attempt()
            except IntegrityError as e:
                self.rejected_writes += 1
                self.forget(_streams_of(e) | ({cron_id} if cron_id is not None else set()))
        raise Conflict("gave up after repeated version conflicts")

    def forget(self, cron_ids: Iterable[UUID] | None = None) -> None:
        """Drop the repository's cached copies of these aggregates (None: of all).

        A refused save means the copy was not the log's state. Usually the log is ahead and
        the cache catches up by reading what follows its copy; but when the log is behind
        (it lost its tail in a failover) there is nothing to read after a copy that is ahead
        of it, and a cached copy would be decided on and refused again forever. So a refused
        save, a lost connection and a changed store all drop the copies, and the next load
        reads what the log holds now."""
        if cron_ids is None:
            self._ahead.clear()
        else:
            for cron_id in cron_ids:
                self._ahead.pop(cron_id, None)
        cache = self.repository.cache
        if cache is None:
            return
        if cron_ids is None:
            maxsize = getattr(cache, "maxsize", None)
            self.repository.cache = LRUCache(maxsize) if maxsize else Cache()
            return
        for cron_id in cron_ids:
            try:
                cache.get(cron_id, evict=True)
            except KeyError:
                pass

    # ------------------------------------------------------------------ admission

    def apply(
        self,
        manifest: CronWorkflowManifest,
        at: datetime,
        expected_version: int | None = None,
        *,
        adopt: ArgoStatus | None = None,
    ) -> tuple[UUID, str]:
        """Create or update from a manifest, taking the writer's values as they are (two-way:
        the Kubernetes watch, whose object is the live state, and an HTTP PUT); returns (id,
        "created"|"updated"|"unchanged"). A file applied by a user goes through
        `apply_config` instead.

        `adopt`: the status another controller left on the object, taken over when this
        creates the stream, in the same save (CronWorkflow.adopt_status); an update ignores it.
        With `expected_version` the live CronWorkflow must be at exactly that version (see
        `command`); nothing is created then, since a version names an existing object."""

        def two_way(a: CronWorkflow) -> list[str]:
            a.update_spec(manifest, at, self.late_tolerance)
            return []

        applied = self._apply(manifest, at, expected_version, two_way, None, adopt=adopt)
        return applied.id, applied.what

    def apply_config(
        self,
        manifest: CronWorkflowManifest,
        at: datetime,
        expected_version: int | None = None,
        *,
        force: bool = False,
        dry_run: bool = False,
        manager: str = DEFAULT_MANAGER,
    ) -> Applied:
        """`kubectl apply` of a file: a three-way merge with the last-applied record, which
        this apply then replaces (CronWorkflow.apply_config; `force`: `--force-conflicts`).
        Raises ManifestError, saving nothing, when the merge is not a valid CronWorkflow.
        `dry_run`: decide on the current state and save nothing, so a caller applying many
        files can refuse them all before saving any (`cronsource apply -f DIR`).
        `manager`: the field manager of a server-side apply (ApplyConflict, saving nothing,
        where it would change what another manager's apply set)."""
        return self._apply(
            manifest,
            at,
            expected_version,
            lambda a: a.apply_config(
                manifest, at, self.late_tolerance, force=force, manager=manager
            ),
            with_manager(applied_config(manifest), manager),
            save=not dry_run,
        )

    def _apply(
        self,
        manifest: CronWorkflowManifest,
        at: datetime,
        expected_version: int | None,
        update: Callable[[CronWorkflow], list[str]],
        record: dict[str, Any] | None,
        *,
        save: bool = True,
        adopt: ArgoStatus | None = None,
    ) -> Applied:
        """Create (with `record` as its last-applied record) or `update`, re-deciding on a
        lost race; `update` returns the notes of the attempt that was saved. Without `save`,
        one attempt on the current state, not saved (the loaded aggregate is a copy)."""
        meta = manifest.metadata

        def on(a: CronWorkflow) -> Applied:
            before = a.version
            notes = update(a)
            return Applied(a.id, "updated" if a.version != before else "unchanged", tuple(notes))

        if expected_version is not None and save:
            try:
                live = self.find(meta.namespace, meta.name, meta.uid or "")
            except NotFound:
                raise StaleVersion(expected_version, None) from None
            return self.command(live.id, on, expected_version)

        def attempt() -> Applied:
            current = self._latest_incarnation(meta.namespace, meta.name, meta.uid or "")
            if (current is None or current.deleted) and not meta.uid:
                # A manifest without a uid updates the live object of that name, also one
                # that was created with a uid (exported from a cluster).
                current = self._live_by_name(meta.namespace, meta.name) or current
            if current is None or current.deleted:
                incarnation = 0 if current is None else current.incarnation + 1
                agg = CronWorkflow.from_manifest(manifest, at, incarnation, last_applied=record)
                if adopt is not None:
                    agg.adopt_status(adopt, at)
                if save:
                    self.save(agg)
                return Applied(agg.id, "created")
            result = on(current)
            if save:
                self.save(current)
            return result

        return self._retrying(attempt) if save else attempt()

    def create(
        self, manifest: CronWorkflowManifest, at: datetime, *, applied: bool = False
    ) -> UUID:
        """Create only: AlreadyExists when a live CronWorkflow of that name is there.
        `applied`: the manifest is a file applied (HTTP's POST, the library's create), so
        the CronWorkflow keeps it as the default field manager's last-applied record.

        The store decides, not this process: the new stream's id is deterministic and its
        first event is version 1, so when two writers (two replicas) create the same name at
        once, the store's unique (stream, version) key refuses the second. The loser is never
        retried as an ordinary apply, which would be a lost update (the second spec silently
        replacing the first).
        """
        meta = manifest.metadata
        uid = meta.uid or ""
        current = self._latest_incarnation(meta.namespace, meta.name, uid)
        if current is not None and not current.deleted:
            raise AlreadyExists(meta.namespace, meta.name, current.version)
        incarnation = 0 if current is None else current.incarnation + 1
        record = applied_config(manifest) if applied else None
        agg = CronWorkflow.from_manifest(manifest, at, incarnation, last_applied=record)
        try:
            self.save(agg)
        except IntegrityError:
            self.rejected_writes += 1
            winner = self._latest_incarnation(meta.namespace, meta.name, uid)
            raise AlreadyExists(
                meta.namespace, meta.name, winner.version if winner is not None else 0
            ) from None
        return agg.id

    def command(
        self,
        cron_id: UUID,
        do: Callable[[CronWorkflow], T],
        expected_version: int | None = None,
    ) -> T:
        """Load, run `do`, save; on a stale save, reload and run `do` again.

        With `expected_version` (a client's If-Match) the aggregate must be at exactly that
        version and the save carries it: when anyone appended in between, the store refuses
        the save (the same check that stops a stale scheduler) and StaleVersion names the
        current version, instead of a decision made again on state the client never saw."""

        def attempt() -> T:
            agg = self.load(cron_id)
            _check_version(agg, expected_version)
            result = do(agg)
            self.save(agg)
            return result

        if expected_version is None:
            return self._retrying(attempt, cron_id)
        try:
            return attempt()
        except IntegrityError:
            self.forget([cron_id])
            now = self.load(cron_id)
            raise StaleVersion(expected_version, _live_version(now)) from None

    def suspend(self, cron_id: UUID, at: datetime, by: str = "", note: str = "") -> None:
        self.command(cron_id, lambda a: a.suspend(at, by, note))

    def resume(self, cron_id: UUID, at: datetime, by: str = "", note: str = "") -> None:
        self.command(cron_id, lambda a: a.resume(at, by, note))

    def delete(self, cron_id: UUID, at: datetime) -> None:
        self.command(cron_id, lambda a: a.delete(at))

    def reject_spec(self, cron_id: UUID, generation: int, message: str, at: datetime) -> None:
        self.command(cron_id, lambda a: a.reject_spec(generation, message, at))

    def run_completed(
        self, cron_id: UUID, workflow: str, phase: Phase, finished_at: datetime, at: datetime
    ) -> None:
        self.command(
            cron_id,
            lambda a: a.run_completed(workflow, phase, finished_at, at, self.decided_by),
        )

    def run_vanished(self, cron_id: UUID, workflow: str, at: datetime) -> None:
        self.command(cron_id, lambda a: a.run_vanished(workflow, at, self.decided_by))

    def runs_ended(self, ends: Sequence[RunEnd], at: datetime) -> None:
        """Record what the run watcher saw end, in its order, as `run_completed` and
        `run_vanished` would one by one, but saved RUN_END_BATCH at a time in one transaction
        (a burst of 200 runs ending was 200 transactions). A batch closes before a
        CronWorkflow's second end, so the log holds the events in the order given. A batch
        the store refuses (a stale copy: someone else wrote), or one naming a CronWorkflow
        that is gone, is recorded end by end instead, each with the retries of `command`;
        each stale stream counts as one rejected write, as its own command's save would."""
        batch: list[RunEnd] = []
        ids: set[UUID] = set()
        for end in ends:
            if end.cron_id in ids or len(batch) >= RUN_END_BATCH:
                self._record_ends(batch, at)
                batch, ids = [], set()
            batch.append(end)
            ids.add(end.cron_id)
        if batch:
            self._record_ends(batch, at)

    def _record_end(self, end: RunEnd, at: datetime) -> None:
        if end.phase is None:
            self.run_vanished(end.cron_id, end.workflow, at)
        else:
            assert end.finished_at is not None
            self.run_completed(end.cron_id, end.workflow, end.phase, end.finished_at, at)

    def _load_current(self, cron_ids: Sequence[UUID]) -> list[CronWorkflow]:
        """The latest version of each, as `load` would give: the repository's copies
        brought up to date by one read of the events after them all (a read each was a
        fifth of a fleet's burst of run ends), the rest loaded. NotFound if one is not."""
        cache = self.repository.cache
        select_many = getattr(self.recorder, "select_events_many", None)
        if cache is None or select_many is None:
            return [self.load(cron_id) for cron_id in cron_ids]
        held: dict[UUID, Any] = {}
        for cron_id in cron_ids:
            try:
                held[cron_id] = deepcopy(cache.get(cron_id))
            except KeyError:
                pass
        tails = select_many(list(held), {i: a.version for i, a in held.items()}) if held else {}
        to_domain = self.mapper.to_domain_event
        out = []
        for cron_id in cron_ids:
            agg = held.get(cron_id)
            if agg is None:
                out.append(self.load(cron_id))
                continue
            for stored in tails.get(cron_id, ()):
                event: Any = to_domain(stored)
                agg = event.mutate(agg)
            out.append(agg)
        self.resolve_calendars(out)
        return out

    def _record_ends(self, batch: Sequence[RunEnd], at: datetime) -> None:
        if len(batch) > 1:
            try:
                aggs = self._load_current([end.cron_id for end in batch])
            except NotFound:
                aggs = []  # each on its own: the others are recorded, the missing one raises
            if aggs:
                for agg, end in zip(aggs, batch, strict=True):
                    if end.phase is None:
                        agg.run_vanished(end.workflow, at, self.decided_by)
                    else:
                        assert end.finished_at is not None
                        agg.run_completed(
                            end.workflow, end.phase, end.finished_at, at, self.decided_by
                        )
                loaded = {a.id: a.version - len(a.pending_events) for a in aggs}
                try:
                    self.save(*aggs)
                    return
                except IntegrityError as e:
                    # The streams someone appended to since our copies: each is one refused
                    # write, as its own command's save would have been.
                    stale = _streams_of(e) or {
                        cron_id
                        for cron_id, version in loaded.items()
                        if self.recorder.select_events(cron_id, gt=version, limit=1)
                    }
                    self.rejected_writes += max(1, len(stale))
                    self.forget(stale or set(loaded))
        for end in batch:
            self._record_end(end, at)

    def recover_run(
        self,
        cron_id: UUID,
        workflow: str,
        scheduled_time: datetime,
        trigger: str,
        created_at: datetime,
        reason: str,
        at: datetime,
    ) -> bool:
        """Record a Workflow of ours that the log has no fire for (CronWorkflow.recover_run)."""
        return self.command(
            cron_id,
            lambda a: a.recover_run(
                workflow,
                scheduled_time,
                trigger,
                created_at,
                reason,
                at,
                self.late_tolerance,
                self.decided_by,
            ),
        )

    def submission_failed(
        self,
        cron_id: UUID,
        workflow: str,
        scheduled_time: datetime,
        message: str,
        transient: bool,
        at: datetime,
        *,
        reason: str | None = None,
        attempts: int = 1,
    ) -> bool:
        """Record that a fire's Workflow was not created (CronWorkflow.submission_failed);
        whether anything was recorded."""
        return bool(
            self.command(
                cron_id,
                lambda a: a.submission_failed(
                    workflow,
                    scheduled_time,
                    message,
                    transient,
                    at,
                    reason=reason,
                    attempts=attempts,
                ),
            )
        )

    def submission_recovered(
        self, cron_id: UUID, workflow: str, attempts: int, at: datetime
    ) -> bool:
        """Record a create that succeeded after transient failures
        (CronWorkflow.submission_recovered); whether anything was recorded."""
        return bool(self.command(cron_id, lambda a: a.submission_recovered(workflow, attempts, at)))

    def run_not_started(
        self,
        cron_id: UUID,
        workflow: str,
        reason: str,
        message: str,
        late_seconds: float,
        deadline_seconds: float,
        at: datetime,
    ) -> bool:
        """Record that a fire's Workflow was not created (CronWorkflow.run_not_started)."""
        return self.command(
            cron_id,
            lambda a: a.run_not_started(
                workflow, reason, message, late_seconds, deadline_seconds, at
            ),
        )

    def trigger(self, cron_id: UUID, at: datetime, request_id: str) -> str | None:
        return self.command(cron_id, lambda a: a.trigger(at, request_id))

    def fired_ticks(self, cron_id: UUID, start: datetime, end: datetime) -> set[datetime]:
        """Scheduled times in [start, end] that fired in this stream (manual runs aside), for
        backfill. Through the LogIndex (the audit read model, indexed, plus the events it has
        not projected yet: adapters/runtime/indexes.py) when the adapters give one, so its cost
        does not grow with the stream; else from the whole stream."""
        if self.index is not None:
            return self.index.fired_ticks(cron_id, start, end)
        return fired_in(self.events.get(cron_id), start, end)

    def backfill(
        self,
        cron_id: UUID,
        start: datetime,
        end: datetime,
        at: datetime,
        *,
        dry_run: bool = False,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[datetime]:
        """Fire every qualifying tick in [start, end] now, whatever the overlap policy (the
        `Allow` of `run_backfill`, uncapped); returns the ticks fired (or, dry, to fire)."""
        plan = self.run_backfill(
            cron_id,
            start,
            end,
            at,
            overlap="Allow",
            max_ticks=None,
            dry_run=dry_run,
            batch=batch,
            progress=progress,
        )
        return list(plan.fire)

    def plan_backfill(
        self,
        cron_id: UUID,
        start: datetime,
        end: datetime,
        *,
        overlap: Overlap | None = None,
        parallel: int | None = None,
        max_ticks: int | None = None,
        agg: CronWorkflow | None = None,
    ) -> BackfillPlan:
        """What a backfill would do now (domain/backfill.py); `overlap` defaults to the
        CronWorkflow's concurrencyPolicy. Raises BackfillTooLarge past `max_ticks`."""
        agg = agg or self.load(cron_id)
        ticks = agg.backfill_candidates(start, end, max_ticks)
        done = (
            self.fired_ticks(cron_id, ticks[0], ticks[-1]) | set(agg.backfill_queue)
            if ticks
            else set()
        )
        policy = agg.policy(self.late_tolerance).concurrency
        # `parallel` alone asks for runs side by side, which Forbid and Replace never have:
        # it means one queue of that width.
        default: Overlap = "Queue" if parallel is not None and policy != "Allow" else policy
        return plan_backfill(
            ticks,
            done,
            overlap or default,
            parallel,
            tuple(agg.active),
            len(agg.backfill_running),
            waiting=set(agg.backfill_queue),
        )

    def run_backfill(
        self,
        cron_id: UUID,
        start: datetime,
        end: datetime,
        at: datetime,
        *,
        overlap: Overlap | None = None,
        parallel: int | None = None,
        max_ticks: int | None = None,
        dry_run: bool = False,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
        expected: int | None = None,
    ) -> BackfillPlan:
        """Plan and carry out a backfill; returns the plan as carried out (a tick another
        writer fired meanwhile moves to `already`). Runs that start now are saved in batches
        of `batch` events, so a large Allow backfill shows progress and no save is huge.
        `expected` (an HTTP If-Match): the CronWorkflow must be at that version when the
        backfill starts (its first save carries it), else StaleVersion and nothing fired."""
        plan = self.plan_backfill(
            cron_id, start, end, overlap=overlap, parallel=parallel, max_ticks=max_ticks
        )
        if dry_run or not plan.runs:
            if expected is not None:
                _check_version(self.load(cron_id), expected)
            return plan
        todo = list(plan.fire)
        chunks = [todo[i : i + batch] for i in range(0, len(todo), batch)] or [[]]
        fired: list[datetime] = []
        for n, chunk in enumerate(chunks):

            def attempt(
                a: CronWorkflow, chunk: Sequence[datetime] = chunk, n: int = n
            ) -> list[datetime]:
                # Planned again on the state this attempt loaded: after a lost race the
                # winner's fires are `already` here, never fired a second time.
                fresh = self.plan_backfill(
                    cron_id, start, end, overlap=plan.overlap, parallel=parallel, agg=a
                )
                runs = set(fresh.runs)
                now = tuple(t for t in chunk if t in runs)
                rest = (
                    tuple(t for t in fresh.runs if t not in set(now))
                    if n == len(chunks) - 1
                    else ()
                )
                part = BackfillPlan(
                    plan.overlap,
                    fresh.parallel,
                    fresh.candidates,
                    fire=now,
                    replaces=fresh.replaces if n == 0 else (),
                    queue=rest,
                )
                return a.apply_backfill(part, at)

            fired += self.command(cron_id, attempt, expected if n == 0 else None)
            if progress:
                progress(len(fired), len(todo))
        queued = set(self.load(cron_id).backfill_queue)
        queue = tuple(t for t in plan.runs if t in queued)
        lost = set(plan.runs) - set(fired) - set(queue)
        return BackfillPlan(
            plan.overlap,
            plan.parallel,
            plan.candidates,
            already=tuple(sorted(set(plan.already) | lost)),
            queued_before=plan.queued_before,
            fire=tuple(fired),
            replaces=plan.replaces,
            queue=queue,
            skip=plan.skip,
            skip_reason=plan.skip_reason,
        )

    def cancel_backfill(self, cron_id: UUID, at: datetime) -> int:
        """Drop the queued ticks of earlier backfills; returns how many were queued."""
        return self.command(cron_id, lambda a: a.cancel_backfill(at))

    # ------------------------------------------------------------------ the scheduler's batch
    # Batch steps: many aggregates at one instant. The scheduler (adapters/runtime/) keeps its
    # own copies of aggregates between instants; the service keeps none.

    def decide_batch(
        self,
        cron_ids: Iterable[UUID],
        at: datetime,
        copies: Mapping[UUID, CronWorkflow] | None = None,
        decided_by: str | None = None,
    ) -> list[CronWorkflow]:
        """Decide a batch of CronWorkflows at `at` without saving (the first half of a batch
        tick; see `commit_batch`). `copies` are aggregates the caller already holds (taken out
        of its cache, not shared); the rest are loaded from the store. A copy that is stale
        after all is refused by the store at commit and decided again. `decided_by` is the
        deciding replica's identity, recorded on the decision events (default: the
        service's own)."""
        if decided_by is None:
            decided_by = self.decided_by
        ids = list(cron_ids)
        fresh = dict(copies or {})
        cold = [i for i in ids if i not in fresh]
        if cold:
            fresh.update(self.load_many(dict.fromkeys(cold)))
        self.resolve_calendars(fresh.values())
        aggs = []
        for cron_id in ids:
            agg = fresh.get(cron_id)
            if agg is None:
                continue
            agg.tick(at, self.late_tolerance, decided_by=decided_by)
            aggs.append(agg)
        return aggs

    def commit_batch(
        self, aggs: Sequence[CronWorkflow], at: datetime, decided_by: str | None = None
    ) -> TickReport:
        """Save decided aggregates in one transaction (`stage_batch`, `append_batch`), then
        bring what this service keeps about them up to date."""
        report, finish = self.append_batch(self.stage_batch(aggs), at, decided_by)
        finish()
        return report

    def append_batch(
        self, staged: StagedBatch, at: datetime, decided_by: str | None = None
    ) -> tuple[TickReport, Callable[[], None]]:
        """Append a staged batch in one transaction. If any of it is stale the store refuses
        the whole batch; it is then decided again on fresh state, as a batch (one read of
        the latest snapshots and events, one append), up to BATCH_RETRIES times, and after
        that each aggregate on its own: never a lost decision. Another replica's run
        completions make a batch decided ahead stale every time (its run watcher writes to
        streams this one decides): saving those one by one, 100 transactions instead of
        two, made the ticks of a replica deciding 100 `@every 2s` CronWorkflows 1.4 s late
        at the 99th percentile, and some of them missed. `report.rejected` counts the
        refusals, and tells the caller its copies are not the saved state.

        Returns the report once the store has the batch, with what is left to do: this
        service's copies, saved versions and callbacks, and the report's next due instants
        and versions. A burst runs it for one batch while the next is at the store
        (adapters/runtime/scheduler.py): it needs no database."""
        if decided_by is None:
            decided_by = self.decided_by
        report = TickReport()
        done = staged.aggs
        appended = False
        tries = 0
        while staged.pending and not appended:
            try:
                self._append(staged)
                report.saved, report.fires = len(staged.pending), staged.fires
                appended = True
            except IntegrityError as e:
                self.forget(_streams_of(e))
                self.rejected_writes += 1
                report.rejected += 1
                tries += 1
                ids = [a.id for a in staged.aggs]
                if tries <= BATCH_RETRIES:
                    staged = self.stage_batch(self.decide_batch(ids, at, decided_by=decided_by))
                    done = staged.aggs
                    continue
                for a in staged.pending:
                    report.fires += self.command(
                        a.id,
                        lambda b: len(b.tick(at, self.late_tolerance, decided_by=decided_by)),
                    )
                    report.saved += 1
                done = [self.load(cron_id) for cron_id in ids]
                break

        def finish() -> None:
            if appended:
                self._after_append(staged)
            report.next_due = {a.id: a.next_due() for a in done}
            report.versions = {a.id: a.version for a in done}

        return report, finish

    def fast_forward(self, agg: CronWorkflow) -> CronWorkflow:
        """A copy the caller holds (no pending events), brought to the latest version by
        reading only the events after it: a copy made stale by a run completion costs one
        short read instead of replaying a stream that grows with every tick."""
        to_domain = self.mapper.to_domain_event
        result: Any = agg
        for stored in self.recorder.select_events(agg.id, gt=agg.version):
            event: Any = to_domain(stored)
            result = event.mutate(result)
        return cast(CronWorkflow, result)

    def tick(
        self, cron_ids: Iterable[UUID], at: datetime, decided_by: str | None = None
    ) -> TickReport:
        """Decide every due tick of these CronWorkflows as of `at`, in one transaction."""
        return self.commit_batch(
            self.decide_batch(cron_ids, at, decided_by=decided_by), at, decided_by
        )


def _same_events(ahead: tuple[Any, ...], pending: Sequence[Any]) -> bool:
    """Whether these are the very event objects something was prepared from."""
    return len(ahead) == len(pending) and all(a is b for a, b in zip(ahead, pending, strict=True))


def _recordings(
    events: Sequence[Any], stored: Sequence[StoredEvent], ids: Sequence[int] | None
) -> list[Recording[UUID]]:
    """What eventsourcing's `EventStore.put` returns: each event with its notification."""
    if not ids:
        return []
    return [
        Recording(
            d,
            Notification(
                originator_id=s.originator_id,
                originator_version=s.originator_version,
                topic=s.topic,
                state=s.state,
                id=n,
            ),
        )
        for d, s, n in zip(events, stored, ids, strict=True)
    ]


def _replay(agg: Any, events: Iterable[Any]) -> Any:
    """The repository's projector function without its `isinstance` check of every event
    against a runtime Protocol (40 µs an event: a fifth of a command's load)."""
    for ev in events:
        agg = ev.mutate(agg)
    return agg


def fired_in(events: Iterable[Any], start: datetime, end: datetime) -> set[datetime]:
    """The scheduled times in [start, end] of these events' fires and recovered runs (manual
    runs aside: their time is the request's, not a tick)."""
    fired: set[datetime] = set()
    for e in events:
        if event_type(e) in ("ScheduleFired", "RunRecovered") and e.trigger != "manual":
            if start <= e.scheduled_time <= end:
                fired.add(e.scheduled_time)
    return fired


def _streams_of(error: Exception) -> set[UUID]:
    """The streams a refused save names (`StaleAppend.streams` of
    adapters/infrastructure/store/recorders/; any other IntegrityError names none)."""
    return set(getattr(error, "streams", ()))


def commit_deadline(aggs: Iterable[CronWorkflow], late_tolerance: timedelta) -> datetime | None:
    """The latest instant these decided aggregates may be committed and still be what was
    decided: an on-time fire within the late tolerance of its tick, a catch-up within its
    tick's deadline (startingDeadlineSeconds). Later, the fire would be a late run recorded
    as on time, so the commit is refused and the ticks decided again
    (adapters/infrastructure/store/recorders/ `commit_within`). None: nothing in them has a
    deadline (skips are as true later as now)."""
    deadline: datetime | None = None
    for agg in aggs:
        for ev in agg.pending_events:
            if event_type(ev) != "ScheduleFired":
                continue
            trigger, tick = getattr(ev, "trigger"), getattr(ev, "scheduled_time")  # noqa: B009
            if trigger == "schedule":
                by = tick + late_tolerance
            elif trigger == "catchup":
                by = tick + (agg.policy(late_tolerance).deadline or late_tolerance)
            elif trigger == "buffer" and (waited := agg.policy(late_tolerance).deadline):
                by = tick + waited
            else:
                continue
            deadline = by if deadline is None else min(deadline, by)
    return deadline


def _count_fires(agg: CronWorkflow) -> int:
    return sum(1 for e in agg.pending_events if event_type(e) == "ScheduleFired")


def topic_type(topic: str) -> str:
    """`cronsource:ScheduleFired/v1` -> `ScheduleFired`: the event type users see."""
    return topic.split(":", 1)[-1].split("/", 1)[0]


def event_type(ev: Any) -> str:
    kind = type(ev)
    name = _TYPE_NAMES.get(kind)
    if name is None:
        name = _TYPE_NAMES[kind] = topic_type(getattr(kind, "TOPIC", kind.__name__))
    return name


#: `event_type` per event class: a burst asks it of every event several times (its report,
#: its commit deadline), and the answer is the class's.
_TYPE_NAMES: dict[type, str] = {}
