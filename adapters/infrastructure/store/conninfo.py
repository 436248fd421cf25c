"""libpq conninfo strings: one helper every connection site shares.

Kept apart from adapters/infrastructure/store/config.py, which imports the read model, so that
modules the read model itself imports (adapters/infrastructure/leases.py) can use it without an
import cycle.
"""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict, make_conninfo


def with_defaults(conninfo: str, **defaults: str | int) -> str:
    """`conninfo` plus `defaults` for the parameters it does not set. The URL's own value
    wins: an argument to psycopg.connect() would override it (a `connect_timeout=5` there
    silently replaced the operator's `?connect_timeout=`)."""
    given = conninfo_to_dict(conninfo)
    return make_conninfo(conninfo, **{k: v for k, v in defaults.items() if k not in given})
