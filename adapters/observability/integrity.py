"""Whether the store can be read at all, for /readyz.

A SQLite file with a corrupt page answers the queries readiness used to make (the log head,
the tracking positions) from intact pages and said "ready" while every read of the damaged
rows failed. `PRAGMA quick_check` reads every page, so it costs time in proportion to the
file (about a second per few hundred MB): it runs in a background thread at most once per
`interval`, and /readyz answers from its last result at once (a readiness probe has a
timeout of its own). Until the first check finishes, /readyz waits for it at most
`first_wait` seconds, then answers from the other checks alone. PostgreSQL checks its own
pages (a damaged one fails the query that reads it), so this asks nothing of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.runtime.engine import Engine


class IntegrityCheck:
    def __init__(
        self,
        engine: Engine,
        interval: float = 300.0,
        first_wait: float = 2.0,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
    ) -> None:
        self.engine = engine
        self.interval = interval
        self.first_wait = first_wait
        self.clock = clock
        self._lock = threading.Lock()
        self._running: threading.Thread | None = None
        self._checked_at: float | None = None
        self._problem: str | None = None

    def _check(self) -> None:
        try:
            conn = self.engine.view.separate_connection()  # reads are not held up meanwhile
            try:
                rows = conn.execute("PRAGMA quick_check").fetchall()
            finally:
                conn.close()
            found = [str(r[0]) for r in rows if str(r[0]) != "ok"]
            problem = "integrity check: " + "; ".join(found[:3]) if found else None
        except Exception as e:  # a malformed file raises on the check itself
            problem = f"{type(e).__name__}: {e}"
        with self._lock:
            self._problem = problem
            self._checked_at = self.clock()
            self._running = None

    def problem(self) -> str | None:
        """Why the store cannot be read (as of the last check), or None."""
        if not self.engine.view.is_sqlite:
            return None
        with self._lock:
            due = self._checked_at is None or self.clock() - self._checked_at >= self.interval
            if due and self._running is None:
                self._running = threading.Thread(
                    target=self._check, name="store-check", daemon=True
                )
                self._running.start()
            first, running = self._checked_at is None, self._running
        if first and running is not None:
            running.join(self.first_wait)
        with self._lock:
            return self._problem
