"""The status page's JSON (adapters/application/statuspage.py) over real HTTP on a virtual
clock: when the page says no scheduler is deciding, how it counts `cronsource run` replicas on
PostgreSQL, and the phases it gives a CronWorkflow's Workflows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.adapters.infrastructure.shards import AdvisoryLockShards
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import parse_manifest
from tests.http_helpers import manifest, serving
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

HOURLY_DUE = T0 + timedelta(hours=1)


@pytest.fixture
def store_url(pg_url: str) -> str:
    """tests/conftest.py's `engine` and `clock`, on PostgreSQL."""
    return pg_url


@pytest.fixture
def http(engine: Engine, clock: VirtualClock) -> Iterator[httpx.Client]:
    with serving(create_app(engine, ServeSettings(), clock)) as base:
        with httpx.Client(base_url=base + "/api/v1") as client:
            yield client


def health(http: httpx.Client) -> dict[str, Any]:
    r = http.get("/scheduler")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_no_scheduler_is_deciding_only_once_a_tick_is_due_past_the_late_tolerance(
    engine: Engine, clock: VirtualClock, http: httpx.Client
) -> None:
    svc = engine.service
    svc.apply(parse_manifest(manifest("hourly")), T0)
    svc.apply(parse_manifest(manifest("paused", suspend=True)), T0)
    assert health(http)["stale"] is False and health(http)["lastDecisionAt"] is None

    clock.set(HOURLY_DUE + timedelta(seconds=29))  # due, still within the 30 s tolerance
    h = health(http)
    assert h["stale"] is False and h["overdueCount"] == 0 and h["lateToleranceSeconds"] == 30

    clock.set(HOURLY_DUE + timedelta(seconds=31))
    h = health(http)
    assert h["stale"] is True and h["now"] == "2026-05-04T11:00:31Z"
    # the suspended one is not waiting for a scheduler: it waits for a resume
    assert h["overdueCount"] == 1
    assert h["overdue"] == [
        {"namespace": "default", "name": "hourly", "dueAt": "2026-05-04T11:00:00Z"}
    ]

    svc.tick([svc.find("default", "hourly").id], clock.now())  # a scheduler decides, late
    h = health(http)
    assert h["stale"] is False and h["lastDecisionAt"] == "2026-05-04T11:00:31Z"


def test_connected_run_replicas_are_counted_on_postgresql(pg_url: str, http: httpx.Client) -> None:
    assert health(http)["schedulers"] == 0
    replica = AdvisoryLockShards(StoreConfig.parse(pg_url).pg_conninfo)
    replica.rebalance()  # what `cronsource run` does when it starts
    try:
        assert health(http)["schedulers"] == 1
    finally:
        replica.release()
    assert health(http)["schedulers"] == 0


def test_child_workflows_with_the_phase_each_run_ended_in(
    engine: Engine, clock: VirtualClock, http: httpx.Client
) -> None:
    svc = engine.service
    svc.apply(parse_manifest(manifest("hourly")), T0)
    cid = svc.find("default", "hourly").id
    for h in (1, 2, 3, 4):
        svc.tick([cid], T0 + timedelta(hours=h))
    name = {h: f"hourly-{int((T0 + timedelta(hours=h)).timestamp())}" for h in (1, 2, 3, 4)}
    svc.run_completed(cid, name[1], "Failed", T0 + timedelta(hours=1, minutes=5), T0)
    svc.run_completed(cid, name[2], "Succeeded", T0 + timedelta(hours=2, minutes=5), T0)
    svc.submission_failed(
        cid, name[3], T0 + timedelta(hours=3), "quota exceeded", False, T0 + timedelta(hours=3)
    )
    manual = svc.trigger(cid, T0 + timedelta(hours=4, minutes=1), "req-1")
    clock.set(T0 + timedelta(hours=4, minutes=2))

    r = http.get("/namespaces/default/cronworkflows/hourly/workflows")
    assert r.status_code == 200, r.text
    got = [(w["name"], w["trigger"], w["phase"]) for w in r.json()["items"]]
    assert got == [
        (manual, "manual", "Active"),
        (name[4], "schedule", "Active"),
        (name[3], "schedule", "SubmissionFailed"),
        (name[2], "schedule", "Succeeded"),
        (name[1], "schedule", "Failed"),
    ]
    items = r.json()["items"]
    assert items[2]["message"] == "quota exceeded"
    assert items[4]["finishedAt"] == "2026-05-04T11:05:00Z"
    assert (
        len(http.get("/namespaces/default/cronworkflows/hourly/workflows?limit=2").json()["items"])
        == 2
    )

    missing = http.get("/namespaces/default/cronworkflows/nosuch/workflows")
    assert missing.status_code == 404 and "default/nosuch not found" in missing.json()["detail"]
    assert http.get("/namespaces/default/cronworkflows/hourly/workflows?limit=0").status_code == 422
