"""The HTTP API over real HTTP (uvicorn on 127.0.0.1) against a real PostgreSQL store.

Time is the app's injected clock (a `VirtualClock`); the scheduler is not running, so history is
made by calling the service at named instants, as the scheduler would. What is pinned: the
resources and their status codes, problem+json naming the field, optimistic concurrency with
If-Match (409 with the current version, nothing changed), bearer tokens, "why did it run at T",
metrics counted once per decision from the log, readiness, and structured logs.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.entrypoints.http import ServeError, ServeSettings, create_app, is_loopback
from cronsource.adapters.infrastructure.logs import (
    DecisionLog,
    configure_logging,
    scheduling_fields,
)
from cronsource.adapters.runtime.engine import Engine
from cronsource.projections.readmodel import rfc3339
from tests.http_helpers import manifest, pg_engine, serving
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

PROBLEM = "application/problem+json"
CW = "/api/v1/namespaces/default/cronworkflows"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass
class Api:
    http: httpx.Client
    clock: VirtualClock
    engine: Engine
    app: Any

    def apply(self, body: dict[str, Any], **headers: str) -> httpx.Response:
        """Create (POST)."""
        return self.http.post(CW, json=body, headers=headers)

    def server_apply(
        self,
        body: dict[str, Any],
        manager: str | None = "cronsource",
        force: bool = False,
        **headers: str,
    ) -> httpx.Response:
        """Server-side apply (PATCH, application/apply-patch+yaml) by `manager`; the
        default one is `cronsource apply`'s."""
        params = {"fieldManager": manager} if manager is not None else {}
        if force:
            params["force"] = "true"
        return self.http.patch(
            f"{CW}/{body['metadata']['name']}",
            content=yaml.safe_dump(body),
            params=params,
            headers={"content-type": APPLY, **headers},
        )

    def patch(self, name: str, body: Any, kind: str, **headers: str) -> httpx.Response:
        return self.http.patch(
            f"{CW}/{name}", content=json.dumps(body), headers={"content-type": kind, **headers}
        )

    def events(self) -> int:
        """How many events the store holds (the audit log, every CronWorkflow)."""
        return len(self.http.get("/api/v1/events", params={"limit": 1000}).json()["items"])

    def at(self, when: datetime) -> None:
        self.clock.set(when)

    def tick(self, name: str, when: datetime) -> None:
        """What the scheduler loop does when `name` is due at `when`: decide and project
        (through the projector, the one mover of positions, as the server's reads do)."""
        self.at(when)
        agg = self.engine.service.find("default", name)
        self.engine.service.tick([agg.id], when)
        self.engine.projector.step(when)

    def run_completed(self, name: str, workflow: str, phase: str, when: datetime) -> None:
        self.at(when)
        agg = self.engine.service.find("default", name)
        self.engine.service.run_completed(agg.id, workflow, phase, when, when)
        self.engine.projector.step(when)


@pytest.fixture
def api(pg_url: str) -> Iterator[Api]:
    engine = pg_engine(pg_url)
    clock = VirtualClock(T0)
    app = create_app(engine, ServeSettings(), clock)
    try:
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as http:
            yield Api(http, clock, engine, app)
    finally:
        engine.close()


def h(hour: int, minute: int = 0, second: int = 0) -> datetime:
    """An instant on T0's day (2026-05-04, UTC)."""
    return T0.replace(hour=hour, minute=minute, second=second)


def wf(name: str, t: datetime) -> str:
    return f"{name}-{int(t.timestamp())}"


def make_history(api: Api) -> None:
    """`hourly` (0 * * * *, no deadline), created at 10:00: fires at 11:00 (its run fails) and
    12:00 (2 s late), is suspended 12:30-15:30 (13, 14, 15 skipped: Suspended), and the
    scheduler is down until 17:10 (16, 17 skipped: DeadlineExceeded). The scheduler decides
    the suspension's ticks too, so both skips are recorded at 17:10."""
    assert api.apply(manifest("hourly")).status_code == 201
    api.tick("hourly", h(11))
    api.run_completed("hourly", wf("hourly", h(11)), "Failed", h(11, 5))
    api.tick("hourly", h(12, 0, 2))
    api.at(h(12, 30))
    assert api.http.post(f"{CW}/hourly/suspend", json={"by": "alice"}).status_code == 200
    api.at(h(15, 30))
    assert api.http.post(f"{CW}/hourly/resume").status_code == 200
    api.tick("hourly", h(17, 10))


def assert_problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["title"]
    return body


def fields(r: httpx.Response) -> set[str]:
    return {e["field"] for e in r.json()["errors"]}


# ---------------------------------------------------------------------- resources


def test_post_creates_and_a_server_side_apply_updates_with_etag_and_location(api: Api) -> None:
    r = api.apply(manifest("nightly", "30 2 * * *", timezone="America/New_York"))
    assert r.status_code == 201
    assert r.headers["location"] == f"{CW}/nightly"
    assert r.headers["etag"] == '"1"'
    body = r.json()
    assert body["kind"] == "CronWorkflow"
    assert body["metadata"]["resourceVersion"] == "1"
    assert body["status"]["nextScheduledTime"] == "2026-05-05T06:30:00Z"  # 02:30 EDT

    same = api.server_apply(manifest("nightly", "30 2 * * *", timezone="America/New_York"))
    assert same.status_code == 200 and same.headers["etag"] == '"1"'
    changed = api.server_apply(manifest("nightly", "45 2 * * *", timezone="America/New_York"))
    assert changed.status_code == 200 and changed.headers["etag"] == '"2"'
    got = api.http.get(f"{CW}/nightly")
    assert got.status_code == 200
    assert got.json()["spec"]["schedules"] == ["45 2 * * *"]
    assert got.headers["etag"] == '"2"'


