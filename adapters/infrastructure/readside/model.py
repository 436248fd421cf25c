"""The read model of one database: the handle the engine holds (`engine.view`).

It answers every query (`Queries`) and takes the projection's writes (`ReadModelView` of
projections/readmodel.py); the work is done by the modules it names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from eventsourcing.persistence import Tracking

from cronsource.adapters.infrastructure.readside import positions, retention, schema, writer
from cronsource.adapters.infrastructure.readside.database import (
    Database,
    PostgresDatabase,
    SqliteDatabase,
)
from cronsource.adapters.infrastructure.readside.queries import Queries
from cronsource.projections.readmodel import AuditRow, StatusRow, ViewItem


class ReadModel(Queries):
    """The read model tables. `projection` names whose tracking row the writes advance."""

    def __init__(self, db: Database, projection: str = "readmodel") -> None:
        super().__init__(db)
        self.projection = projection
        #: Where the projection's writes (rows and positions) go: the database itself, or
        #: the projector's own session (`write_through`).
        self._writes: Database = db

    @classmethod
    def sqlite(cls, path: str) -> ReadModel:
        return cls(SqliteDatabase(path))

    @classmethod
    def postgres(cls, url: str, schema: str | None = None) -> ReadModel:
        return cls(PostgresDatabase(url, schema))

    def create_tables(self) -> None:
        schema.create_tables(self.db)

    def drop_tables(self) -> None:
        schema.drop_tables(self.db)

    def separate_connection(self) -> Any:
        return self.db.separate_connection()

    def close(self) -> None:
        self.db.close()

    def max_tracking_id(self, application_name: str, projection: str | None = None) -> int | None:
        return positions.max_tracking_id(self.db, projection or self.projection, application_name)

    def track(self, projection: str, tracking: Tracking) -> bool:
        return positions.track(self._writes, projection, tracking)

    def write(self, tracking: Tracking, status: StatusRow | None, audit: AuditRow) -> None:
        self.write_batch([(tracking, status, audit)])

    def write_batch(self, items: Sequence[ViewItem]) -> int:
        return writer.write_batch(self._writes, self.projection, items)

    # ------------------------------------------------------------------ retention

    def position_before(self, cutoff: datetime) -> int:
        return retention.position_before(self.db, cutoff)

    def needed_positions(self, upto: int) -> list[int]:
        return retention.needed_positions(self.db, upto)

    def remove_audit(self, upto: int, keep: Sequence[int], limit: int) -> int:
        return retention.remove_audit(self._writes, upto, keep, limit)

    def set_kept_from(self, t: datetime) -> None:
        retention.set_kept_from(self._writes, t)

    def write_through(self, transaction: Callable[[], AbstractContextManager[Any]]) -> None:
        """Run the projection's write transactions in `transaction` from now on: in `run` on
        PostgreSQL, the session that holds the projector lock (adapters/infrastructure/shards.py
        `projector_transaction`), so that a replica whose role was taken cannot write.
        Reads stay on the database's own connections."""
        self._writes = _WritesThrough(self.db, transaction)


class _WritesThrough:
    """The read model's database, with its write transactions taken from elsewhere."""

    def __init__(
        self, db: Database, transaction: Callable[[], AbstractContextManager[Any]]
    ) -> None:
        self.db = db
        self.dialect = db.dialect
        self._transaction = transaction

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.db.fetch(sql, args)

    def transaction(self) -> AbstractContextManager[Any]:
        return self._transaction()

    def separate_connection(self) -> Any:
        return self.db.separate_connection()

    def close(self) -> None:
        self.db.close()
