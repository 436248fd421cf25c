"""Before a command touches a store: can it be reached, and is it migrated?

The store libraries answer these questions slowly and in their own words: psycopg's pool waits
its full connect timeout (10 s) before "couldn't get a connection", an un-migrated PostgreSQL
database fails deep inside the first query (`UndefinedTable`), and SQLite says "unable to open
database file" for a missing directory. A user needs the cause and the fix in one line, at
once, so every command asks here first, with one short direct connection, and `describe`
turns whatever a store library raised later into the same kind of line.
"""

from __future__ import annotations

import getpass
import os
import sqlite3
import sys

from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.infrastructure.store.conninfo import with_defaults

#: A direct connection attempt. A refused port answers in milliseconds; this bounds an
#: unreachable (filtered) host, which never answers at all.
CONNECT_TIMEOUT_SECONDS = 3
#: Tables `migrate` creates; if one is missing, the store was never migrated (or partly).
REQUIRED_TABLES = (
    "cronsource_events",
    "cronsource_snapshots",
    "cronsource_tracking",
    "cronsource_status",
)


class StoreUnavailable(RuntimeError):
    """The store cannot be used; the message names the cause and the fix."""


def _where(config: StoreConfig) -> str:
    """host:port of each server the URL names (libpq's defaults where it names none)."""
    from psycopg.conninfo import conninfo_to_dict  # PostgreSQL's only (store/conninfo.py)

    p = conninfo_to_dict(config.pg_conninfo)
    hosts = str(p.get("host") or p.get("hostaddr") or os.environ.get("PGHOST") or "").split(",")
    ports = str(p.get("port") or os.environ.get("PGPORT") or "").split(",")
    if len(ports) == 1:
        ports *= len(hosts)  # one port for every host, as libpq reads it
    return ",".join(
        f"{h or 'localhost'}:{port or 5432}" for h, port in zip(hosts, ports, strict=True)
    )


def _pg_message(config: StoreConfig, text: str) -> str:
    """One line from a psycopg connection error, which spans several lines and repeats."""
    from psycopg.conninfo import conninfo_to_dict

    where = _where(config)
    low = text.lower()
    if "connection refused" in low:
        return (
            f"connection refused at {where}: is PostgreSQL running there?"
            f" (check --store {config.shown})"
        )
    if "timeout expired" in low or "timed out" in low:
        return (
            f"no answer from {where} within {CONNECT_TIMEOUT_SECONDS}s: check the host and"
            " port in --store and that the network allows it"
        )
    if "does not exist" in low and "database" in low:
        db = conninfo_to_dict(config.pg_conninfo).get("dbname")
        return (
            f"database {db!r} does not exist at {where}: create it (createdb {db}),"
            " then run `cronsource migrate`"
        )
    if "authentication failed" in low or "password" in low:
        user = (
            conninfo_to_dict(config.pg_conninfo).get("user")
            or os.environ.get("PGUSER")
            or getpass.getuser()
        )
        return (
            f"PostgreSQL at {where} refused user {user!r}: check the user and password in --store"
        )
    if "could not translate host name" in low or "name or service not known" in low:
        return f"unknown host in --store {config.shown}: check the host name"
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return f"cannot connect to PostgreSQL at {where}: {first}"


def _not_migrated(config: StoreConfig) -> str:
    return (
        f"store {config.shown} is not migrated (no cronsource tables):"
        f" run `cronsource --store {config.shown} migrate` first"
    )


