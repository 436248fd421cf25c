"""The dispatcher on a thread of its own (`cronsource run`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from cronsource.adapters.clock import Clock
from cronsource.adapters.runtime.projector import Projector
from cronsource.adapters.runtime.settings import TURN_BUDGET
from cronsource.adapters.runtime.supervisor import DISPATCH_MAX_BACKOFF, Supervisor


class DispatchWorker:
    """The dispatcher on a thread of its own (`cronsource run`).

    Creating Workflows is I/O (files and a sync, or API calls) that used to wait its turn
    behind the read model's projection; on its own thread it starts as soon as a fire is in
    the log and overlaps the projection and the next decisions. It follows the log with its
    own position exactly as before, so crash safety is unchanged: creation first, position
    after. Only the replica that holds the projector role dispatches.
    """

    def __init__(
        self,
        projector: Projector,
        clock: Clock,
        stop: threading.Event,
        *,
        poll_seconds: float,
        runs_projections: Callable[[], bool],
        store_probe: Callable[[], str | None],
    ) -> None:
        """`runs_projections`: whether this replica holds the projector role now (only it
        dispatches); `store_probe`: the write probe the supervisor backs off on."""
        self.projector = projector
        self.clock = clock
        self.stop_event = stop
        self.poll_seconds = poll_seconds
        self.runs_projections = runs_projections
        self.wake = threading.Event()
        #: Called when a step finds nothing more to dispatch after one that did: the loop's
        #: read model may be waiting for that (adapters/runtime/dispatchfirst.py).
        self.on_caught_up: Callable[[], None] | None = None
        self.supervisor = Supervisor(
            "dispatch", clock, store_probe, max_backoff=DISPATCH_MAX_BACKOFF
        )
        #: (fires, instant): a burst a moment away that the target is still getting ready
        #: for (`expect`, from the loop's thread); None when it is ready or none is expected.
        self._expected: tuple[int, datetime] | None = None
        self._expected_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="dispatch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        stop = self.stop_event
        busy = False
        while not stop.is_set():
            if self.runs_projections():
                done = self.supervisor.run(lambda: self.step(TURN_BUDGET))
                if done:
                    busy = True
                    continue  # there may be more already
                if busy and done == 0 and self.on_caught_up is not None:
                    self.on_caught_up()
                busy = False
                if self._expected is not None and self._warm():
                    continue  # more to get ready, after a look for fires to dispatch
            else:
                self.supervisor.forget()  # another replica dispatches: its failures are its own
            self.clock.wait(self.poll_seconds, self.wake)
            self.wake.clear()

    @property
    def _target(self) -> Any:
        return getattr(self.projector.dispatcher, "target", None)

    def expect(self, fires: int, at: datetime) -> None:
        """About `fires` fires are decided for the instant `at`, a moment away (the
        scheduler's `prepare_once`): the target gets ready for them where it can (`warm`: a
        cluster's connections opened, the local target's files made), on this thread when
        it has nothing to dispatch, in steps, so a fire committed meanwhile is not kept
        waiting; never from the instant on, when the fires themselves are what to do. Only
        the replica that dispatches."""
        with self._expected_lock:
            self._expected = (fires, at)
        self.wake.set()

    def _warm(self) -> bool:
        """One step of getting the target ready for the burst expected; whether more is
        left. A target that cannot get ready is no fault of the dispatch: it creates at the
        instant as it would have (the target logs why)."""
        with self._expected_lock:
            expected = self._expected
        if expected is None:
            return False
        fires, at = expected
        warm: Callable[[int], int] | None = getattr(self._target, "warm", None)
        left = 0
        if warm is not None and self.runs_projections() and self.clock.now() < at:
            left = warm(fires)
        if not left:
            with self._expected_lock:
                if self._expected is expected:  # not a new burst expected meanwhile
                    self._expected = None
        return bool(left)

    def step(self, budget: float) -> int:
        """Dispatch what is new for at most `budget` seconds on the loop's clock."""
        clock, stop = self.clock, self.stop_event
        deadline = clock.monotonic() + budget
        return self.projector.dispatch_step(
            clock.now(), stop=lambda: stop.is_set() or clock.monotonic() >= deadline
        )

    def stop(self) -> None:
        """Let the batch in flight finish (its position moves after its Workflows exist)."""
        self.wake.set()
        self._thread.join(timeout=120)
        cool = getattr(self._target, "cool", None)
        if cool is not None and not self._thread.is_alive():
            cool()  # what was made ahead for a burst that did not come
