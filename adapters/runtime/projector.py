"""The one owner of the projections: who may move their positions, and how readers wait.

A projection (status view, audit, due index, dispatch) follows the log with a position it
moves in the same transaction as its rows, and follows aggregates in a cache of its own that
two threads must not evolve at once. So exactly one thread in one process moves positions at a
time: the holder of the projector lock (`run`'s projector replica, or, when none runs, a short
catch-up by whoever needs fresh reads) inside this class's mutex.
The lock itself is infrastructure (adapters/infrastructure/locks.py).

Everyone else reads. A command returns a receipt with its log position (`CronService.receipt`);
a reader that must see its own write calls `settle(receipt)`:

- a projector is running in this process: wait until it has passed the position;
- none runs anywhere (a CLI command or `serve` on a quiet store): take the lock and project,
  at most `SETTLE_BUDGET` seconds of work, then let it go again so that a `run` started later
  can take it;
- another process holds it (`cronsource run`): wait until its position passes ours.

Either way the wait is bounded; `settle` returns whether the read model has caught up, and a
reader that got `False` says the status may be behind rather than hang.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eventsourcing.persistence import Tracking

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.locks import ProjectorLock
from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.runtime.dispatchfirst import DispatchFirst
from cronsource.domain.service import CronService, Receipt
from cronsource.projections.dispatch import STREAM_CHUNK, Dispatcher
from cronsource.projections.readmodel import ReadModelProjection

log = logging.getLogger("cronsource")

#: Seconds of projection work a reader may do itself when no projector runs. The read model
#: of a store nobody projected for a long time catches up over several commands (each says so)
#: instead of one command blocking for minutes.
SETTLE_BUDGET = 10.0
#: Seconds a reader waits for another projector to pass its position.
SETTLE_TIMEOUT = 10.0
#: How often a reader looks at the position while another process projects.
POLL_SECONDS = 0.05
#: How long a reader sleeps between looks while this process's own worker projects (it is
#: woken sooner when the worker moves).
NOTIFIED_SLICE = POLL_SECONDS * 4
#: The projections that follow the log, by the name their positions are stored under.
READ_MODEL, DISPATCH = "readmodel", "dispatch"
#: The read model's projection waits for a dispatch thread that has at least this many events
#: to dispatch (a burst), until it has caught up (adapters/runtime/dispatchfirst.py): the
#: creations then have the process to themselves. Smaller backlogs are projected as they come.
READ_MODEL_WAITS_FROM = 200
#: ... unless the dispatcher has not moved for this long (an API that refuses every create),
READ_MODEL_WAITS_FOR_DISPATCH = timedelta(seconds=5)
#: ... and at most this long at a time: the status view, the audit and the due index are then
#: at most this stale while more fires come than the target takes.
READ_MODEL_WAITS_AT_MOST = timedelta(seconds=30)


#: How many full reads of the log the projections share (`Projector._pending`): the last
#: ones, for the projection that follows the other a step or two behind on its own thread.
SHARED_READS = 4


@dataclass(frozen=True)
class _Read:
    """Events read for a projection: from `start`, at most `limit` of them."""

    start: int
    limit: int
    events: list[tuple[Any, Tracking]]


class Projector:
    """Moves the projections' positions; see the module docstring for who calls what.

    One runner owns the projections' subscription to the log (what is pending after each
    position), the catch-up within a budget, the wait for a position, and the lock. It is
    ours rather than eventsourcing's `projection.ProjectionRunner` because that runner owns a
    thread per projection and a tracking recorder per view, where ours moves the status view
    and the dispatcher from the scheduler loop's turn, within its budget, under one lock
    (docs/architecture.md).
    """

    def __init__(
        self,
        service: CronService,
        view: ReadModel,
        readmodel: ReadModelProjection,
        dispatcher: Dispatcher | None,
        lock: ProjectorLock,
        clock: Clock,
    ) -> None:
        self.service = service
        self.view = view
        self.readmodel = readmodel
        self.dispatcher = dispatcher
        self.lock = lock
        self.clock = clock
        #: True while a projection worker of this process turns (`run`): readers here then
        #: wait for it instead of projecting themselves.
        self.worker_running = False
        #: True while a dispatch thread of this process creates the Workflows (`run`): the
        #: projection step then leaves the dispatcher's position to it.
        self.dispatch_thread = False
        #: When the read model's projection waits for the dispatch thread (`step`).
        self.read_model_first = DispatchFirst(
            READ_MODEL_WAITS_FOR_DISPATCH, READ_MODEL_WAITS_AT_MOST, READ_MODEL_WAITS_FROM
        )
        #: Readers waiting for this process's worker (`settle`): the read model never waits
        #: for the dispatcher while someone waits for it.
        self._readers = 0
        self._mutex = threading.Lock()
        self._moved = threading.Condition(threading.Lock())
        #: A lower bound of each projection's position: the highest this process has read or
        #: written. Positions only move forward, so a bound at or past the head proves a
        #: projection caught up without a query; below it, `behind` reads the position.
        self._reached: dict[str, int] = {}
        #: The last full reads of the log, decoded, by (start, limit): the projection that
        #: comes second to a position (on its own thread) takes them instead of reading and
        #: decoding the same events again (`_pending`).
        self._reads: OrderedDict[tuple[int, int], list[tuple[Any, Tracking]]] = OrderedDict()
        self._reads_lock = threading.Lock()

    def use_lock(self, lock: ProjectorLock) -> None:
        """Hold the projector role by `lock` from now on: `run` hands over its shard
        ownership's role (RoleLock) in place of the store's own lock."""
        old, self.lock = self.lock, lock
        if old is not lock:
            old.close()

    # ------------------------------------------------------------------ positions

    def position(self, projection: str = READ_MODEL) -> int:
        """How far a projection has followed the log (the status view by default)."""
        at = self.view.max_tracking_id(self.service.name, projection) or 0
        self._reach(projection, at)
        return at

    def _reach(self, projection: str, at: int) -> None:
        if at > self._reached.get(projection, 0):
            self._reached[projection] = at

    def forget(self) -> None:
        """Drop the positions seen, and the events read: a store restored from a backup has
        them further back, and other events past them."""
        self._reached.clear()
        with self._reads_lock:
            self._reads.clear()

    def _caught_up(self, projection: str, head: int) -> bool:
        """Whether `projection` has reached `head`: known without a query when a position
        this process saw is there already (positions never go back)."""
        return self._reached.get(projection, 0) >= head or self.position(projection) >= head

    def dispatched(self) -> int:
        """How far the dispatcher has followed the log (every fire up to it has its Workflow)."""
        return self.position(DISPATCH)

    def head(self) -> int:
        return self.service.recorder.max_notification_id() or 0

    def lag(self) -> dict[str, int]:
        """How many events each projection is behind the log."""
        head = self.head()
        return {p: head - self.position(p) for p in (READ_MODEL, DISPATCH)}

    def behind(self, *, dispatch: bool = True) -> bool:
        """Whether the log has events past the read model's position (or, with `dispatch`,
        past the dispatcher's): the test a catch-up itself makes, in two or three queries
        instead of a round of reads per projection."""
        head = self.head()
        if not self._caught_up(READ_MODEL, head):
            return True
        return dispatch and self.dispatcher is not None and not self._caught_up(DISPATCH, head)

    # ------------------------------------------------------------------ the mechanism

    def catch_up(
        self,
        at: datetime | None = None,
        batch: int = 1000,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
        *,
        dispatch: bool = True,
    ) -> int:
        """Process events not yet projected; returns how many the read model took.

        The mechanism only, without the lock: `step` and `settle` call it under the lock;
        tests and benchmarks that are the only process on their store call it directly.
        Without a `budget` it runs until caught up. The service loop passes a budget in
        seconds and a stop check, so a backlog never holds up SIGTERM or the scheduler for
        longer than that: the rest waits for the next turn. `dispatch=False` leaves the
        dispatcher to its own thread (adapters/runtime/dispatchworker.py).
        """
        more_time = _time_left(self.clock, budget, stop)
        read: list[_Read] = []  # the read model's last read, handed on to the dispatcher
        done = self._drain(READ_MODEL, self.readmodel.process_batch, batch, more_time, read)
        if dispatch:
            self._dispatch(at, batch, more_time, read)
        return done

    def dispatch(
        self,
        at: datetime | None = None,
        batch: int = 1000,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> int:
        """Dispatch events not yet dispatched (the dispatcher's part of `catch_up`)."""
        return self._dispatch(at, batch, _time_left(self.clock, budget, stop))

    def _dispatch(
        self,
        at: datetime | None,
        batch: int,
        more_time: Callable[[], bool],
        read: list[_Read] | None = None,
    ) -> int:
        dispatcher = self.dispatcher
        if dispatcher is None:
            return 0
        now = at or self.clock.now()
        done = 0

        def batches() -> Iterator[list[tuple[Any, Tracking]]]:
            """The pending events, `batch` at a time, until caught up or time is up; read
            from where the last batch ended, while its creations may still be answered
            (the stored position moves once they are: `Dispatcher.process_batches`)."""
            nonlocal done
            start = self.position(DISPATCH) + 1
            # A streaming dispatcher of its own (`run`) reads a first chunk only: the first
            # Workflows of a burst are sent while the rest is read (a read of 500 fires took
            # 25 ms before the first create could go).
            limit = min(STREAM_CHUNK, batch) if read is None and dispatcher.streams else batch
            while True:
                pending = self._pending(DISPATCH, limit, read, start=start)
                limit = batch
                yield pending
                done += len(pending)
                if pending:
                    start = pending[-1][1].notification_id + 1
                # A short read is the end of the log as it was; a streaming dispatcher reads
                # once more while the creations sent are answered: the scheduler commits a
                # burst in batches, and the next may be in the log already.
                short = len(pending) < batch and not dispatcher.streams
                if not pending or short or not more_time():
                    return

        reached = dispatcher.process_batches(batches(), now)
        if reached is not None:
            self._reach(DISPATCH, reached.notification_id)
        return done

    def _pending(
        self,
        projection: str,
        limit: int,
        read: list[_Read] | None = None,
        *,
        start: int | None = None,
    ) -> list[tuple[Any, Tracking]]:
        """The events after the projection's position, at most `limit`, decoded once for
        both projections where they follow the log from the same positions:

        - Within one catch-up (`read`: the last read of it), the dispatcher follows the read
          model from the same position: it is handed the events the read model just read,
          whatever their number (what was appended in between waits for the next step, as
          it would have for a read a moment earlier).
        - Across threads (`run`'s dispatcher thread, a step behind the read model or ahead
          of it), a projection is handed the other's last reads from its position when they
          were full, `limit` events: such a read is the same whenever it is made (the log
          only grows, in order), so it can never hide an event. A shorter read, at the head
          of the log then, could: a catch-up must reach the head of the log as of its call
          (`settle` waits on that), so it reads that again itself.

        Decoded events are shared, never edited: each projection evolves its own aggregates
        with them. `start`: read from there rather than after the stored position (the
        dispatcher's next batch, while the last one's creations are answered)."""
        app = self.service
        if start is None:
            start = self.position(projection) + 1
        if read and read[-1].start == start and read[-1].limit == limit:
            return read[-1].events
        key = (start, limit)
        with self._reads_lock:
            shared = self._reads.get(key)
        if shared is not None:
            pending = shared
        else:
            notes = app.recorder.select_notifications(start=start, limit=limit)
            pending = [(app.mapper.to_domain_event(n), Tracking(app.name, n.id)) for n in notes]
            if len(pending) == limit:
                with self._reads_lock:
                    self._reads[key] = pending
                    while len(self._reads) > SHARED_READS:
                        self._reads.popitem(last=False)
        if read is not None:
            read[:] = [_Read(start, limit, pending)]
        return pending

    def _drain(
        self,
        projection: str,
        process: Callable[[list[tuple[Any, Tracking]]], Any],
        batch: int,
        more_time: Callable[[], bool],
        read: list[_Read] | None = None,
    ) -> int:
        """Feed a projection its pending events, `batch` at a time, until it is caught up or
        time is up; at least one batch per call, so it always makes progress."""
        done = 0
        while True:
            pending = self._pending(projection, batch, read)
            process(pending)
            done += len(pending)
            if pending:
                self._reach(projection, pending[-1][1].notification_id)
            if len(pending) < batch or not more_time():
                return done

    # ------------------------------------------------------------------ the projector's turn

    def step(
        self,
        now: datetime | None = None,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
        *,
        dispatch: bool | None = None,
    ) -> int:
        """Project what is new, if this process holds the projector lock; returns how many
        events the read model took (0 when another process projects). The dispatcher
        follows too (`dispatch=None`) unless a dispatch thread of its own does
        (`dispatch_step`)."""
        if dispatch is None:
            dispatch = not self.dispatch_thread
        if not dispatch and self._waits_for_dispatch(now):
            return 0
        with self._mutex:
            if not self.lock.try_acquire():
                return 0
            done = self.catch_up(now, budget=budget, stop=stop, dispatch=dispatch)
        if done:
            with self._moved:
                self._moved.notify_all()
        return done

    def _waits_for_dispatch(self, now: datetime | None) -> bool:
        """Whether the read model's step waits for the dispatch thread this time: it is
        creating a burst's Workflows (adapters/runtime/dispatchfirst.py) and no reader here
        waits for the read model."""
        if not self.dispatch_thread or self.dispatcher is None or self._readers:
            return False
        return self.read_model_first.waits(
            self.dispatched(), self.head(), now if now is not None else self.clock.now()
        )

    def dispatch_step(
        self,
        now: datetime | None = None,
        budget: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> int:
        """The dispatch thread's turn: create the Workflows of new fires, if this process
        holds the projector lock. The dispatcher keeps its own position and its own copies
        of the aggregates, so it needs no share of the read model's mutex."""
        if not self.lock.try_acquire():
            return 0
        return self.dispatch(now, budget=budget, stop=stop)

    # ------------------------------------------------------------------ readers

    def settle(
        self,
        receipt: Receipt | int | None = None,
        *,
        wait: bool = True,
        timeout: float = SETTLE_TIMEOUT,
    ) -> bool:
        """Make the read model reflect `receipt` (a command's log position; None: the head
        of the log now), or wait until it does; True when it does.

        `wait=False` is for plain reads: when someone else projects, read what is there
        rather than wait (no write of the reader's own is at stake).
        """
        target = receipt.position if isinstance(receipt, Receipt) else receipt
        if target is None:
            target = self.head()
        if target <= 0 or self.position() >= target:
            return True
        if self.worker_running:
            return wait and self._wait_notified(target, timeout)
        projected = self._project_bounded(target, block=wait)
        if projected is not None:
            return projected
        if not wait:
            return False
        if self._wait_polled(target, timeout):
            return True
        log.warning(
            "the status view has not reached this command's write after %.0fs: the"
            " projector (`cronsource run`) is %d events behind the log",
            timeout,
            self.head() - self.position(),
        )
        return False

    def _project_bounded(self, target: int, *, block: bool) -> bool | None:
        """No projector runs here: project ourselves if nobody else does (at most
        SETTLE_BUDGET seconds), then give the lock back. None: another process projects.
        With `block=False` a plain read does not queue behind another thread's catch-up:
        it reads what is there (False)."""
        if not self._mutex.acquire(blocking=block):
            return False
        try:
            if self.position() >= target:
                return True
            if not self.lock.try_acquire():
                return None
            try:
                self.catch_up(self.clock.now(), budget=SETTLE_BUDGET, dispatch=False)
            finally:
                self.lock.release()
        finally:
            self._mutex.release()
        behind = self.head() - self.position()
        if self.position() < target:
            log.warning(
                "the status view is %d events behind the log; no projector is running"
                " (start `cronsource run`) and this command projected for %.0fs",
                behind,
                SETTLE_BUDGET,
            )
            return False
        return True

    def _wait_notified(self, target: int, timeout: float) -> bool:
        """Wait for this process's projection worker, woken as it moves: at most `timeout`
        seconds counted in the slices waited, so no clock is read."""
        slices = max(1, math.ceil(timeout / NOTIFIED_SLICE))
        with self._moved:
            self._readers += 1
            try:
                for _ in range(slices):
                    if self.position() >= target:
                        return True
                    self._moved.wait(NOTIFIED_SLICE)
            finally:
                self._readers -= 1
        return self.position() >= target

    def _wait_polled(self, target: int, timeout: float) -> bool:
        clock = self.clock
        deadline = clock.monotonic() + timeout
        while self.position() < target:
            if clock.monotonic() >= deadline:
                return False
            clock.wait(POLL_SECONDS)
        return True

    def close(self) -> None:
        self.lock.close()


def _time_left(
    clock: Clock, budget: float | None, stop: Callable[[], bool] | None
) -> Callable[[], bool]:
    deadline = None if budget is None else clock.monotonic() + budget

    def more_time() -> bool:
        if stop is not None and stop():
            return False
        return deadline is None or clock.monotonic() < deadline

    return more_time
