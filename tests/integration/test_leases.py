"""Leases on a real PostgreSQL (adapters/infrastructure/leases.py,
adapters/infrastructure/shards.py): a replica renews its row, gives everything up when its lease
lapses on its own clock, and the others terminate the session of a replica whose lease lapsed on the
server's clock and take its shards and the projector role; a projector whose role was taken cannot
write.

Time is moved, not waited for: each replica measures its lease on a clock the test moves, and a
lease lapses on the server by moving its `renewed_at` back (what a replica frozen for that long
leaves behind). The timing with real processes and a real SIGSTOP is
tests/e2e/test_fault_frozen_replica.py.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from eventsourcing.persistence import Tracking
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from cronsource.adapters.application.presence import schedulers_running
from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.infrastructure.leases import LeaseLost
from cronsource.adapters.infrastructure.readside import positions
from cronsource.adapters.infrastructure.readside.dialect import POSTGRESQL
from cronsource.adapters.infrastructure.readside.model import ReadModel
from cronsource.adapters.infrastructure.shards import (
    SHARDS,
    AdvisoryLockShards,
    ProjectorFenced,
    SoleOwner,
)
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.observability.metrics import Metrics
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.scheduler import Scheduler
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import event_type
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

LEASE = 15.0


class Monotonic:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def store(pg_url: str) -> StoreConfig:
    config = StoreConfig.parse(pg_url)
    migrate(config)
    return config


@pytest.fixture
def made() -> Iterator[list[AdvisoryLockShards]]:
    replicas: list[AdvisoryLockShards] = []
    yield replicas
    for r in replicas:
        r.release()


def replica(
    made: list[AdvisoryLockShards],
    conninfo: str,
    clock: Monotonic | None = None,
    schema: str = "",
) -> AdvisoryLockShards:
    r = AdvisoryLockShards(
        conninfo,
        schema=schema,
        lease_seconds=LEASE,
        monotonic=clock or Monotonic(),
        renew_in_background=False,
    )
    made.append(r)
    return r


def query(conninfo: str, text: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cur = conn.execute(text, args)
        return cur.fetchall() if cur.description else []


def lease_row(conninfo: str, r: AdvisoryLockShards) -> tuple[Any, ...] | None:
    rows = query(
        conninfo,
        "SELECT holder, pids, lease_seconds, renewed_at FROM cronsource_leases WHERE member = %s",
        (r.lease.member,),
    )
    return rows[0] if rows else None


def session_pid(r: AdvisoryLockShards) -> int:
    conn = r._conn
    assert conn is not None
    return int(conn.info.backend_pid)


def lapse(conninfo: str, r: AdvisoryLockShards, seconds: float = 3600) -> None:
    """What a replica frozen for `seconds` leaves behind: a lease renewed that long ago."""
    query(
        conninfo,
        "UPDATE cronsource_leases SET renewed_at = now() - %s * interval '1 second'"
        " WHERE member = %s",
        (seconds, r.lease.member),
    )


def backend_alive(conninfo: str, pid: int) -> bool:
    return bool(query(conninfo, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)))


def until(what: str, done: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `done` (the server ends a terminated backend asynchronously)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def ownership_metrics(engine: Engine) -> dict[str, float]:
    text = generate_latest(Metrics(engine, VirtualClock(T0)).registry).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }


# ---------------------------------------------------------------------------- own lease


def test_joining_writes_a_lease_naming_the_session_that_holds_the_locks(
    store: StoreConfig, made: list[AdvisoryLockShards]
) -> None:
    a = replica(made, store.pg_conninfo)
    a.rebalance()
    row = lease_row(store.pg_conninfo, a)
    assert row is not None
    holder, pids, seconds, _ = row
    assert pids == [session_pid(a)] and seconds == LEASE and holder.endswith(f":{os.getpid()}")
    held = query(
        store.pg_conninfo,
        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    assert held == [(session_pid(a),)]  # member, 64 shards and the projector: one session
    assert len(a.owned) == SHARDS and a.is_projector()
    a.release()
    assert lease_row(store.pg_conninfo, a) is None  # a clean exit leaves no lease behind


def test_renewing_moves_the_lease_and_one_not_renewed_gives_everything_up(
    store: StoreConfig, made: list[AdvisoryLockShards]
) -> None:
    clock = Monotonic()
    a = replica(made, store.pg_conninfo, clock)
    a.rebalance()
    first = lease_row(store.pg_conninfo, a)
    assert first is not None
    clock.advance(9)
    assert a.renew()
    second = lease_row(store.pg_conninfo, a)
    assert second is not None and second[3] > first[3]
    clock.advance(9)  # 9 s since the last renewal: inside the renew deadline (10 s of 15)
    a.check_lease()
    assert a.is_projector() and len(a.owned) == SHARDS

    clock.advance(1.5)  # 10.5 s: this replica no longer trusts its lease
    assert not a.is_projector()
    pid = session_pid(a)
    with pytest.raises(LeaseLost, match="lease lapsed"):
        a.check_lease()
    assert a.owned == set() and a.leases_lost == 1
    until("the given-up session to end", lambda: not backend_alive(store.pg_conninfo, pid))

    a.rebalance()  # re-joins: a new session, a new lease
    assert len(a.owned) == SHARDS and a.is_projector() and session_pid(a) != pid


def test_a_lapsed_replica_is_terminated_and_its_shards_and_role_taken(
    store: StoreConfig, made: list[AdvisoryLockShards], caplog: pytest.LogCaptureFixture
) -> None:
    conninfo = store.pg_conninfo
    a, b = replica(made, conninfo), replica(made, conninfo)
    for r in (a, b, a, b):
        r.rebalance()
    assert len(a.owned) == len(b.owned) == SHARDS // 2
    assert a.is_projector() and not b.is_projector()
    engine = bootstrap(store)
    try:
        healthy = ownership_metrics(engine)
        assert healthy["cronsource_shards_lapsed"] == 0
        assert healthy["cronsource_shards_unowned"] == 0
        assert healthy["cronsource_replicas"] == 2

        lapse(conninfo, a)  # a is frozen: it renews nothing, its session stays open
        frozen = ownership_metrics(engine)
        assert frozen["cronsource_shards_lapsed"] == SHARDS // 2
        assert frozen["cronsource_shards_unowned"] == SHARDS // 2
        assert frozen["cronsource_replicas"] == 1
        assert frozen["cronsource_replicas_lapsed"] == 1
        assert frozen["cronsource_projector_replicas"] == 0

        pid = session_pid(a)
        with caplog.at_level(logging.WARNING, "cronsource"):
            b.rebalance()
        assert b.takeovers == 1
        assert f"terminated its PostgreSQL backend(s) [{pid}]" in caplog.text
        until("a's backend to end", lambda: not backend_alive(conninfo, pid))
        assert lease_row(conninfo, a) is None

        def b_took_all() -> bool:
            b.rebalance()
            return len(b.owned) == SHARDS and b.is_projector()

        until("b to hold every shard and the projector role", b_took_all)
        after = ownership_metrics(engine)
        assert after["cronsource_shards_lapsed"] == 0
        assert after["cronsource_shards_unowned"] == 0
        assert after["cronsource_projector_replicas"] == 1
    finally:
        engine.close()

    # a runs again: its own clock says nothing lapsed, but its session is gone.
    with pytest.raises(LeaseLost, match="session"):
        a.check_lease()
    assert a.owned == set() and not a.is_projector() and a.leases_lost == 1
    for r in (a, b, a):
        r.rebalance()
    assert len(a.owned) == len(b.owned) == SHARDS // 2 and b.is_projector()


def test_a_projector_whose_role_was_taken_cannot_write(
    store: StoreConfig, made: list[AdvisoryLockShards]
) -> None:
    """a is frozen halfway through a projection write (position moved, not committed); b
    terminates it and projects; when a runs again its write fails and b's position stands."""
    conninfo = store.pg_conninfo
    a, b = replica(made, conninfo), replica(made, conninfo)
    a.rebalance()
    b.rebalance()
    assert a.is_projector()
    view_a, view_b = ReadModel.postgres(conninfo), ReadModel.postgres(conninfo)
    view_a.write_through(a.projector_transaction)
    view_b.write_through(b.projector_transaction)
    try:
        view_a.track("dispatch", Tracking("cronsource", 3))
        frozen = a.projector_transaction()
        conn = frozen.__enter__()
        assert positions.lock_position(conn, POSTGRESQL, "dispatch", "cronsource") == 3
        positions.set_position(conn, POSTGRESQL, "dispatch", "cronsource", 5)

        lapse(conninfo, a)
        pid = session_pid(a)

        def b_projects() -> bool:
            b.rebalance()
            return b.is_projector()

        until("b to take the projector role", b_projects)
        assert not backend_alive(conninfo, pid)
        assert view_b.track("dispatch", Tracking("cronsource", 7))  # not blocked by a's row lock

        with pytest.raises(psycopg.OperationalError):
            frozen.__exit__(None, None, None)  # a runs again and commits: refused
        assert not a.is_projector() and a.leases_lost == 1
        with pytest.raises(ProjectorFenced):
            view_a.track("dispatch", Tracking("cronsource", 9))
        assert view_b.max_tracking_id("cronsource", "dispatch") == 7
    finally:
        view_a.close()
        view_b.close()