def test_apply_is_three_way_so_a_suspend_survives_and_force_takes_the_manifest(api: Api) -> None:
    doc = manifest("hourly", suspend=False)
    assert api.apply(doc).status_code == 201
    assert api.http.post(f"{CW}/hourly/suspend").status_code == 200

    again = api.server_apply(doc)

    assert again.status_code == 200 and again.json()["spec"]["suspend"] is True
    assert again.headers.get_list("warning") == [
        '299 - "default/hourly: spec.suspend kept at true, set since the last apply by'
        ' another writer (the file still says false; --force-conflicts takes it)"'
    ]
    forced = api.server_apply(doc, force=True)
    assert forced.status_code == 200 and forced.json()["spec"]["suspend"] is False
    assert "warning" not in forced.headers
    types = [e["type"] for e in api.http.get(f"{CW}/hourly/history").json()["items"]]
    assert types == ["CronWorkflowCreated", "Suspended", "Resumed"]


def test_a_put_is_another_writer_whose_value_a_reapplied_manifest_keeps(api: Api) -> None:
    assert api.apply(manifest("etl", startingDeadlineSeconds=60)).status_code == 201
    put = api.http.put(f"{CW}/etl", json=manifest("etl", startingDeadlineSeconds=300))
    assert put.status_code == 200 and "warning" not in put.headers

    again = api.server_apply(manifest("etl", startingDeadlineSeconds=60))

    assert again.json()["spec"]["startingDeadlineSeconds"] == 300
    assert "spec.startingDeadlineSeconds kept at 300" in again.headers["warning"]


def test_apply_and_put_warn_of_names_argo_does_not_define(api: Api) -> None:
    r = api.apply(manifest("typo", when="{{= cronworkflow.faild < 3 }}"))
    assert r.status_code == 201
    assert r.headers.get_list("warning") == [
        '299 - "spec.when: cronworkflow.faild is not a variable Argo defines'
        ' (nearest: cronworkflow.failed)"'
    ]
    # A quote in the name is escaped in the header's quoted string.
    stop = {"expression": "cronworkflow['fa\"ild'] > 1"}
    put = api.http.put(f"{CW}/typo", json=manifest("typo", stopStrategy=stop))
    assert put.status_code == 200
    assert put.headers.get_list("warning") == [
        "299 - \"spec.stopStrategy.expression: cronworkflow['fa\\\"ild'] is not a variable"
        ' Argo defines (nearest: cronworkflow.failed)"'
    ]


def test_apply_takes_yaml_and_the_namespace_from_the_path(api: Api) -> None:
    doc = manifest("hello", "*/5 * * * *", namespace=None)
    r = api.http.post(
        "/api/v1/namespaces/team-a/cronworkflows",
        content=yaml.safe_dump(doc),
        headers={"content-type": "application/yaml"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["namespace"] == "team-a"
    assert api.http.get("/api/v1/namespaces/team-a/cronworkflows/hello").status_code == 200
    assert api.http.get(f"{CW}/hello").status_code == 404


def test_put_updates_an_existing_cronworkflow_only(api: Api) -> None:
    missing = api.http.put(f"{CW}/ghost", json=manifest("ghost"))
    assert_problem(missing, 404)
    api.apply(manifest("etl"))
    r = api.http.put(f"{CW}/etl", json=manifest("etl", "15 * * * *"))
    assert r.status_code == 200 and r.json()["spec"]["schedules"] == ["15 * * * *"]
    other = api.http.put(f"{CW}/etl", json=manifest("not-etl"))
    assert fields(other) == {"metadata.name"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"schedules": ["61 * * * *"]}, {"spec.schedules[0]"}, id="bad minute"),
        pytest.param(
            {"schedules": ["* * * * *", "0 0 L * *"]}, {"spec.schedules[1]"}, id="L unsupported"
        ),
        pytest.param(
            {"schedules": ["* * * * *"], "timezone": "Mars/Olympus"},
            {"spec.timezone"},
            id="unknown zone",
        ),
        pytest.param(
            {"schedules": ["* * * * *"], "concurrencyPolicy": "Sometimes"},
            {"spec.concurrencyPolicy"},
            id="bad enum",
        ),
        pytest.param(
            {"schedules": ["* * * * *"], "startingDeadlineSeconds": -1},
            {"spec.startingDeadlineSeconds"},
            id="negative deadline",
        ),
        pytest.param(
            {"schedules": ["* * * * *"], "startingDeadlineSeconds": 10**12},
            {"spec.startingDeadlineSeconds"},
            id="deadline overflowing dates",
        ),
        pytest.param(
            {"schedules": ["* * * * *"], "schedual": "typo"}, {"spec.schedual"}, id="typo"
        ),
        pytest.param({"schedules": []}, {"spec.schedules"}, id="no schedule"),
    ],
)
def test_invalid_manifest_is_422_naming_the_camelcase_field_and_stores_nothing(
    api: Api, spec: dict[str, Any], expected: set[str]
) -> None:
    doc = manifest("bad")
    doc["spec"] = {
        "workflowSpec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
        **spec,
    }
    r = api.apply(doc)
    body = assert_problem(r, 422)
    assert fields(r) == expected
    assert all(e["in"] == "body" for e in body["errors"])
    assert all(f in body["detail"] for f in expected)
    assert_problem(api.http.get(f"{CW}/bad"), 404)
    assert api.http.get("/api/v1/events").json()["items"] == []


