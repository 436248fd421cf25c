"""A week's scheduling decisions per CronWorkflow, from the audit view cronsource_decisions_v1.

    python examples/python/audit_week.py                          # ./cronsource.db, last 7 days
    python examples/python/audit_week.py postgresql://host/db --until 2026-03-09

Plain SQL through the database's own driver (sqlite3, psycopg): the views are documented and
versioned in docs/audit.md, so a report like this one does not depend on cronsource's code.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

QUERY = """
SELECT namespace, cron_workflow, decision, reason, sum(tick_count)
FROM cronsource_decisions_v1
WHERE decided_at >= {p} AND decided_at < {p}
GROUP BY namespace, cron_workflow, decision, reason
"""


def connect(url: str) -> tuple[Any, str]:
    """A connection to the store at `url` and its parameter placeholder."""
    if url.startswith(("postgresql://", "postgres://")):
        import psycopg

        base, _, query = url.partition("?")  # `schema=` is cronsource's, not libpq's
        params = dict(p.split("=", 1) for p in query.split("&") if p)
        schema = params.pop("schema", "")
        conninfo = base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")
        options = f"-c search_path={schema}" if schema else ""
        return psycopg.connect(conninfo, options=options), "%s"
    path = url.removeprefix("sqlite://").removeprefix("/") if url.startswith("sqlite:") else url
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True), "?"


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
    parser.add_argument("--until", type=instant, help="end of the week; default: now")
    args = parser.parse_args()
    end = args.until or datetime.now(UTC)
    start = end - timedelta(days=7)

    try:
        conn, p = connect(args.store)
        try:
            rows = conn.execute(QUERY.format(p=p), (iso(start), iso(end))).fetchall()
        finally:
            conn.close()
    except Exception as e:  # a missing or unmigrated store: one line, not a traceback
        sys.exit(f"audit_week: cannot read the audit views of {args.store}: {e}")

    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for namespace, name, decision, reason, ticks in rows:
        c = counts[f"{namespace}/{name}"]
        c[decision] += ticks
        if reason and decision == "Skipped":
            c[f"skip:{reason}"] += ticks
    print(f"decisions from {iso(start)} to {iso(end)}")
    head = ("CRONWORKFLOW", "FIRED", "SKIPPED", "NOT STARTED", "SKIP REASONS")
    table = [head]
    for ref, c in sorted(counts.items()):
        reasons = ", ".join(
            f"{k.removeprefix('skip:')} {n}" for k, n in c.most_common() if k.startswith("skip:")
        )
        not_started = c["NotStarted"] + c["SubmissionFailed"]
        table.append((ref, str(c["Fired"]), str(c["Skipped"]), str(not_started), reasons))
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
