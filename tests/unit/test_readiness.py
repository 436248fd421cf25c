"""Readiness tells the truth (adapters/entrypoints/probes.py, adapters/runtime/supervisor.py): a
worker's own failure makes the probes 503 and a role another replica took does not; a failing
worker recovers within a second of its fault clearing, on a virtual clock. The write probe and
the loop on a full or read-only disk and a read-only PostgreSQL: tests/integration/
test_readiness.py; /readyz of a real `cronsource run`: tests/e2e/test_readiness.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import SYSTEM_CLOCK, VirtualClock
from cronsource.adapters.entrypoints.probes import Probes
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.supervisor import MAX_BACKOFF, PROBE_SECONDS, Supervisor
from tests.instants import T0


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
    probes = Probes(engine, loop, SYSTEM_CLOCK)
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
