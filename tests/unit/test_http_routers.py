"""Unit tests of the HTTP edge on FastAPI's TestClient over the in-memory store: each router's
happy path, the problem table row by row, the dependencies and the response models.

The same API over real HTTP and PostgreSQL is pinned end to end by tests/integration/test_http.py.
`engine` (memory:) and `clock` (virtual, at T0) are tests/conftest.py's.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Response
from fastapi.testclient import TestClient

from cronsource.adapters.application.documents import DocumentError
from cronsource.adapters.application.inputs import FieldError
from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.adapters.entrypoints.http.problems import PROBLEM, PROBLEMS, install
from cronsource.adapters.infrastructure.store.check import StoreUnavailable
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.lastapplied import MISSING, ApplyConflict, Kept
from cronsource.domain.manifest import ManifestError
from cronsource.domain.service import AlreadyExists, Conflict, NotFound, StaleVersion
from tests.http_helpers import manifest
from tests.instants import T0

CW = "/api/v1/namespaces/default/cronworkflows"
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
INVALID = "urn:cronsource:problem:invalid"


@pytest.fixture
def client(engine: Engine, clock: VirtualClock) -> TestClient:
    app = create_app(engine, ServeSettings(token=TOKEN), clock)
    return TestClient(app, headers=AUTH, raise_server_exceptions=False)


def created(client: TestClient, name: str = "hourly", **spec: Any) -> dict[str, Any]:
    r = client.post(CW, json=manifest(name, **spec))
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def problem_of(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = r.json()
    assert body["status"] == status
    return body


# ---------------------------------------------------------------------- the problem table

#: What each domain error is answered with, written here independently of the table: a row
#: changed or added there without this list fails the test below.
EXPECTED: dict[type[Exception], tuple[Exception, int, str]] = {
    NotFound: (NotFound("cronworkflow default/x not found"), 404, "about:blank"),
    AlreadyExists: (
        AlreadyExists("default", "x", 3),
        409,
        "urn:cronsource:problem:already-exists",
    ),
    StaleVersion: (StaleVersion(2, 5), 409, "urn:cronsource:problem:stale-version"),
    Conflict: (Conflict("gave up after repeated version conflicts"), 409, "about:blank"),
    ApplyConflict: (
        ApplyConflict("ci", "cronsource", (Kept("spec.timezone", "UTC", MISSING),)),
        409,
        "urn:cronsource:problem:apply-conflict",
    ),
    FieldError: (FieldError("since", "is not an RFC 3339 time"), 422, INVALID),
    ManifestError: (ManifestError(["spec.schedule: bad cron (x)"]), 422, INVALID),
    DocumentError: (DocumentError("body: not JSON"), 400, "about:blank"),
    StoreUnavailable: (StoreUnavailable("connection refused"), 503, "about:blank"),
}


def raising(error: Exception) -> TestClient:
    """An app with the edge's problem handlers whose one route raises `error`."""
    app = FastAPI()
    install(app)

    @app.get("/boom")
    def boom() -> None:
        raise error

    return TestClient(app, raise_server_exceptions=False)


def test_the_problem_table_answers_each_domain_error_with_its_status_and_type() -> None:
    assert set(PROBLEMS) == set(EXPECTED)
    for cls, (error, status, type_) in EXPECTED.items():
        r = raising(error).get("/boom")
        body = problem_of(r, status)
        assert (cls.__name__, body["type"]) == (cls.__name__, type_)
        assert body["title"] and body["instance"] == "/boom"


