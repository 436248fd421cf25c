"""The dispatcher on a thread of its own (`cronsource run`)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cronsource.adapters.runtime.settings import TURN_BUDGET
from cronsource.adapters.runtime.supervisor import Supervisor

if TYPE_CHECKING:
    from cronsource.adapters.runtime.loop import SchedulerLoop


class DispatchWorker:
    """The dispatcher on a thread of its own (`cronsource run`).

    Creating Workflows is I/O (files and a sync, or API calls) that used to wait its turn
    behind the read model's projection; on its own thread it starts as soon as a fire is in
    the log and overlaps the projection and the next decisions. It follows the log with its
    own position exactly as before, so crash safety is unchanged: creation first, position
    after. Only the replica that holds the projector role dispatches.
    """

    def __init__(self, loop: SchedulerLoop) -> None:
        self.loop = loop
        self.wake = threading.Event()
        self.supervisor = Supervisor("dispatch", loop.clock, loop.write_probe.check)
        self._thread = threading.Thread(target=self._run, name="dispatch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        loop = self.loop
        stop = loop.stop_event
        while not stop.is_set():
            if loop.runs_projections:
                done = self.supervisor.run(lambda: self.step(TURN_BUDGET))
                if done:
                    continue  # there may be more already
            else:
                self.supervisor.forget()  # another replica dispatches: its failures are its own
            loop.clock.wait(loop.poll_seconds, self.wake)
            self.wake.clear()

    def step(self, budget: float) -> int:
        """Dispatch what is new for at most `budget` seconds on the loop's clock."""
        clock, stop = self.loop.clock, self.loop.stop_event
        deadline = clock.monotonic() + budget
        return self.loop.engine.projector.dispatch_step(
            clock.now(), stop=lambda: stop.is_set() or clock.monotonic() >= deadline
        )

    def stop(self) -> None:
        """Let the batch in flight finish (its position moves after its Workflows exist)."""
        self.wake.set()
        self._thread.join(timeout=120)
