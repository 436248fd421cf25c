"""The read side (adapters/infrastructure/readside/) on a real PostgreSQL: reads that do not
wait for each other."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.infrastructure.store.config import StoreConfig

#: An advisory lock key of this test only (adapters/infrastructure/shards.py uses class ids of its
#: own).
HOLD_KEY = 7_326_001


def _waiting_on_advisory_lock(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
@pytest.mark.timeout(60)
def test_a_read_on_postgres_completes_while_another_is_still_in_the_database(
    pg_url: str,
) -> None:
    """One read is held inside PostgreSQL (it waits for an advisory lock this test holds);
    another read from a second thread must complete meanwhile. With one lock or one
    connection serialising reads, the second read would wait for the first."""
    view = StoreConfig.parse(pg_url).read_model()
    assert isinstance(view, ReadModel)
    view.create_tables()
    held_done = threading.Event()
    other_done = threading.Event()
    errors: list[BaseException] = []

    def held_read() -> None:
        try:
            view.db.fetch("SELECT pg_advisory_xact_lock(?)", (HOLD_KEY,))
        except BaseException as e:  # reported by the assertions below
            errors.append(e)
        held_done.set()

    def other_read() -> None:
        try:
            assert view.statuses() == []
            assert view.max_tracking_id("CronService") is None
        except BaseException as e:
            errors.append(e)
        other_done.set()

    try:
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
            first = threading.Thread(target=held_read, daemon=True)
            first.start()
            deadline = time.monotonic() + 20
            while _waiting_on_advisory_lock(holder) == 0:
                assert time.monotonic() < deadline, "the first read never reached the database"
                time.sleep(0.02)
            second = threading.Thread(target=other_read, daemon=True)
            second.start()
            completed_meanwhile = other_done.wait(15)
            still_held = not held_done.is_set()
            holder.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
        assert held_done.wait(15) and other_done.wait(15), "a read never completed"
        assert not errors, errors
        assert still_held, "the first read finished before the lock was released"
        assert completed_meanwhile, "a read waited for another read that was still running"
    finally:
        view.close()
