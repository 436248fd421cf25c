"""`run --retain DURATION`: the log and the audit keep a window, not the whole history.

Without it the log grows for ever (100,000 hourly CronWorkflows add about 1.75 billion events a
year) and with it every backup and every rebuild of the read model. With it, the projector
replica removes, in small batches between its turns, the events older than the retention that
nothing needs any more:

- a snapshot covers them: the stream's second latest (a stream is loaded from its latest
  snapshot and the events after it; when the latest cannot be read, from the one before it),
  so the events at or below it serve no load; a stream with old events and no snapshot
  covering them gets one first (of the version before its last when the last has one: a
  deleted or idle stream keeps its last event and two snapshots, not its history);
- every follower of the log has passed them (the read model and the dispatcher: their
  positions), so nothing still has to project or dispatch them;
- they are not their stream's last event (the last version is what every append checks);
- they are not still needed, whatever their age: the fire of a run still active, the
  BackfillQueued of a queue not drained.

The audit rows of the removed window go too, and `cronsource_retention` records the oldest
instant kept, so history and `why` can name it. A batch is one short transaction of at most
BATCH events; appends wait for it (they lock the event table), so it is kept small, and the
work of a turn stops when the turn's budget is spent, so removal never holds up a fire for
longer than one batch. A kill -9 in the middle loses nothing: a batch is committed whole or not
at all, and the next pass starts again from the first event it has not looked at (from the
start of the log after a restart).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.durations import format_duration

log = logging.getLogger("cronsource")

#: Events per delete transaction: about 10-50 ms of the event table's lock.
BATCH = 1000
#: The shortest retention accepted: less would remove the history a user looks at today.
MIN_RETAIN = timedelta(days=1)
#: How often a replica looks for something to remove.
RETENTION_SECONDS = 60.0
#: How often a pass starts from the beginning of the log again, not from where the last ended.
FULL_PASS = timedelta(days=1)


class RetentionTooShort(ValueError):
    pass


def check_retain(retain: timedelta, longest_deadline: timedelta, shown: str | None = None) -> None:
    """Refuse a retention shorter than a day or than the longest startingDeadlineSeconds (a
    catch-up decided within its deadline must still find its ticks' history). `shown`: the
    value as the user wrote it (`1s`, not Python's `0:00:01`)."""
    said = shown if shown is not None else str(retain)
    if retain < MIN_RETAIN:
        raise RetentionTooShort(f"--retain {said}: shorter than a day (24h, or 1d)")
    if retain < longest_deadline:
        raise RetentionTooShort(
            f"--retain {said}: shorter than the longest startingDeadlineSeconds"
            f" ({int(longest_deadline.total_seconds())}s)"
        )


class Retention:
    def __init__(self, engine: Engine, retain: timedelta) -> None:
        self.engine = engine
        self.retain = retain
        #: The last log position looked at; 0 again after a restart, so a pass then looks at
        #: everything left behind (events still needed then, the streams' last events).
        self._after = 0
        self._full_pass_at: datetime | None = None
        self.removed = 0
        #: Whether the last pass stopped for want of time before the window's end.
        self.behind = False
        #: The deadline the window was last widened to (`_window`), to say it once.
        self._widened_to: timedelta | None = None

    def _window(self) -> timedelta:
        """The retention, or the longest startingDeadlineSeconds of the live CronWorkflows
        when that is longer: start-up refuses such a `--retain` (check_retain), but a
        CronWorkflow applied since may set one, and its catch-up must still find its ticks'
        history. Said once per deadline that widens the window."""
        deadline = timedelta(seconds=self.engine.view.longest_deadline())
        if deadline <= self.retain:
            return self.retain
        if deadline != self._widened_to:
            self._widened_to = deadline
            log.warning(
                "retention: a CronWorkflow's startingDeadlineSeconds (%ds) is longer than"
                " --retain %s: events are kept for %s; a restart refuses this --retain",
                deadline.total_seconds(),
                format_duration(self.retain),
                format_duration(deadline),
            )
        return deadline

    def step(self, now: datetime, more_time: Callable[[], bool]) -> int:
        """Remove what the window no longer needs, batch by batch while `more_time()`;
        returns how many events were removed."""
        engine = self.engine
        snapshots = engine.service.snapshots
        recorder: Any = engine.service.recorder
        if snapshots is None or not hasattr(recorder, "remove_covered"):
            return 0  # `memory:`: the process's lifetime is the retention
        cutoff = now - self._window()
        if self._full_pass_at is None or now - self._full_pass_at >= FULL_PASS:
            # Once a day from the start of the log again: what a pass left behind (an
            # active run's fire since ended, events a snapshot covers only now) goes too.
            self._after, self._full_pass_at = 0, now
        view, projector = engine.view, engine.projector
        passed = projector.position()
        if engine.dispatcher is not None:
            passed = min(passed, projector.dispatched())
        upto = min(view.position_before(cutoff), passed)
        self.behind = False
        if upto <= self._after:
            return 0
        keep = view.needed_positions(upto)
        table = getattr(snapshots.recorder, "events_table_name")  # noqa: B009
        removed = 0
        while self._after < upto and more_time():
            n, last, uncovered = recorder.remove_covered(table, self._after, upto, keep, BATCH)
            if uncovered:
                # Old events no snapshot covers yet: snapshot those streams (as they are
                # now, or at the version before when that is snapshotted already: a deleted
                # stream), and the same range again removes them.
                aggs = engine.service.load_many(dict.fromkeys(uncovered))
                # A calendar's stream has no snapshot and is kept whole: each version is
                # what some skip names, and a calendar changes rarely.
                engine.service.snapshot_to_cover(
                    [a for a in aggs.values() if isinstance(a, CronWorkflow)]
                )
                n2, _, _ = recorder.remove_covered(table, self._after, last, keep, BATCH)
                n += n2
            removed += n
            self._after = last
        audit = BATCH
        while audit == BATCH and more_time():
            audit = view.remove_audit(upto, keep, BATCH)
        self.behind = self._after < upto or audit == BATCH
        if removed:
            view.set_kept_from(cutoff)
            self.removed += removed
            log.info(
                "retention: removed %d events older than %s (kept: %s)",
                removed,
                cutoff.isoformat(timespec="seconds"),
                format_duration(self.retain),
            )
        return removed


class RetentionThread:
    """`serve --retain`: retention for a store no `run` projects (a `run` does it in its
    loop). Every RETENTION_SECONDS it takes the projector lock if free (so it never removes
    beside a projector), removes for at most a second, and lets the lock go."""

    def __init__(self, engine: Engine, retain: timedelta) -> None:
        import threading

        self.retention = Retention(engine, retain)
        self.engine = engine
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _for_a_second(self, monotonic: Callable[[], float]) -> Callable[[], bool]:
        until = monotonic() + 1.0
        return lambda: not self._stop.is_set() and monotonic() < until

    def _run(self) -> None:
        clock = self.engine.clock
        while not self._stop.wait(RETENTION_SECONDS):
            lock = self.engine.projector.lock
            try:
                if not lock.try_acquire():
                    continue
                try:
                    self.retention.step(clock.now(), self._for_a_second(clock.monotonic))
                finally:
                    lock.release()
            except Exception as e:  # a store that went away: the next round tries again
                log.warning("retention failed: %s: %s", type(e).__name__, e)
