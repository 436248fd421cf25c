"""The projection step of a turn: the read model (and the dispatcher) caught up with the log.

Kept thin on purpose: who may move the projections' positions is decided in one place,
adapters/runtime/projector.py (the projector lock); this step only asks it for a catch-up within the
turn's budget and writes the decision log for what was newly committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from cronsource.adapters.clock import Clock
from cronsource.adapters.infrastructure.logs import DecisionLog
from cronsource.adapters.runtime.engine import Engine


class ProjectionWorker:
    def __init__(
        self, engine: Engine, clock: Clock, stop: threading.Event, *, log_decisions: bool = True
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.stop = stop
        self.log_decisions = log_decisions  # off in simulate: nobody reads those lines
        self.decision_log: DecisionLog | None = None  # created once this replica projects

    def step(self, now: datetime, budget: Callable[[], float | None], *, dispatch: bool) -> int:
        """Catch up for at most `budget()` seconds on the runtime's clock (asked only when
        there is something to project; a virtual clock does not move during a turn, so there
        it always catches up fully); returns how many events the read model took."""
        clock, stop = self.clock, self.stop
        if not self.engine.projector.behind(dispatch=dispatch):
            return 0
        seconds = budget()
        deadline = None if seconds is None else clock.monotonic() + seconds

        def enough() -> bool:
            return stop.is_set() or (deadline is not None and clock.monotonic() >= deadline)

        n = self.engine.projector.step(now, stop=enough, dispatch=dispatch)
        # One structured line per committed decision (cronWorkflow, tick, version), written by
        # the projector only, so each decision is logged once across replicas.
        if self.log_decisions:
            if self.decision_log is None:
                self.decision_log = DecisionLog(self.engine.view)
            self.decision_log.emit_new()
        return n
