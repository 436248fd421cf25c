"""Throwaway PostgreSQL servers for the test suite.

Importable from tests and runnable as a CLI::

    python -m tests.pgserver start            # prints "DATADIR URL"
    python -m tests.pgserver restart DATADIR  # prints URL
    python -m tests.pgserver stop DATADIR     # stops the server, removes DATADIR
    python -m tests.pgserver bindir           # prints the PostgreSQL bin dir

Each server lives in its own ``/tmp/pgXXXXXXXX`` directory, which is both the
data directory and the unix socket directory (kept short: socket paths are
limited to 107 bytes). It listens on 127.0.0.1 only, on a free port, with
``trust`` authentication and durability switched off (fsync, full page writes,
synchronous commit) because nothing in it is worth keeping.

PostgreSQL refuses to run as root. When we are root, initdb and pg_ctl run as
the ``postgres`` user (created by the Debian package), or ``nobody`` if that
user does not exist, via ``runuser -u USER --`` (``su`` as a fallback), and the
data directory is chowned to that user.

If the environment variable ``CRONSOURCE_TEST_PG`` holds a URL, the test
helpers (``pg_url_for_tests``, ``running_server``, the ``pg_server_url``
fixture) use that server and start nothing; its role needs CREATEDB.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import conninfo, errors, sql

ENV_URL = "CRONSOURCE_TEST_PG"
TEST_DB = "cronsource_test"
DEBIAN_PACKAGE = "postgresql"
PG_LIB_ROOT = "/usr/lib/postgresql"
SUPERUSER = "postgres"
READY_TIMEOUT = 30.0

# Written into every data directory we create. It holds our settings (it is
# included from postgresql.conf) and marks the directory as ours, so that
# stop() never deletes a directory it did not create.
CONF_NAME = "cronsource_pgserver.conf"
LOG_NAME = "postgres.log"

SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "128MB",
}

_SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")


class PostgresNotFound(RuntimeError):
    """The PostgreSQL server binaries are not installed."""


class PgServerError(RuntimeError):
    """initdb, pg_ctl or the server itself failed."""


# --------------------------------------------------------------------------
# Locating binaries and choosing the user to run them as
# --------------------------------------------------------------------------


def _has_server_binaries(bindir: str) -> bool:
    return all(os.access(os.path.join(bindir, name), os.X_OK) for name in _SERVER_BINARIES)


def _version_key(bindir: str) -> tuple[int, ...]:
    # /usr/lib/postgresql/<version>/bin -> (15,) or (9, 6)
    version = os.path.basename(os.path.dirname(bindir))
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return (-1,)


def find_bindir(path: str | None = None, lib_root: str = PG_LIB_ROOT) -> str:
    """Return the directory holding initdb, pg_ctl and postgres.

    Looks at PATH first (resolving symlinks, so that all three binaries come
    from the same installation), then at the highest ``<lib_root>/<ver>/bin``.
    """
    found = shutil.which("initdb", path=path)
    if found:
        bindir = os.path.dirname(os.path.realpath(found))
        if _has_server_binaries(bindir):
            return bindir
    candidates = sorted(glob.glob(os.path.join(lib_root, "*", "bin")), key=_version_key)
    for bindir in reversed(candidates):
        if _has_server_binaries(bindir):
            return bindir
    raise PostgresNotFound(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in PATH "
        f"or {lib_root}/*/bin. Install the Debian package '{DEBIAN_PACKAGE}' "
        f"(apt-get install -y {DEBIAN_PACKAGE}, or run scripts/ensure-postgres.sh), "
        f"or set {ENV_URL} to the URL of an existing server."
    )


def server_user() -> str | None:
    """The user to run PostgreSQL as, or None to run it as ourselves (non-root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PgServerError(
        "running as root, and neither a 'postgres' nor a 'nobody' user exists to run "
        "PostgreSQL as (it refuses to run as root)"
    )


def _as_user(argv: list[str], user: str | None) -> list[str]:
    if user is None:
        return argv
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *argv]
    # su needs a shell; -s because 'nobody' has /usr/sbin/nologin.
    return ["su", "-s", "/bin/sh", user, "-c", 'exec "$0" "$@"', *argv]


def _subprocess_env() -> dict[str, str]:
    # PGDATA, PGPORT, PGOPTIONS ... from the caller's environment must not leak in.
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _run(
    argv: list[str], user: str | None, timeout: float, what: str
) -> subprocess.CompletedProcess[str]:
    cmd = _as_user(argv, user)
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_subprocess_env(),
            cwd="/",  # the server user may not be able to enter our cwd
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PgServerError(f"{what} timed out after {timeout}s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        raise PgServerError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stdout}{proc.stderr}".rstrip()
        )
    return proc


