"""The event store's recorders, as eventsourcing ships them plus what the log's truth and a
burst need.

The library's version check is a unique key on (stream, version): it refuses a writer that is
behind, never one that is ahead. After a failover to an asynchronous standby the promoted log
has lost its last commits, and a replica still holding a copy at version 12 of a stream the
log now ends at 8 would write 13 on top of the hole: a stream nobody can replay again
(`OriginatorVersionError: (9, 8)`), for every reader, for good. So every append here checks
what Kubernetes' `resourceVersion` precondition checks: the stream's last version in the log
is the one the writer read (`StaleAppend` otherwise, an IntegrityError like any stale save,
so the writer reloads and decides again). Duplicates are still refused by the key.

And for a burst of 10,000 fires, which loaded each aggregate with its own query and wrote each
batch as an array of a composite type (whose client-side encoding cost more than the server's
insert), they add:

- `select_events_many(ids)`: the events of many streams in one query;
- on PostgreSQL, the insert sends four plain arrays (`unnest(uuid[], bigint[], text[],
  bytea[])`) instead of one array of a composite type, and checks the last versions in the
  same statement.

The library retries a failed insert up to 10 times, each waiting for a connection: a decision
made before an outage was committed 44 s later as an on-time fire. Here an insert is tried
once (on PostgreSQL once more at once, on a fresh connection, when its connection broke:
adapters/infrastructure/pgpool.py); the caller decides again on what the store holds then
(domain/service.py).

They are wired in through eventsourcing's own `APPLICATION_RECORDER_TOPIC`
(adapters/infrastructure/store/config.py), and for `memory:` through `MemoryFactory` (its
`PERSISTENCE_MODULE`), each named by its own module: the package does not import the
PostgreSQL recorders, which load psycopg, its pool and the library's PostgreSQL module (0.2 s
of a command on SQLite).
"""

from cronsource.adapters.infrastructure.store.recorders.common import (
    CommitTooLate,
    StaleAppend,
    commit_within,
)
from cronsource.adapters.infrastructure.store.recorders.memory import (
    MemoryFactory,
    MemoryRecorder,
    MemorySnapshotRecorder,
)
from cronsource.adapters.infrastructure.store.recorders.sqlite import (
    SqliteFactory,
    SqliteRecorder,
    SqliteSnapshotRecorder,
)

__all__ = [
    "CommitTooLate",
    "MemoryFactory",
    "MemoryRecorder",
    "MemorySnapshotRecorder",
    "SqliteFactory",
    "SqliteRecorder",
    "SqliteSnapshotRecorder",
    "StaleAppend",
    "commit_within",
]
