"""Supervisor: one step's failures become a backoff instead of a dead or spinning loop."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.runtime.clock import Clock, SystemClock

log = logging.getLogger("cronsource")


@dataclass
class Supervisor:
    """Runs a step; on failure waits with exponential backoff instead of dying or spinning."""

    name: str
    clock: Clock = field(default_factory=SystemClock)
    backoff: float = 0.0
    failures: int = 0
    last_error: str = ""
    #: When a failed step may run again; None while nothing failed. (Not 0.0: a virtual
    #: clock set back before its start reads a negative monotonic time, and every step
    #: would then be skipped as if backing off.)
    retry_at: float | None = None

    @property
    def failing(self) -> bool:
        """Whether the last run of the step failed (and no run has succeeded since): what
        /readyz reports, since reads may go on working while every write fails."""
        return self.retry_at is not None

    def forget(self) -> None:
        """The step is no longer this process's to run (its role moved to another replica):
        its last failure says nothing about this replica any more."""
        self.backoff = 0.0
        self.retry_at = None

    def run(self, step: Callable[[], Any]) -> Any:
        if self.retry_at is not None and self.clock.monotonic() < self.retry_at:
            return None
        try:
            result = step()
        except Exception as e:
            self.failures += 1
            self.backoff = min(30.0, max(0.5, self.backoff * 2))
            self.retry_at = self.clock.monotonic() + self.backoff
            self.last_error = f"{type(e).__name__}: {e}"
            log.warning("%s failed (retry in %.1fs): %s", self.name, self.backoff, self.last_error)
            return None
        self.backoff = 0.0
        self.retry_at = None
        return result