# --------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------


def url_for(port: int, dbname: str = TEST_DB) -> str:
    return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{dbname}"


def database_name(url: str) -> str:
    dbname = conninfo.conninfo_to_dict(url).get("dbname")
    if not dbname:
        raise ValueError(f"no database name in {url!r}")
    return str(dbname)


def with_database(url: str, dbname: str) -> str:
    """The same server and credentials as ``url``, but database ``dbname``."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + quote(dbname, safe="")))
    return conninfo.make_conninfo(url, dbname=dbname)


def wait_until_ready(url: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll until ``url`` accepts connections and answers a query."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() >= deadline:
                raise PgServerError(
                    f"PostgreSQL at {url} not ready after {timeout}s: {exc}"
                ) from exc
            time.sleep(0.05)


# --------------------------------------------------------------------------
# Server lifecycle
# --------------------------------------------------------------------------


def new_datadir() -> str:
    """A fresh empty directory for a server (short path, under /tmp)."""
    return tempfile.mkdtemp(prefix="pg", dir="/tmp")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _conf_path(datadir: str) -> str:
    return os.path.join(datadir, CONF_NAME)


def is_ours(datadir: str) -> bool:
    return os.path.isfile(_conf_path(datadir))


def server_port(datadir: str) -> int:
    with open(_conf_path(datadir)) as f:
        match = re.search(r"^port = (\d+)$", f.read(), re.MULTILINE)
    if not match:
        raise PgServerError(f"no port in {_conf_path(datadir)}")
    return int(match.group(1))


def server_url(datadir: str, dbname: str = TEST_DB) -> str:
    return url_for(server_port(datadir), dbname)


def _write_conf(datadir: str, port: int, user: str | None) -> None:
    settings = {**SETTINGS, "port": str(port), "unix_socket_directories": datadir}
    lines = ["# written by tests/pgserver.py"]
    for key, value in settings.items():
        if value.isdigit() or value in ("on", "off"):
            lines.append(f"{key} = {value}")
        else:
            lines.append(f"{key} = '{value.replace(chr(39), chr(39) * 2)}'")
    path = _conf_path(datadir)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    if user is not None:
        shutil.chown(path, user)


def _log_tail(datadir: str, lines: int = 30) -> str:
    try:
        with open(os.path.join(datadir, LOG_NAME), errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _initdb(bindir: str, datadir: str, user: str | None) -> None:
    if user is not None:
        shutil.chown(datadir, user, user)
    base = [
        os.path.join(bindir, "initdb"),
        "-D",
        datadir,
        "--auth=trust",
        "-U",
        SUPERUSER,
        "--no-sync",
        "--encoding=UTF8",
    ]
    try:
        _run([*base, "--locale=C.UTF-8"], user, 120, "initdb")
    except PgServerError:
        # No C.UTF-8 locale on this system: fall back to plain C. initdb has
        # already emptied the directory it failed in.
        _run([*base, "--no-locale"], user, 120, "initdb")
    with open(os.path.join(datadir, "postgresql.conf"), "a") as f:
        f.write(f"\ninclude '{CONF_NAME}'\n")


def _pg_ctl_start(bindir: str, datadir: str, user: str | None) -> None:
    argv = [
        os.path.join(bindir, "pg_ctl"),
        "start",
        "-D",
        datadir,
        "-l",
        os.path.join(datadir, LOG_NAME),
        "-w",
        "-t",
        str(int(READY_TIMEOUT)),
        "-s",
    ]
    try:
        _run(argv, user, READY_TIMEOUT + 30, "pg_ctl start")
    except PgServerError as exc:
        raise PgServerError(f"{exc}\n--- {LOG_NAME} ---\n{_log_tail(datadir)}") from None


def _is_running(datadir: str) -> bool:
    return os.path.exists(os.path.join(datadir, "postmaster.pid"))


def _pg_ctl_stop(bindir: str, datadir: str, user: str | None) -> None:
    if not _is_running(datadir):
        return
    pg_ctl = os.path.join(bindir, "pg_ctl")
    try:
        _run(
            [pg_ctl, "stop", "-D", datadir, "-m", "fast", "-w", "-t", "60", "-s"],
            user,
            90,
            "pg_ctl stop",
        )
    except PgServerError:
        if _is_running(datadir):
            _run(
                [pg_ctl, "stop", "-D", datadir, "-m", "immediate", "-w", "-s"],
                user,
                60,
                "pg_ctl stop -m immediate",
            )


def start(datadir: str) -> str:
    """Start a server in ``datadir`` and return the URL of its ``cronsource_test`` db.

    An empty (or missing) ``datadir`` gets initdb, a free port and the
    ``cronsource_test`` database; a directory this module initialised before
    is started again on the port it had.
    """
    bindir = find_bindir()
    user = server_user()
    os.makedirs(datadir, mode=0o700, exist_ok=True)
    if is_ours(datadir):
        _pg_ctl_start(bindir, datadir, user)
        url = server_url(datadir)
        wait_until_ready(url)
        return url
    if os.listdir(datadir):
        raise PgServerError(f"{datadir} is neither empty nor a tests/pgserver.py data directory")

    _initdb(bindir, datadir, user)
    for attempt in range(3):
        port = free_port()
        _write_conf(datadir, port, user)
        try:
            _pg_ctl_start(bindir, datadir, user)
            break
        except PgServerError as exc:
            # Someone grabbed the port between free_port() and the bind.
            if attempt == 2 or "Address already in use" not in str(exc):
                raise
    admin_url = url_for(port, "postgres")
    wait_until_ready(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEST_DB)))
    return url_for(port, TEST_DB)


def stop(datadir: str) -> None:
    """``pg_ctl stop -m fast``, then remove ``datadir``. Missing datadir: no-op."""
    if not os.path.isdir(datadir):
        return
    if not is_ours(datadir):
        if os.listdir(datadir):
            raise PgServerError(f"refusing to remove {datadir}: not a tests/pgserver.py datadir")
        os.rmdir(datadir)
        return
    _pg_ctl_stop(find_bindir(), datadir, server_user())
    shutil.rmtree(datadir)


def restart(datadir: str) -> str:
    """Stop and start the server again: same datadir, same port, same URL."""
    if not is_ours(datadir):
        raise PgServerError(f"{datadir} is not a tests/pgserver.py data directory")
    _pg_ctl_stop(find_bindir(), datadir, server_user())
    return start(datadir)


@dataclass
class PgHandle:
    """A server started by this module."""

    datadir: str
    url: str  # the cronsource_test database

    @property
    def port(self) -> int:
        return server_port(self.datadir)

    def restart(self) -> str:
        return restart(self.datadir)

    def stop(self) -> None:
        stop(self.datadir)


def start_server() -> PgHandle:
    """New datadir + start(); the datadir is removed again if starting fails."""
    datadir = new_datadir()
    try:
        return PgHandle(datadir, start(datadir))
    except BaseException:
        with contextlib.suppress(Exception):
            _pg_ctl_stop(find_bindir(), datadir, server_user())
        shutil.rmtree(datadir, ignore_errors=True)
        raise


def start_standby(primary: PgHandle, *, synchronous: bool = False) -> PgHandle:
    """A hot standby streaming from `primary` (a base backup with `-R`), on a port of its own.

    With `synchronous`, the primary waits for the standby on every commit
    (`synchronous_standby_names = '*'`, `synchronous_commit = on`): what a client was told is
    committed is on the standby too, as Patroni's and CloudNativePG's synchronous modes give.
    Without it the standby is asynchronous (their default): it may lag, and a failover loses
    what it had not received.
    """
    bindir, user = find_bindir(), server_user()
    datadir = new_datadir()
    if user is not None:
        shutil.chown(datadir, user, user)
    argv = [
        os.path.join(bindir, "pg_basebackup"),
        *("-D", datadir, "-R", "-X", "stream", "-c", "fast", "--no-sync"),
        *("-h", "127.0.0.1", "-p", str(primary.port), "-U", SUPERUSER),
    ]
    _run(argv, user, 120, "pg_basebackup")
    # The data directory is also the socket directory: the copy carries the primary's socket
    # lock file, which would stop this server from ever taking the primary's port.
    for lock in glob.glob(os.path.join(datadir, ".s.PGSQL.*.lock")):
        os.unlink(lock)
    _write_conf(datadir, free_port(), user)  # the copy carries the primary's port
    _pg_ctl_start(bindir, datadir, user)
    standby = PgHandle(datadir, server_url(datadir))
    wait_until_ready(server_url(datadir, "postgres"))
    with psycopg.connect(server_url(primary.datadir, "postgres"), autocommit=True) as conn:
        if synchronous:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
            conn.execute("SELECT pg_reload_conf()")
        want = "sync" if synchronous else "async"
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            row = conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
            ).fetchone()
            if row is not None and row[0] == want:
                break
            if time.monotonic() >= deadline:
                raise PgServerError(f"standby in {datadir} is not streaming ({want}): {row}")
            time.sleep(0.05)
    return standby


def kill_postmaster(datadir: str) -> None:
    """SIGKILL the server's postmaster, as a crash of its machine would end it: nothing is
    shut down, no checkpoint is written, the clients' connections break. Returns once
    nothing listens on its port any more (its backends exit by themselves when they notice)."""
    port = server_port(datadir)
    with open(os.path.join(datadir, "postmaster.pid")) as f:
        pid = int(f.readline())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            break
        time.sleep(0.05)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(datadir, "postmaster.pid"))  # dead: `stop` just removes it


def stop_server(datadir: str) -> None:
    """`pg_ctl stop -m fast`, keeping the data directory (see `stop` to remove it)."""
    _pg_ctl_stop(find_bindir(), datadir, server_user())


def take_over(standby: PgHandle, primary: PgHandle) -> str:
    """Make `standby` the primary at the primary's address: stopped if running, moved to the
    primary's port (the address clients have, as a service or a virtual IP moves), started and
    promoted. The old primary must be down. Returns the URL, the same as the primary's."""
    bindir, user = find_bindir(), server_user()
    port = primary.port
    _pg_ctl_stop(bindir, standby.datadir, user)
    _write_conf(standby.datadir, port, user)
    _pg_ctl_start(bindir, standby.datadir, user)
    _run(
        [os.path.join(bindir, "pg_ctl"), "promote", "-D", standby.datadir, "-w"],
        user,
        60,
        "promote",
    )
    standby.url = server_url(standby.datadir)
    wait_until_ready(standby.url)
    return standby.url