def test_a_projector_past_its_renew_deadline_writes_nothing_and_frees_the_role(
    store: StoreConfig, made: list[AdvisoryLockShards]
) -> None:
    """Nobody terminated it (no one else runs, or may not): on its own clock it knows its
    lease is gone, refuses the write, and closes its session so another can take the role."""
    clock = Monotonic()
    a = replica(made, store.pg_conninfo, clock)
    a.rebalance()
    view = ReadModel.postgres(store.pg_conninfo)
    view.write_through(a.projector_transaction)
    try:
        assert view.track("dispatch", Tracking("cronsource", 1))
        clock.advance(LEASE)
        with pytest.raises(ProjectorFenced, match="lease lapsed"):
            view.track("dispatch", Tracking("cronsource", 2))
        assert view.max_tracking_id("cronsource", "dispatch") == 1
        b = replica(made, store.pg_conninfo)
        b.rebalance()
        assert b.is_projector() and len(b.owned) == SHARDS
    finally:
        view.close()


# ---------------------------------------------------------------------------- privileges


@pytest.fixture
def roles(store: StoreConfig) -> Iterator[tuple[str, str]]:
    """Two login roles that may use the store's tables, each other's sessions not theirs."""
    names = tuple(f"cs_{who}_{uuid.uuid4().hex[:8]}" for who in ("a", "b"))
    conninfo = store.pg_conninfo
    for name in names:
        query(conninfo, sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)).as_string())
        query(
            conninfo,
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON cronsource_leases TO {}")
            .format(sql.Identifier(name))
            .as_string(),
        )
    yield names[0], names[1]
    for name in names:
        ident = sql.Identifier(name)
        query(
            conninfo, sql.SQL("REVOKE ALL ON cronsource_leases FROM {}").format(ident).as_string()
        )
        query(conninfo, sql.SQL("REVOKE pg_signal_backend FROM {}").format(ident).as_string())
        query(conninfo, sql.SQL("DROP ROLE {}").format(ident).as_string())


