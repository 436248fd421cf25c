"""The waker's LISTEN connection (adapters/runtime/waker.py) on a real PostgreSQL that is
stopped and started again: the loss is logged once, and the return once, with the attempts
that failed meanwhile (the report's rules: tests/unit/test_waker.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg
import pytest

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.waker import Waker
from tests import pgserver
from tests.faults.harness import stop_keeping_data
from tests.unit.test_waker import lines


def wait_for(what: str, done: Callable[[], bool], within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def listening(url: str) -> bool:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%'"
            ).fetchone()
    except psycopg.OperationalError:
        return False
    return bool(row and row[0])


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_a_stopped_server_is_logged_once_lost_and_once_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cronsource")
    handle = pgserver.start_server()  # a server of its own: this test stops it
    try:
        config = StoreConfig.parse(handle.url)
        migrate(config)
        engine = bootstrap(config)
        waker = Waker(engine)
        try:
            wait_for("the waker listens", lambda: listening(handle.url))
            stop_keeping_data(handle.datadir)
            wait_for("the loss is logged", lambda: bool(lines(caplog, "connection lost")))
            time.sleep(5)  # five more attempts to connect fail meanwhile
            pgserver.start(handle.datadir)
            wait_for("the waker listens again", lambda: listening(handle.url))
            wait_for("it says so", lambda: bool(lines(caplog, "LISTEN connection back")))
        finally:
            waker.stop()
            engine.close()
    finally:
        handle.stop()
    assert len(lines(caplog, "LISTEN connection lost")) == 1, caplog.text
    assert lines(caplog, "still lost") == [], caplog.text
    (back,) = lines(caplog, "LISTEN connection back after")
    assert int(back.split("(")[1].split()[0]) >= 5, back  # the failed attempts, counted