@contextlib.contextmanager
def running_server() -> Iterator[tuple[str, PgHandle | None]]:
    """Yield ``(url, handle)``; handle is None when ``CRONSOURCE_TEST_PG`` is used."""
    external = os.environ.get(ENV_URL)
    if external:
        yield external, None
        return
    handle = start_server()
    try:
        yield handle.url, handle
    finally:
        handle.stop()


_test_server: PgHandle | None = None
_test_server_pid: int | None = None


def pg_url_for_tests() -> str:
    """``$CRONSOURCE_TEST_PG`` if set, else a server started once per process.

    The server is stopped by ``stop_test_server()`` or at interpreter exit.
    """
    global _test_server, _test_server_pid
    external = os.environ.get(ENV_URL)
    if external:
        return external
    if _test_server is None or _test_server_pid != os.getpid():
        if _test_server_pid is None:
            atexit.register(stop_test_server)
        _test_server = start_server()
        _test_server_pid = os.getpid()
    return _test_server.url


def stop_test_server() -> None:
    global _test_server
    # Never from a forked child: the server belongs to the parent.
    if _test_server is not None and _test_server_pid == os.getpid():
        handle, _test_server = _test_server, None
        handle.stop()


# --------------------------------------------------------------------------
# Databases
# --------------------------------------------------------------------------


