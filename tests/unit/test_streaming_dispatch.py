"""The streaming dispatcher (projections/dispatch.py `process_batches`) on a target that answers
later (`submit_many`, as KubeTarget does): the next batch is sent while the one before is still
being answered, the answers are taken in log order, and the position never passes a fire whose
creation was not answered, whichever batch of the window fails.

The scheduler's warning of a burst (`SchedulerLoop.prepare_once` -> `DispatchWorker.expect`)
has a cluster target open its connections ahead of the instant."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronsource.adapters.clock import Clock, VirtualClock
from cronsource.adapters.infrastructure.kube import ApiError, Creation, KubeTarget
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime import projector as projector_module
from cronsource.adapters.runtime.dispatchworker import DispatchWorker
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.cronworkflow import workflow_name
from tests.instants import T0
from tests.kube.fake import FakeKube
from tests.unit.test_kube_watch import admitted, children
from tests.unit.test_snapshots import manifest

T1 = T0 + timedelta(minutes=1)
NAMES = ("a", "b", "c", "d")


class Later:
    """The answers of one `submit_many`, recorded in the target's log when they are taken."""

    def __init__(self, log: list[tuple[str, list[str]]], names: list[str], errors: Any) -> None:
        self.log, self.names, self.errors = log, names, errors

    def result(self) -> list[BaseException | None]:
        self.log.append(("answered", self.names))
        return list(self.errors)


class StreamingTarget:
    """Records what the dispatcher sent and when it took the answers; `fail` maps a Workflow
    name to the error its creation reports."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.fail: dict[str, BaseException] = {}

    def submit_many(self, creations: Sequence[Creation]) -> Later:
        names = [c.workflow["metadata"]["name"] for c in creations]
        self.calls.append(("sent", names))
        return Later(self.calls, names, [self.fail.get(n) for n in names])

    def create_many(self, creations: Sequence[Creation], at: Any) -> list[BaseException | None]:
        raise AssertionError("a target that streams is never waited on batch by batch")

    def create(self, workflow: dict[str, Any], *, cron_id: str, trigger: str, at: Any) -> None:
        raise AssertionError("a target that streams is given whole chunks")

    def created(self, workflow: dict[str, Any], *, cron_id: str) -> bool:
        return False

    def terminate(self, namespace: str, name: str, at: datetime) -> None:
        self.calls.append(("terminate", [name]))

    def delete(self, namespace: str, name: str, at: datetime) -> None:
        self.calls.append(("delete", [name]))


def fired(engine: Engine, ids: list[UUID] | None = None) -> tuple[list[UUID], int]:
    """Four CronWorkflows (applied here unless given) projected, then fired at T1 in one
    commit: their four fires are the only events the dispatcher has left. Returns their ids
    and the position before them."""
    ids = ids or [engine.service.apply(manifest(n), T0)[0] for n in NAMES]
    engine.projector.catch_up(T0)
    before = engine.projector.dispatched()
    engine.service.tick(ids, T1)
    assert engine.projector.head() == before + len(NAMES)
    return ids, before


def dispatch_worker(
    engine: Engine, clock: Clock, poll_seconds: float, stop: threading.Event | None = None
) -> DispatchWorker:
    """The dispatch thread `run` has, on this process's projector, always dispatching."""
    return DispatchWorker(
        engine.projector,
        clock,
        stop or threading.Event(),
        poll_seconds=poll_seconds,
        runs_projections=lambda: True,
        store_probe=lambda: None,
    )


def names(*crons: str) -> list[str]:
    return [workflow_name(c, T1) for c in crons]


@pytest.fixture
def streaming() -> StreamingTarget:
    return StreamingTarget()


@pytest.fixture
def target(streaming: StreamingTarget) -> StreamingTarget:
    return streaming


def test_the_next_batch_is_sent_before_the_answers_of_the_one_before_are_taken(
    engine: Engine, streaming: StreamingTarget
) -> None:
    _, before = fired(engine)
    engine.projector.dispatch(T1, batch=2)
    assert streaming.calls == [
        ("sent", names("a", "b")),
        ("sent", names("c", "d")),
        ("answered", names("a", "b")),
        ("answered", names("c", "d")),
    ]
    assert engine.projector.dispatched() == before + 4


