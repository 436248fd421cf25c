"""While `run`'s dispatch thread creates a burst's Workflows, the read model's projection, the
warm-up and the status writes wait for it (adapters/runtime/dispatchfirst.py): bounded when
the dispatcher stops moving or never catches up, never while a reader waits for the view, and
not at all for the few fires of a quiet minute. Time is what the test passes in.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.dispatchfirst import DispatchFirst
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.projector import (
    READ_MODEL_WAITS_AT_MOST,
    READ_MODEL_WAITS_FOR_DISPATCH,
)
from tests.instants import T0
from tests.kube.fake import FakeKube
from tests.unit.test_kube_watch import NS, TICK, admitted
from tests.unit.test_snapshots import manifest
from tests.unit.test_streaming_dispatch import dispatch_worker

T1 = T0 + timedelta(minutes=1)
SECOND = timedelta(seconds=1)


class TestTheRule:
    def rule(self, from_backlog: int = 3) -> DispatchFirst:
        return DispatchFirst(5 * SECOND, 30 * SECOND, from_backlog)

    def test_a_wait_starts_at_a_burst_and_lasts_until_the_dispatcher_has_caught_up(
        self,
    ) -> None:
        rule = self.rule()
        assert not rule.waits(10, 12, T0)  # two behind: not a burst
        assert not rule.waiting
        assert rule.waits(10, 13, T0)
        assert rule.waits(12, 13, T0 + SECOND)  # one left: still the same burst
        assert rule.waiting
        assert not rule.waits(13, 13, T0 + 2 * SECOND)
        assert not rule.waiting
        assert not rule.waits(13, 14, T0 + 3 * SECOND)  # the next fire alone: no wait

    def test_a_dispatcher_that_stops_moving_holds_nothing_back(self) -> None:
        rule = self.rule()
        assert rule.waits(10, 20, T0)
        assert rule.waits(10, 20, T0 + 4 * SECOND)
        assert not rule.waits(10, 20, T0 + 5 * SECOND)
        assert not rule.waits(10, 20, T0 + 6 * SECOND)  # still stuck: still no wait
        assert rule.waits(11, 20, T0 + 7 * SECOND)  # it moves again: a new wait

    def test_one_that_never_catches_up_holds_the_work_back_at_most_the_bound(self) -> None:
        rule = self.rule()
        at, dispatched = T0, 0
        while at - T0 < 30 * SECOND:
            assert rule.waits(dispatched, dispatched + 100, at), at - T0
            at, dispatched = at + SECOND, dispatched + 10
        assert not rule.waits(dispatched, dispatched + 100, at)  # the work runs once...
        assert rule.waits(dispatched + 10, dispatched + 110, at + SECOND)  # ...then waits


# ---------------------------------------------------------------- the read model's projection


@pytest.fixture
def target(tmp_path: Path) -> LocalTarget:
    return LocalTarget(tmp_path / "workflows")


def burst(engine: Engine, names: tuple[str, ...] = ("a", "b", "c", "d")) -> list[UUID]:
    """CronWorkflows applied and projected, then fired at T1 in one commit, with a dispatch
    thread in this process and a burst of three fires enough to wait for."""
    ids = [engine.service.apply(manifest(n), T0)[0] for n in names]
    engine.projector.catch_up(T0)
    engine.service.tick(ids, T1)
    projector = engine.projector
    projector.dispatch_thread = True
    projector.read_model_first = DispatchFirst(
        READ_MODEL_WAITS_FOR_DISPATCH, READ_MODEL_WAITS_AT_MOST, from_backlog=3
    )
    return ids


def test_the_read_model_waits_while_the_dispatch_thread_creates_a_burst(
    engine: Engine,
) -> None:
    projector = engine.projector
    burst(engine)
    before = projector.position()
    assert projector.step(T1) == 0
    assert projector.position() == before and projector.read_model_first.waiting
    projector.dispatch(T1)
    assert projector.step(T1 + SECOND) == 4
    assert projector.position() == projector.head()
    assert not projector.read_model_first.waiting


def test_a_fire_or_two_are_projected_at_once(engine: Engine) -> None:
    burst(engine, ("a", "b"))
    assert engine.projector.step(T1) == 2


def test_without_a_dispatch_thread_the_step_projects_and_dispatches(engine: Engine) -> None:
    projector = engine.projector
    burst(engine)
    projector.dispatch_thread = False
    assert projector.step(T1) == 4
    assert projector.dispatched() == projector.head()


def test_a_stuck_dispatcher_holds_the_read_model_back_for_its_bound_only(
    engine: Engine,
) -> None:
    projector = engine.projector
    burst(engine)
    assert projector.step(T1) == 0
    assert projector.step(T1 + READ_MODEL_WAITS_FOR_DISPATCH - SECOND) == 0
    assert projector.step(T1 + READ_MODEL_WAITS_FOR_DISPATCH) == 4


def test_a_reader_waiting_for_the_view_is_not_kept_waiting_by_a_burst(engine: Engine) -> None:
    projector = engine.projector
    burst(engine)
    projector.worker_running = True  # readers wait for this process's worker
    settled: list[bool] = []
    reader = threading.Thread(target=lambda: settled.append(projector.settle(timeout=5.0)))
    reader.start()
    projected, deadline = 0, time.monotonic() + 5.0
    while not projected and time.monotonic() < deadline:
        projected = projector.step(T1)  # 0 until the reader is there, then it projects
        time.sleep(0.01)
    reader.join(timeout=5.0)
    assert projected == 4 and settled == [True]
    assert projector.dispatched() < projector.head()  # the dispatcher had not caught up


def test_the_dispatch_thread_says_when_it_has_caught_up(engine: Engine) -> None:
    projector = engine.projector
    burst(engine)
    stop, caught_up = threading.Event(), threading.Event()
    worker = dispatch_worker(engine, VirtualClock(T1), poll_seconds=0.01, stop=stop)
    worker.on_caught_up = caught_up.set
    worker.start()
    try:
        assert caught_up.wait(5.0)
        assert projector.dispatched() == projector.head()
    finally:
        stop.set()
        worker.stop()


# ---------------------------------------------------------------- the loop while it waits


def test_the_loop_sleeps_and_leaves_the_warm_up_while_the_read_model_waits(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    burst(engine)
    clock = VirtualClock(T1 + SECOND)
    loop = SchedulerLoop(engine, SoleOwner(), role="all", clock=clock, poll_seconds=0.5)
    # As `run` has it, not started: the test dispatches.
    loop.dispatch_worker = dispatch_worker(engine, clock, poll_seconds=0.5)
    warmed: list[Any] = []
    monkeypatch.setattr(loop, "warm_once", lambda now: warmed.append(now))
    monkeypatch.setattr(loop, "prepare_once", lambda now: warmed.append(now))
    assert loop.project_once(clock.now()) == 0  # the read model waits: the view shows due
    assert loop.sleep_seconds() == 0.5  # not 0 over the fires the view still shows due
    loop.turn()
    assert warmed == []
    engine.projector.dispatch(clock.now())
    loop.turn()
    assert not engine.projector.read_model_first.waiting
    assert len(warmed) == 2


# ---------------------------------------------------------------- status writes


def test_statuses_are_read_again_only_when_the_view_has_moved(
    engine: Engine, kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync = KubeSync(engine, kube, namespace=NS)
    first = admitted(engine, kube, "first")
    engine.projector.catch_up(T0)
    reads: list[int] = []
    statuses = engine.view.statuses

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return statuses(*args, **kwargs)

    monkeypatch.setattr(engine.view, "statuses", counted)
    assert sync.write_statuses(T0) == 1
    assert sync.write_statuses(T0 + SECOND) == 0
    assert len(reads) == 1  # nothing projected since: nothing read
    engine.service.tick([first], TICK)
    engine.projector.catch_up(TICK)
    assert sync.write_statuses(TICK) == 1
    assert len(reads) == 2