def fresh_database(url: str, prefix: str = "cronsource_t", template: str | None = None) -> str:
    """Create a uniquely named database on the server of ``url``; return its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(url, autocommit=True) as conn:
        for attempt in range(50):
            try:
                conn.execute(query)
                break
            except errors.ObjectInUse:
                # "source database ... is being accessed by other users"
                if attempt == 49:
                    raise
                time.sleep(0.1)
    return with_database(url, name)


def drop_database(url: str) -> None:
    """Drop the database named in ``url`` (terminating its connections)."""
    name = database_name(url)
    if name in ("postgres", "template0", "template1"):
        raise ValueError(f"refusing to drop system database {name!r}")
    query = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    try:
        conn = psycopg.connect(with_database(url, "postgres"), autocommit=True)
    except psycopg.OperationalError:
        conn = psycopg.connect(with_database(url, "template1"), autocommit=True)
    with conn:
        conn.execute(query)


# --------------------------------------------------------------------------
# pytest fixtures (plain generators; tests/conftest.py decorates them)
# --------------------------------------------------------------------------


def pg_server_url() -> Generator[str, None, None]:
    """Session: URL of the test server. Errors (never skips) if none is available."""
    url = pg_url_for_tests()
    wait_until_ready(url, timeout=10)
    yield url
    stop_test_server()


def pg_url(pg_server_url: str) -> Generator[str, None, None]:
    """Function: URL of a fresh database on the test server, dropped afterwards."""
    url = fresh_database(pg_server_url)
    try:
        yield url
    finally:
        drop_database(url)


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.pgserver",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("start", help='start a server, print "DATADIR URL"')
    for name, text in (
        ("stop", "stop the server and remove DATADIR"),
        ("restart", "restart the server, print URL"),
    ):
        sub.add_parser(name, help=text).add_argument("datadir")
    sub.add_parser("bindir", help="print the PostgreSQL bin dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            handle = start_server()
            print(handle.datadir, handle.url)
        elif args.command == "stop":
            stop(args.datadir)
        elif args.command == "restart":
            print(restart(args.datadir))
        else:
            print(find_bindir())
    except (PostgresNotFound, PgServerError, psycopg.Error, OSError) as exc:
        print(f"pgserver: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