def test_problem_extensions_carry_what_a_client_acts_on() -> None:
    stale = raising(StaleVersion(2, 5)).get("/boom")
    body = problem_of(stale, 409)
    assert (body["currentVersion"], body["expectedVersion"]) == (5, 2)
    assert stale.headers["etag"] == '"5"'
    assert "If-Match 2 is stale" in body["detail"]

    gone = raising(StaleVersion(2, None)).get("/boom")
    assert problem_of(gone, 409)["currentVersion"] is None and "etag" not in gone.headers

    exists = problem_of(raising(AlreadyExists("default", "x", 3)).get("/boom"), 409)
    assert (exists["reason"], exists["currentVersion"]) == ("AlreadyExists", 3)

    owned = ApplyConflict("ci", "cronsource", (Kept("spec.schedules", ["0 * * * *"], ["5"]),))
    conflict = problem_of(raising(owned).get("/boom"), 409)
    assert conflict["reason"] == "Conflict"
    assert conflict["errors"] == [
        {
            "field": "spec.schedules",
            "in": "body",
            "message": "set to [\"0 * * * *\"] by field manager 'cronsource';"
            ' this apply says ["5"]',
        }
    ]

    field = problem_of(raising(FieldError("If-Match", "give one", "header")).get("/boom"), 422)
    assert field["errors"] == [{"field": "If-Match", "in": "header", "message": "give one"}]

    manifest_error = ManifestError(["spec.schedule: bad cron (x)", "metadata.name: required"])
    bad = problem_of(raising(manifest_error).get("/boom"), 422)
    assert [e["field"] for e in bad["errors"]] == ["spec.schedule", "metadata.name"]
    assert bad["title"] == "Invalid CronWorkflow"


def test_an_error_outside_the_table_is_a_500_naming_only_its_type() -> None:
    body = problem_of(raising(KeyError("secret detail")).get("/boom"), 500)
    assert body["detail"] == "KeyError" and "secret" not in str(body)


# ---------------------------------------------------------------------- cronworkflows


def test_cronworkflows_router_applies_gets_lists_replaces_and_deletes(client: TestClient) -> None:
    r = client.post(CW, json=manifest("hourly", labels={"team": "data"}))
    assert r.status_code == 201
    assert r.headers["etag"] == '"1"' and r.headers["location"] == f"{CW}/hourly"
    assert r.json()["status"]["nextScheduledTime"] == "2026-05-04T11:00:00Z"
    created(client, "other")

    got = client.get(f"{CW}/hourly")
    assert got.status_code == 200 and got.json()["metadata"]["resourceVersion"] == "1"
    listed = client.get(CW, params={"labelSelector": "team=data"}).json()
    assert [i["metadata"]["name"] for i in listed["items"]] == ["hourly"]
    assert listed["kind"] == "CronWorkflowList"

    put = client.put(
        f"{CW}/hourly", json=manifest("hourly", "30 * * * *"), headers={"If-Match": '"1"'}
    )
    assert put.status_code == 200 and put.headers["etag"] == '"2"'
    assert put.json()["spec"]["schedules"] == ["30 * * * *"]

    nxt = client.get(f"{CW}/hourly/next", params={"count": 2}).json()
    assert [i["utc"] for i in nxt["items"]] == ["2026-05-04T10:30:00Z", "2026-05-04T11:30:00Z"]

    deleted = client.delete(f"{CW}/hourly", headers={"If-Match": "2"})
    assert deleted.json() == {
        "kind": "Status",
        "status": "Success",
        "namespace": "default",
        "name": "hourly",
        "version": 3,
    }
    problem_of(client.get(f"{CW}/hourly"), 404)


def test_a_stale_if_match_is_refused_by_the_service_and_nothing_changes(
    client: TestClient, engine: Engine
) -> None:
    created(client)
    body = problem_of(
        client.post(f"{CW}/hourly/suspend", headers={"If-Match": "7"}),
        409,
    )
    assert (body["currentVersion"], body["expectedVersion"]) == (1, 7)
    assert engine.service.find("default", "hourly").version == 1
    # A version for a CronWorkflow that does not exist: stale, never a create.
    absent = client.patch(
        f"{CW}/absent",
        json=manifest("absent"),
        params={"fieldManager": "ci"},
        headers={"If-Match": "1", "Content-Type": "application/apply-patch+yaml"},
    )
    assert problem_of(absent, 409)["currentVersion"] is None
    problem_of(client.get(f"{CW}/absent"), 404)
    # A create names no version: refused, naming where it was.
    versioned = client.post(CW, json=manifest("absent"), headers={"If-Match": "1"})
    assert problem_of(versioned, 422)["errors"][0]["field"] == "If-Match"
    problem_of(client.get(f"{CW}/absent"), 404)


