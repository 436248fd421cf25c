"""The waker's LISTEN connection (adapters/runtime/waker.py) says when it is lost, at most once
a minute while it stays lost, and when it is back: not one line per retry a second. Here its
report on a virtual second counter; a real server stopped and started again:
tests/integration/test_waker.py."""

from __future__ import annotations

import logging

import psycopg
import pytest

from cronsource.adapters.runtime.waker import LossReport


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
