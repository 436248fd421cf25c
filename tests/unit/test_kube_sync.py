"""KubeSync (adapters/runtime/kube/sync.py), the cluster side of `cronsource run --kube`, on the
in-memory API (tests/kube/fake.py): status writes wait for a dispatcher that is behind, but
not longer than their bounds; the watches run as tasks and the scheduler loop's `poll` applies
what they saw; a Workflow of ours the log has no fire for is recovered. Time is what the test
passes in; the fake's `settle` waits for the watch tasks, not for time. The same against the
real server: tests/integration/test_kube_contract.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronsource.adapters.infrastructure.kube import CWF, WF, Backoff, KubeTarget
from cronsource.adapters.infrastructure.kube.status import ANNOTATION_SEQUENCE, ANNOTATION_STREAM
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.kube.sync import STATUS_WAITS_AT_MOST, STATUS_WAITS_FOR_DISPATCH
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import NotFound, event_type
from cronsource.projections.dispatch import build_workflow
from tests.instants import T0
from tests.kube.fake import FakeKube
from tests.unit.test_kube_watch import NS, TICK, admitted, children, cron_workflow, types


@pytest.fixture
def target(kube_target: KubeTarget) -> KubeTarget:
    return kube_target


def shown(kube: FakeKube, name: str) -> Any:
    return (kube.user.get(NS, CWF, name).get("status") or {}).get("lastScheduledTime")


def test_status_writes_wait_for_the_dispatcher_but_not_longer_than_the_bound(
    engine: Engine, kube: FakeKube
) -> None:
    sync = KubeSync(engine, kube, namespace=NS)
    first = admitted(engine, kube, "first")
    second = admitted(engine, kube, "second")
    engine.projector.catch_up(T0)
    assert sync.write_statuses(T0) == 2  # the dispatcher is not behind: written at once

    engine.service.tick([first], TICK)
    engine.projector.catch_up(TICK, dispatch=False)  # the view shows a fire not created yet
    assert sync.dispatch_behind()
    assert sync.write_statuses(TICK) == 0
    assert sync.write_statuses(TICK + STATUS_WAITS_FOR_DISPATCH / 2) == 0
    assert shown(kube, "first") is None and children(kube) == []
    engine.projector.dispatch(TICK)
    assert not sync.dispatch_behind()
    assert sync.write_statuses(TICK + STATUS_WAITS_FOR_DISPATCH / 2) == 1
    assert shown(kube, "first") == "2026-05-04T10:01:00Z"
    assert children(kube) == [workflow_name("first", TICK)]

    # A dispatcher that is behind but moving holds statuses back past the bound...
    later = TICK + timedelta(minutes=1)
    engine.service.tick([first, second], later)
    engine.projector.catch_up(later, dispatch=False)
    assert sync.write_statuses(later) == 0
    engine.projector.dispatch(later, batch=1, budget=0)  # one event: the dispatcher moved
    assert sync.dispatch_behind()
    assert sync.write_statuses(later + STATUS_WAITS_FOR_DISPATCH) == 0
    # ...and one that stopped moving holds them back for the bound, not for ever.
    assert sync.write_statuses(later + 2 * STATUS_WAITS_FOR_DISPATCH) == 2
    assert sync.dispatch_behind() and shown(kube, "second") == "2026-05-04T10:02:00Z"

    # One that keeps moving but never catches up holds them back at most STATUS_WAITS_AT_MOST.
    again = later + timedelta(minutes=1)
    engine.service.tick([first, second], again)
    engine.projector.catch_up(again, dispatch=False)
    step, waited, turn = STATUS_WAITS_FOR_DISPATCH / 2, timedelta(0), 0

    def one_more_event_and_one_dispatched(at: datetime) -> None:
        command = engine.service.suspend if turn % 2 == 0 else engine.service.resume
        command(first, at)  # a new event in the log: the view moves ahead
        engine.projector.catch_up(at, dispatch=False)
        engine.projector.dispatch(at, batch=1, budget=0)  # it moves, and stays behind
        assert sync.dispatch_behind()

    while waited < STATUS_WAITS_AT_MOST:
        one_more_event_and_one_dispatched(again + waited)
        assert sync.write_statuses(again + waited) == 0, waited
        waited, turn = waited + step, turn + 1
    one_more_event_and_one_dispatched(again + waited)
    assert sync.write_statuses(again + waited) == 2


@pytest.fixture
def live() -> Iterator[FakeKube]:
    """A fake whose watches wait for changes, for watches that run as tasks."""
    fake = FakeKube(watch_timeout=None)
    yield fake
    fake.close()


def test_a_status_from_a_log_that_lost_its_tail_does_not_freeze_the_object(
    engine: Engine, kube: FakeKube
) -> None:
    """The object shows a sequence of its stream that this log does not hold (written before
    a failover lost the log's tail, or by a store this one replaced): the sync's writes go on."""
    sync = KubeSync(engine, kube, namespace=NS)
    cron_id = admitted(engine, kube)
    ahead = {ANNOTATION_SEQUENCE: "999", ANNOTATION_STREAM: str(cron_id)}
    kube.user.patch(NS, CWF, "job", {"metadata": {"annotations": ahead}})
    engine.service.tick([cron_id], TICK)
    engine.projector.catch_up(TICK)
    assert sync.write_statuses(TICK) == 1
    assert shown(kube, "job") == "2026-05-04T10:01:00Z"
    shows = kube.user.get(NS, CWF, "job")["metadata"]["annotations"][ANNOTATION_SEQUENCE]
    assert shows == str(engine.service.head_version(cron_id))


def test_watches_run_as_tasks_and_poll_applies_what_they_saw(live: FakeKube) -> None:
    from cronsource.adapters.bootstrap import bootstrap

    engine = bootstrap("memory:", target=KubeTarget(live, Backoff(sleep=lambda s: None)))
    sync = KubeSync(engine, live, namespace=NS)
    sync.start(watch_seconds=30)
    try:
        obj = live.user.create(NS, CWF, cron_workflow("job"))
        live.settle(watches=2)
        with pytest.raises(NotFound):  # seen by the watch, not applied yet: poll does that
            engine.service.find(NS, "job")
        assert sync.poll(T0) >= 1
        cron_id = engine.service.find(NS, "job", obj["metadata"]["uid"]).id
        engine.service.tick([cron_id], TICK)
        engine.projector.catch_up(TICK)
        live.settle(watches=2)
        sync.poll(TICK)  # the child's ADDED (running: nothing to say) and the status write
        name = workflow_name("job", TICK)
        status = live.user.get(NS, CWF, "job")["status"]
        assert [a["name"] for a in status["active"]] == [name]

        live.user.patch(NS, WF, name, {"status": {"phase": "Failed"}})
        live.settle(watches=2)
        sync.poll(TICK + timedelta(seconds=30))
        assert types(engine, cron_id).count("RunCompleted") == 1
        status = live.user.get(NS, CWF, "job")["status"]
        assert status["failed"] == 1 and status["active"] == []
        assert live.user.get(NS, CWF, "job")["spec"] == obj["spec"]  # never written
    finally:
        sync.stop()
        engine.close()


def test_a_workflow_of_ours_the_log_has_no_fire_for_is_recovered(
    engine: Engine, kube: FakeKube
) -> None:
    """As a failover to an asynchronous standby leaves it: the Workflow was created, the fire
    is not in the log. Its tick is decided by it and never fired again."""
    cron_id = admitted(engine, kube)
    engine.projector.catch_up(T0)
    agg = engine.service.load(cron_id)
    name = workflow_name("job", TICK)
    kube.user.create(NS, WF, build_workflow(agg, name, TICK))
    sync = KubeSync(engine, kube, namespace=NS)
    assert sync.recover(TICK + timedelta(seconds=5)) == 1
    assert list(engine.service.load(cron_id).active) == [name]
    engine.service.tick([cron_id], TICK + timedelta(seconds=10))
    engine.projector.catch_up(TICK + timedelta(seconds=10))
    fired = [e for e in engine.service.events.get(cron_id) if event_type(e) == "ScheduleFired"]
    assert fired == [] and children(kube) == [name]
    assert sync.recover(TICK + timedelta(seconds=15)) == 0  # known now: nothing twice
