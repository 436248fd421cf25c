"""Tests for tests/pgserver.py and scripts/ensure-postgres.sh.

These start their own servers (they test the machinery itself), so they need
the PostgreSQL binaries even when CRONSOURCE_TEST_PG is set.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests import pgserver

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
ENSURE = ROOT / "scripts" / "ensure-postgres.sh"


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _port_of(url: str) -> int:
    return int(str(psycopg.conninfo.conninfo_to_dict(url)["port"]))


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid in /proc/{pid}/status")


@pytest.fixture(scope="module")
def server() -> Iterator[pgserver.PgHandle]:
    handle = pgserver.start_server()
    yield handle
    handle.stop()


# -- the server ------------------------------------------------------------


def test_server_answers_select_1(server: pgserver.PgHandle) -> None:
    assert server.url == f"postgresql://postgres@127.0.0.1:{server.port}/cronsource_test"
    with psycopg.connect(server.url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT current_database(), current_user").fetchone() == (
            "cronsource_test",
            "postgres",
        )


def test_server_settings(server: pgserver.PgHandle) -> None:
    with psycopg.connect(server.url) as conn:
        settings: dict[str, str] = dict(
            conn.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                [
                    [
                        "listen_addresses",
                        "unix_socket_directories",
                        "fsync",
                        "synchronous_commit",
                        "full_page_writes",
                        "max_connections",
                        "shared_buffers",
                        "server_encoding",
                    ]
                ],
            ).fetchall()
        )
    assert settings == {
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": server.datadir,
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "300",
        "shared_buffers": "128MB",
        "server_encoding": "UTF8",
    }
    socket_path = Path(server.datadir) / f".s.PGSQL.{server.port}"
    assert socket_path.is_socket()
    assert len(str(socket_path)) < 107


def test_server_does_not_run_as_root(server: pgserver.PgHandle) -> None:
    with psycopg.connect(server.url) as conn:
        pid = conn.info.backend_pid
        uid = _uid_of(pid)
    assert uid != 0
    if os.geteuid() != 0:
        assert uid == os.geteuid()


def test_more_than_default_100_connections(server: pgserver.PgHandle) -> None:
    conns = [psycopg.connect(server.url) for _ in range(150)]
    try:
        assert all(c.execute("SELECT 1").fetchone() == (1,) for c in conns)
    finally:
        for c in conns:
            c.close()


# -- databases ---------------------------------------------------------------


def test_fresh_database_is_isolated(server: pgserver.PgHandle) -> None:
    a = pgserver.fresh_database(server.url)
    b = pgserver.fresh_database(server.url)
    try:
        assert a != b
        assert pgserver.database_name(a) != pgserver.database_name(b)
        with psycopg.connect(a) as conn:
            conn.execute("CREATE TABLE events (id int)")
            conn.execute("INSERT INTO events VALUES (1)")
        with psycopg.connect(b) as conn:
            assert conn.execute("SELECT to_regclass('events')").fetchone() == (None,)
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT to_regclass('events')").fetchone() == (None,)
        with psycopg.connect(a) as conn:
            assert conn.execute("SELECT id FROM events").fetchall() == [(1,)]
    finally:
        pgserver.drop_database(a)
        pgserver.drop_database(b)
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(a).close()
    pgserver.drop_database(a)  # idempotent


def test_drop_database_with_open_connections(server: pgserver.PgHandle) -> None:
    url = pgserver.fresh_database(server.url)
    conn = psycopg.connect(url)  # e.g. a pool a test forgot to close
    try:
        pgserver.drop_database(url)
    finally:
        conn.close()
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(url).close()


def test_drop_database_refuses_system_databases() -> None:
    with pytest.raises(ValueError, match="refusing"):
        pgserver.drop_database("postgresql://postgres@127.0.0.1:1/postgres")


def test_with_database() -> None:
    assert (
        pgserver.with_database("postgresql://u:p@h:5/a?sslmode=disable", "b")
        == "postgresql://u:p@h:5/b?sslmode=disable"
    )
    assert pgserver.database_name(pgserver.with_database("host=h port=5 dbname=a", "b")) == "b"


def test_pg_url_fixture_gives_fresh_database_and_drops_it(server: pgserver.PgHandle) -> None:
    gen = pgserver.pg_url(server.url)
    url = next(gen)
    assert pgserver.database_name(url).startswith("cronsource_t_")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (
            pgserver.database_name(url),
        )
    gen.close()
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(url).close()


# -- external server (CRONSOURCE_TEST_PG) -----------------------------------


def test_env_url_is_used_without_starting_a_server(
    server: pgserver.PgHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(pgserver.ENV_URL, server.url)

    def no_start() -> pgserver.PgHandle:
        raise AssertionError("must not start a server")

    monkeypatch.setattr(pgserver, "start_server", no_start)
    assert pgserver.pg_url_for_tests() == server.url
    with pgserver.running_server() as (url, handle):
        assert (url, handle) == (server.url, None)
    gen = pgserver.pg_server_url()
    assert next(gen) == server.url
    with pytest.raises(StopIteration):
        next(gen)  # teardown stops nothing ...
    with psycopg.connect(server.url) as conn:  # ... the server is still up
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_missing_binaries_is_an_error_naming_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(pgserver.PostgresNotFound, match="Debian package 'postgresql'"):
        pgserver.find_bindir(path=str(tmp_path), lib_root=str(tmp_path))

    # The session fixture must fail, not skip, when there is nothing to run.
    real_find_bindir = pgserver.find_bindir

    def missing() -> str:
        return real_find_bindir(path=str(tmp_path), lib_root=str(tmp_path))

    monkeypatch.delenv(pgserver.ENV_URL, raising=False)
    monkeypatch.setattr(pgserver, "find_bindir", missing)
    monkeypatch.setattr(pgserver, "_test_server", None)
    monkeypatch.setattr(pgserver, "_test_server_pid", os.getpid())  # no extra atexit hook
    before = set(Path("/tmp").glob("pg*"))
    with pytest.raises(pgserver.PostgresNotFound):
        next(pgserver.pg_server_url())
    assert set(Path("/tmp").glob("pg*")) <= before  # the new datadir was cleaned up


# -- lifecycle -----------------------------------------------------------------


def test_restart_keeps_data_and_url() -> None:
    handle = pgserver.start_server()
    try:
        with psycopg.connect(handle.url) as conn:
            conn.execute("CREATE TABLE kept (v text)")
            conn.execute("INSERT INTO kept VALUES ('before restart')")
        survivor = psycopg.connect(handle.url, autocommit=True)

        t0 = time.monotonic()
        assert handle.restart() == handle.url
        restart_seconds = time.monotonic() - t0

        # A connection from before the restart is dead, as a service would see it.
        with pytest.raises(psycopg.OperationalError):
            survivor.execute("SELECT 1")
        survivor.close()
        with psycopg.connect(handle.url) as conn:
            assert conn.execute("SELECT v FROM kept").fetchall() == [("before restart",)]
        assert restart_seconds < 30
    finally:
        handle.stop()
    assert not os.path.exists(handle.datadir)
    assert not _port_open(_port_of(handle.url))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.pgserver", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_start_restart_stop() -> None:
    started = _cli("start")
    assert started.returncode == 0, started.stderr
    datadir, url = started.stdout.strip().split(" ")
    try:
        assert Path(datadir).is_dir()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        restarted = _cli("restart", datadir)
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip() == url
    finally:
        stopped = _cli("stop", datadir)
    assert stopped.returncode == 0, stopped.stderr
    assert not Path(datadir).exists()
    assert not _port_open(_port_of(url))


def test_cli_stop_refuses_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "precious").write_text("x")
    result = _cli("stop", str(tmp_path))
    assert result.returncode == 1
    assert "refusing" in result.stderr
    assert (tmp_path / "precious").exists()


def test_pg_url_for_tests_starts_once_and_stops_at_exit() -> None:
    code = (
        "from tests import pgserver as p\n"
        "u = p.pg_url_for_tests()\n"
        "assert p.pg_url_for_tests() == u\n"
        "print(p._test_server.datadir, u)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != pgserver.ENV_URL}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    datadir, url = result.stdout.split()
    assert not Path(datadir).exists()  # removed by the atexit hook
    assert not _port_open(_port_of(url))


# -- scripts/ensure-postgres.sh -------------------------------------------------


def test_ensure_postgres_when_installed_is_fast_and_prints_bindir() -> None:
    t0 = time.monotonic()
    result = subprocess.run([str(ENSURE)], capture_output=True, text=True, timeout=60, check=False)
    elapsed = time.monotonic() - t0
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == pgserver.find_bindir()
    assert elapsed < 5


def _fake_apt(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "lib").mkdir()
    apt = bin_dir / "apt-get"
    apt.write_text('#!/bin/sh\necho "fake apt-get $*"\n' + body)
    apt.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:/usr/bin:/bin",  # no initdb here on Debian
        "ENSURE_PG_LIB_ROOT": str(tmp_path / "lib"),
    }


def test_ensure_postgres_failure_names_the_package(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the install branch is only reached as root")
    env = _fake_apt(tmp_path, "exit 100\n")
    result = subprocess.run(
        [str(ENSURE)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert "fake apt-get update" in result.stderr
    assert "Debian package 'postgresql'" in result.stderr


def test_ensure_postgres_installs_and_picks_highest_version(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the install branch is only reached as root")
    lib = tmp_path / "lib"
    env = _fake_apt(
        tmp_path,
        'if [ "$1" = install ] && [ "$2" = -y ] && [ "$3" = postgresql ]; then\n'
        f"  for v in 9.6 16 15; do mkdir -p {lib}/$v/bin\n"
        f"    for b in initdb pg_ctl postgres; do touch {lib}/$v/bin/$b;"
        f" chmod +x {lib}/$v/bin/$b; done\n"
        "  done\nfi\n",
    )
    result = subprocess.run(
        [str(ENSURE)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{lib}/16/bin"]
    assert "fake apt-get install -y postgresql" in result.stderr
