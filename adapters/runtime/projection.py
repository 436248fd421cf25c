"""The projection step of a turn: the read model (and the dispatcher) caught up with the log.

Kept thin on purpose: who may move the projections' positions is decided in one place
elsewhere (the projector role); this step only asks for a catch-up within the turn's budget
and writes the decision log for what was newly committed.
"""

from __future__ import annotations

import threading
from datetime import datetime

from adapters.engine import Engine
from adapters.logs import DecisionLog
from adapters.runtime.clock import Clock


class ProjectionWorker:
    def __init__(self, engine: Engine, clock: Clock, stop: threading.Event) -> None:
        self.engine = engine
        self.clock = clock
        self.stop = stop
        self.decision_log: DecisionLog | None = None  # created once this replica projects

    def step(self, now: datetime, budget: float | None, *, dispatch: bool) -> int:
        """Catch up for at most `budget` seconds on the runtime's clock (a virtual clock does
        not move during a turn, so there it always catches up fully); returns how many
        events the read model took."""
        clock, stop = self.clock, self.stop
        deadline = None if budget is None else clock.monotonic() + budget

        def enough() -> bool:
            return stop.is_set() or (deadline is not None and clock.monotonic() >= deadline)

        n = self.engine.catch_up(now, stop=enough, dispatch=dispatch)
        # One structured line per committed decision (cronWorkflow, tick, version), written by
        # the projector only, so each decision is logged once across replicas.
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