def test_other_bad_input_is_a_problem_naming_the_field(api: Api) -> None:
    long_name = manifest("x" * 53)
    assert fields(api.apply(long_name)) == {"metadata.name"}
    elsewhere = manifest("x", namespace="other")
    assert fields(api.apply(elsewhere)) == {"metadata.namespace"}
    nan = yaml.safe_dump(manifest("x")).replace("entrypoint: main", "entrypoint: main\n    x: .nan")
    r = api.http.post(CW, content=nan, headers={"content-type": "application/yaml"})
    assert fields(r) == {"spec.workflowSpec.x"}
    assert_problem(api.http.post(CW, content=b"{not json"), 400)
    assert_problem(api.http.post(CW, content=b"x", headers={"content-type": "text/csv"}), 415)
    api.apply(manifest("ok"))
    count = api.http.get(f"{CW}/ok/next", params={"count": 0})
    assert assert_problem(count, 422)["errors"] == [
        {"field": "count", "in": "query", "message": "Input should be greater than or equal to 1"}
    ]
    assert fields(api.http.get("/api/v1/events", params={"since": "yesterday"})) == {"since"}
    bad_if_match = api.http.post(f"{CW}/ok/suspend", headers={"If-Match": "abc"})
    assert fields(bad_if_match) == {"If-Match"}
    assert fields(api.http.get(f"{CW}/Not_A_Name")) == {"name"}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/ghost", None),
        ("PUT", "/ghost", manifest("ghost")),
        ("DELETE", "/ghost", None),
        ("POST", "/ghost/suspend", None),
        ("POST", "/ghost/resume", None),
        ("POST", "/ghost/trigger", None),
        (
            "POST",
            "/ghost/backfill",
            {"start": "2026-05-04T00:00:00Z", "end": "2026-05-04T01:00:00Z"},
        ),
        ("GET", "/ghost/next", None),
        ("GET", "/ghost/history", None),
        ("GET", "/ghost/decision?at=2026-05-04T11:00:00Z", None),
        ("GET", "/ghost/timeline", None),
    ],
)
def test_unknown_cronworkflow_is_404_problem(
    api: Api, method: str, path: str, body: dict[str, Any] | None
) -> None:
    r = api.http.request(method, CW + path, json=body)
    assert "ghost" in assert_problem(r, 404)["detail"]


def test_unknown_route_is_a_404_problem(api: Api) -> None:
    assert_problem(api.http.get("/api/v1/nothing"), 404)


def test_list_filters_by_label_selector(api: Api) -> None:
    api.apply(manifest("a", labels={"team": "data", "tier": "gold"}))
    api.apply(manifest("b", labels={"team": "data", "legacy": "yes"}))
    api.apply(manifest("c", labels={"team": "web"}))
    api.http.post("/api/v1/namespaces/ops/cronworkflows", json=manifest("d", namespace="ops"))

    def names(selector: str | None, path: str = CW) -> list[str]:
        params = {"labelSelector": selector} if selector is not None else {}
        r = api.http.get(path, params=params)
        assert r.status_code == 200, r.text
        assert r.json()["kind"] == "CronWorkflowList"
        return [i["metadata"]["name"] for i in r.json()["items"]]

    assert names(None) == ["a", "b", "c"]
    assert names("team=data") == ["a", "b"]
    assert names("team==data,!legacy") == ["a"]
    assert names("team!=data") == ["c"]
    assert names("tier in (gold, silver)") == ["a"]
    assert names("team notin (data)") == ["c"]
    assert names("legacy") == ["b"]
    assert names(None, "/api/v1/cronworkflows") == ["a", "b", "c", "d"]
    assert fields(api.http.get(CW, params={"labelSelector": "team=(data"})) == {"labelSelector"}


def test_trigger_runs_now_and_a_retried_request_starts_no_second_run(api: Api) -> None:
    api.apply(manifest("adhoc"))
    first = api.http.post(f"{CW}/adhoc/trigger", json={"requestId": "deploy-42"})
    assert first.status_code == 201
    again = api.http.post(f"{CW}/adhoc/trigger", headers={"Idempotency-Key": "deploy-42"})
    assert again.status_code == 200
    assert again.json() == {**first.json(), "triggered": False}
    fired = api.http.get(f"{CW}/adhoc/history", params={"type": "ScheduleFired"}).json()["items"]
    assert [(e["workflow"], e["trigger"]) for e in fired] == [(first.json()["workflow"], "manual")]
    assert (
        api.http.get(f"{CW}/adhoc").json()["status"]["active"][0]["name"]
        == first.json()["workflow"]
    )


