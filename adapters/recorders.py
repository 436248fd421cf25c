"""The event store's recorders, as eventsourcing ships them plus what a burst needs.

A burst of 10,000 fires loaded each aggregate with its own query (10,000 round trips, most of
a cold burst) and wrote each batch as an array of a composite type, whose client-side
encoding cost more than the server's insert. These subclasses keep eventsourcing's tables,
locking, notification and version check exactly as they are and add:

- `select_events_many(ids)`: the events of many streams in one query;
- on PostgreSQL, the insert sends four plain arrays (`unnest(uuid[], bigint[], text[],
  bytea[])`) instead of one array of a composite type: the same rows, the same statement
  shape, the same IntegrityError on a stale version.

They are wired in through eventsourcing's own `APPLICATION_RECORDER_TOPIC` (adapters/store.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.sql import SQL, Identifier

#: Streams per query: bounds the statement's parameter and the rows held at once.
MANY_CHUNK = 1000


class PostgresRecorder(PostgresApplicationRecorder):
    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        table = SQL("{schema}.{table}").format(
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
        )
        self._insert_arrays = (
            SQL(
                "INSERT INTO {table} (originator_id, originator_version, topic, state) "
                "SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::bytea[]) "
                "RETURNING notification_id"
            ).format(table=table)
            if self.datastore.originator_id_type == "uuid"
            else None
        )
        self._select_many = SQL(
            "SELECT originator_id, originator_version, topic, state FROM {table} "
            "WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version"
        ).format(table=table)

    def _insert_stored_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        if self._insert_arrays is None:
            super()._insert_stored_events(curs, stored_events, **kwargs)
            return
        self._lock_table(curs)
        self._notify_channel(curs)
        curs.execute(
            self._insert_arrays,
            (
                [e.originator_id for e in stored_events],
                [e.originator_version for e in stored_events],
                [e.topic for e in stored_events],
                [e.state for e in stored_events],
            ),
            prepare=True,
        )

    def select_events_many(self, originator_ids: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """Every event of these streams, in version order, by stream."""
        out: dict[UUID, list[StoredEvent]] = defaultdict(list)
        ids = list(originator_ids)
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            for i in range(0, len(ids), MANY_CHUNK):
                curs.execute(self._select_many, (ids[i : i + MANY_CHUNK],), prepare=True)
                for row in curs.fetchall():
                    oid = row["originator_id"]
                    out[oid].append(
                        StoredEvent(
                            oid, row["originator_version"], row["topic"], bytes(row["state"])
                        )
                    )
        return out


class SqliteRecorder(SQLiteApplicationRecorder):
    def select_events_many(self, originator_ids: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """Every event of these streams, in version order, by stream."""
        out: dict[UUID, list[StoredEvent]] = defaultdict(list)
        keys = [i.hex if isinstance(i, UUID) else str(i) for i in originator_ids]
        with self.datastore.transaction(commit=False) as c:
            # SQLite's default limit is 32,766 host parameters; stay well below it.
            for i in range(0, len(keys), MANY_CHUNK):
                chunk = keys[i : i + MANY_CHUNK]
                c.execute(
                    f"SELECT originator_id, originator_version, topic, state "  # noqa: S608
                    f"FROM {self.events_table_name} WHERE originator_id IN "
                    f"({','.join('?' * len(chunk))}) ORDER BY originator_id, originator_version",
                    chunk,
                )
                for row in c.fetchall():
                    # Our stream ids are all uuid5, which the recorder converts back to UUID.
                    oid = cast(UUID, self.convert_originator_id(row["originator_id"]))
                    out[oid].append(
                        StoredEvent(oid, row["originator_version"], row["topic"], row["state"])
                    )
        return out
