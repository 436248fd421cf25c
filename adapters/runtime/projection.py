"""The projection step of a turn: the read model (and the dispatcher) caught up with the log."""

from __future__ import annotations

from adapters.engine import Engine


def lag(engine: Engine) -> dict[str, int]:
    """How many events each projection is behind the log."""
    app = engine.service
    head = app.recorder.max_notification_id() or 0
    return {
        p: head - (engine.view.max_tracking_id(app.name, p) or 0) for p in ("readmodel", "dispatch")
    }
