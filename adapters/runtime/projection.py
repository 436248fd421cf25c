"""The projection step of a turn: the read model (and the dispatcher) caught up with the log.

Kept thin on purpose: who may move the projections' positions is decided in one place,
adapters/projector.py (the projector lock); this step only asks it for a catch-up within the
turn's budget and writes the decision log for what was newly committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from adapters.engine import Engine
from adapters.logs import DecisionLog
from adapters.runtime.clock import Clock


class ProjectionWorker:
    def __init__(
        self, engine: Engine, clock: Clock, stop: threading.Event, *, log_decisions: bool = True
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.stop = stop
        self.log_decisions = log_decisions  # off in simulate: nobody reads those lines
        self.decision_log: DecisionLog | None = None  # created once this replica projects
        #: The log's head when a catch-up last finished with nothing left over; while the
        #: head stays there, there is nothing new to project (one query instead of a
        #: round of reads per projection).
        self._caught_up_to: int | None = None

    def behind(self) -> bool:
        """Whether the log has events the last catch-up did not see."""
        head = self.engine.service.recorder.max_notification_id() or 0
        return head != self._caught_up_to

    def step(self, now: datetime, budget: Callable[[], float | None], *, dispatch: bool) -> int:
        """Catch up for at most `budget()` seconds on the runtime's clock (asked only when
        there is something to project; a virtual clock does not move during a turn, so there
        it always catches up fully); returns how many events the read model took."""
        clock, stop = self.clock, self.stop
        head = self.engine.service.recorder.max_notification_id() or 0
        if head == self._caught_up_to:
            return 0
        seconds = budget()
        deadline = None if seconds is None else clock.monotonic() + seconds
        out_of_time = False

        def enough() -> bool:
            nonlocal out_of_time
            out_of_time = stop.is_set() or (deadline is not None and clock.monotonic() >= deadline)
            return out_of_time

        n = self.engine.projector.step(now, stop=enough, dispatch=dispatch)
        # Caught up to `head` unless time ran out (then the rest is for the next turn).
        self._caught_up_to = None if out_of_time else head
        # One structured line per committed decision (cronWorkflow, tick, version), written by
        # the projector only, so each decision is logged once across replicas.
        if self.log_decisions:
            if self.decision_log is None:
                self.decision_log = DecisionLog(self.engine.view)
            self.decision_log.emit_new()
        return n


def lag(engine: Engine) -> dict[str, int]:
    """How many events each projection is behind the log."""
    app = engine.service
    head = app.recorder.max_notification_id() or 0
    return {
        p: head - (engine.view.max_tracking_id(app.name, p) or 0) for p in ("readmodel", "dispatch")
    }
