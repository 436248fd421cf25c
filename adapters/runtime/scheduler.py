"""The scheduler step: what is due, decided and committed; the next instant prepared and warmed.

One per replica, over its own service instance and its own decision cache. Decisions go to
the store through one committing thread, in order; several replicas deciding one tick are
kept from firing it twice by the store's version check, not by this code.

Each replica logs its own decisions (`log_decisions`, called by the service once the store
took a save: SchedulerLoop registers it), one line per ScheduleFired/ScheduleSkipped that names
a replica, with `decidedBy`: a decision the store refused was never made and is not logged;
the projector's DecisionLog logs the other events of the audit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from functools import lru_cache, partial
from itertools import chain
from typing import Any
from uuid import UUID

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.logs import scheduling_fields
from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.infrastructure.shards import Ownership
from cronsource.adapters.infrastructure.store.recorders import CommitTooLate, commit_within
from cronsource.adapters.runtime.decision_cache import DecisionCache
from cronsource.adapters.runtime.settings import (
    BATCH,
    PREPARE_AHEAD,
    PREPARE_LIMIT,
    PREPARED_MAX_DELAY,
    WARM_AHEAD,
    WARM_LIMIT,
)
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.service import CronService, StagedBatch, TickReport

#: The logger of decisions (the projector's DecisionLog writes the audit's other events to it).
decision_log = logging.getLogger("cronsource.decisions")
#: The events a scheduler decides, logged by the replica that decided them.
DECISIONS = ("ScheduleFired", "ScheduleSkipped")
#: The id of each stream named by its text, parsed once: the due index names every
#: CronWorkflow due at an instant, 10,000 at once, at every instant it is due (parsing was a
#: third of reading them). Bounded by the CronWorkflows that exist, give or take deletions.
stream_uuid = lru_cache(maxsize=1 << 18)(UUID)

#: A batch the store has: its report, and what is left to do (`Scheduler._commit`).
Committed = tuple[TickReport, Callable[[], None]]


def log_decisions(events: list[tuple[str, str, Any]]) -> None:
    """One line per decision saved that names the replica that made it (this one: only its
    own service saves through here)."""
    for namespace, name, ev in events:
        kind = type(ev).__name__
        d = ev.__dict__
        if kind not in DECISIONS or not d.get("decided_by"):
            continue
        workflow = d.get("workflow_name")
        fields = scheduling_fields(
            namespace,
            name,
            d.get("scheduled_time"),
            ev.originator_version,
            event=kind,
            reason=d.get("reason"),
            workflow=workflow,
            trigger=d.get("trigger"),
            count=d.get("count"),
            lastTick=d.get("last_scheduled_time") if kind == "ScheduleSkipped" else None,
            decidedBy=d["decided_by"],
        )
        what = f"fired {workflow}" if kind == "ScheduleFired" else f"skipped ({d.get('reason')})"
        decision_log.info("%s/%s %s", namespace, name, what, extra=fields)


def _decided_on(agg: CronWorkflow) -> int:
    """The stored version a decision not yet saved was made on: its version before the
    events it holds."""
    return agg.version - len(agg.pending_events)


class Scheduler:
    def __init__(
        self,
        service: CronService,
        view: ReadModel,
        ownership: Ownership,
        cache: DecisionCache | None = None,
        on_fired: Callable[[], None] | None = None,
        clock: Clock | None = None,
        replica: str | None = None,
    ) -> None:
        self.service = service
        #: This replica's identity (adapters/infrastructure/replica.py): recorded as `decidedBy` on
        #: its decisions and named in their log lines.
        self.replica = replica
        self.view = view
        self.ownership = ownership
        self.cache = (
            cache if cache is not None else DecisionCache(service.load_many, service.fast_forward)
        )
        #: Called as soon as a batch with fires is in the store, on the thread that committed
        #: it (wakes the dispatch thread).
        self.on_fired = on_fired
        #: The runtime's clock, for commit deadlines; None (tests driving instants by hand):
        #: commits have no deadline.
        self.clock = clock
        self.fires = 0
        self.last_warmed = 0
        #: What this replica last saved: version and next due instant, by id.
        self._known_next: dict[UUID, tuple[int, datetime | None]] = {}
        #: Decisions made in advance for one due instant: (instant, batches of aggregates).
        self._prepared: tuple[datetime, list[list[CronWorkflow]]] | None = None

    def forget(self) -> None:
        """Drop what this step holds between instants (copies, the versions it saved, the
        decisions made in advance): the store may no longer hold what they were made on."""
        self.cache.clear()
        self._known_next.clear()
        self._prepared = None

    def due(self, now: datetime) -> dict[UUID, int]:
        """What the due index shows due now and this replica owns, by id with the version
        shown; left out: what it shows before our own last save of it."""
        seen: dict[UUID, int] = {}
        for raw, version in self.view.due_versions(now):
            cron_id = stream_uuid(raw)
            if not self.ownership.owns(cron_id):
                continue
            known = self._known_next.get(cron_id)
            if known is not None and version < known[0]:
                # The due index has not yet seen our own last save: what we decided then is
                # newer than what it shows. Once it has caught up, it is the one to trust
                # (someone else may have changed the CronWorkflow since).
                if known[1] is None or known[1] > now:
                    continue
            seen[cron_id] = version
        return seen

    def decide_with_copies(
        self, ids: list[UUID], at: datetime, seen: dict[UUID, int]
    ) -> list[CronWorkflow]:
        """One batch decided on the cache's copies where they are current, else loaded."""
        return self.service.decide_batch(
            ids, at, self.cache.take(seen, ids), decided_by=self.replica
        )

    def _commit(
        self, staged: StagedBatch, at: datetime, started: threading.Event | None = None
    ) -> Committed:
        """On the committing thread: append a staged batch; returns the report and what is
        left to do once the store has it (`CronService.append_batch`), which then also puts
        the saved copies back in the cache (after a refusal they are not the saved state:
        the next decision loads afresh). The caller runs it, in a burst while the next batch
        is at the store.

        The save must land while its fires are still what was decided (`commit_deadline`):
        an on-time fire within the late tolerance of its tick. A store that is slow, locked
        or reconnecting past that refuses the commit (CommitTooLate, or the statement and
        lock timeouts it sets), and the batch is decided again on the time it is then, where
        those ticks are missed ticks and follow the deadline rules.

        `started` is set as it starts (`_commit_all`)."""
        if started is not None:
            started.set()
        while True:
            self.ownership.check_lease()  # a replica frozen past its lease writes nothing
            try:
                with commit_within(self._time_left(staged.deadline)):
                    report, finish = self.service.append_batch(staged, at, self.replica)
            except CommitTooLate:
                assert self.clock is not None  # no deadline without a clock
                now = self.clock.now()
                if now <= at:
                    raise  # the clock stands still (a virtual one): deciding again is no use
                at = now
                staged = self.service.stage_batch(
                    self.service.decide_batch(
                        [a.id for a in staged.aggs], at, decided_by=self.replica
                    )
                )
                continue
            if report.fires and self.on_fired is not None:
                # The fires are in the log now: their Workflows can be created while this
                # batch's aftermath (`finish`) is settled, which in a burst of 500 took the
                # first create 30 ms later.
                self.on_fired()
            return report, partial(self._kept, report, finish, staged.aggs)

    def _kept(
        self, report: TickReport, finish: Callable[[], None], batch: Sequence[CronWorkflow]
    ) -> None:
        finish()
        if not report.rejected:
            self.cache.keep(batch)

    def _time_left(self, deadline: datetime | None) -> float | None:
        """Seconds until a batch's `commit_deadline`, on the runtime's clock."""
        if self.clock is None or deadline is None:
            return None
        return (deadline - self.clock.now()).total_seconds()

    def schedule_once(self, now: datetime) -> int:
        """Decide everything due now, BATCH CronWorkflows per transaction; returns fires.

        What `prepare_once` decided in advance for an instant that has now come is committed
        first, as it is: the store's version check refuses any of it whose CronWorkflow
        changed since (that batch is then decided again on fresh state). The rest is decided
        now. Batch k+1 is decided while batch k's transaction is on its way to the store (one
        committing thread keeps the commits in order): the database's time and Python's
        overlap instead of adding up. Batches hold distinct CronWorkflows, so the two never
        touch the same aggregate.

        A burst decided in advance (more than one batch) starts committing at once: what
        else is due is looked up, and each prepared batch checked, while the commits before
        it are on their way.
        """
        ahead = self._take_prepared(now)
        if len(ahead) > 1:
            return self._commit_all(self._current_then_due(ahead, now), overlap=True)
        seen = self.due(now)
        prepared = self._still_current(ahead, seen)
        taken = {a.id for _, batch in prepared for a in batch}
        due = [cron_id for cron_id in seen if cron_id not in taken]
        if not prepared and not due:
            return 0
        return self._commit_all(
            chain(prepared, self._decided(due, now, seen)),
            # One batch: nothing to overlap its commit with, so no committing thread either.
            overlap=len(prepared) + len(due) > BATCH or len(prepared) > 1,
        )

    def _current_then_due(
        self, ahead: list[tuple[datetime, list[CronWorkflow]]], now: datetime
    ) -> Iterator[tuple[datetime, list[CronWorkflow]]]:
        """The prepared batches still current, one by one, then the rest of what is due."""
        taken: set[UUID] = set()
        for prepared in ahead:
            for instant, batch in self._still_current([prepared]):
                taken.update(a.id for a in batch)
                yield instant, batch
        seen = self.due(now)
        yield from self._decided([c for c in seen if c not in taken], now, seen)

    def _decided(
        self, due: list[UUID], now: datetime, seen: dict[UUID, int]
    ) -> Iterator[tuple[datetime, list[CronWorkflow]]]:
        for i in range(0, len(due), BATCH):
            yield now, self.decide_with_copies(due[i : i + BATCH], now, seen)

    def _commit_all(
        self, batches: Iterator[tuple[datetime, list[CronWorkflow]]], overlap: bool
    ) -> int:
        """Commit the batches in order; with `overlap`, on a committing thread, while the
        deciding thread makes and stages the next one and settles the one before: the
        store's work and Python's overlap. Returns the fires."""
        fired = 0

        def settle(committed: Committed) -> None:
            nonlocal fired
            report, finish = committed
            finish()
            fired += report.fires
            for cron_id, version in report.versions.items():
                self._known_next[cron_id] = (version, report.next_due.get(cron_id))

        stage = self.service.stage_batch
        if not overlap:
            for at, batch in batches:
                settle(self._commit(stage(batch), at))
        else:
            with ThreadPoolExecutor(1, thread_name_prefix="commit") as committer:
                in_flight: Future[Committed] | None = None
                for at, batch in batches:
                    staged = stage(batch)  # while the one before is at the store
                    stored = in_flight.result() if in_flight is not None else None
                    started = threading.Event()
                    in_flight = committer.submit(self._commit, staged, at, started)
                    # Let the committing thread send it first: Python's lock between
                    # threads goes to a waiting thread only after 5 ms (or when the
                    # holder blocks), so settling first would hold the store up.
                    started.wait()
                    if stored is not None:
                        settle(stored)  # while this one is at the store
                if in_flight is not None:
                    settle(in_flight.result())
        self.fires += fired
        return fired

    def _take_prepared(self, now: datetime) -> list[tuple[datetime, list[CronWorkflow]]]:
        """The batches decided in advance for an instant that has come, if it came no more
        than PREPARED_MAX_DELAY ago; decisions for a later instant stay, stale ones go."""
        if self._prepared is None or now < self._prepared[0]:
            return []
        instant, batches = self._prepared
        self._prepared = None
        if now - instant > PREPARED_MAX_DELAY:
            return []  # their copies were taken out of the cache: the next decision reloads
        return [(instant, batch) for batch in batches]

    @property
    def prepared_for(self) -> datetime | None:
        """The instant the decisions made in advance are for, if any are held."""
        return None if self._prepared is None else self._prepared[0]

    def _held_by_prepared(self) -> dict[UUID, int]:
        """The stored version each decision made in advance was decided on, by id."""
        if self._prepared is None:
            return {}
        return {a.id: _decided_on(a) for batch in self._prepared[1] for a in batch}

    def _still_current(
        self,
        prepared: list[tuple[datetime, list[CronWorkflow]]],
        seen: dict[UUID, int] | None = None,
    ) -> list[tuple[datetime, list[CronWorkflow]]]:
        """The decisions made in advance whose CronWorkflow this process has not written
        since (a run completion its watcher reported, a command it served), nor the due
        index shows written since (`seen`, when the caller looked it up: another replica's
        run watcher records the completions of runs this one fired, so with runs shorter
        than the period every decision made ahead was stale, and each refused batch cost a
        retry): those are left out and decided now on fresh state, instead of being
        committed for the store to refuse. So one replica rejects no write; a second
        writer's saves the due index has not yet seen are the store's to refuse, as the
        version check is there for (`rejected_writes`). A decision that read a calendar
        changed since is left out too: calendars are streams of their own, which the
        CronWorkflow's version check does not cover."""
        saved = self.service.saved_versions
        shown = seen or {}
        kept = []
        for instant, batch in prepared:
            current = [
                a
                for a in batch
                if max(saved.get(a.id, 0), shown.get(a.id, 0)) <= _decided_on(a)
                # A calendar it read changed since: its store version would not say so.
                and not self.service.calendars_changed(a)
            ]
            if current:
                kept.append((instant, current))
        return kept

    def prepare_once(self, now: datetime) -> int:
        """Decide in advance the next due instant's CronWorkflows, when it is near.

        A decision is a pure function of the aggregate and the instant, so it can be made
        before the instant and committed at it (never before: `schedule_once` only commits
        decisions for an instant that has come). A burst then costs the commits alone. If a
        CronWorkflow changes in between (suspended, a run completed, its spec edited), the
        store refuses the stale save and that batch is decided again on fresh state.
        Returns how many were decided.
        """
        instant = self.view.next_due_after(now)
        if (
            instant is None
            or instant - now > PREPARE_AHEAD
            or (self._prepared is not None and self._prepared[0] == instant)
        ):
            return 0
        seen = {
            cron_id: version
            for raw, version in self.view.due_versions(instant, PREPARE_LIMIT, after=now)
            if self.ownership.owns(cron_id := stream_uuid(raw))
        }
        ids = list(seen)
        batches = [
            self.decide_with_copies(ids[i : i + BATCH], instant, seen)
            for i in range(0, len(ids), BATCH)
        ]
        # Their events' stored form and the cache's copies too: at the instant, only the
        # store's work is left.
        self.service.encode_ahead([a for batch in batches for a in batch])
        self._prepared = (instant, [b for b in batches if b])
        return len(ids)

    def warm_once(self, now: datetime) -> int:
        """Load what is due within WARM_AHEAD and not yet in memory; returns how many.

        Left out: what a decision made in advance holds, at the version the due index shows
        or newer. Its copy was taken out of the cache to decide on (`DecisionCache.take`), so
        the cache looks as if it never had it; loading it again read the whole burst back
        from the store (0.55 s for 5,000, on the loop's thread, into the instant itself) for
        copies the commit then replaces with the saved ones."""
        held = self._held_by_prepared()
        versions = {
            cron_id: version
            for raw, version in self.view.due_versions(now + WARM_AHEAD)
            if self.ownership.owns(cron_id := stream_uuid(raw)) and held.get(cron_id, -1) < version
        }
        self.last_warmed = self.cache.warm(versions, WARM_LIMIT)
        return self.last_warmed

    def next_wake(self, now: datetime) -> datetime | None:
        """The next instant this step has work at: the next due instant (or that of the
        decisions made in advance), or before it the moments it is warmed (WARM_AHEAD) and
        decided in advance (PREPARE_AHEAD). A clock
        that jumps (simulate) needs them; on the wall clock the loop turns more often."""
        nxt = self.view.next_due()
        if self._prepared is not None and (nxt is None or self._prepared[0] < nxt):
            nxt = self._prepared[0]  # committed (or refused) at its instant
        if nxt is None or nxt <= now:
            return nxt
        for ahead in (WARM_AHEAD, PREPARE_AHEAD):
            if nxt - ahead > now:
                return nxt - ahead
        return nxt