# ---------------------------------------------------------------------- commands


def test_commands_router_suspends_resumes_triggers_and_backfills(
    client: TestClient, clock: VirtualClock
) -> None:
    created(client)
    clock.set(clock.now() + timedelta(minutes=30))
    s = client.post(f"{CW}/hourly/suspend", json={"by": "alice"})
    assert s.status_code == 200 and s.json()["spec"]["suspend"] is True
    clock.set(clock.now() + timedelta(hours=3))
    r = client.post(f"{CW}/hourly/resume")
    assert r.status_code == 200 and r.json()["spec"]["suspend"] is False

    first = client.post(f"{CW}/hourly/trigger", json={"requestId": "r1"})
    again = client.post(f"{CW}/hourly/trigger", json={"requestId": "r1"})
    assert (first.status_code, first.json()["triggered"]) == (201, True)
    assert (again.status_code, again.json()["triggered"]) == (200, False)
    assert first.json()["workflow"] == again.json()["workflow"]
    header = client.post(f"{CW}/hourly/trigger", headers={"Idempotency-Key": "r1"})
    assert (header.status_code, header.json()["triggered"]) == (200, False)
    both = client.post(
        f"{CW}/hourly/trigger", json={"requestId": "r2"}, headers={"Idempotency-Key": "r3"}
    )
    assert [e["field"] for e in problem_of(both, 422)["errors"]] == ["requestId"]

    dry = client.post(
        f"{CW}/hourly/backfill",
        json={"start": "2026-05-04T00:00:00Z", "end": "2026-05-04T02:00:00Z", "dryRun": True},
    ).json()
    assert (dry["ticks"], dry["count"], dry["fired"]) == (3, 3, 0)
    assert {i["action"] for i in dry["items"]} == {"would fire"}
    refused = client.post(
        f"{CW}/hourly/backfill",
        json={"start": "2026-05-04T03:00:00Z", "end": "2026-05-04T02:00:00Z"},
    )
    assert [e["field"] for e in problem_of(refused, 422)["errors"]] == ["end"]


def test_a_backfill_may_not_ask_for_more_than_100_000_ticks(client: TestClient) -> None:
    """10,000,000 ticks kept a worker busy for minutes and gigabytes after its client left."""
    created(client)
    body = {"start": "2026-05-04T00:00:00Z", "end": "2026-05-04T02:00:00Z", "dryRun": True}
    refused = client.post(f"{CW}/hourly/backfill", json={**body, "maxTicks": 100_001})
    assert [e["field"] for e in problem_of(refused, 422)["errors"]] == ["maxTicks"]
    allowed = client.post(f"{CW}/hourly/backfill", json={**body, "maxTicks": 100_000})
    assert allowed.status_code == 200 and allowed.json()["ticks"] == 3, allowed.text


def test_a_backfill_dry_run_is_true_or_false_itself(client: TestClient) -> None:
    """ "no" was taken for false, as pydantic's lax bool reads it: a real backfill."""
    created(client)
    body = {"start": "2026-05-04T00:00:00Z", "end": "2026-05-04T02:00:00Z", "dryRun": "no"}
    refused = client.post(f"{CW}/hourly/backfill", json=body)
    assert [e["field"] for e in problem_of(refused, 422)["errors"]] == ["dryRun"]
    fired = client.get(f"{CW}/hourly/history", params={"type": "ScheduleFired"}).json()
    assert fired["items"] == []


# ---------------------------------------------------------------------- audit


