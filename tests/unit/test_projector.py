"""One owner of the projections (adapters/runtime/projector.py): only the holder of the projector
lock moves positions; a command's receipt is its log position; readers wait for it.

Two engines on one store stand for two processes: each has its own lock handle, so the
advisory lock (PostgreSQL) and the flock (SQLite) conflict between them exactly as between
processes.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.clock import SYSTEM_CLOCK, Clock, VirtualClock
from cronsource.adapters.infrastructure.locks import FileLock, InProcessLock
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import parse_manifest
from tests.http_helpers import manifest
from tests.instants import T0

ROOT = Path(__file__).resolve().parents[2]


def two_engines(url: str, clock: Clock = SYSTEM_CLOCK) -> tuple[Engine, Engine]:
    """Two processes on one store; the second one's waits run on `clock`."""
    config = StoreConfig.parse(url)
    migrate(config)
    return bootstrap(config), bootstrap(config, clock=clock)


class Meanwhile(VirtualClock):
    """A virtual clock on which another process acts while this one waits: `after(s, act)`
    runs `act` once this process's own waits have moved time `s` seconds on. No thread and
    no real sleep: what the waiting code decides does not depend on how loaded the machine is."""

    def __init__(self) -> None:
        super().__init__(T0)
        self._acts: list[tuple[float, Callable[[], object]]] = []

    def after(self, seconds: float, act: Callable[[], object]) -> None:
        self._acts.append((self.monotonic() + seconds, act))

    def wait(self, seconds: float, wake: threading.Event | None = None) -> bool:
        woken = super().wait(seconds, wake)
        for due in [a for a in self._acts if a[0] <= self.monotonic()]:
            self._acts.remove(due)
            due[1]()
        return woken


def apply(engine: Engine, name: str) -> Any:
    with engine.service.receipt() as wrote:
        engine.service.apply(parse_manifest(manifest(name)), T0)
    return wrote


def test_a_receipt_is_the_log_position_of_what_the_command_wrote() -> None:
    engine = bootstrap("memory:")
    try:
        first = apply(engine, "a")
        second = apply(engine, "b")
        assert first.position == 1 and second.position == 2
        with engine.service.receipt() as nothing:
            engine.service.apply(parse_manifest(manifest("a")), T0)  # unchanged: no event
        assert nothing.position == 0
        assert engine.projector.position() == 0  # writing projected nothing by itself
        assert engine.projector.settle(second)
        assert engine.projector.position() == 2
    finally:
        engine.close()


@pytest.mark.stores("postgresql", "sqlite")
def test_a_reader_waits_for_the_process_that_projects_and_never_projects_beside_it(
    store_url: str,
) -> None:
    clock = Meanwhile()
    projecting, reading = two_engines(store_url, clock)
    try:
        assert projecting.projector.lock.try_acquire()  # `run` holds the role
        wrote = apply(reading, "hello")
        started = clock.monotonic()
        assert not reading.projector.settle(wrote, timeout=0.4)
        assert round(clock.monotonic() - started, 6) >= 0.4  # it waited its whole timeout
        assert reading.projector.position() == 0  # the reader did not project

        # The projecting process steps 0.3 s into the reader's wait: the reader sees it then.
        clock.after(0.3, lambda: projecting.projector.step(T0))
        started = clock.monotonic()
        assert reading.projector.settle(wrote, timeout=10)
        assert 0.3 <= round(clock.monotonic() - started, 6) < 10
        assert [c.name for c in reading.view.statuses()] == ["hello"]
        # a plain read beside a projector neither projects nor waits
        second = apply(reading, "other")
        started = clock.monotonic()
        assert not reading.projector.settle(second, wait=False)
        assert clock.monotonic() == started
        assert reading.projector.position() < second.position
    finally:
        projecting.close()
        reading.close()


@pytest.mark.stores("postgresql", "sqlite")
def test_with_no_projector_anywhere_a_reader_projects_itself_and_lets_the_lock_go(
    store_url: str,
) -> None:
    first, second = two_engines(store_url)
    try:
        wrote = apply(first, "hello")
        assert first.projector.settle(wrote, timeout=0.1)
        assert first.projector.position() >= wrote.position
        # the lock was given back: a `run` started now can take the role
        assert second.projector.lock.try_acquire()
    finally:
        first.close()
        second.close()


def test_beside_a_projection_worker_in_the_same_process_readers_wait_for_it() -> None:
    engine = bootstrap("memory:")
    projected_by: list[str] = []
    real_catch_up = engine.projector.catch_up

    def recording_catch_up(*args: Any, **kwargs: Any) -> int:
        projected_by.append(threading.current_thread().name)
        return real_catch_up(*args, **kwargs)

    engine.projector.catch_up = recording_catch_up  # type: ignore[method-assign]
    engine.projector.worker_running = True
    try:
        wrote = apply(engine, "hello")
        worker = threading.Timer(0.2, lambda: engine.projector.step(T0))
        worker.name = "projection-worker"
        worker.start()
        assert engine.projector.settle(wrote, timeout=10)
        worker.join()
        assert projected_by == ["projection-worker"]
    finally:
        engine.close()


def test_a_sqlite_file_lock_is_held_by_one_opener_at_a_time(tmp_path: Path) -> None:
    path = str(tmp_path / "x.db.projector-lock")
    a, b = FileLock(path), FileLock(path)
    assert a.try_acquire() and a.try_acquire()  # re-entrant for its holder
    assert not b.try_acquire()
    a.release()
    assert b.try_acquire()
    b.release()
    assert InProcessLock().try_acquire()


def side_projections(source: str) -> list[int]:
    """Lines of `source` that call `<...>.projector.catch_up/dispatch` or
    `projector.catch_up/...`: the mechanism without the lock."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("catch_up", "dispatch")
            and (
                getattr(node.func.value, "attr", None) == "projector"
                or getattr(node.func.value, "id", None) == "projector"
            )
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_projector_moves_projection_positions() -> None:
    """No module of the product calls `Projector.catch_up` or `Projector.dispatch` (the
    mechanism without the lock) except the projector itself, which calls them under the
    lock: a read that projected on the side is how two threads came to evolve one
    follower's cache at once."""
    allowed = {ROOT / "adapters" / "runtime" / "projector.py"}
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "adapters").rglob("*.py"))
        if path not in allowed
        for line in side_projections(path.read_text())
    ]
    assert offenders == []


def test_the_check_finds_a_side_projection() -> None:
    planted = (
        "def read(self, projector):\n    self.engine.projector.catch_up(now)\n"
        "    projector.dispatch()\n"
    )
    assert side_projections(planted) == [2, 3]


def test_a_plain_read_does_not_queue_behind_another_threads_catch_up() -> None:
    engine = bootstrap("memory:")
    try:
        wrote = apply(engine, "hello")
        answers: list[bool] = []
        read = threading.Thread(
            target=lambda: answers.append(engine.projector.settle(wait=False)), daemon=True
        )
        with engine.projector._mutex:  # another request is catching up right now
            read.start()
            # A read that queued would wait for the mutex this thread holds until the join
            # gives up: a hang guard, not a speed figure.
            read.join(timeout=30)
            assert answers == [False], "the plain read queued behind the catch-up"
        assert engine.projector.position() == 0  # it read what was there, projecting nothing
        assert engine.projector.settle(wrote)  # the command's own read still waits its turn
    finally:
        engine.close()
