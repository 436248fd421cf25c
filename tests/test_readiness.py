"""Readiness tells the truth (adapters/entrypoints/probes.py, adapters/runtime/writeprobe.py):
/readyz of a real `cronsource run` is 503 while its store takes no writes, though reads still work
(a full disk, a read-only file system, a read-only PostgreSQL database), and 200 again once it does.

The SQLite stores live on a small tmpfs each test mounts and unmounts (the suite runs as root,
as CI does); the PostgreSQL ones on the throwaway server of tests/pgserver.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.probes import Probes
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.supervisor import MAX_BACKOFF, PROBE_SECONDS, Supervisor
from cronsource.adapters.runtime.writeprobe import WriteProbe
from tests.instants import T0
from tests.probe_helpers import EVERY_SECOND, RunProcess, ready_body, samples, total

CLI = str(Path(sys.executable).parent / "cronsource")


def _mount_tmpfs(where: Path, size: str) -> None:
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mounting a tmpfs needs root: {done.stderr}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    _mount_tmpfs(disk, "16m")
    try:
        yield disk
    finally:
        # Lazy: a process that outlived its test must not leave the mount behind.
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no room left; returns it (removing it frees the disk)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == 28, e  # ENOSPC
    finally:
        os.close(fd)
    return filler


def start_run(store: str, tmp_path: Path) -> RunProcess:
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    run = RunProcess(
        [CLI, "--store", store, "run", str(manifest), "--http-port", "0"]
        + ["--workflows-dir", str(tmp_path / "workflows")]
    )
    run.wait_for_probes()
    return run


def wait_ready(
    run: RunProcess, want: Callable[[int, dict[str, Any]], bool], within: float
) -> tuple[int, dict[str, Any]]:
    deadline = time.monotonic() + within
    while True:
        code, body = ready_body(run)
        if want(code, body):
            return code, body
        assert time.monotonic() < deadline, (code, body, run.stderr[-2000:])
        time.sleep(0.2)


def metric(run: RunProcess, name: str, **labels: str) -> float:
    return total(samples(run.get("/metrics")[2]), name, **labels)


def test_readyz_is_503_while_the_sqlite_disk_is_full_and_200_once_it_has_room(
    small_disk: Path, tmp_path: Path
) -> None:
    run = start_run(f"sqlite:///{small_disk / 'cronsource.db'}", tmp_path)
    try:
        assert ready_body(run)[0] == 200
        filler = fill(small_disk)
        code, body = wait_ready(run, lambda c, _: c == 503, within=10)
        assert body["status"] == "store not writable", body
        assert "No space left on device" in body["error"], body
        # The workers' own writes fail too (the scheduler decides every second), while reads
        # go on: the projection lag is still reported.
        wait_ready(run, lambda _, __: metric(run, "cronsource_worker_failures_total") > 0, 10)
        assert "lag" in ready_body(run)[1]
        fires = metric(run, "cronsource_fires_total")
        filler.unlink()
        wait_ready(run, lambda c, _: c == 200, within=20)
        wait_ready(run, lambda _, __: metric(run, "cronsource_fires_total") > fires, 10)
    finally:
        code = run.stop()
    assert code == 0, run.stderr[-3000:]


def test_the_write_probe_names_a_read_only_file_system(small_disk: Path) -> None:
    """A file system with a store open for writing cannot be remounted read-only (EBUSY), so
    this one asks the probe of a closed store; /readyz answers what the probe says (above)."""
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
def test_readyz_is_503_while_the_postgres_database_is_read_only(
    pg_url: str, tmp_path: Path
) -> None:
    done = subprocess.run([CLI, "--store", pg_url, "migrate"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    db = sql.Identifier(str(psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]))
    run = start_run(pg_url, tmp_path)
    try:
        assert ready_body(run)[0] == 200
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(db)
            )
        code, body = wait_ready(run, lambda c, _: c == 503, within=10)
        assert (body["status"], body["error"]) == (
            "store not writable",
            "sessions are read-only (default_transaction_read_only)",
        ), body
        with psycopg.connect(
            pg_url, autocommit=True, options="-c default_transaction_read_only=off"
        ) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(db)
            )
        wait_ready(run, lambda c, _: c == 200, within=20)
    finally:
        code = run.stop()
    assert code == 0, run.stderr[-3000:]


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


class Replica:
    """Owns every shard; holds the projector role while `projector` says so."""

    def __init__(self) -> None:
        self.projector = True

    def owns(self, cron_id: object) -> bool:
        return True

    def rebalance(self) -> None:
        pass

    def is_projector(self) -> bool:
        return self.projector

    def release(self) -> None:
        pass

    def check_lease(self) -> None:
        pass  # one process: no lease to lose


def test_readiness_is_503_while_a_worker_fails_and_forgets_a_role_it_lost(tmp_path: Path) -> None:
    """A worker's own failure counts even when the probe passes (a disk with a little room
    left, a target that refuses); a failure of a role now held by another replica does not."""
    engine = bootstrap(f"sqlite:///{tmp_path / 'c.db'}")
    owner = Replica()
    loop = SchedulerLoop(engine, owner)
    probes = Probes(engine, loop, lambda: datetime.now(UTC))
    try:
        loop.turn()
        assert probes.ready()[0] == 200

        def disk_full() -> None:
            raise OSError(28, "database or disk is full")

        loop.supervise_scheduler.run(disk_full)
        code, body = probes.ready()
        assert (code, body["status"]) == (503, "workers failing"), body
        assert body["failing"] == {"scheduler": "OSError: [Errno 28] database or disk is full"}
        loop.supervise_scheduler.retry_at = None  # its backoff has passed
        loop.turn()
        assert probes.ready()[0] == 200
        loop.supervise_projections.run(disk_full)
        assert probes.ready()[1]["failing"].keys() == {"projections"}
        owner.projector = False  # another replica projects now
        loop.turn()
        assert probes.ready()[0] == 200
    finally:
        probes.close()
        engine.close()


# ------------------------------------------------------------ recovery, on a virtual clock


class Store:
    """A store that fails while `broken`; `probe` sees the fault only when `visible`."""

    def __init__(self) -> None:
        self.broken = False
        self.visible = True
        self.steps = 0
        self.probes = 0

    def step(self) -> None:
        self.steps += 1
        if self.broken:
            raise OSError(28, "database or disk is full")

    def probe(self) -> str | None:
        self.probes += 1
        return "no space left" if self.broken and self.visible else None


def turn_until(sup: Supervisor, clock: VirtualClock, store: Store, seconds: float) -> list[float]:
    """Run the step every half second (the loop's poll) for `seconds`; when it ran, by
    monotonic time."""
    ran: list[float] = []
    end = clock.monotonic() + seconds
    while clock.monotonic() < end:
        before = store.steps
        sup.run(store.step)
        if store.steps > before:
            ran.append(clock.monotonic())
        clock.wait(0.5)
    return ran


@pytest.mark.parametrize("probe", [True, False], ids=["probed", "backoff alone"])
def test_recovery_starts_within_a_second_of_the_fault_clearing(probe: bool) -> None:
    clock = VirtualClock(T0)
    store = Store()
    sup = Supervisor("scheduler", clock, store.probe if probe else None)
    store.broken = True
    turn_until(sup, clock, store, 120)  # the backoff has grown to its 30 s
    while not turn_until(sup, clock, store, 0.5):
        pass  # the fault clears just after a failed attempt: the worst case
    assert sup.failing and sup.backoff == MAX_BACKOFF
    cleared = clock.monotonic()
    store.broken = False
    ran = turn_until(sup, clock, store, 40)
    assert not sup.failing and sup.streak == 0
    took = ran[0] - cleared
    if probe:
        assert took <= PROBE_SECONDS, took
    else:
        assert took >= MAX_BACKOFF - 1, took  # what the probe saves


def test_a_probe_blind_to_the_fault_keeps_the_backoff() -> None:
    """The step fails although the probe passes (a disk with room for the probe's small file
    but not for the commit): it must not be retried every second."""
    clock = VirtualClock(T0)
    store = Store()
    store.visible = False
    sup = Supervisor("scheduler", clock, store.probe)
    store.broken = True
    ran = turn_until(sup, clock, store, 120)
    # 0, 0.5, 1.5, 3.5, 7.5, 15.5, 31.5, 61.5, 91.5: the backoff alone.
    assert len(ran) <= 9, ran
    assert store.probes <= 120 / PROBE_SECONDS + 1  # and the probe is asked once a second


def test_a_step_that_fails_after_the_probe_passed_waits_for_the_probe_to_fail_again() -> None:
    clock = VirtualClock(T0)
    store = Store()
    sup = Supervisor("scheduler", clock, store.probe)
    store.broken = True
    turn_until(sup, clock, store, 60)
    store.visible = False  # the probe passes, the step still fails
    ran = turn_until(sup, clock, store, 60)
    assert 1 <= len(ran) <= 3, ran  # one early retry, then the backoff again


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
