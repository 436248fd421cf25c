"""The audit examples run (issue 26 item 6): examples/python/audit_week.py and grafana_query.py.

Each runs as a user would run it, a subprocess given the store URL, against a store filled with
the week of tests/audit_history.py (SQLite and a real PostgreSQL). What it prints is checked
against the same week read another way: the audit events through the Python API
(`cronsource.open(url).events(...)`), which reads the audit table through cronsource's own
queries, not through the views the examples use.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronsource
from cronsource.adapters.application.models import Event
from cronsource.adapters.bootstrap import migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig
from tests import audit_history, pgserver

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
WEEK_END = datetime(2026, 3, 9, tzinfo=UTC)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store holding the week."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('examples')}/cronsource.db"
        audit_history.fill(url)
        yield url
        return
    url = pgserver.fresh_database(
        request.getfixturevalue("pg_server_url"), prefix="cronsource_examples"
    )
    try:
        migrate(StoreConfig.parse(url))
        audit_history.fill(url)
        yield url
    finally:
        pgserver.drop_database(url)


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def events(url: str, start: datetime, end: datetime, *types: str) -> list[Event]:
    """The audit's events of these types recorded in [start, end), every page."""
    out: list[Event] = []
    with cronsource.open(url) as api:
        after = 0
        while True:
            page = api.events(since=start, until=end, types=types, after=after, limit=500)
            out += [e for e in page.items if datetime.fromisoformat(e.at) < end]
            if page.nextAfter is None:
                return out
            after = page.nextAfter


def table(stdout: str) -> list[list[str]]:
    """The rows of a printed table: columns are two or more spaces apart."""
    return [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines() if line.strip()]


def test_audit_week_prints_each_cronworkflows_decisions(store: str) -> None:
    done = run("audit_week.py", store, "--until", "2026-03-09")
    assert done.returncode == 0, done.stderr

    start = WEEK_END - timedelta(days=7)
    fired: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = {}
    for e in events(store, start, WEEK_END, "ScheduleFired", "ScheduleSkipped"):
        if e.type == "ScheduleFired":
            fired[e.cronWorkflow] += 1
        else:
            n = int((e.model_extra or {}).get("count", 1))
            skipped[e.cronWorkflow] += n
            assert e.reason is not None
            reasons.setdefault(e.cronWorkflow, Counter())[e.reason] += n
    not_started = events(store, start, WEEK_END, "RunNotStarted", "SubmissionFailed")
    assert not not_started  # this week has none, so the column must say 0 everywhere

    lines = table(done.stdout)
    assert lines[0] == ["decisions from 2026-03-02T00:00:00.000Z to 2026-03-09T00:00:00.000Z"]
    assert lines[1] == ["CRONWORKFLOW", "FIRED", "SKIPPED", "NOT STARTED", "SKIP REASONS"]
    expected = []
    for ref in sorted(fired.keys() | skipped.keys()):
        row = [ref, str(fired[ref]), str(skipped[ref]), "0"]
        if ref in reasons:
            row.append(", ".join(f"{r} {n}" for r, n in reasons[ref].most_common()))
        expected.append(row)
    assert lines[2:] == expected
    # And the week is the one the docs describe (docs/audit.md, example 1).
    assert ["team-a/etl", "164", "111", "0", "ConcurrencyForbid 108, DeadlineExceeded 3"] in lines


def test_grafana_query_prints_fires_per_hour_per_namespace(store: str) -> None:
    start, end = datetime(2026, 3, 7, tzinfo=UTC), datetime(2026, 3, 7, 8, tzinfo=UTC)
    done = run("grafana_query.py", store, "--from", "2026-03-07", "--to", "2026-03-07T08:00")
    assert done.returncode == 0, done.stderr

    per_hour: Counter[tuple[str, str]] = Counter()
    for e in events(store, start, end, "ScheduleFired"):
        namespace = e.cronWorkflow.split("/")[0]
        per_hour[(e.at[:13], namespace)] += 1
    lines = table(done.stdout)
    assert lines[0] == ["HOUR (UTC)", "team-a", "team-b"]
    hours = [(start + timedelta(hours=h)).strftime("%Y-%m-%dT%H") for h in range(8)]
    assert lines[1:] == [
        [f"{h}:00", str(per_hour[(h, "team-a")]), str(per_hour[(h, "team-b")])] for h in hours
    ]
    # The outage (01:00 to 04:00) is a gap, then etl and backup's catch-up fire at 04:00.
    assert [line[1:] for line in lines[2:6]] == [["0", "0"]] * 3 + [["2", "1"]]


@pytest.mark.parametrize("script", ["audit_week.py", "grafana_query.py"])
def test_a_store_that_is_not_there_is_one_line_and_a_failure(script: str, tmp_path: Path) -> None:
    done = run(script, f"sqlite:///{tmp_path}/missing.db")
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "missing.db" in done.stderr


@pytest.mark.parametrize(
    ("script", "flag"), [("audit_week.py", "--until"), ("grafana_query.py", "--from")]
)
def test_a_bad_time_names_the_argument_and_the_value(script: str, flag: str) -> None:
    done = run(script, flag, "yesterday")
    assert done.returncode == 2
    assert f"argument {flag}: not an ISO date or time: 'yesterday'" in done.stderr
    assert "Traceback" not in done.stderr
