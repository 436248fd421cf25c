"""The dispatcher on a thread of its own (`cronsource run`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from cronsource.adapters.clock import Clock
from cronsource.adapters.runtime.projector import Projector
from cronsource.adapters.runtime.settings import TURN_BUDGET
from cronsource.adapters.runtime.supervisor import Supervisor


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
        self.supervisor = Supervisor("dispatch", clock, store_probe)
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
            else:
                self.supervisor.forget()  # another replica dispatches: its failures are its own
            self.clock.wait(self.poll_seconds, self.wake)
            self.wake.clear()

    def expect(self, fires: int) -> None:
        """About `fires` fires are decided for an instant a moment away (the scheduler's
        `prepare_once`): the target gets ready for them where it can (`warm`: a cluster's
        connections opened now, not at the instant). Only the replica that dispatches."""
        target = getattr(self.projector.dispatcher, "target", None)
        warm = getattr(target, "warm", None)
        if warm is not None and self.runs_projections():
            warm(fires)

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