def as_role(conninfo: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(conninfo, user=role)


def test_taking_over_needs_the_same_role_or_pg_signal_backend(
    store: StoreConfig,
    roles: tuple[str, str],
    made: list[AdvisoryLockShards],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/operator-guide.md, "Frozen replicas": a replica may end another replica's session
    only if it runs as the same role or has pg_signal_backend. Refused, it says so once and the
    lapsed replica's shards are shown as lapsed; granted, the take-over goes through."""
    role_a, role_b = roles
    a = replica(made, as_role(store.pg_conninfo, role_a))
    b = replica(made, as_role(store.pg_conninfo, role_b))
    for r in (a, b, a, b):
        r.rebalance()
    lapse(store.pg_conninfo, a)
    pid = session_pid(a)
    with caplog.at_level(logging.ERROR, "cronsource"):
        b.rebalance()
        b.rebalance()
    assert b.takeovers == 0 and b.takeovers_refused == 2
    assert caplog.text.count("may not terminate") == 1 and "pg_signal_backend" in caplog.text
    assert backend_alive(store.pg_conninfo, pid) and lease_row(store.pg_conninfo, a) is not None
    engine = bootstrap(store)
    try:
        assert ownership_metrics(engine)["cronsource_shards_lapsed"] == SHARDS // 2
    finally:
        engine.close()

    query(
        store.pg_conninfo,
        sql.SQL("GRANT pg_signal_backend TO {}").format(sql.Identifier(role_b)).as_string(),
    )
    b.rebalance()
    assert b.takeovers == 1
    until("a's backend to end", lambda: not backend_alive(store.pg_conninfo, pid))


# ---------------------------------------------------------------------------- the scheduler


class LostLease(SoleOwner):
    """Owns everything, but its lease is gone (or not, once `lost` is cleared)."""

    lost = True

    def check_lease(self) -> None:
        if self.lost:
            raise LeaseLost("lease lapsed")


def test_the_scheduler_commits_nothing_once_its_lease_is_lost() -> None:
    engine = bootstrap("memory:")
    try:
        doc = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": {"name": "hourly", "namespace": "default"},
            "spec": {
                "schedules": ["0 * * * *"],
                "workflowSpec": {
                    "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox"}}],
                },
            },
        }
        engine.service.apply(parse_manifest(doc), T0)
        engine.projector.catch_up(T0)
        head = engine.service.recorder.max_notification_id()
        ownership = LostLease()
        scheduler = Scheduler(engine.service, engine.view, ownership)
        due = T0 + timedelta(hours=1)
        with pytest.raises(LeaseLost):
            scheduler.schedule_once(due)
        assert engine.service.recorder.max_notification_id() == head  # nothing written

        ownership.lost = False
        assert scheduler.schedule_once(due) == 1
        fired = [
            n
            for n in engine.service.recorder.select_notifications(start=1, limit=100)
            if event_type(engine.service.mapper.to_domain_event(n)) == "ScheduleFired"
        ]
        assert len(fired) == 1
    finally:
        engine.close()


