"""What differs between SQLite and PostgreSQL in the read model's SQL.

The statements are written once, in the subset both databases share (upserts with
`ON CONFLICT ... DO UPDATE`, `RETURNING`, partial indexes) with `?` placeholders; this module
holds the few places where they part: the placeholder, reading a field of a JSON column,
integer division for timeline cells, row locks, and how to list a table's columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    name: str  # "sqlite" | "postgresql"

    @property
    def is_sqlite(self) -> bool:
        return self.name == "sqlite"

    def sql(self, text: str) -> str:
        """`text` with this database's placeholders (statements are written with `?`)."""
        return text if self.is_sqlite else text.replace("?", "%s")

    def json_field(self, column: str, key: str) -> str:
        """A field of a JSON text column (the audit `detail`)."""
        if self.is_sqlite:
            return f"json_extract({column}, '$.{key}')"
        return f"({column}::json ->> '{key}')"

    def cell(self, column: str) -> str:
        """The timeline cell of a time column, floor((t - ?) / ?), given t >= the first `?`."""
        if self.is_sqlite:
            return f"CAST(({column} - ?) / ? AS INTEGER)"  # truncation is floor here
        return f"FLOOR(({column} - ?) / ?)::bigint"

    @property
    def for_update(self) -> str:
        """The row-lock suffix of a SELECT: SQLite's BEGIN IMMEDIATE already serialises
        writers; PostgreSQL needs the row lock so two projectors take turns."""
        return "" if self.is_sqlite else " FOR UPDATE"

    def columns(self, conn: Any, table: str) -> set[str]:
        """The column names `table` has now (to upgrade tables of an older version)."""
        if self.is_sqlite:
            return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        return {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = %s",
                (table,),
            )
        }


SQLITE = Dialect("sqlite")
POSTGRESQL = Dialect("postgresql")