def test_audit_router_answers_history_events_decision_and_timeline(
    client: TestClient, engine: Engine, clock: VirtualClock
) -> None:
    created(client)
    fire = T0 + timedelta(hours=1)
    clock.set(fire)
    engine.service.tick([engine.service.find("default", "hourly").id], fire)

    history = client.get(f"{CW}/hourly/history").json()
    assert [e["type"] for e in history["items"]] == ["CronWorkflowCreated", "ScheduleFired"]
    page = client.get("/api/v1/events", params={"limit": 1}).json()
    assert len(page["items"]) == 1 and page["nextAfter"] == page["items"][0]["position"]

    why = client.get(f"{CW}/hourly/decision", params={"at": "2026-05-04T11:00:00Z"}).json()
    assert why["outcome"] == "Fired" and why["nextTick"] is None
    not_a_tick = client.get(f"{CW}/hourly/decision", params={"at": "2026-05-04T11:30:00Z"})
    assert not_a_tick.json()["outcome"] == "NotATick"
    # Half a second after the tick is no tick, and the answer names the time asked, not the
    # whole second before it (which is the tick, and said NotATick).
    late = client.get(f"{CW}/hourly/decision", params={"at": "2026-05-04T11:00:00.5Z"}).json()
    assert (late["at"], late["outcome"]) == ("2026-05-04T11:00:00.5Z", "NotATick")

    line = client.get(f"{CW}/hourly/timeline", params={"days": 1, "buckets": 24}).json()
    assert line["bucketSeconds"] == 3600
    cells = line["items"][0]["cells"]
    assert sum(c.get("fired", 0) for c in cells) == 1
    problem_of(client.get(f"{CW}/never/history"), 404)


def test_the_timeline_places_a_skipped_ranges_ticks_where_they_are(
    client: TestClient, engine: Engine, clock: VirtualClock
) -> None:
    """A suspension's 22 ticks of `*/10` (10:10..13:40) are one ScheduleSkipped range; spread
    by share of time they put 7 in an hour, which has 6, and 4 in 13:00..13:40, which has 5.
    They are placed by the schedule: 5, 6, 6 and 5 in the hours from 10:00."""
    created(client, "tenth", schedules=["*/10 * * * *"])
    cron_id = engine.service.find("default", "tenth").id
    clock.set(T0 + timedelta(minutes=1))
    assert client.post(f"{CW}/tenth/suspend").status_code == 200
    resumed = T0 + timedelta(hours=3, minutes=41)
    clock.set(resumed)
    assert client.post(f"{CW}/tenth/resume").status_code == 200
    engine.service.tick([cron_id], resumed)
    line = client.get(f"{CW}/tenth/timeline", params={"days": 1, "buckets": 24}).json()
    assert line["bucketSeconds"] == 3600
    since = datetime.fromisoformat(line["since"].replace("Z", "+00:00"))
    hours = {
        since + timedelta(hours=i): c["skipped"]["Suspended"]
        for i, c in enumerate(line["items"][0]["cells"])
        if c.get("skipped")
    }
    assert hours == {T0 + timedelta(hours=h): k for h, k in enumerate([5, 6, 6, 5])}


def test_a_name_that_is_not_a_kubernetes_name_is_refused_in_words(client: TestClient) -> None:
    """pydantic's `String should match pattern '^[a-z0-9]...'` named neither the value nor
    the rule in words."""
    body = problem_of(client.get(f"{CW}/Alpha"), 422)
    assert body["errors"][0]["field"] == "name"
    assert body["errors"][0]["message"] == (
        "'Alpha' must be lowercase letters, digits, '-' or '.', starting and ending with a"
        " letter or digit (a Kubernetes name)"
    )
    r = client.patch(
        f"{CW}/x",
        params={"fieldManager": "caf\u00e9"},
        content=b"{}",
        headers={"content-type": "application/apply-patch+yaml"},
    )
    assert "'caf\u00e9' must be printable ASCII" in problem_of(r, 422)["detail"]


# ---------------------------------------------------------------------- operations, auth


def test_operations_router_answers_liveness_readiness_and_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert "error" not in ready.json()  # each readiness answer has only its own fields
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and "cronsource_" in metrics.text