def check_store(config: StoreConfig, *, need_tables: bool = True, must_exist: bool = False) -> None:
    """Raise StoreUnavailable unless the store answers (and, with `need_tables`, is migrated).

    SQLite and memory stores create their tables on first use, so only their path is checked;
    with `must_exist`, a SQLite file must be there already: a tool that reads the store only
    (`check`, `export`, `version`) reported a store it had just created at a mistyped path as
    healthy and empty.
    """
    if config.kind == "memory":
        return
    if config.kind == "sqlite":
        directory = os.path.dirname(os.path.abspath(config.sqlite_path))
        if not os.path.isdir(directory):
            raise StoreUnavailable(
                f"cannot open SQLite store {config.sqlite_path}: directory {directory} does"
                " not exist (create it, or pick another path in --store)"
            )
        if os.path.isdir(config.sqlite_path):
            raise StoreUnavailable(
                f"cannot open SQLite store {config.sqlite_path}: it is a directory"
                " (--store sqlite:///DIR/cronsource.db)"
            )
        if must_exist and not os.path.exists(config.sqlite_path):
            raise StoreUnavailable(
                f"SQLite store {config.sqlite_path} does not exist (a mistyped path? `cronsource"
                " migrate`, `apply` or `run` creates it)"
            )
        return
    import psycopg

    try:
        conn = psycopg.connect(
            with_defaults(config.pg_conninfo, connect_timeout=CONNECT_TIMEOUT_SECONDS),
            autocommit=True,
        )
    except psycopg.Error as e:
        raise StoreUnavailable(_pg_message(config, str(e))) from None
    try:
        if not need_tables:
            return
        schema = config.pg_schema or "public"
        row = conn.execute(
            "SELECT " + ", ".join("to_regclass(%s)" for _ in REQUIRED_TABLES),
            [f'"{schema}".{t}' for t in REQUIRED_TABLES],
        ).fetchone()
        if row is None or any(v is None for v in row):
            raise StoreUnavailable(_not_migrated(config))
    except psycopg.Error as e:
        raise StoreUnavailable(_pg_message(config, str(e))) from None
    finally:
        conn.close()


def store_faults() -> tuple[type[Exception], ...]:
    """The errors that say the store did not answer (the server went away, the pool found no
    connection, SQLite stayed locked past its timeout): faults to retry, not bugs. psycopg's
    (the pool's derive from them) only when it is loaded, as `describe` asks."""
    from eventsourcing.persistence import InterfaceError, OperationalError

    faults: tuple[type[Exception], ...] = (
        sqlite3.OperationalError,
        OperationalError,
        InterfaceError,
    )
    if (psycopg := sys.modules.get("psycopg")) is not None:
        faults += (psycopg.OperationalError, psycopg.InterfaceError)
    return faults


def is_store_fault(e: BaseException) -> bool:
    faults = store_faults()
    return isinstance(e, faults) or isinstance(e.__cause__, faults)


def describe(e: BaseException, config: StoreConfig | None = None) -> str:
    """One line naming the cause (and the fix, where there is one) of an error a store
    library raised after the first check passed (e.g. the server went away meanwhile)."""
    # Not loaded, psycopg raised nothing: a command on SQLite does not import it for this.
    psycopg = sys.modules.get("psycopg")
    drivers: tuple[type[BaseException], ...] = (sqlite3.Error,)
    if psycopg is not None:
        drivers += (psycopg.Error,)
    if not isinstance(e, drivers) and isinstance(e.__cause__, drivers):
        e = e.__cause__  # eventsourcing wraps the driver's error: name the driver's cause
    text = str(e)
    if psycopg is not None and isinstance(e, psycopg.Error) and config is not None:
        if isinstance(e, psycopg.errors.UndefinedTable):
            return _not_migrated(config)
        if config.kind == "postgresql":
            return _pg_message(config, text)
    if "couldn't get a connection" in text and config is not None and config.kind == "postgresql":
        return f"no connection to PostgreSQL at {_where(config)}: {text}"
    if isinstance(e, sqlite3.Error):
        where = f" {config.sqlite_path}" if config is not None and config.sqlite_path else ""
        if "no such table" in text:
            return f"SQLite store{where} is missing tables ({text}): run `cronsource migrate`"
        if "locked" in text:
            return f"SQLite store{where} is locked by another process: {text} (try again)"
        return f"the store cannot be read: SQLite store{where}: {text}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__
