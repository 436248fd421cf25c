"""Whether the store can be read at all, for /readyz.

A SQLite file with a corrupt page answers the queries readiness used to make (the log head,
the tracking positions) from intact pages and said "ready" while every read of the damaged
rows failed. `PRAGMA quick_check` reads every page; it is cached for `interval` seconds
because it costs time in proportion to the file (about a second per few hundred MB).
PostgreSQL checks its own pages (a damaged one fails the query that reads it), so this
asks nothing of it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from adapters.engine import Engine


class IntegrityCheck:
    def __init__(
        self,
        engine: Engine,
        interval: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._checked_at: float | None = None
        self._problem: str | None = None

    def problem(self) -> str | None:
        """Why the store cannot be read, or None; at most one check per `interval`."""
        if not self.engine.view.is_sqlite:
            return None
        with self._lock:
            now = self.clock()
            if self._checked_at is not None and now - self._checked_at < self.interval:
                return self._problem
            try:
                rows = self.engine.view.query("PRAGMA quick_check")
                found = [str(r[0]) for r in rows if str(r[0]) != "ok"]
                self._problem = "integrity check: " + "; ".join(found[:3]) if found else None
            except Exception as e:  # a malformed file raises on the check itself
                self._problem = f"{type(e).__name__}: {e}"
            self._checked_at = now
            return self._problem