def test_a_method_no_route_has_is_one_label_value_in_the_metrics(client: TestClient) -> None:
    """Any token is a method to HTTP: each `curl -X M<n>` added series per route to /metrics
    (4,000 from 200 requests). They are counted as "other"."""
    for n in range(20):
        assert client.request(f"M{n}", "/healthz").status_code == 405
    text = client.get("/metrics").text
    lines = [x for x in text.splitlines() if x.startswith("cronsource_http_requests_total{")]
    methods = {x.split('method="')[1].split('"')[0] for x in lines}
    assert "other" in methods and not any(m.startswith("M") for m in methods), methods


def test_the_token_dependency_guards_the_api_and_metrics_not_the_probes(
    engine: Engine, clock: VirtualClock
) -> None:
    anonymous = TestClient(create_app(engine, ServeSettings(token=TOKEN), clock))
    for path in (CW, "/api/v1/events", "/metrics", "/api/v1/scheduler"):
        r = anonymous.get(path)
        assert problem_of(r, 401)["title"] == "Unauthorized", path
        assert r.headers["www-authenticate"].startswith("Bearer")
    wrong = anonymous.get(CW, headers={"Authorization": "Bearer nope"})
    problem_of(wrong, 401)
    assert anonymous.get("/healthz").status_code == 200


def test_without_a_token_a_request_a_web_page_sent_is_refused_and_changes_nothing(
    engine: Engine, clock: VirtualClock
) -> None:
    """A server without a token binds to loopback, where a browser on the same machine still
    reaches it: a page's form POSTs a command cross-origin with no preflight (an empty body
    suspended and triggered), and a name re-pointed at 127.0.0.1 (DNS rebinding) reads the
    API as its own origin. Both are 403; a loopback client, and the status page itself, are
    answered."""
    app = create_app(engine, ServeSettings(), clock)
    local = TestClient(app, base_url="http://127.0.0.1:8080", raise_server_exceptions=False)
    created(local)
    suspend = f"{CW}/hourly/suspend"
    evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    r = local.post(suspend, headers=evil)
    assert "evil.example" in problem_of(r, 403)["detail"]
    r = local.post(f"{CW}/hourly/trigger", headers={"Origin": "null"})
    problem_of(r, 403)
    rebound = TestClient(app, base_url="http://attacker.example:8080")
    assert "attacker.example" in problem_of(rebound.get(CW), 403)["detail"]
    assert local.get(f"{CW}/hourly").json()["spec"].get("suspend") is not True
    same_page = {"Origin": "http://127.0.0.1:8080"}
    assert local.post(suspend, headers=same_page).status_code == 200
    for base in ("http://localhost:8080", "http://[::1]:8080"):
        assert TestClient(app, base_url=base).get(CW).status_code == 200, base


def test_until_counts_its_whole_second_with_or_without_a_fraction(
    client: TestClient, clock: VirtualClock
) -> None:
    """Events are shown to the second, so `until=T` counts T's whole second; `until=T.5` cut
    the events later in that second and answered fewer than `until=T`, an earlier instant."""
    clock.set(T0 + timedelta(milliseconds=200))
    created(client)
    clock.set(T0 + timedelta(milliseconds=900))
    assert client.post(f"{CW}/hourly/suspend").status_code == 200
    at = T0.strftime("%Y-%m-%dT%H:%M:%S")
    counts = {
        until: len(client.get(f"{CW}/hourly/history", params={"until": until}).json()["items"])
        for until in (f"{at}Z", f"{at}.5Z", f"{at}.999Z")
    }
    assert counts == {f"{at}Z": 2, f"{at}.5Z": 2, f"{at}.999Z": 2}
    events = client.get("/api/v1/events", params={"until": f"{at}.1Z"}).json()["items"]
    assert len(events) == 2


def test_a_query_parameter_given_twice_is_refused_unless_it_repeats(client: TestClient) -> None:
    """Starlette keeps the last of two values: `?labelSelector=a&labelSelector=b` dropped the
    first filter and answered what it excludes. A 422 names it; `type` and `reason`, lists,
    still repeat."""
    created(client, "gold", labels={"tier": "gold"})
    created(client, "plain")
    r = client.get(CW, params=[("labelSelector", "tier=gold"), ("labelSelector", "x")])
    assert "labelSelector: given more than once" in problem_of(r, 422)["detail"]
    r = client.get("/api/v1/events", params=[("limit", "3"), ("limit", "1")])
    problem_of(r, 422)
    types = [("type", "CronWorkflowCreated"), ("type", "Suspended")]
    assert len(client.get("/api/v1/events", params=types).json()["items"]) == 2


