"""The dispatch thread gets the target ready for a burst decided in advance
(adapters/runtime/dispatchworker.py `expect`): on its own thread, between its dispatch steps,
a chunk at a time, so a fire committed meanwhile waits for one chunk at most; and what was
made for a burst that did not come is removed when it stops."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.infrastructure import localtarget
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.runtime.dispatchworker import DispatchWorker


class Projector:
    """What the dispatch thread asks of the projector: a step, and the target."""

    def __init__(self, target: Any, calls: list[str]) -> None:
        self.dispatcher = SimpleNamespace(target=target)
        self.calls = calls

    def dispatch_step(self, now: datetime, stop: Any) -> int:
        self.calls.append("dispatch")
        return 0


def _until(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


@contextlib.contextmanager
def running(
    target: LocalTarget, calls: list[str], poll_seconds: float, dispatching: bool = True
) -> Iterator[DispatchWorker]:
    """The dispatch thread `run` has, over `target`, started; stopped at the end."""
    stop = threading.Event()
    worker = DispatchWorker(
        Projector(target, calls),  # type: ignore[arg-type]
        SYSTEM_CLOCK,
        stop,
        poll_seconds=poll_seconds,
        runs_projections=lambda: dispatching,
        store_probe=lambda: None,
    )
    worker.start()
    try:
        yield worker
    finally:
        stop.set()
        worker.stop()


def test_the_dispatch_thread_makes_the_burst_files_between_its_steps_and_removes_leftovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localtarget, "WARM_CHUNK", 2)
    calls: list[str] = []
    target = LocalTarget(tmp_path)
    real_warm = target.warm

    def warm(creations: int) -> int:
        calls.append("warm")
        return real_warm(creations)

    def hidden() -> list[Path]:
        return sorted(tmp_path.glob(".tmp-*"))

    monkeypatch.setattr(target, "warm", warm)
    with running(target, calls, poll_seconds=30.0) as worker:
        assert _until(lambda: calls == ["dispatch"])  # idle, waiting for a wake
        worker.expect(5, SYSTEM_CLOCK.now() + timedelta(minutes=1))
        assert _until(lambda: len(hidden()) == 5 and calls.count("warm") == 3)
        # A look for fires to dispatch before each chunk of files, none two chunks apart.
        assert calls[:7] == ["dispatch", "dispatch", "warm", "dispatch", "warm", "dispatch", "warm"]
    assert hidden() == []


def test_a_replica_that_does_not_dispatch_makes_nothing_ahead(tmp_path: Path) -> None:
    calls: list[str] = []
    with running(LocalTarget(tmp_path), calls, poll_seconds=0.01, dispatching=False) as worker:
        worker.expect(3, SYSTEM_CLOCK.now() + timedelta(minutes=1))
        time.sleep(0.2)
        assert sorted(tmp_path.glob(".tmp-*")) == []


def test_nothing_is_made_ahead_once_the_instant_has_come(tmp_path: Path) -> None:
    """From the instant on, the fires are what to dispatch; files made then would only
    delay them (and, after the burst, refill for a burst nobody expects)."""
    calls: list[str] = []
    with running(LocalTarget(tmp_path), calls, poll_seconds=0.01) as worker:
        worker.expect(3, SYSTEM_CLOCK.now())
        assert _until(lambda: calls.count("dispatch") >= 3)
        assert sorted(tmp_path.glob(".tmp-*")) == []
