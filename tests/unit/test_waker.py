"""The waker's LISTEN connection (adapters/runtime/waker.py) says when it is lost, at most once
a minute while it stays lost, and when it is back: not one line per retry a second."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg
import pytest

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.waker import LossReport, Waker
from tests import pgserver
from tests.faults.harness import stop_keeping_data


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_connection_lost_for_three_minutes_logs_five_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cronsource")
    report = LossReport("LISTEN connection")
    refused = psycopg.OperationalError("connection refused\nIs the server running?")
    for second in range(181):  # one attempt a second, as the waker retries
        report.failure(float(second), refused)
    report.connected(181.0)
    assert lines(caplog, "LISTEN connection lost") == [
        "LISTEN connection lost (OperationalError: connection refused); retrying every 1s,"
        " reporting at most every 60s"
    ]
    assert lines(caplog, "still lost") == [
        f"LISTEN connection still lost after {s}s: 60 attempts failed since the last report"
        " (OperationalError: connection refused)"
        for s in (60, 120, 180)
    ]
    assert lines(caplog, "back after") == [
        "LISTEN connection back after 181s (181 attempts failed)"
    ]
    caplog.clear()
    report.failure(200.0, refused)  # lost again: said again at once
    assert len(lines(caplog, "LISTEN connection lost")) == 1


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