def test_fires_committed_while_a_short_batch_is_in_flight_join_the_stream(
    engine: Engine, streaming: StreamingTarget
) -> None:
    # The scheduler commits a burst in batches: the second lands while the first batch's
    # creations are in flight, after a read that found fewer events than it asked for.
    ids = [engine.service.apply(manifest(n), T0)[0] for n in NAMES]
    engine.projector.catch_up(T0)
    engine.service.tick(ids[:2], T1)
    submit = streaming.submit_many

    def second_commit_lands(creations: Sequence[Creation]) -> Later:
        sent = submit(creations)
        if len(streaming.calls) == 1:
            engine.service.tick(ids[2:], T1)
        return sent

    streaming.submit_many = second_commit_lands  # type: ignore[method-assign]
    engine.projector.dispatch(T1, batch=1000)
    assert streaming.calls == [
        ("sent", names("a", "b")),
        ("sent", names("c", "d")),
        ("answered", names("a", "b")),
        ("answered", names("c", "d")),
    ]
    assert engine.projector.dispatched() == engine.projector.head()


@pytest.mark.parametrize(
    ("failing", "answered", "repeated"),
    [
        # The later batch fails: the position moves past the earlier one only.
        ("c", 2, [("c", "d")]),
        # The earlier batch fails while the later is in flight: that one is waited for and
        # dropped, and the position stays though it was answered.
        ("a", 0, [("a", "b"), ("c", "d")]),
    ],
)
def test_the_position_never_passes_a_fire_whose_creation_failed(
    engine: Engine,
    streaming: StreamingTarget,
    failing: str,
    answered: int,
    repeated: list[tuple[str, ...]],
) -> None:
    _, before = fired(engine)
    streaming.fail = {workflow_name(failing, T1): ApiError(503, "Service Unavailable")}
    with pytest.raises(ApiError):
        engine.projector.dispatch(T1, batch=2)
    assert ("answered", names("c", "d")) in streaming.calls  # nothing left in flight
    assert engine.projector.dispatched() == before + answered
    streaming.calls.clear()
    streaming.fail.clear()
    engine.projector.dispatch(T1, batch=2)
    assert [c[1] for c in streaming.calls if c[0] == "sent"] == [names(*r) for r in repeated]
    engine.projector.dispatch(T1, batch=2)  # what the failure and recovery recorded
    assert engine.projector.dispatched() == engine.projector.head()


class TestOnTheCluster:
    """The same stream through KubeTarget on the in-memory API server."""

    @pytest.fixture
    def target(self, kube_target: KubeTarget) -> KubeTarget:
        return kube_target

    def test_every_fire_is_created_once_through_a_failed_request(
        self, engine: Engine, kube: FakeKube
    ) -> None:
        _, before = fired(engine, [admitted(engine, kube, n) for n in NAMES])
        kube.fail("create", 500, times=1)  # retried by the target, within the stream
        engine.projector.dispatch(T1, batch=2)
        assert sorted(children(kube)) == sorted(names(*NAMES))
        assert engine.projector.dispatched() == before + 4

    def test_a_burst_ahead_opens_the_connections_its_creations_will_use(
        self, engine: Engine, kube: FakeKube
    ) -> None:
        for n in NAMES:
            engine.service.apply(manifest(n), T0)
        engine.projector.catch_up(T0)
        clock = VirtualClock(T1 - timedelta(seconds=2))
        loop = SchedulerLoop(engine, SoleOwner(), role="all", clock=clock)
        stop = threading.Event()
        worker = dispatch_worker(engine, clock, poll_seconds=1.0, stop=stop)
        loop.dispatch_worker = worker
        assert loop.prepare_once(clock.now()) == len(NAMES)
        assert kube.warmed == []  # on the dispatch thread, not the loop's
        worker.start()
        try:
            deadline = time.monotonic() + 5.0
            while not kube.warmed and time.monotonic() < deadline:
                kube.run(asyncio.sleep(0))  # what the thread sent to the client's loop
                time.sleep(0.01)
            assert kube.warmed == [len(NAMES)]
        finally:
            stop.set()
            worker.stop()


def test_the_dispatch_thread_sends_a_first_chunk_before_reading_the_rest_of_a_burst(
    engine: Engine, streaming: StreamingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst read whole (500 fires in 25 ms) held back its first creation: the thread's
    dispatcher reads one chunk first, sends it, then reads the rest while it is answered."""
    monkeypatch.setattr(projector_module, "STREAM_CHUNK", 1)
    _, before = fired(engine)
    engine.projector.dispatch(T1, batch=1000)
    assert streaming.calls == [
        ("sent", names("a")),
        ("sent", names("b", "c", "d")),
        ("answered", names("a")),
        ("answered", names("b", "c", "d")),
    ]
    assert engine.projector.dispatched() == before + 4


def test_a_catch_up_hands_the_dispatcher_the_read_model_s_read_whole(
    engine: Engine, streaming: StreamingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one catch-up the dispatcher takes the events the read model just read, not a
    chunk of its own: a first chunk there would read the log again."""
    monkeypatch.setattr(projector_module, "STREAM_CHUNK", 1)
    fired(engine)
    engine.projector.catch_up(T1)
    assert [c for c in streaming.calls if c[0] == "sent"] == [("sent", names(*NAMES))]