# ---------------------------------------------------------------------------- `run`


@pytest.mark.parametrize("value", ["2s", "ten", "-5s"])
def test_run_refuses_a_lease_duration_it_cannot_keep(value: str, tmp_path: Any) -> None:
    res = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{tmp_path}/x.db", "run", "--lease-duration", value]
    )
    assert res.exit_code != 0
    assert "--lease-duration" in res.output and len(res.output.strip().splitlines()) == 1


def test_run_on_a_store_without_the_lease_table_says_to_migrate(store: StoreConfig) -> None:
    query(store.pg_conninfo, "DROP TABLE cronsource_leases")
    res = CliRunner().invoke(cli, ["--store", store.url, "run", "--workflows-dir", "/nonexistent"])
    assert res.exit_code == 1
    assert "cronsource migrate" in res.output and "cronsource_leases" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_migrate_makes_the_lease_table_in_the_stores_schema(pg_url: str) -> None:
    """A store in a schema of its own keeps its leases there (the replicas' session sets the
    search path to it)."""
    schema = f"leases_{uuid.uuid4().hex[:8]}"
    query(pg_url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)).as_string())
    config = StoreConfig.parse(f"{pg_url}?schema={schema}")
    migrate(config)
    rows = query(
        pg_url,
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'cronsource_leases'",
    )
    assert rows == [(schema,)]
    r = AdvisoryLockShards(config.pg_conninfo, schema=schema, renew_in_background=False)
    try:
        r.rebalance()
        assert len(r.owned) == SHARDS
        assert query(
            pg_url,
            sql.SQL("SELECT count(*) FROM {}.cronsource_leases")
            .format(sql.Identifier(schema))
            .as_string(),
        ) == [(1,)]
    finally:
        r.release()


def test_a_replica_that_only_projects_holds_no_shard_and_is_no_scheduler(
    store: StoreConfig, made: list[AdvisoryLockShards]
) -> None:
    """Given a scheduling replica and a projector-only one (`cronsource project`), both alive
    and leased: the scheduler holds all the shards, the projector none (it would hold shards
    it never decides: their CronWorkflows would never fire), and only the scheduler counts
    as a scheduler running (the CLI's "nothing fires" notice)."""
    conninfo = store.pg_conninfo
    scheduler = replica(made, conninfo)
    projector = AdvisoryLockShards(
        conninfo,
        want_shards=False,
        lease_seconds=LEASE,
        monotonic=Monotonic(),
        renew_in_background=False,
    )
    made.append(projector)
    for _ in range(2):
        projector.rebalance()
        scheduler.rebalance()
    assert len(scheduler.owned) == SHARDS and projector.owned == set()
    assert projector.is_projector() and not scheduler.is_projector()
    engine = bootstrap(store)
    try:
        assert schedulers_running(engine) == 1
    finally:
        engine.close()