def test_backfill_dry_run_lists_then_fires_each_skipped_tick_once(api: Api) -> None:
    api.apply(manifest("hourly"))
    api.at(h(10, 1))
    api.http.post(f"{CW}/hourly/suspend")
    api.at(h(13, 30))
    api.http.post(f"{CW}/hourly/resume")
    api.tick("hourly", h(13, 30))  # the scheduler decides: 11, 12, 13 skipped (Suspended)
    body = {"start": "2026-05-04T10:30:00Z", "end": "2026-05-04T12:00:00Z"}
    dry = api.http.post(f"{CW}/hourly/backfill", json={**body, "dryRun": True})
    assert dry.status_code == 200, dry.text

    def items(action: str) -> list[dict[str, str]]:
        return [
            {"scheduledTime": rfc3339(t), "workflow": wf("hourly", t), "action": action}
            for t in (h(11), h(12))
        ]

    assert dry.json()["count"] == 2 and dry.json()["items"] == items("would fire")
    assert dry.json()["overlap"] == "Allow" and dry.json()["fired"] == 0
    assert (
        api.http.get(f"{CW}/hourly/history", params={"type": "ScheduleFired"}).json()["items"] == []
    )
    fired = api.http.post(f"{CW}/hourly/backfill", json=body)
    assert fired.json()["items"] == items("fire") and fired.json()["fired"] == 2
    assert api.http.post(f"{CW}/hourly/backfill", json=body).json()["count"] == 0
    triggers = [
        e["trigger"]
        for e in api.http.get(f"{CW}/hourly/history", params={"type": "ScheduleFired"}).json()[
            "items"
        ]
    ]
    assert triggers == ["backfill", "backfill"]


def test_backfill_queue_runs_one_after_another_and_forbid_skips_overlaps(api: Api) -> None:
    api.apply(manifest("hourly"))
    api.at(h(10, 1))
    api.http.post(f"{CW}/hourly/suspend")
    api.at(h(13, 30))
    api.http.post(f"{CW}/hourly/resume")
    api.tick("hourly", h(13, 30))  # the scheduler decides the suspension's ticks
    body = {"start": "2026-05-04T10:30:00Z", "end": "2026-05-04T13:00:00Z"}
    forbid = api.http.post(f"{CW}/hourly/backfill", json={**body, "overlap": "Forbid"}).json()
    # One run at once: the earliest starts, the others would overlap it.
    assert (forbid["fired"], forbid["skipped"]) == (1, 2)
    queued = api.http.post(f"{CW}/hourly/backfill", json={**body, "overlap": "Queue"}).json()
    # 11:00 runs, so 12:00 and 13:00 wait for it, one after another.
    assert (queued["fired"], queued["queued"], queued["parallel"]) == (0, 2, 1)
    svc = api.engine.service
    cron_id = svc.find("default", "hourly").id
    svc.run_completed(cron_id, wf("hourly", h(11)), "Succeeded", h(13, 31), h(13, 31))
    fired = api.http.get(f"{CW}/hourly/history", params={"type": "ScheduleFired"}).json()
    assert [(e["scheduledTime"], e["trigger"]) for e in fired["items"]] == [
        (rfc3339(h(11)), "backfill"),
        (rfc3339(h(12)), "backfill"),
    ]
    bad = api.http.post(f"{CW}/hourly/backfill", json={**body, "overlap": "Sometimes"})
    assert fields(bad) == {"overlap"}


def test_an_unknown_event_type_or_reason_is_422_not_an_empty_page(api: Api) -> None:
    api.apply(manifest("hourly"))
    for path in ("/api/v1/events", f"{CW}/hourly/history"):
        r = api.http.get(path, params={"type": "Bogus"})
        assert r.status_code == 422 and fields(r) == {"type"}, r.text
        assert "ScheduleSkipped" in r.json()["detail"]
        assert fields(api.http.get(path, params={"reason": "Lazy"})) == {"reason"}


def test_backfill_refuses_an_oversized_or_inverted_range_naming_the_field(api: Api) -> None:
    api.apply(manifest("minutely", "* * * * *"))
    api.at(T0 + timedelta(days=8))
    api.http.post(f"{CW}/minutely/suspend")
    api.http.post(f"{CW}/minutely/resume")
    api.tick("minutely", T0 + timedelta(days=8))  # the scheduler decides 8 days of ticks
    big = {"start": "2026-05-04T00:00:00Z", "end": "2026-05-12T00:00:00Z", "dryRun": True}
    r = api.http.post(f"{CW}/minutely/backfill", json=big)
    assert fields(r) == {"end"} and "10000" in r.json()["detail"]
    inverted = {"start": "2026-05-05T00:00:00Z", "end": "2026-05-04T00:00:00Z"}
    assert fields(api.http.post(f"{CW}/minutely/backfill", json=inverted)) == {"end"}
    bad_time = {"start": "soon", "end": "2026-05-04T00:00:00Z"}
    assert fields(api.http.post(f"{CW}/minutely/backfill", json=bad_time)) == {"start"}


