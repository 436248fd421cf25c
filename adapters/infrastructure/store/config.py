"""Store URLs to infrastructure: the eventsourcing environment and the read-model tables.

`sqlite:///path` (the embedded default), `postgresql://...` and `memory:`. A PostgreSQL URL is
libpq's own (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-URIS),
read by psycopg as it reads any conninfo: several hosts (`h1:5432,h2:5432`),
`target_session_attrs`, `sslmode` and its certificates, `connect_timeout`, `application_name`
and every other libpq parameter reach every connection cronsource makes. Dropping them is a
defect, not a simplification: `?sslmode=require` once connected without TLS. Only `schema` is
ours (the PostgreSQL schema of our tables); it is taken out before libpq sees the URL.

PostgreSQL never gets POSTGRES_ENABLE_DB_FUNCTIONS: its shared insert function writes
into the wrong app's table when two apps share a schema and skips the table lock, so LISTEN/NOTIFY
subscribers miss events. Tables are created by `migrate` (or on first use of an embedded store);
replicas start with CREATE_TABLE=n because concurrent CREATE TABLE fails in PostgreSQL.

A store URL is printed only through `StoreConfig.shown` (or `redact`): the password is never
in a log line, an error, `cronsource version`, the metrics or the status page.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from cronsource.adapters.infrastructure.readside.model import ReadModel

DEFAULT_STORE = "sqlite:///cronsource.db"
#: Where eventsourcing finds our recorders and factories (its topics: module:attribute).
RECORDERS = "cronsource.adapters.infrastructure.store.recorders"
#: The environment key under which `env` hands the libpq conninfo (key=value, password
#: included) to the PostgreSQL factory (recorders/postgres.py `ConninfoFactory`).
CONNINFO = "CRONSOURCE_STORE_CONNINFO"
#: Seconds the event store's callers wait for a pooled connection (see `StoreConfig.env`).
POOL_WAIT_SECONDS = 3
#: What a password is replaced by wherever a store URL is shown.
HIDDEN = "***"
#: libpq parameters whose value is a secret (the URL's own password is handled apart).
_SECRET_PARAMS = ("password", "sslpassword")
#: libpq parameters cronsource cannot honour, and why: refused, never silently ignored.
_REFUSED = {
    # A replication connection takes no extended-protocol queries, no LISTEN, no advisory
    # locks: every one of our connections would fail after connecting.
    "replication": "cronsource needs ordinary sessions, not replication connections",
}
#: target_session_attrs values that may pick a server that takes no writes: every decision
#: would then fail on a read-only transaction.
_READ_ONLY_TARGETS = ("read-only", "standby", "prefer-standby")


class StoreURLError(ValueError):
    pass


def _netloc_span(url: str) -> tuple[int, int] | None:
    """Where the authority (`user:password@hosts`) of a scheme:// URL starts and ends."""
    head = url.find("://")
    if head < 0:
        return None
    start = head + 3
    end = len(url)
    for stop in "/?#":
        i = url.find(stop, start)
        if i >= 0:
            end = min(end, i)
    return start, end


def _password(url: str) -> str | None:
    """The password as written in the URL (maybe percent-encoded), without parsing the rest,
    so that a URL libpq refuses can still be shown without it."""
    span = _netloc_span(url)
    if span is None:
        return None
    userinfo, at, _ = url[span[0] : span[1]].rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1]


def redact(url: str) -> str:
    """`url` with its password (and any `password=`/`sslpassword=` parameter) hidden."""
    span = _netloc_span(url)
    if span is not None:
        start, end = span
        userinfo, at, hosts = url[start:end].rpartition("@")
        if at and ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            url = f"{url[:start]}{user}:{HIDDEN}@{hosts}{url[end:]}"
    secret = "|".join(_SECRET_PARAMS)
    return re.sub(rf"([?&](?:{secret})=)[^&#]*", rf"\g<1>{HIDDEN}", url)


