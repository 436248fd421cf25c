"""The event store's PostgreSQL connections, made from the store URL's whole conninfo.

eventsourcing's `PostgresFactory` is configured from discrete settings (POSTGRES_HOST,
POSTGRES_PORT, POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DBNAME) and hands exactly those to
its connection pool: one host, no `sslmode`, no `target_session_attrs`, no `application_name`.
With it the event store connected without TLS to a URL that asked for it, and could not follow a
multi-host URL to the primary. This factory is the library's own (with our snapshot recorder,
adapters/recorders.py), selected through its own PERSISTENCE_MODULE topic (adapters/store.py);
it builds everything as the library does (pool sizes, timeouts, schema, recorders) and then
points the still unopened pool at the libpq conninfo from the environment (`CONNINFO`), so every
parameter of the URL reaches every event-store connection. tests/test_store_url.py checks it
against a real server (pg_stat_activity, sslmode, a dead first host).
"""

from __future__ import annotations

from eventsourcing.utils import Environment, EnvType
from psycopg.rows import dict_row

from adapters.recorders import PostgresFactory

#: The environment key holding the libpq conninfo (key=value, password included).
CONNINFO = "CRONSOURCE_STORE_CONNINFO"
#: Settings the library insists on before it builds its pool. Their values never reach a
#: connection: the pool's conninfo and arguments are replaced below.
_REQUIRED = ("POSTGRES_DBNAME", "POSTGRES_HOST", "POSTGRES_USER", "POSTGRES_PASSWORD")


class ConninfoFactory(PostgresFactory):
    """`PostgresFactory` whose pool connects with the conninfo under `CONNINFO`."""

    def __init__(self, env: Environment | EnvType | None):
        given = env if isinstance(env, Environment) else Environment(env=env)
        conninfo = given.get(CONNINFO)
        if not conninfo:
            raise OSError(f"the libpq conninfo is not in the environment under {CONNINFO!r}")
        # A copy: the application's own environment keeps no placeholder.
        completed = Environment(given.name, {**{key: "" for key in _REQUIRED}, **given})
        super().__init__(completed)
        pool = self.datastore.pool
        # The pool is not open yet (the library opens it at first use), so no connection was
        # made with the discrete settings. psycopg merges the arguments into the conninfo with
        # the arguments winning: only the row factory the library's recorders need is left.
        pool.conninfo = conninfo
        pool.kwargs = {"row_factory": dict_row}
