"""The PostgreSQL store URL is libpq's (adapters/infrastructure/store/config.py), for every
connection the product opens, against a real server (a multi-host URL past a dead host, a server
the URL rules out), and the installed CLI's error for an unreachable store never shows the
password (the parsing itself: tests/unit/test_store_url.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import yaml
from eventsourcing.persistence import OperationalError

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.entrypoints.simulate import load_scenario, simulate
from cronsource.adapters.infrastructure.locks import lock_for
from cronsource.adapters.infrastructure.shards import AdvisoryLockShards
from cronsource.adapters.infrastructure.store.check import check_store
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.waker import Waker
from cronsource.domain.service import CronService
from tests.unit.test_store_url import SECRET

CLI = str(Path(sys.executable).parent / "cronsource")


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
  workflowSpec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}
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


def _backends(monitor_url: str, application_name: str) -> list[str]:
    with psycopg.connect(monitor_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.mark.postgres
@pytest.mark.parametrize("component", [*COMPONENTS, pytest.param(_waker, id="waker LISTEN")])
def test_every_connection_follows_a_multi_host_url_past_a_dead_host_with_its_parameters(
    component: Component, migrated_pg_url: str
) -> None:
    """The first host is a closed port, the second the real server; application_name and
    target_session_attrs=read-write reach the server (pg_stat_activity shows the name)."""
    parts = urlsplit(migrated_pg_url)
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
            while not wanted(seen := _backends(migrated_pg_url, name)):
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
    migrated_pg_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = StoreConfig.parse(_with_query(migrated_pg_url, query))
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


@pytest.mark.postgres
def test_a_service_the_server_refuses_leaves_no_pool_behind(migrated_pg_url: str) -> None:
    """A server the URL rules out is found by the pool's first connection, inside the
    service's construction: the pool is closed there, on the caller's thread. Left to the
    garbage collector (`pytest.raises` keeps the half-made service alive with its traceback),
    its threads lived on, and its `__del__` once ran on one of them, which cannot join
    itself ("RuntimeError: cannot join current thread")."""
    url = _with_query(
        migrated_pg_url,
        "target_session_attrs=read-write&options=-c%20default_transaction_read_only%3Don",
    )
    env = {**StoreConfig.parse(url).env(create_table=False), "POSTGRES_CONNECT_TIMEOUT": "3"}
    before = set(threading.enumerate())
    with pytest.raises(OperationalError) as refused:
        CronService(env=env)
    # `refused` holds the traceback, and with it the half-made service, as the test did.
    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []
    assert "connection" in str(refused.value)