def test_next_fire_times_in_the_zone_and_in_utc(api: Api) -> None:
    api.apply(manifest("nightly", "30 2 * * *", timezone="America/New_York"))
    api.at(datetime.fromisoformat("2026-03-07T12:00:00+00:00"))
    r = api.http.get(f"{CW}/nightly/next", params={"count": 2})
    assert r.json() == {
        "timezone": "America/New_York",
        "items": [
            {"local": "2026-05-05T02:30:00-04:00", "utc": "2026-05-05T06:30:00Z"},
            {"local": "2026-05-06T02:30:00-04:00", "utc": "2026-05-06T06:30:00Z"},
        ],
        "heldBy": None,
    }


def test_delete_keeps_the_history_queryable(api: Api) -> None:
    api.apply(manifest("old"))
    d = api.http.delete(f"{CW}/old")
    assert d.status_code == 200 and d.json()["version"] == 2
    assert_problem(api.http.get(f"{CW}/old"), 404)
    types = [e["type"] for e in api.http.get(f"{CW}/old/history").json()["items"]]
    assert types == ["CronWorkflowCreated", "CronWorkflowDeleted"]
    again = api.apply(manifest("old"))
    assert again.status_code == 201 and again.headers["etag"] == '"1"'  # a new stream


# ---------------------------------------------------------------------- optimistic concurrency


def test_stale_if_match_is_409_with_the_current_version_and_changes_nothing(api: Api) -> None:
    etag = api.apply(manifest("guarded")).headers["etag"]
    assert etag == '"1"'
    ok = api.http.post(f"{CW}/guarded/suspend", headers={"If-Match": etag})
    assert ok.status_code == 200 and ok.headers["etag"] == '"2"'

    stale = api.http.post(f"{CW}/guarded/resume", headers={"If-Match": etag})
    body = assert_problem(stale, 409)
    assert body["currentVersion"] == 2 and body["expectedVersion"] == 1
    assert body["type"] == "urn:cronsource:problem:stale-version"
    assert stale.headers["etag"] == '"2"'
    for method, path, json_body in [
        ("PUT", "/guarded", manifest("guarded", "5 * * * *")),
        ("DELETE", "/guarded", None),
        ("POST", "/guarded/suspend", None),
        ("POST", "/guarded/trigger", None),
    ]:
        r = api.http.request(method, CW + path, json=json_body, headers={"If-Match": etag})
        assert assert_problem(r, 409)["currentVersion"] == 2, (method, path)
    r = api.server_apply(manifest("guarded", "5 * * * *"), **{"If-Match": etag})
    assert assert_problem(r, 409)["currentVersion"] == 2
    for kind, patch in [
        (MERGE, {"spec": {"schedules": ["5 * * * *"]}}),
        (JSON_PATCH, [{"op": "replace", "path": "/spec/schedules", "value": ["5 * * * *"]}]),
    ]:
        r = api.patch("guarded", patch, kind, **{"If-Match": etag})
        assert assert_problem(r, 409)["currentVersion"] == 2, kind

    now = api.http.get(f"{CW}/guarded")
    assert now.headers["etag"] == '"2"'
    assert now.json()["spec"]["suspend"] is True
    assert now.json()["spec"]["schedules"] == ["0 * * * *"]
    assert len(api.http.get(f"{CW}/guarded/history").json()["items"]) == 2

    resumed = api.http.post(f"{CW}/guarded/resume", headers={"If-Match": 'W/"2"'})
    assert resumed.status_code == 200 and resumed.json()["spec"]["suspend"] is False


def test_concurrent_writers_with_the_same_if_match_exactly_one_wins(api: Api) -> None:
    etag = api.apply(manifest("race")).headers["etag"]
    base = str(api.http.base_url)

    def put(minute: int) -> int:
        body = manifest("race", f"{minute} * * * *")
        with httpx.Client(base_url=base, timeout=30) as c:
            return c.put(f"{CW}/race", json=body, headers={"If-Match": etag}).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = sorted(pool.map(put, range(1, 9)))
    assert codes == [200] + [409] * 7
    types = [e["type"] for e in api.http.get(f"{CW}/race/history").json()["items"]]
    assert types == ["CronWorkflowCreated", "SpecUpdated"]


def test_if_match_is_checked_against_the_store_not_the_read_model(api: Api) -> None:
    """Another process suspends it (its own service on the same store); the API's version,
    read before, is now stale, even though this server never saw that write."""
    etag = api.apply(manifest("shared")).headers["etag"]
    other = api.engine.replica()
    other.suspend(other.find("default", "shared").id, h(10, 5), by="other-replica")
    r = api.http.put(
        f"{CW}/shared", json=manifest("shared", "7 * * * *"), headers={"If-Match": etag}
    )
    assert assert_problem(r, 409)["currentVersion"] == 2


def test_if_none_match_star_creates_only(api: Api) -> None:
    assert api.apply(manifest("once"), **{"If-None-Match": "*"}).status_code == 201
    r = api.apply(manifest("once", "5 * * * *"), **{"If-None-Match": "*"})
    assert assert_problem(r, 409)["currentVersion"] == 1


# ---------------------------------------------------------------------- authentication


@pytest.fixture
def secured(pg_url: str) -> Iterator[httpx.Client]:
    engine = pg_engine(pg_url)
    app = create_app(engine, ServeSettings(token="s3cret-token"), VirtualClock(T0))
    try:
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as http:
            yield http
    finally:
        engine.close()


