"""The run watcher: what the local target's runs did, reported to the service."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.recovery import recover_lost_runs
from cronsource.domain.service import RunEnd


@dataclass
class RunWatcher:
    """Reports what the local target's runs did: completed (with phase) or deleted by hand."""

    engine: Engine
    target: LocalTarget
    clock: Clock = SYSTEM_CLOCK

    def poll(
        self, now: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int:
        """Report ended and vanished runs; stops early when `budget` seconds are used up or
        `stop()` says so (the rest is looked at next turn)."""
        deadline = None if budget is None else self.clock.monotonic() + budget
        view, svc = self.engine.view, self.engine.service
        dispatched = self.engine.projector.dispatched()
        # While the dispatcher is behind the status view (a burst is being dispatched), a
        # missing file is most likely a Workflow not yet created: look again next turn rather
        # than ask the audit table about every one of them.
        dispatch_behind = dispatched < self.engine.projector.position()
        ends: list[RunEnd] = []
        for cron_id, namespace, name in view.active_runs():
            if (stop is not None and stop()) or (
                deadline is not None and self.clock.monotonic() >= deadline
            ):
                break
            obs = self.target.observe(namespace, name, now)
            if obs is None:
                continue
            if obs.phase is None:
                # Missing file: vanished only if the dispatcher already created it; a fire not
                # yet dispatched has no file by design.
                if dispatch_behind:
                    continue
                pos = view.fired_position(namespace, name)
                if pos is None or pos > dispatched:
                    continue
                ends.append(RunEnd(UUID(cron_id), name))
            else:
                assert obs.finished_at is not None
                ends.append(RunEnd(UUID(cron_id), name, obs.phase, obs.finished_at))  # type: ignore[arg-type]
        # Saved together (a batch per transaction), in the order they were looked at.
        svc.runs_ended(ends, now)
        return len(ends)

    def recover(self, now: datetime) -> int | None:
        """Record the target's Workflows the log has no fire for (None: not yet, the read
        model is behind the log)."""
        return recover_lost_runs(self.engine, self.target.workflows(), now)


class RunPoller(Protocol):
    """Reports what runs did: the local target's RunWatcher, or the cluster's KubeSync."""

    def poll(
        self, now: datetime, budget: float | None = None, stop: Callable[[], bool] | None = None
    ) -> int: ...

    def recover(self, now: datetime) -> int | None:
        """Record the runs that exist and that the log has no fire for
        (adapters/runtime/recovery.py); None: not yet (the read model is behind the log)."""
        ...
