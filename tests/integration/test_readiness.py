"""Readiness tells the truth (adapters/runtime/writeprobe.py, adapters/runtime/loop.py): the write
probe names a read-only file system and a missing INSERT privilege, and the loop's workers stop
and recover with a full disk, on real stores (a small tmpfs each test mounts and unmounts, as
root, as CI runs the suite; the throwaway PostgreSQL of tests/pgserver.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
import yaml
from psycopg import sql

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.supervisor import MAX_BACKOFF
from cronsource.adapters.runtime.writeprobe import WriteProbe
from tests.instants import T0
from tests.probe_helpers import EVERY_SECOND, fill


def test_the_write_probe_names_a_read_only_file_system(small_disk: Path) -> None:
    """A file system with a store open for writing cannot be remounted read-only (EBUSY), so
    this one asks the probe of a closed store; /readyz answers what the probe says
    (tests/e2e/test_readiness.py)."""
    config = StoreConfig.parse(f"sqlite:///{small_disk / 'cronsource.db'}")
    bootstrap(config).close()
    clock = VirtualClock(T0)
    probe = WriteProbe(config, clock)
    assert probe.check() is None
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    clock.wait(1.0)
    assert probe.check() == f"cannot write in {small_disk}: Read-only file system"
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert probe.check() is not None  # the answer is kept for a second ...
    clock.wait(1.0)
    assert probe.check() is None  # ... then asked again


@pytest.mark.postgres
def test_the_write_probe_names_a_missing_insert_privilege(pg_url: str) -> None:
    from cronsource.adapters.bootstrap import migrate

    migrate(StoreConfig.parse(pg_url))
    role = "cronsource_reader"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        reader = pg_url.replace("postgres@", f"{role}@", 1)
        probe = WriteProbe(StoreConfig.parse(reader), VirtualClock(T0))
        assert probe.check() == 'permission denied: INSERT on "public".cronsource_events'
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"GRANT INSERT ON cronsource_events TO {role}")
        assert probe.check() is not None  # the answer is kept for a second ...
        probe.clock.wait(1.0)
        assert probe.check() is None  # ... then asked again
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_the_loop_probes_the_store_and_its_workers_recover_from_a_full_disk(
    small_disk: Path,
) -> None:
    """The loop's own wiring, on a real SQLite store on a full tmpfs and a virtual clock: the
    scheduler's commits fail while the disk is full, and it decides again within a second and
    a half (a turn, plus the probe's answer kept for a second) of the disk having room."""
    from cronsource.adapters.infrastructure.shards import SoleOwner
    from cronsource.domain.manifest import parse_manifest

    clock = VirtualClock(T0)
    engine = bootstrap(f"sqlite:///{small_disk / 'cronsource.db'}")
    loop = SchedulerLoop(engine, SoleOwner(), clock=clock, heartbeat=False)
    try:
        engine.service.apply(parse_manifest(yaml.safe_load(EVERY_SECOND)), T0)
        loop.turn()
        filler = fill(small_disk)
        for _ in range(240):  # two minutes: the backoff is at its longest
            loop.turn()
            clock.wait(0.5)
        assert loop.supervise_scheduler.failing and loop.supervise_scheduler.backoff == MAX_BACKOFF
        assert "full" in loop.supervise_scheduler.last_error
        fires = loop.fires
        filler.unlink()
        for _ in range(3):
            loop.turn()
            clock.wait(0.5)
        assert not loop.supervise_scheduler.failing and loop.fires > fires
    finally:
        engine.close()
