"""libpq conninfo strings: one helper every connection site shares.

Kept apart from adapters/infrastructure/store/config.py, which imports the read model, so that
modules the read model itself imports (adapters/infrastructure/leases.py) can use it without an
import cycle.

psycopg is imported where a connection is made, in this module and every one beside it that
connects (locks, leases, shards, the write probe, the store check): they are all imported on
every command, and a command on SQLite then paid 0.2 s of its 0.9 s for a driver it never used.
"""

from __future__ import annotations


def with_defaults(conninfo: str, **defaults: str | int) -> str:
    """`conninfo` plus `defaults` for the parameters it does not set. The URL's own value
    wins: an argument to psycopg.connect() would override it (a `connect_timeout=5` there
    silently replaced the operator's `?connect_timeout=`)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo  # PostgreSQL's only

    given = conninfo_to_dict(conninfo)
    return make_conninfo(conninfo, **{k: v for k, v in defaults.items() if k not in given})
