"""Waker: ends the loop's sleep early when the log changes (LISTEN/NOTIFY on PostgreSQL).

While the store is down the LISTEN connection is retried every second, and each failure used
to log a line: an hour's outage wrote 3,600 of them. `LossReport` keeps it to one line when
the connection is lost, at most one a minute while it stays lost (with the count of failed
attempts), and one when it is back.
"""

from __future__ import annotations

import logging
import threading

from cronsource.adapters.runtime.engine import Engine

log = logging.getLogger("cronsource")

#: Seconds between two "still lost" lines while the LISTEN connection cannot be made.
REPORT_EVERY = 60.0
#: Seconds between two attempts to connect again.
RETRY_SECONDS = 1.0


def _first_line(e: BaseException) -> str:
    text = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class LossReport:
    """What to log about a connection that fails again and again (times are monotonic
    seconds, passed in)."""

    def __init__(self, what: str, report_every: float = REPORT_EVERY) -> None:
        self.what = what
        self.report_every = report_every
        self.lost_at: float | None = None  # None while connected
        self.failed = 0  # attempts failed since the connection was lost
        self._reported_at = 0.0
        self._reported_failed = 0

    def failure(self, now: float, error: BaseException) -> None:
        if self.lost_at is None:
            self.lost_at, self._reported_at = now, now
            self.failed, self._reported_failed = 1, 1
            log.warning(
                "%s lost (%s); retrying every %.0fs, reporting at most every %.0fs",
                self.what,
                _first_line(error),
                RETRY_SECONDS,
                self.report_every,
            )
            return
        self.failed += 1
        if now - self._reported_at >= self.report_every:
            log.warning(
                "%s still lost after %.0fs: %d attempts failed since the last report (%s)",
                self.what,
                now - self.lost_at,
                self.failed - self._reported_failed,
                _first_line(error),
            )
            self._reported_at, self._reported_failed = now, self.failed

    def connected(self, now: float) -> None:
        if self.lost_at is not None:
            log.info(
                "%s back after %.0fs (%d attempts failed)",
                self.what,
                now - self.lost_at,
                self.failed,
            )
        self.lost_at = None


class Waker:
    """Wakes the loop when the log changes: LISTEN on PostgreSQL, nothing (polling) elsewhere."""

    def __init__(self, engine: Engine) -> None:
        self.event = threading.Event()
        self.report = LossReport("LISTEN connection")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if engine.config.kind == "postgresql":
            channel = getattr(engine.service.recorder, "channel_name", None)
            if channel:
                self._thread = threading.Thread(
                    target=self._listen, args=(engine, channel), daemon=True
                )
                self._thread.start()

    def _listen(self, engine: Engine, channel: str) -> None:
        import psycopg
        from psycopg import sql

        while not self._stop.is_set():
            try:
                with psycopg.connect(engine.config.pg_conninfo, autocommit=True) as conn:
                    if engine.config.pg_schema:
                        conn.execute(
                            sql.SQL("SET search_path TO {}").format(
                                sql.Identifier(engine.config.pg_schema)
                            )
                        )
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.report.connected(engine.clock.monotonic())
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self.event.set()
            except Exception as e:  # server restarting: listen again shortly
                if self._stop.is_set():
                    return  # stopping: the store going away meanwhile is no news
                self.report.failure(engine.clock.monotonic(), e)
                self._stop.wait(RETRY_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        self.event.set()