def test_a_configured_token_is_required_on_the_api_and_metrics(secured: httpx.Client) -> None:
    for path in (CW, "/api/v1/events", "/api/v1/cronworkflows", "/metrics"):
        r = secured.get(path)
        assert_problem(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer")
        wrong = secured.get(path, headers={"Authorization": "Bearer nope"})
        assert_problem(wrong, 401)
        basic = secured.get(path, headers={"Authorization": "Basic czNjcmV0LXRva2Vu"})
        assert_problem(basic, 401)
    assert_problem(secured.post(CW, json=manifest("x")), 401)
    good = {"Authorization": "Bearer s3cret-token"}
    assert secured.post(CW, json=manifest("x"), headers=good).status_code == 201
    assert secured.get(CW, headers=good).status_code == 200
    assert secured.get("/metrics", headers=good).status_code == 200
    for open_path in ("/healthz", "/readyz", "/", "/static/app.js", "/openapi.json"):
        assert secured.get(open_path).status_code == 200, open_path


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("cronsource.example.org", False),
    ],
)
def test_without_a_token_only_loopback_is_served(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    if loopback:
        ServeSettings(host=host).check()
    else:
        with pytest.raises(ServeError, match="token is required"):
            ServeSettings(host=host).check()
    ServeSettings(host=host, token="t").check()


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        cli,
        ["--store", f"sqlite:///{tmp_path}/c.db", "serve", "--host", "0.0.0.0"],
        env={"CRONSOURCE_TOKEN": ""},
    )
    assert r.exit_code == 1
    assert "not a loopback address: a bearer token is required" in r.output
    empty = tmp_path / "token"
    empty.write_text("\n")
    r = CliRunner().invoke(
        cli, ["--store", "memory:", "serve", "--host", "0.0.0.0", "--token-file", str(empty)]
    )
    assert r.exit_code == 1 and "the file is empty" in r.output


# ---------------------------------------------------------------------- audit


def test_events_filter_by_type_reason_and_time_and_page_by_log_position(api: Api) -> None:
    make_history(api)
    everything = api.http.get("/api/v1/events", params={"limit": 1000}).json()
    assert everything["nextAfter"] is None
    items = everything["items"]
    assert [e["position"] for e in items] == sorted(e["position"] for e in items)
    assert [e["type"] for e in items] == [
        "CronWorkflowCreated",
        "ScheduleFired",
        "RunCompleted",
        "ScheduleFired",
        "Suspended",
        "Resumed",
        "ScheduleSkipped",
        "ScheduleSkipped",
    ]

    pages, after = [], 0
    while True:
        page = api.http.get("/api/v1/events", params={"limit": 3, "after": after}).json()
        pages.append(page["items"])
        if page["nextAfter"] is None:
            break
        after = page["nextAfter"]
    assert [len(p) for p in pages] == [3, 3, 2]
    assert [e for p in pages for e in p] == items

    skipped = api.http.get("/api/v1/events", params={"type": "ScheduleSkipped"}).json()["items"]
    assert [(e["reason"], e["count"]) for e in skipped] == [
        ("Suspended", 3),
        ("DeadlineExceeded", 2),
    ]
    assert skipped[0]["scheduledTime"] == rfc3339(h(13))
    assert skipped[0]["lastScheduledTime"] == rfc3339(h(15))
    by_reason = api.http.get("/api/v1/events", params={"reason": "DeadlineExceeded"})
    assert [e["scheduledTime"] for e in by_reason.json()["items"]] == [rfc3339(h(16))]
    window = api.http.get(
        "/api/v1/events", params={"since": "2026-05-04T15:00:00Z", "until": "2026-05-04T16:00:00Z"}
    )
    assert [e["type"] for e in window.json()["items"]] == ["Resumed"]
    suspended_by = api.http.get(f"{CW}/hourly/history", params={"type": "Suspended"}).json()
    assert suspended_by["items"][0]["by"] == "alice"
    two_types = api.http.get(
        f"{CW}/hourly/history", params=[("type", "Suspended"), ("type", "Resumed")]
    )
    assert [e["type"] for e in two_types.json()["items"]] == ["Suspended", "Resumed"]
    inverted = {"since": "2026-05-04T16:00:00Z", "until": "2026-05-04T15:00:00Z"}
    assert fields(api.http.get("/api/v1/events", params=inverted)) == {"until"}


