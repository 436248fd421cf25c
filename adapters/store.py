"""Store URLs to infrastructure: the eventsourcing environment and the read-model tables.

`sqlite:///path` (the embedded default), `postgresql://user:pw@host:port/db[?schema=s]` and
`memory:`. PostgreSQL never gets POSTGRES_ENABLE_DB_FUNCTIONS: its shared insert function writes
into the wrong app's table when two apps share a schema and skips the table lock, so LISTEN/NOTIFY
subscribers miss events. Tables are created by `migrate` (or on first use of an embedded store);
replicas start with CREATE_TABLE=n because concurrent CREATE TABLE fails in PostgreSQL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlparse

from adapters.readside.model import ReadModel

DEFAULT_STORE = "sqlite:///cronsource.db"


class StoreURLError(ValueError):
    pass


@dataclass(frozen=True)
class StoreConfig:
    url: str
    kind: str  # "sqlite" | "postgresql" | "memory"
    sqlite_path: str = ""
    pg_conninfo: str = ""
    pg_schema: str = ""

    @classmethod
    def parse(cls, url: str | None) -> StoreConfig:
        url = url or os.environ.get("CRONSOURCE_STORE") or DEFAULT_STORE
        if url in ("memory:", "memory://"):
            return cls(url, "memory")
        parsed = urlparse(url)
        if parsed.scheme == "sqlite":
            if not url.startswith("sqlite:///"):
                # `sqlite:/x.db` or `sqlite://x.db`: the path would be read as a host or
                # silently as relative; say how many slashes mean what instead.
                raise StoreURLError(
                    f"not a valid store URL: {url!r}: use sqlite:///relative/path.db"
                    " (three slashes) or sqlite:////absolute/path.db (four)"
                )
            path = unquote(parsed.path)
            # sqlite:///rel/path is relative, sqlite:////abs/path absolute
            path = "/" + path.lstrip("/") if url.startswith("sqlite:////") else path.lstrip("/")
            if not path:
                raise StoreURLError(
                    f"not a valid store URL: {url!r}: a SQLite URL needs a path,"
                    " e.g. sqlite:///cronsource.db"
                )
            return cls(url, "sqlite", sqlite_path=path)
        if parsed.scheme in ("postgresql", "postgres"):
            try:
                parsed.port  # noqa: B018 (urlparse checks the port only when asked)
            except ValueError:
                raise StoreURLError(
                    f"not a valid store URL: {url!r}: the port is not a number"
                ) from None
            schema = parse_qs(parsed.query).get("schema", [""])[0]
            conninfo = parsed._replace(query="").geturl().replace("postgres://", "postgresql://", 1)
            if not parsed.path.strip("/"):
                raise StoreURLError(
                    f"not a valid store URL: {url!r}: a PostgreSQL URL needs a database name,"
                    " e.g. postgresql://user@host:5432/cronsource"
                )
            return cls(url, "postgresql", pg_conninfo=conninfo, pg_schema=schema)
        raise StoreURLError(
            f"not a valid store URL: {url!r}: use sqlite:///PATH, postgresql://USER@HOST/DB"
            " or memory:"
        )

    def with_schema(self, schema: str) -> StoreConfig:
        return StoreConfig(self.url, self.kind, self.sqlite_path, self.pg_conninfo, schema)

    def env(self, create_table: bool = True) -> dict[str, str]:
        """The eventsourcing environment for this store."""
        if self.kind == "memory":
            return {"PERSISTENCE_MODULE": "adapters.recorders:MemoryFactory"}
        if self.kind == "sqlite":
            return {
                "PERSISTENCE_MODULE": "adapters.recorders:SqliteFactory",
                "SQLITE_DBNAME": self.sqlite_path,
                "SQLITE_LOCK_TIMEOUT": "30",
                "APPLICATION_RECORDER_TOPIC": "adapters.recorders:SqliteRecorder",
                "CREATE_TABLE": "y" if create_table else "n",
            }
        p = urlparse(self.pg_conninfo)
        env = {
            "PERSISTENCE_MODULE": "adapters.recorders:PostgresFactory",
            "POSTGRES_DBNAME": p.path.lstrip("/"),
            "POSTGRES_HOST": p.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(p.port or 5432),
            "POSTGRES_USER": unquote(p.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(p.password or ""),
            "POSTGRES_POOL_SIZE": "5",
            "POSTGRES_MAX_OVERFLOW": "10",
            "POSTGRES_CONNECT_TIMEOUT": "10",
            "POSTGRES_PRE_PING": "y",
            "APPLICATION_RECORDER_TOPIC": "adapters.recorders:PostgresRecorder",
            "CREATE_TABLE": "y" if create_table else "n",
            # Pinned, because eventsourcing also reads the process environment: a stray
            # variable must not switch on the shared DB functions or move the event store
            # away from the read model's schema.
            "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
            "POSTGRES_SCHEMA": self.pg_schema or "public",
        }
        return env

    def read_model(self) -> ReadModel:
        if self.kind == "memory":
            return ReadModel.sqlite(":memory:")
        if self.kind == "sqlite":
            return ReadModel.sqlite(self.sqlite_path)
        return ReadModel.postgres(self.pg_conninfo, self.pg_schema or None)
