"""Pooled PostgreSQL connections after the server restarted: every idle one is dead.

Both pools (the event store's, the read model's) keep idle connections. When PostgreSQL
restarts, each of them fails the first statement it is lent for. psycopg_pool drops a
connection that comes back broken, but only that one: the next request met the next dead
one, so after a restart the API server answered 503 to a request per idle connection, and a
scheduler turn failed as often. Its check on checkout would find them first, but it sleeps a
second and more between failed checks (its reconnection backoff), so with five idle
connections a read gave up after its three seconds of wait, still on a dead one, and it
costs a round trip on every read besides.

So a statement that failed on a broken connection empties the pool of the others
(`ConnectionPool.check`: each idle one is tested once and the dead ones replaced), and is
tried once more on a fresh connection. Only where that is safe: a read, or an append, which
the store's version check keeps from being written twice (one that did commit before its
connection broke is refused as stale, and decided again on what the log holds).
"""

from __future__ import annotations

from typing import Any

#: SQLSTATEs of a session the server ended: shut down (fast or immediate), crashed, or not
#: accepting connections yet.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})


def broken_connection(error: BaseException) -> bool:
    """Whether `error` (or what it was raised from) is a connection that broke: the server
    ended the session, or the socket closed; not a statement the server refused (a timeout,
    a constraint), nor a pool that gave no connection in time."""
    import psycopg
    from psycopg_pool import PoolTimeout

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, PoolTimeout):
            return False
        if isinstance(seen, psycopg.OperationalError | psycopg.InterfaceError):
            state = getattr(seen, "sqlstate", None)
            return state is None or state in _SESSION_ENDED
        seen = seen.__cause__
    return False


def drop_dead(pool: Any) -> None:
    """Test each idle connection of a psycopg_pool pool once and replace the dead ones."""
    pool.check()