@pytest.mark.parametrize(
    ("at", "outcome", "reason", "explained"),
    [
        pytest.param(h(11), "Fired", None, "as workflow hourly-1777892400", id="fired"),
        pytest.param(h(14), "Skipped", "Suspended", "3 ticks", id="inside a suspension"),
        pytest.param(h(16), "Skipped", "DeadlineExceeded", "decided at", id="while down"),
        pytest.param(h(18), "Pending", None, "not decided yet", id="not yet due"),
        pytest.param(h(18, 30), "NotATick", None, "next is 2026-05-04T19:00:00Z", id="off tick"),
        pytest.param(h(10), "NotScheduled", None, "created", id="at creation"),
        pytest.param(h(9), "NotScheduled", None, "never run", id="before creation"),
    ],
)
def test_decision_says_why_it_did_or_did_not_run_at_a_time(
    api: Api, at: datetime, outcome: str, reason: str | None, explained: str
) -> None:
    make_history(api)
    r = api.http.get(f"{CW}/hourly/decision", params={"at": rfc3339(at)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["outcome"] == outcome
    assert body.get("reason") == reason
    assert explained in body["explanation"]
    if outcome in ("Fired", "Skipped"):
        assert [d["type"] for d in body["decisions"]] == [f"Schedule{outcome}"]
    else:
        assert body["decisions"] == []


def test_decision_shows_a_skipped_tick_backfilled_later(api: Api) -> None:
    make_history(api)
    api.http.post(
        f"{CW}/hourly/backfill",
        json={"start": "2026-05-04T14:00:00Z", "end": "2026-05-04T14:00:00Z"},
    )
    body = api.http.get(f"{CW}/hourly/decision", params={"at": "2026-05-04T14:00:00Z"}).json()
    assert body["outcome"] == "Fired"
    assert [(d["type"], d.get("trigger")) for d in body["decisions"]] == [
        ("ScheduleSkipped", None),
        ("ScheduleFired", "backfill"),
    ]
    assert "after first being skipped (Suspended)" in body["explanation"]


def test_timeline_counts_fired_failed_and_skipped_by_reason_per_bucket(api: Api) -> None:
    make_history(api)
    r = api.http.get("/api/v1/timeline", params={"days": 1, "buckets": 24})
    body = r.json()
    assert body["bucketSeconds"] == 3600
    assert body["until"] == "2026-05-04T18:00:00Z" and body["since"] == "2026-05-03T18:00:00Z"
    (row,) = body["items"]
    cells = row["cells"]
    assert len(cells) == 24
    assert cells[17] == {"fired": 1, "failed": 1}  # 11:00, its run failed
    assert cells[18] == {"fired": 1}
    assert [cells[i] for i in (19, 20, 21)] == [{"skipped": {"Suspended": 1}}] * 3
    assert [cells[i] for i in (22, 23)] == [{"skipped": {"DeadlineExceeded": 1}}] * 2
    assert all(c == {} for c in cells[:17])
    one = api.http.get(f"{CW}/hourly/timeline", params={"days": 1, "buckets": 24}).json()
    assert one["items"] == body["items"]


# ---------------------------------------------------------------------- metrics and health


def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = api.http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_each_decision_once_from_the_log(api: Api) -> None:
    make_history(api)
    m = scrape(api)
    ns = ("namespace", "default")
    assert m[("cronsource_fires_total", (ns, ("trigger", "schedule")))] == 2
    assert m[("cronsource_skipped_ticks_total", (ns, ("reason", "Suspended")))] == 3
    assert m[("cronsource_skipped_ticks_total", (ns, ("reason", "DeadlineExceeded")))] == 2
    assert m[("cronsource_skip_decisions_total", (ns, ("reason", "Suspended")))] == 1
    assert m[("cronsource_runs_completed_total", (ns, ("phase", "Failed")))] == 1
    skew = (("trigger", "schedule"),)
    assert m[("cronsource_fire_skew_seconds_count", skew)] == 2
    assert m[("cronsource_fire_skew_seconds_sum", skew)] == pytest.approx(2.0)
    assert m[("cronsource_fire_skew_seconds_bucket", (("le", "0.05"), *skew))] == 1
    assert m[("cronsource_fire_skew_seconds_bucket", (("le", "1.0"), *skew))] == 1
    assert m[("cronsource_fire_skew_seconds_bucket", (("le", "2.5"), *skew))] == 2
    assert m[("cronsource_dispatch_errors_total", (("kind", "permanent"),))] == 0
    assert m[("cronsource_projection_lag_events", (("projection", "readmodel"),))] == 0
    assert m[("cronsource_due_index_size", ())] == 1
    assert m[("cronsource_due_overdue", ())] == 0
    assert m[("cronsource_cronworkflows", (ns,))] == 1
    assert m[("cronsource_rejected_writes_total", (("source", "if_match"),))] == 0
    assert m[("cronsource_replicas", ())] == 0  # no scheduler replica runs in this test
    assert m[("cronsource_shards_unowned", ())] == 64

    # after the first scrape, only new rows are read: the counts move by what happened since
    api.tick("hourly", h(18, 0, 20))
    api.http.post(f"{CW}/hourly/suspend", headers={"If-Match": '"1"'})  # stale: 409
    api.at(h(18, 45))
    assert (
        api.http.get(f"{CW}/hourly/decision", params={"at": rfc3339(h(18))}).json()["outcome"]
        == "Fired"
    )
    m = scrape(api)
    assert m[("cronsource_fires_total", (ns, ("trigger", "schedule")))] == 3
    assert m[("cronsource_fire_skew_seconds_count", skew)] == 3
    assert m[("cronsource_fire_skew_seconds_bucket", (("le", "30.0"), *skew))] == 3
    assert m[("cronsource_rejected_writes_total", (("source", "if_match"),))] == 1
    assert m[("cronsource_due_overdue", ())] == 0
    requests = (
        "cronsource_http_requests_total",
        (
            ("code", "409"),
            ("method", "POST"),
            ("route", "/api/v1/namespaces/{namespace}/cronworkflows/{name}/suspend"),
        ),
    )
    assert m[requests] == 1


def test_metrics_show_replica_ownership_from_advisory_locks(api: Api) -> None:
    from cronsource.adapters.infrastructure.shards import AdvisoryLockShards

    replica = AdvisoryLockShards(api.engine.config.pg_conninfo)
    try:
        replica.rebalance()
        m = scrape(api)
        assert m[("cronsource_replicas", ())] == 1
        owned = {k: v for k, v in m.items() if k[0] == "cronsource_shards_owned"}
        assert list(owned.values()) == [64]
        assert m[("cronsource_shards_unowned", ())] == 0
        assert m[("cronsource_projector_replicas", ())] == 1
    finally:
        replica.release()
    assert scrape(api)[("cronsource_replicas", ())] == 0


def test_readyz_reports_projection_lag_and_fails_when_behind(pg_url: str) -> None:
    engine = pg_engine(pg_url)
    app = create_app(engine, ServeSettings(max_projection_lag=1), VirtualClock(T0))
    try:
        with serving(app) as base:
            assert httpx.get(base + "/healthz").json() == {"status": "ok"} | {
                "lag": None,
                "maxLag": None,
                "error": None,
            }
            ready = httpx.get(base + "/readyz")
            assert ready.status_code == 200
            assert ready.json()["lag"] == {"readmodel": 0, "dispatch": 0}
            # written by another process, not projected yet
            other = engine.replica()
            for name in ("a", "b"):
                from cronsource.domain.manifest import parse_manifest

                other.apply(parse_manifest(manifest(name)), T0)
            behind = httpx.get(base + "/readyz")
            assert behind.status_code == 503
            assert behind.json()["lag"]["readmodel"] == 2
            engine.projector.catch_up()
            assert httpx.get(base + "/readyz").status_code == 200
    finally:
        engine.close()


def test_openapi_documents_the_resources_errors_and_auth(api: Api) -> None:
    doc = api.http.get("/openapi.json").json()
    paths = doc["paths"]
    base = "/api/v1/namespaces/{namespace}/cronworkflows"
    assert set(paths[base]) == {"get", "post"}
    assert set(paths[base + "/{name}"]) == {"get", "put", "patch", "delete"}
    patch = paths[base + "/{name}"]["patch"]
    assert set(patch["requestBody"]["content"]) == {APPLY, MERGE, JSON_PATCH}
    assert {"200", "201", "404", "409", "415", "422"} <= set(patch["responses"])
    for action in ("suspend", "resume", "trigger", "backfill"):
        assert "post" in paths[f"{base}/{{name}}/{action}"]
    for read in ("next", "history", "decision", "timeline"):
        assert "get" in paths[f"{base}/{{name}}/{read}"]
    assert "get" in paths["/api/v1/events"]
    schemas = doc["components"]["schemas"]
    assert {"CronWorkflowManifest", "Problem", "CronWorkflowSpec"} <= set(schemas)
    put = paths[base + "/{name}"]["put"]
    assert put["responses"]["409"]["content"][PROBLEM]["schema"] == {
        "$ref": "#/components/schemas/Problem"
    }
    assert "HTTPBearer" in doc["components"]["securitySchemes"]


# ---------------------------------------------------------------------- logs


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_logs_are_json_lines_off_a_terminal_with_scheduling_fields() -> None:
    root = logging.getLogger()
    level = root.level
    out = io.StringIO()
    handler = configure_logging(logging.INFO, stream=out)
    try:
        logging.getLogger("cronsource").info(
            "fired", extra=scheduling_fields("default", "nightly", h(11), 7, workflow="w-1")
        )
        line = json.loads(out.getvalue().splitlines()[-1])
        assert line["msg"] == "fired" and line["level"] == "info"
        assert line["cronWorkflow"] == "default/nightly"
        assert line["tick"] == "2026-05-04T11:00:00Z"
        assert line["version"] == 7 and line["workflow"] == "w-1"
        text = io.StringIO()
        again = configure_logging(logging.INFO, stream=text, json_lines=False)
        assert handler not in root.handlers  # replaced, not stacked
        handler = again
        logging.getLogger("cronsource").info(
            "fired", extra=scheduling_fields("default", "nightly", h(11), 7)
        )
        assert "fired cronWorkflow=default/nightly tick=2026-05-04T11:00:00Z version=7" in (
            text.getvalue()
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_decision_log_writes_one_line_per_committed_decision(api: Api) -> None:
    api.apply(manifest("hourly"))
    records = Records()
    logger = logging.getLogger("test.decisions")
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        decisions = DecisionLog(api.engine.view, logger)
        assert decisions.emit_new() == 0  # history before it started is not repeated
        api.tick("hourly", h(11))
        api.at(h(11, 30))
        api.http.post(f"{CW}/hourly/suspend")
        assert decisions.emit_new() == 2
        fired, suspended = records.records
        assert fired.getMessage() == f"default/hourly fired {wf('hourly', h(11))}"
        assert (fired.cronWorkflow, fired.tick, fired.version) == (  # type: ignore[attr-defined]
            "default/hourly",
            rfc3339(h(11)),
            2,
        )
        assert fired.trigger == "schedule"  # type: ignore[attr-defined]
        assert suspended.event == "Suspended" and suspended.tick is None  # type: ignore[attr-defined]
        assert decisions.emit_new() == 0
    finally:
        logger.removeHandler(records)