def test_newest_gives_the_latest_events_of_a_long_history_oldest_first(
    client: TestClient, clock: VirtualClock
) -> None:
    """The status page shows a CronWorkflow's newest events: it read the first page of its
    history, the oldest thousand, and showed version 1000 on top of one with 1085."""
    created(client)
    for k in range(12):
        clock.set(T0 + timedelta(minutes=k + 1))
        assert (
            client.post(f"{CW}/hourly/{'suspend' if k % 2 == 0 else 'resume'}").status_code == 200
        )
    got = client.get(f"{CW}/hourly/history", params={"limit": 5, "newest": "true"}).json()
    assert [e["version"] for e in got["items"]] == [9, 10, 11, 12, 13]
    assert got["nextAfter"] is None
    first = client.get(f"{CW}/hourly/history", params={"limit": 5}).json()
    assert [e["version"] for e in first["items"]] == [1, 2, 3, 4, 5]
    only = client.get("/api/v1/events", params={"limit": 2, "newest": "true", "type": "Suspended"})
    assert [e["type"] for e in only.json()["items"]] == ["Suspended", "Suspended"]


def test_next_says_what_holds_a_cronworkflow_whose_times_do_not_run(client: TestClient) -> None:
    created(client)
    assert client.get(f"{CW}/hourly/next").json()["heldBy"] is None
    assert client.post(f"{CW}/hourly/suspend").status_code == 200
    held = client.get(f"{CW}/hourly/next").json()
    assert held["heldBy"] == "Suspended" and len(held["items"]) == 5


def test_head_is_answered_as_get_without_the_body(client: TestClient) -> None:
    """RFC 9110: a server that answers GET answers HEAD; every route answered `curl -I`, and
    the health checkers that ask with HEAD, with a 405."""
    created(client)
    for path in ("/healthz", "/readyz", "/metrics", "/", f"{CW}/hourly", CW):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    assert client.head(f"{CW}/nope").status_code == 404


def test_the_clock_given_to_the_app_is_the_one_handlers_read(
    engine: Engine, clock: VirtualClock
) -> None:
    """The facade and the handlers that read time both take it from the app's one clock (there is
    no second clock to override: moving this one moves every answer)."""
    app = create_app(engine, ServeSettings(token=TOKEN), clock)
    client = TestClient(app, headers=AUTH)
    created(client)
    assert app.dependency_overrides == {} and app.state.clock is clock
    clock.set(T0 + timedelta(days=1))
    nxt = client.get(f"{CW}/hourly/next", params={"count": 1}).json()
    assert nxt["items"][0]["utc"] == "2026-05-05T11:00:00Z"


