"""Fires per hour per namespace: the time series a Grafana panel draws from the audit views.

    python examples/python/grafana_query.py                 # ./cronsource.db, the last 24 h
    python examples/python/grafana_query.py postgresql:///cron --from 2026-03-07 --to 2026-03-07T06

In a Grafana panel on the PostgreSQL data source the same query reads, with Grafana's macros:

    SELECT $__timeGroupAlias(decided_at, '1h'), namespace AS metric, count(*) AS value
    FROM cronsource_decisions_v1
    WHERE decision = 'Fired' AND $__timeFilter(decided_at)
    GROUP BY 1, 2 ORDER BY 1

Here the macros are spelled out, for PostgreSQL and for SQLite (whose times are ISO-8601 text, so
an hour is the text's first 13 characters), and the series printed as a table.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

QUERIES = {
    "postgresql": """
        SELECT date_trunc('hour', decided_at AT TIME ZONE 'UTC') AS time, namespace, count(*)
        FROM cronsource_decisions_v1
        WHERE decision = 'Fired' AND decided_at >= %s AND decided_at < %s
        GROUP BY 1, 2 ORDER BY 1, 2""",
    "sqlite": """
        SELECT substr(decided_at, 1, 13) AS time, namespace, count(*)
        FROM cronsource_decisions_v1
        WHERE decision = 'Fired' AND decided_at >= ? AND decided_at < ?
        GROUP BY 1, 2 ORDER BY 1, 2""",
}


def connect(url: str) -> tuple[Any, str]:
    """A connection to the store at `url`, and which of QUERIES it takes."""
    if url.startswith(("postgresql://", "postgres://")):
        import psycopg

        base, _, query = url.partition("?")  # `schema=` is cronsource's, not libpq's
        params = dict(p.split("=", 1) for p in query.split("&") if p)
        schema = params.pop("schema", "")
        conninfo = base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")
        options = f"-c search_path={schema}" if schema else ""
        return psycopg.connect(conninfo, options=options), "postgresql"
    path = url.removeprefix("sqlite://").removeprefix("/") if url.startswith("sqlite:") else url
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True), "sqlite"


def instant(text: str) -> datetime:
    """An ISO date or time (UTC unless it names an offset)."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or time: {text!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def iso(t: datetime) -> str:
    """A time as the views' SQLite text (PostgreSQL reads it as a timestamptz too)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", nargs="?", default="sqlite:///cronsource.db")
    parser.add_argument("--from", dest="start", type=instant, help="default: 24 h before --to")
    parser.add_argument("--to", dest="end", type=instant, help="default: now")
    args = parser.parse_args()
    end = args.end or datetime.now(UTC)
    start = args.start or end - timedelta(hours=24)

    try:
        conn, dialect = connect(args.store)
        try:
            rows = conn.execute(QUERIES[dialect], (iso(start), iso(end))).fetchall()
        finally:
            conn.close()
    except Exception as e:  # a missing or unmigrated store: one line, not a traceback
        sys.exit(f"grafana_query: cannot read the audit views of {args.store}: {e}")

    # Every hour of the range, with 0 where nothing fired: a gap shows as a gap.
    series: dict[str, dict[str, int]] = {}
    for time, namespace, fires in rows:
        hour = time.strftime("%Y-%m-%dT%H") if isinstance(time, datetime) else time
        series.setdefault(namespace, {})[hour] = fires
    namespaces = sorted(series)
    print(f"{'HOUR (UTC)':<16}  " + "  ".join(f"{n:>8}" for n in namespaces))
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while hour < end:
        key = hour.strftime("%Y-%m-%dT%H")
        print(f"{key}:00  " + "  ".join(f"{series[n].get(key, 0):>8}" for n in namespaces))
        hour += timedelta(hours=1)


if __name__ == "__main__":
    main()