def _scrub(text: str, url: str) -> str:
    """`text` (an error libpq wrote about `url`) with every spelling of the password hidden:
    libpq quotes the part it could not read, and that part may be the password."""
    text = text.replace(url, redact(url))
    raw = _password(url)
    if raw:
        for spelling in {raw, unquote(raw)}:
            text = text.replace(spelling, HIDDEN)
    return text


def split_schema(url: str) -> tuple[str, str]:
    """(the URL without our `schema` parameter, the schema or ""). The query is split by
    hand, not re-encoded, so that libpq reads every other parameter exactly as written."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, ""
    schemas = [p for p in query.split("&") if unquote(p.partition("=")[0]) == "schema"]
    kept = [p for p in query.split("&") if p and p not in schemas]
    if len(schemas) > 1:
        raise StoreURLError(
            f"not a valid store URL: {redact(url)!r}: the parameter 'schema' is given"
            f" {len(schemas)} times"
        )
    schema = unquote(schemas[0].partition("=")[2]) if schemas else ""
    if schemas and not _SCHEMA.fullmatch(schema):
        # It reaches SQL as a name: `Bad-Schema` was a PostgreSQL syntax error said as a
        # connection failure, and `public;...` a statement of its own.
        raise StoreURLError(
            f"not a valid store URL: {redact(url)!r}: schema {schema!r} is not a PostgreSQL"
            " schema name cronsource takes (lower-case letters, digits and _, starting with"
            " a letter or _, at most 63)"
        )
    return (f"{base}?{'&'.join(kept)}" if kept else base), schema


_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _postgres_conninfo(url: str) -> tuple[str, str]:
    """The libpq conninfo of a postgresql:// URL as psycopg reads it, and our schema;
    StoreURLError (one line, naming the parameter, without the password) for anything that
    libpq would refuse at connect time or that we cannot honour."""
    shown = redact(url)

    def bad(why: str) -> StoreURLError:
        return StoreURLError(f"not a valid store URL: {shown!r}: {why}")

    libpq_url, schema = split_schema(url)
    query = libpq_url.partition("?")[2]
    keys = [unquote(p.partition("=")[0]) for p in query.split("&") if p]
    for key in sorted({k for k in keys if keys.count(k) > 1}):
        # libpq keeps the last one: the others would be dropped without a word.
        raise bad(f"the parameter {key!r} is given {keys.count(key)} times")
    import psycopg  # here, not at the top: a command on SQLite never loads it (0.1 s)

    try:
        params = {
            k: str(v)
            for k, v in psycopg.conninfo.conninfo_to_dict(libpq_url).items()
            if v is not None
        }
    except psycopg.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise bad(_scrub(first, url)) from None
    for key, why in _REFUSED.items():
        if key in params:
            raise bad(f"the parameter {key!r} is not supported: {why}")
    target = params.get("target_session_attrs", "")
    if target in _READ_ONLY_TARGETS:
        raise bad(
            f"target_session_attrs={target} may pick a server that takes no writes;"
            " cronsource writes: use read-write, primary or any"
        )
    ports = params.get("port", "").split(",")
    for port in ports:
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise bad(f"the port is not a number: {port!r}")
    hosts = (params.get("host") or params.get("hostaddr") or "").split(",")
    if len(ports) not in (1, len(hosts)):
        raise bad(f"{len(ports)} ports for {len(hosts)} hosts: give one port, or one per host")
    if not params.get("dbname"):
        raise bad(
            "a PostgreSQL URL needs a database name, e.g. postgresql://user@host:5432/cronsource"
        )
    return psycopg.conninfo.make_conninfo(**params), schema


@dataclass(frozen=True)
class StoreConfig:
    #: The URL as given, password included: pass it on (to a child process), never print it.
    url: str
    kind: str  # "sqlite" | "postgresql" | "memory"
    sqlite_path: str = ""
    #: libpq's key=value conninfo: every parameter of the URL but `schema`.
    pg_conninfo: str = ""
    pg_schema: str = ""

    @property
    def shown(self) -> str:
        """The URL to print: the password hidden."""
        return redact(self.url)

    @classmethod
    def parse(cls, url: str | None) -> StoreConfig:
        url = url or os.environ.get("CRONSOURCE_STORE") or DEFAULT_STORE
        if url in ("memory:", "memory://"):
            return cls(url, "memory")
        scheme = url.partition(":")[0].lower() if ":" in url else ""
        if scheme == "sqlite":
            if not url.startswith("sqlite:///"):
                # `sqlite:/x.db` or `sqlite://x.db`: the path would be read as a host or
                # silently as relative; say how many slashes mean what instead.
                raise StoreURLError(
                    f"not a valid store URL: {url!r}: use sqlite:///relative/path.db"
                    " (three slashes) or sqlite:////absolute/path.db (four)"
                )
            path = unquote(urlparse(url).path)
            # sqlite:///rel/path is relative, sqlite:////abs/path absolute
            path = "/" + path.lstrip("/") if url.startswith("sqlite:////") else path.lstrip("/")
            if not path:
                raise StoreURLError(
                    f"not a valid store URL: {url!r}: a SQLite URL needs a path,"
                    " e.g. sqlite:///cronsource.db"
                )
            return cls(url, "sqlite", sqlite_path=path)
        if scheme in ("postgresql", "postgres"):
            conninfo, schema = _postgres_conninfo(url)
            return cls(url, "postgresql", pg_conninfo=conninfo, pg_schema=schema)
        raise StoreURLError(
            f"not a valid store URL: {redact(url)!r}: use sqlite:///PATH,"
            " postgresql://USER@HOST/DB or memory:"
        )

    def with_schema(self, schema: str) -> StoreConfig:
        return StoreConfig(self.url, self.kind, self.sqlite_path, self.pg_conninfo, schema)

    def env(self, create_table: bool = True) -> dict[str, str]:
        """The eventsourcing environment for this store."""
        if self.kind == "memory":
            return {"PERSISTENCE_MODULE": f"{RECORDERS}.memory:MemoryFactory"}
        if self.kind == "sqlite":
            return {
                "PERSISTENCE_MODULE": f"{RECORDERS}.sqlite:SqliteFactory",
                "SQLITE_DBNAME": self.sqlite_path,
                "SQLITE_LOCK_TIMEOUT": "30",
                "APPLICATION_RECORDER_TOPIC": f"{RECORDERS}.sqlite:SqliteRecorder",
                "CREATE_TABLE": "y" if create_table else "n",
            }
        env = {
            # The library's PostgreSQL factory, given the whole conninfo (ConninfoFactory).
            "PERSISTENCE_MODULE": f"{RECORDERS}.postgres:ConninfoFactory",
            CONNINFO: self.pg_conninfo,
            "POSTGRES_POOL_SIZE": "5",
            "POSTGRES_MAX_OVERFLOW": "10",
            # Seconds a caller waits for a pooled connection (the pool makes them in the
            # background; a refused or dead server answers no sooner). A loop step that reads
            # while the store is down waits this long twice (a read tries one fresh connection,
            # store/recorders/), and SIGTERM waits for the step in flight: with 10 s a
            # replica took 20 s and more to stop (issue 27, item 3). A healthy server gives a
            # connection in milliseconds.
            "POSTGRES_CONNECT_TIMEOUT": str(POOL_WAIT_SECONDS),
            # No check as a connection is lent: after a restart it slept a second and more
            # between dead connections and gave up at the wait above. A statement that
            # meets a dead one has the pool drop them all and runs again on a fresh one
            # (adapters/infrastructure/pgpool.py).
            "POSTGRES_PRE_PING": "n",
            "APPLICATION_RECORDER_TOPIC": f"{RECORDERS}.postgres:PostgresRecorder",
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
