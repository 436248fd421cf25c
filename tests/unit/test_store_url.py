"""The PostgreSQL store URL is libpq's (adapters/infrastructure/store/config.py): every parameter
reaches the connections as psycopg reads it, `schema` is ours, what we cannot honour is refused in
one line, and the password is never shown."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.entrypoints.simulate import load_scenario, simulate
from cronsource.adapters.infrastructure.locks import lock_for
from cronsource.adapters.infrastructure.shards import AdvisoryLockShards
from cronsource.adapters.infrastructure.store.check import check_store
from cronsource.adapters.infrastructure.store.config import StoreConfig, StoreURLError, redact
from cronsource.adapters.infrastructure.store.conninfo import with_defaults
from cronsource.adapters.runtime.waker import Waker
from cronsource.domain.service import CronService
from tests.probe_helpers import EVERY_SECOND, RunProcess
from tests.serve_process import serve as serve_process

SECRET = "s3cret-pw"
CLI = str(Path(sys.executable).parent / "cronsource")


def params(url: str) -> dict[str, str | int | None]:
    return conninfo_to_dict(StoreConfig.parse(url).pg_conninfo)


def test_a_multi_host_url_keeps_every_host_port_and_target_session_attrs() -> None:
    cfg = StoreConfig.parse(
        "postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write&schema=s"
    )
    assert cfg.kind == "postgresql" and cfg.pg_schema == "s"
    assert params(cfg.url) == {
        "user": "u",
        "dbname": "db",
        "host": "h1,h2",
        "port": "5432,5433",
        "target_session_attrs": "read-write",
    }


def test_a_percent_encoded_password_reaches_libpq_decoded() -> None:
    assert params("postgres://u:p%40ss%2Fw%20rd@db:5433/cron")["password"] == "p@ss/w rd"


def test_every_libpq_parameter_passes_through_and_schema_does_not() -> None:
    given = {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
        "sslcert": "/etc/c.pem",
        "sslkey": "/etc/k.pem",
        "connect_timeout": "7",
        "application_name": "cron source",
        "keepalives_idle": "30",
        "options": "-c statement_timeout=5000",
    }
    query = "&".join(f"{k}={quote(v, safe='/')}" for k, v in given.items())
    got = params(f"postgresql://u@h/db?{query}&schema=mine")
    assert got == {"user": "u", "dbname": "db", "host": "h", **given}
    assert StoreConfig.parse(f"postgresql://u@h/db?{query}&schema=mine").pg_schema == "mine"


def test_schema_alone_leaves_a_plain_url() -> None:
    cfg = StoreConfig.parse("postgresql://u@h/db?schema=s%201")
    assert cfg.pg_schema == "s 1"
    assert params(cfg.url) == {"user": "u", "dbname": "db", "host": "h"}


def test_the_database_may_come_from_the_query_as_libpq_reads_it() -> None:
    assert params("postgresql://u@h/?dbname=other")["dbname"] == "other"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        pytest.param("postgresql://u@h/db?sslmod=require", '"sslmod"', id="unknown parameter"),
        pytest.param(
            "postgresql://u@h/db?sslmode=require&sslmode=disable",
            "'sslmode' is given 2 times",
            id="a parameter twice",
        ),
        pytest.param(
            "postgresql://u@h/db?schema=a&schema=b", "'schema' is given 2 times", id="schema twice"
        ),
        pytest.param("postgresql://u@h/db?replication=database", "'replication'", id="replication"),
        pytest.param(
            "postgresql://u@h1,h2/db?target_session_attrs=standby",
            "target_session_attrs=standby",
            id="a read-only target",
        ),
        pytest.param("postgresql://u@h:54x/db", "the port is not a number: '54x'", id="port"),
        pytest.param(
            "postgresql://u@h1:5432,h2:x/db", "the port is not a number: 'x'", id="second port"
        ),
        pytest.param(
            "postgresql://u@h1,h2/db?port=1,2,3", "3 ports for 2 hosts", id="ports and hosts"
        ),
        pytest.param("postgresql://u@h", "needs a database name", id="no database"),
        pytest.param("postgresql://u@h?sslmode", '"sslmode"', id="parameter without value"),
    ],
)
def test_what_cannot_be_honoured_is_refused_in_one_line_naming_it(url: str, named: str) -> None:
    with pytest.raises(StoreURLError) as err:
        StoreConfig.parse(url)
    text = str(err.value)
    assert named in text and "\n" not in text and text.startswith("not a valid store URL"), text


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(f"postgresql://u:{SECRET}@h/db?nope=1", id="unknown parameter"),
        pytest.param(f"postgresql://u:{SECRET}@h:x/db", id="bad port"),
        pytest.param("postgresql://u:s3cret%20pw@h", id="no database, encoded password"),
        pytest.param(f"postgresql://u:{SECRET} x@h/db", id="libpq quotes the password"),
        pytest.param(f"postgresql://u:{SECRET}%zz@h/db", id="bad percent-encoding"),
        pytest.param(f"postgresql://u:{SECRET}@[::1/db", id="libpq quotes the whole URL"),
        pytest.param(f"postgresql://u@h/db?password={SECRET}&x=1", id="password parameter"),
        pytest.param(f"postgresql://u@h/db?sslpassword={SECRET}&x=1", id="sslpassword"),
        pytest.param(f"mysql://u:{SECRET}@h/db", id="another scheme"),
    ],
)
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    with pytest.raises(StoreURLError) as err:
        StoreConfig.parse(url)
    text = str(err.value)
    assert "s3cret" not in text and "***" in text, text


def test_the_url_is_shown_without_its_password() -> None:
    cfg = StoreConfig.parse(
        f"postgresql://u:{SECRET}@h1:5432,h2:5432/db?sslpassword=k3y&sslmode=require&schema=s"
    )
    assert cfg.shown == (
        "postgresql://u:***@h1:5432,h2:5432/db?sslpassword=***&sslmode=require&schema=s"
    )
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"  # the last @ ends it
    assert redact("sqlite:///x.db") == "sqlite:///x.db"


# ------------------------------------------------------------ through the command line


def cs(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CRONSOURCE_STORE"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=60)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns


@pytest.mark.parametrize(
    "args",
    [["list"], ["migrate"], ["run", "--workflows-dir", "/nonexistent"], ["serve"], ["version"]],
    ids=lambda a: a[0],
)
def test_the_password_is_not_in_the_error_of_an_unreachable_store(args: list[str]) -> None:
    port = closed_port()
    for url in (
        f"postgresql://u:{SECRET}@127.0.0.1:{port}/db",
        f"postgresql://u@127.0.0.1:{port},127.0.0.1:{port}/db?password={SECRET}",
    ):
        r = cs("--store", url, *args)
        out = r.stdout + r.stderr
        assert f"connection refused at 127.0.0.1:{port}" in out, out
        assert "s3cret" not in out and "Traceback" not in out, out
        assert (r.returncode == 0) == (args[0] == "version"), out


# ------------------------------------------------- every connection, against a real server


def _event_store(cfg: StoreConfig) -> Iterator[bool]:
    # One pool connection, not a recorder method: those retry ten times on a failed connect.
    env = {**cfg.env(create_table=False), "POSTGRES_CONNECT_TIMEOUT": "3"}
    svc = CronService(env=env)
    try:
        with svc.factory.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            conn.execute("SELECT 1")
            yield True
    finally:
        svc.close()


def _read_model(cfg: StoreConfig) -> Iterator[bool]:
    view = cfg.read_model()
    try:
        with view.db.transaction() as conn:
            conn.execute("SELECT 1")
            yield True
    finally:
        view.close()


def _projector_lock(cfg: StoreConfig) -> Iterator[bool]:
    lock = lock_for(cfg)
    try:
        assert lock.try_acquire()
        yield True
    finally:
        lock.close()


def _shard_locks(cfg: StoreConfig) -> Iterator[bool]:
    shards = AdvisoryLockShards(cfg.pg_conninfo, schema=cfg.pg_schema)
    try:
        shards.rebalance()
        assert shards.owned
        yield True
    finally:
        shards.release()


def _waker(cfg: StoreConfig) -> Iterator[bool]:
    engine = bootstrap(cfg)
    waker = Waker(engine)
    try:
        yield True
    finally:
        waker.stop()
        engine.close()


def _storecheck(cfg: StoreConfig) -> Iterator[bool]:
    check_store(cfg)
    yield False  # its connection is closed again at once


def _simulate(cfg: StoreConfig) -> Iterator[bool]:
    scenario = load_scenario(
        {
            "start": "2026-03-07T00:00:00Z",
            "end": "2026-03-07T00:03:00Z",
            "cronWorkflows": [yaml.safe_load(EVERY_MINUTE)],
        }
    )
    fires = [w for w in simulate(scenario, cfg.url)["workflows"] if w["trigger"] == "schedule"]
    assert len(fires) == 3, fires
    yield False  # its scratch schema's connections are closed again at once


def _migrate(cfg: StoreConfig) -> Iterator[bool]:
    migrate(cfg)
    yield False


EVERY_MINUTE = """\
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: minutely, namespace: default}
spec:
  schedules: ["* * * * *"]
  workflowSpec: {entrypoint: main, templates: [{name: main}]}
