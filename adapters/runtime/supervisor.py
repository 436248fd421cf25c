"""Supervisor: one step's failures become a backoff instead of a dead or spinning loop.

The backoff doubles up to 30 s, so that a store that stays broken is not hammered by five
workers. Left alone it also made recovery wait: after a minute of a full disk, the first
retry came up to 30 s after the disk had room again. So while a step backs off, the
supervisor asks a cheap probe of the store (adapters/runtime/writeprobe.py) at most once per
PROBE_SECONDS: if the probe saw a fault when the step failed and now sees it gone, the step
runs at the next turn. A fault the probe cannot see (it passed when the step failed) changes
nothing: the step keeps its backoff instead of failing every second.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cronsource.adapters.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("cronsource")

#: Seconds between two questions to the probe while a step backs off.
PROBE_SECONDS = 1.0
#: Longest backoff: how long a step that keeps failing waits before it tries again, unless
#: the probe sees the fault clear first.
MAX_BACKOFF = 30.0
#: Longest backoff of the dispatch (the creates of Workflows): a fire waits for it within its
#: starting deadline (30 s when unset), and doubling to MAX_BACKOFF put the first retry after
#: an API server outage of half a minute past that deadline (every run of the tick lost while
#: the server had been answering for 12 s). A failed create costs the server one request.
DISPATCH_MAX_BACKOFF = 5.0


@dataclass
class Supervisor:
    """Runs a step; on failure waits with exponential backoff instead of dying or spinning."""

    name: str
    clock: Clock = SYSTEM_CLOCK
    #: None if the store takes writes, else why not (see the module docstring); None: no probe.
    probe: Callable[[], str | None] | None = None
    backoff: float = 0.0
    #: The longest backoff (MAX_BACKOFF, or DISPATCH_MAX_BACKOFF for the dispatch).
    max_backoff: float = MAX_BACKOFF
    failures: int = 0
    last_error: str = ""
    #: When a failed step may run again; None while nothing failed. (Not 0.0: a virtual
    #: clock set back before its start reads a negative monotonic time, and every step
    #: would then be skipped as if backing off.)
    retry_at: float | None = None
    #: Failures since the step last worked.
    streak: int = 0
    _probed_at: float | None = field(default=None, repr=False)
    #: Whether the probe saw a fault when the step last failed: one it will see clear.
    _probe_saw_fault: bool = field(default=False, repr=False)

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
        self.streak = 0
        self._probed_at, self._probe_saw_fault = None, False

    def _fault_seen(self) -> bool:
        """Ask the probe (once per PROBE_SECONDS at most) whether the store has a fault."""
        assert self.probe is not None
        self._probed_at = self.clock.monotonic()
        try:
            return self.probe() is not None
        except Exception:  # a probe that cannot ask has not seen the store recover
            return True

    def _fault_cleared(self) -> bool:
        """While backing off: whether the probe, having seen the fault, now passes."""
        if self.probe is None or not self._probe_saw_fault:
            return False
        now = self.clock.monotonic()
        if self._probed_at is not None and 0 <= now - self._probed_at < PROBE_SECONDS:
            return False
        return not self._fault_seen()

    def run(self, step: Callable[[], Any]) -> Any:
        if (
            self.retry_at is not None
            and self.clock.monotonic() < self.retry_at
            and not self._fault_cleared()
        ):
            return None
        try:
            result = step()
        except Exception as e:
            self.failures += 1
            self.streak += 1
            self.backoff = min(self.max_backoff, max(0.5, self.backoff * 2))
            self.retry_at = self.clock.monotonic() + self.backoff
            # Only a fault the probe sees may be seen to clear: a step that fails while the
            # probe passes (it cannot see this fault) keeps its backoff.
            self._probe_saw_fault = self.probe is not None and self._fault_seen()
            self.last_error = f"{type(e).__name__}: {e}"
            log.warning("%s failed (retry in %.1fs): %s", self.name, self.backoff, self.last_error)
            return None
        if self.streak:
            log.info("%s works again after %d failed attempts", self.name, self.streak)
        self.forget()
        return result
