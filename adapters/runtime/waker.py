"""Waker: ends the loop's sleep early when the log changes (LISTEN/NOTIFY on PostgreSQL)."""

from __future__ import annotations

import logging
import threading

from adapters.engine import Engine

log = logging.getLogger("cronsource")


class Waker:
    """Wakes the loop when the log changes: LISTEN on PostgreSQL, nothing (polling) elsewhere."""

    def __init__(self, engine: Engine) -> None:
        self.event = threading.Event()
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
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self.event.set()
            except Exception as e:  # server restarting: listen again shortly
                log.info("LISTEN connection lost (%s); retrying", e)
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self.event.set()