def test_response_models_validate_what_a_handler_returns(
    engine: Engine, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler that returns something its response model refuses is a 500, not a 200 with
    a malformed body."""
    app = create_app(engine, ServeSettings(token=TOKEN), clock)
    client = TestClient(app, headers=AUTH, raise_server_exceptions=False)
    created(client)

    import cronsource.adapters.entrypoints.http.routers.cronworkflows as routes

    def broken(response: Response, row: dict[str, Any], status_code: int = 200) -> Any:
        return {"kind": "CronWorkflow"}  # no apiVersion, metadata, spec, status

    monkeypatch.setattr(routes, "answer", broken)
    r = client.get(f"{CW}/hourly")
    assert problem_of(r, 500)["detail"] == "ResponseValidationError"


# ---------------------------------------------------------------------- the status page


def test_status_page_router_answers_scheduler_health_and_child_workflows(
    client: TestClient, engine: Engine, clock: VirtualClock
) -> None:
    created(client)
    fire = T0 + timedelta(hours=1)
    clock.set(fire)
    engine.service.tick([engine.service.find("default", "hourly").id], fire)

    health = client.get("/api/v1/scheduler").json()
    assert (health["now"], health["stale"], health["overdueCount"]) == (
        "2026-05-04T11:00:00Z",
        False,
        0,
    )
    assert health["lastDecisionAt"] == "2026-05-04T11:00:00Z"
    clock.set(fire + timedelta(hours=2))  # 12:00 is due and nobody decided it
    assert client.get("/api/v1/scheduler").json()["stale"] is True

    children = client.get(f"{CW}/hourly/workflows").json()["items"]
    assert [(c["scheduledTime"], c["phase"]) for c in children] == [
        ("2026-05-04T11:00:00Z", "Active")
    ]
    problem_of(client.get(f"{CW}/never/workflows"), 404)


# ---------------------------------------------------------------------- DST named (issue 25)


def test_next_and_decision_name_the_tick_dst_moved_and_the_object_both_next_times(
    client: TestClient,
) -> None:
    created(client, "nightly", schedules=["30 2 * * *"], timezone="America/New_York")
    items = client.get(f"{CW}/nightly/next", params={"count": 320}).json()["items"]
    moved = [i for i in items if "dst" in i]
    assert [i["utc"] for i in moved] == ["2027-03-14T07:00:00Z"]  # 03:00 EDT
    assert moved[0]["dst"] == {
        "kind": "gap",
        "wall": "02:30",
        "date": "2027-03-14",
        "zone": "America/New_York",
        "note": "02:30 does not exist on 2027-03-14",
    }
    # Asked at 02:30 that day (in either offset), the answer is that tick, not NotATick.
    for asked in ("2027-03-14T02:30:00-05:00", "2027-03-14T02:30:00-04:00"):
        d = client.get(f"{CW}/nightly/decision", params={"at": asked}).json()
        assert (d["at"], d["outcome"], d["dst"]["kind"]) == (
            "2027-03-14T07:00:00Z",
            "Pending",
            "gap",
        )
        assert "03:00 EDT (02:30 does not exist on 2027-03-14)" in d["explanation"]
    status = client.get(f"{CW}/nightly").json()["status"]
    assert status["nextScheduledTime"] == status["nextDecisionTime"] == "2026-05-05T06:30:00Z"


def test_a_store_that_fails_under_a_request_is_a_503_naming_the_cause(
    tmp_path: Path, clock: VirtualClock
) -> None:
    """The store going away mid-request (here: SQLite's event table gone under a running
    server) was a 500 with the exception's class name and a traceback logged for each
    request; it is a 503 that names the cause, as a store down at the start is."""
    config = StoreConfig.parse(f"sqlite:///{tmp_path / 'cs.db'}")
    migrate(config)
    engine = bootstrap(config)
    try:
        app = create_app(engine, ServeSettings(token=TOKEN), clock)
        served = TestClient(app, headers=AUTH, raise_server_exceptions=False)
        created(served)
        with sqlite3.connect(tmp_path / "cs.db") as db:
            db.execute("DROP TABLE stored_events")
        r = served.post(f"{CW}/hourly/suspend", json={})
        body = problem_of(r, 503)
        assert "stored_events" in body["detail"] and "migrate" in body["detail"], body
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("method", "path", "key"),
    [
        ("post", CW, "dryRun"),  # kubectl's server-side dry run: it created the object
        ("post", f"{CW}/hourly/trigger", "dryRun"),  # it started a real run
        ("delete", f"{CW}/hourly", "dryRun"),
        ("get", CW, "fieldSelector"),  # it answered every object, unfiltered
        ("get", CW, "limit"),  # every object, no continue token
        ("get", f"{CW}/hourly/history", "sort"),
    ],
)
def test_a_query_parameter_a_request_does_not_take_is_refused_and_nothing_is_done(
    client: TestClient, method: str, path: str, key: str
) -> None:
    created(client)
    body = {"json": manifest("other")} if path == CW and method == "post" else {}
    r = getattr(client, method)(path, params={key: "All"}, **body)
    problem = problem_of(r, 422)
    assert problem["errors"][0]["field"] == key and problem["errors"][0]["in"] == "query"
    names = [i["metadata"]["name"] for i in client.get(CW).json()["items"]]
    assert names == ["hourly"]  # nothing created, nothing deleted
    runs = client.get(f"{CW}/hourly/history", params={"type": "ScheduleFired"}).json()
    assert runs["items"] == []  # no run triggered


def test_the_parameters_a_request_takes_are_still_taken(client: TestClient) -> None:
    created(client)
    r = client.get(CW, params={"labelSelector": "nope=1"})
    assert r.status_code == 200 and r.json()["items"] == []
    assert client.get(f"{CW}/hourly/history", params={"limit": 1}).status_code == 200


def test_an_every_created_at_a_fraction_ticks_at_the_whole_seconds_it_is_shown_in(
    client: TestClient, engine: Engine, clock: VirtualClock
) -> None:
    """An `@every` ticked at its creation's fraction of a second, while every time is shown
    in whole seconds (history's scheduledTime, as Argo's): asked at the second it printed,
    the answer was NotATick. It ticks at whole seconds now, as robfig's Every does."""
    clock.set(T0 + timedelta(seconds=0.25))
    created(client, "often", schedules=["@every 2s"])
    fire = T0 + timedelta(seconds=2)
    clock.set(fire)
    engine.service.tick([engine.service.find("default", "often").id], fire)
    history = client.get(f"{CW}/often/history", params={"type": "ScheduleFired"}).json()
    shown = history["items"][0]["scheduledTime"]
    assert shown == "2026-05-04T10:00:02Z"
    why = client.get(f"{CW}/often/decision", params={"at": shown}).json()
    assert (why["at"], why["outcome"]) == ("2026-05-04T10:00:02Z", "Fired"), why
    none = client.get(f"{CW}/often/decision", params={"at": "2026-05-04T10:00:03Z"}).json()
    assert none["outcome"] == "NotATick"


def test_a_command_body_that_is_not_json_is_a_400_as_a_manifest_body_is(
    client: TestClient,
) -> None:
    created(client)
    r = client.post(
        f"{CW}/hourly/suspend", content=b"garbage", headers={"Content-Type": "application/json"}
    )
    assert problem_of(r, 400)["detail"].startswith("body: not valid JSON")
    assert client.get(f"{CW}/hourly").json()["spec"]["suspend"] is False


@pytest.mark.parametrize("header", ['"1', '1"', 'W/"1', '"', "²", '"1"x', "1 2"])
def test_an_if_match_that_is_no_entity_tag_is_refused_naming_it(
    client: TestClient, engine: Engine, header: str
) -> None:
    """Only a whole entity tag (`"1"`, `W/"1"`) or a bare version is a version: a half-quoted
    one was read as version 1 and the write went ahead."""
    created(client)
    refused = client.post(f"{CW}/hourly/suspend", headers={"If-Match": header.encode("latin-1")})
    error = problem_of(refused, 422)["errors"][0]
    assert error["field"] == "If-Match" and "is not a version" in error["message"]
    assert not engine.service.find("default", "hourly").suspended


@pytest.mark.parametrize(
    ("body", "said"),
    [("null", "null"), ("[1]", "array"), ("3", "number"), ('"x"', "string")],
)
def test_a_body_that_is_no_mapping_is_named_in_jsons_words(
    client: TestClient, engine: Engine, body: str, said: str
) -> None:
    """A create whose body is JSON `null` said "got NoneType", Python's name for it; the
    words are Go's decoder's, as the workflowSpec's errors say them."""
    head = engine.service.recorder.max_notification_id()
    refused = client.post(CW, content=body, headers={"Content-Type": "application/json"})
    detail = problem_of(refused, 422)["detail"]
    assert detail == f"<document>: a CronWorkflow manifest must be a mapping, got {said}"
    assert engine.service.recorder.max_notification_id() == head