"""

Component = Callable[[StoreConfig], Iterator[bool]]
COMPONENTS: list[Any] = [
    pytest.param(_event_store, id="event store"),
    pytest.param(_read_model, id="read model"),
    pytest.param(_projector_lock, id="projector lock"),
    pytest.param(_shard_locks, id="shard locks"),
    pytest.param(_storecheck, id="storecheck"),
    pytest.param(_simulate, id="simulate scratch schema"),
    pytest.param(_migrate, id="migrate"),
]


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture
def migrated(pg_url: str) -> str:
    migrate(StoreConfig.parse(pg_url))
    return pg_url


def _backends(monitor_url: str, application_name: str) -> list[str]:
    with psycopg.connect(monitor_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.mark.postgres
@pytest.mark.parametrize("component", [*COMPONENTS, pytest.param(_waker, id="waker LISTEN")])
def test_every_connection_follows_a_multi_host_url_past_a_dead_host_with_its_parameters(
    component: Component, migrated: str
) -> None:
    """The first host is a closed port, the second the real server; application_name and
    target_session_attrs=read-write reach the server (pg_stat_activity shows the name)."""
    parts = urlsplit(migrated)
    name = f"cs-{uuid.uuid4().hex[:12]}"
    url = urlunsplit(
        parts._replace(
            netloc=f"{parts.username}@127.0.0.1:{closed_port()},{parts.hostname}:{parts.port}",
            query=f"application_name={name}&target_session_attrs=read-write&connect_timeout=5",
        )
    )
    cfg = StoreConfig.parse(url)
    with contextlib.contextmanager(component)(cfg) as held:
        if held:
            # The waker connects from its own thread, after the engine's own connections.
            wanted: Callable[[list[str]], bool] = (
                (lambda seen: any(q.startswith("LISTEN") for q in seen))
                if component is _waker
                else bool
            )
            deadline = time.monotonic() + 10
            while not wanted(seen := _backends(migrated, name)):
                assert time.monotonic() < deadline, f"no connection named {name}: {seen}"
                time.sleep(0.05)


@pytest.mark.postgres
@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize(
    ("query", "libpq_says"),
    [
        # The test server has no TLS: a connection that really asks for it cannot be made.
        pytest.param("sslmode=require", "SSL", id="sslmode=require"),
        # A server whose sessions are read-only is not a read-write target.
        pytest.param(
            "target_session_attrs=read-write&options=-c%20default_transaction_read_only%3Don",
            "read-only",
            id="target_session_attrs=read-write",
        ),
    ],
)
def test_every_connection_refuses_a_server_the_url_rules_out(
    component: Component,
    query: str,
    libpq_says: str,
    migrated: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = StoreConfig.parse(_with_query(migrated, query))
    caplog.set_level(logging.WARNING, logger="psycopg.pool")
    with pytest.raises(Exception) as err:  # noqa: B017,PT011 (each path raises its own kind)
        with contextlib.contextmanager(component)(cfg):
            pass
    # A pool says only that it got no connection; it logs libpq's reason.
    chain: list[BaseException] = [err.value]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    said = " ".join(str(e) for e in chain) + caplog.text
    assert libpq_says in said, said


def test_a_connect_timeout_in_the_url_wins_over_ours() -> None:
    assert conninfo_to_dict(with_defaults("host=h connect_timeout=9", connect_timeout=5)) == {
        "host": "h",
        "connect_timeout": "9",
    }
    assert conninfo_to_dict(with_defaults("host=h", connect_timeout=5))["connect_timeout"] == "5"


@pytest.mark.postgres
def test_the_password_is_printed_nowhere_by_a_store_that_answers(
    migrated: str, tmp_path: Path
) -> None:
    """The test server trusts every login, so a password in the URL is accepted and ignored:
    each command below really works against it, and its output never shows the password."""
    parts = urlsplit(migrated)
    netloc = f"{parts.username}:{SECRET}@{parts.hostname}:{parts.port}"
    url = urlunsplit(parts._replace(netloc=netloc, query="sslpassword=" + SECRET))
    shown = f"{parts.username}:***@{parts.hostname}:{parts.port}"
    for args in (["migrate"], ["version"], ["-o", "json", "version"], ["list"]):
        r = cs("--store", url, *args)
        assert r.returncode == 0, r.stderr
        assert "s3cret" not in r.stdout + r.stderr, r.stdout + r.stderr
        if args[-1] in ("migrate", "version"):
            assert shown in r.stdout, r.stdout
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    run = RunProcess(
        [CLI, "--store", url, "run", str(manifest), "--http-port", "0"]
        + ["--workflows-dir", str(tmp_path / "workflows")],
    )
    try:
        run.wait_for_probes()
        scraped = run.get("/metrics")[2] + run.get("/readyz")[2]
    finally:
        assert run.stop() == 0, run.stderr[-3000:]
    assert f"store postgresql://{shown}" in run.stderr, run.stderr
    assert "s3cret" not in run.stderr + scraped
    with serve_process([CLI], url) as served:
        page = "".join(
            httpx.get(served.base + path, timeout=10).text
            for path in ("/", "/metrics", "/api/v1/scheduler", "/healthz")
        )
    assert "s3cret" not in page + served.stderr and shown in served.stderr, served.stderr
