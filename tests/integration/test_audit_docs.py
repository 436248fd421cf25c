"""docs/audit.md shows real output: each example query, run on the week of tests/audit_history.py.

The history is made once per module on a real PostgreSQL and on SQLite through the real engine.
Each PostgreSQL query runs through `psql` (as the docs say the output was made) and must print
the documented block, line for line. Each SQLite variant runs through the `sqlite3` module and
must return the same rows as PostgreSQL, times compared as instants.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cronsource.adapters.bootstrap import migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig
from tests import audit_history, pgserver

DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class Example:
    title: str
    postgresql: str
    sqlite: str
    output: str


def examples() -> list[Example]:
    """Each `### N.` section of "Example queries": its SQL blocks (one for both databases, or
    one marked `-- PostgreSQL` and one `-- SQLite`) and its `text` block."""
    part = DOC.read_text().split("## Example queries", 1)[1].split("\n## ", 1)[0]
    out = []
    for section in re.split(r"\n### ", part)[1:]:
        title = section.splitlines()[0]
        sql = re.findall(r"```sql\n(.*?)```", section, re.S)
        (text,) = re.findall(r"```text\n(.*?)```", section, re.S)
        pg = [q for q in sql if not q.startswith("-- SQLite")]
        lite = [q for q in sql if not q.startswith("-- PostgreSQL")]
        assert len(pg) == 1 and len(lite) == 1, title
        out.append(Example(title, pg[0], lite[0], text))
    return out


EXAMPLES = examples()


@pytest.fixture(scope="module")
def stores(
    pg_server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(PostgreSQL URL, SQLite path), each holding the week."""
    pg = pgserver.fresh_database(pg_server_url, prefix="cronsource_audit_docs")
    try:
        migrate(StoreConfig.parse(pg))
        audit_history.fill(pg)
        path = tmp_path_factory.mktemp("audit-docs") / "cronsource.db"
        audit_history.fill(f"sqlite:///{path}")
        yield pg, str(path)
    finally:
        pgserver.drop_database(pg)


def test_the_docs_have_the_five_examples() -> None:
    assert [e.title.split(".")[0] for e in EXAMPLES] == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.title for e in EXAMPLES])
def test_psql_prints_the_documented_output(stores: tuple[str, str], example: Example) -> None:
    psql = os.path.join(pgserver.find_bindir(), "psql")
    done = subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", stores[0]],
        input=example.postgresql,
        capture_output=True,
        text=True,
        env={**os.environ, "PGTZ": "UTC"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    printed = [line.rstrip() for line in done.stdout.strip("\n").splitlines()]
    assert printed == example.output.strip("\n").splitlines()


def _same(v: Any) -> Any:
    """A value as both databases' rows compare: times as instants, numbers as floats."""
    if isinstance(v, datetime):
        return v.astimezone(UTC)
    if isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", v):
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    if isinstance(v, Decimal | float):
        return float(v)
    if isinstance(v, list | dict):
        return repr(v)  # jsonb on PostgreSQL ...
    if isinstance(v, str) and v[:1] in "[{":
        return repr(json.loads(v))  # ... JSON text on SQLite
    return v


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.title for e in EXAMPLES])
def test_sqlite_returns_the_same_rows(stores: tuple[str, str], example: Example) -> None:
    with psycopg.connect(stores[0]) as pg:
        expected = [tuple(map(_same, r)) for r in pg.execute(example.postgresql).fetchall()]
    conn = sqlite3.connect(stores[1])
    try:
        got = [tuple(map(_same, r)) for r in conn.execute(example.sqlite).fetchall()]
    finally:
        conn.close()
    assert expected  # an example that prints nothing shows nothing
    assert got == expected
