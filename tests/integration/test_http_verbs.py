"""Kubernetes' verbs on a CronWorkflow over real HTTP (uvicorn, the real app, real
PostgreSQL): POST creates and refuses a live name (409 AlreadyExists), PUT replaces under a
precondition, PATCH takes a merge patch (RFC 7386), a JSON patch (RFC 6902) or a server-side
apply by a field manager, DELETE deletes. Every refusal names its field and stores nothing:
the event count is unchanged and so is the object.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from tests.http_helpers import manifest, pg_engine, serving
from tests.instants import T0
from tests.integration.test_http import (
    APPLY,
    CW,
    JSON_PATCH,
    MERGE,
    Api,
    assert_problem,
    fields,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

COMPLETED = "cronworkflows.argoproj.io/completed"


@pytest.fixture
def api(pg_url: str) -> Iterator[Api]:
    """The real app on a fresh PostgreSQL database, served over HTTP (as test_http.py's)."""
    engine = pg_engine(pg_url)
    clock = VirtualClock(T0)
    app = create_app(engine, ServeSettings(), clock)
    try:
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as http:
            yield Api(http, clock, engine, app)
    finally:
        engine.close()


def refused(r: httpx.Response, status: int, field: str | None) -> None:
    """`r` was refused with `status`, naming `field` (None: no field names it)."""
    body = assert_problem(r, status)
    if field is not None:
        assert fields(r) == {field}, body
        assert field in body["detail"]


@pytest.fixture
def etl(api: Api) -> dict[str, Any]:
    """`etl`, created with a label, and the object as GET shows it."""
    assert api.apply(manifest("etl", labels={"team": "data"}, timezone="UTC")).status_code == 201
    got: dict[str, Any] = api.http.get(f"{CW}/etl").json()
    return got


def unchanged(api: Api, before: dict[str, Any], events: int) -> None:
    """Nothing was stored: the same events, and `etl` as it was."""
    assert api.events() == events
    assert api.http.get(f"{CW}/etl").json() == before


# ---------------------------------------------------------------------- POST


def test_post_of_a_live_name_is_409_already_exists_and_changes_nothing(
    api: Api, etl: dict[str, Any]
) -> None:
    # given etl exists
    events = api.events()
    # when it is posted again, with another schedule
    r = api.apply(manifest("etl", "5 * * * *"))
    # then 409 AlreadyExists with its version, as Kubernetes answers a create
    body = assert_problem(r, 409)
    assert body["reason"] == "AlreadyExists" and body["currentVersion"] == 1
    assert body["detail"] == (
        "cronworkflow default/etl already exists; to change it, send PUT or PATCH"
    )
    unchanged(api, etl, events)


def test_post_after_a_delete_creates_a_new_object(api: Api, etl: dict[str, Any]) -> None:
    # given etl was deleted
    assert api.http.delete(f"{CW}/etl").status_code == 200
    # when it is posted again, then it is a new object
    r = api.apply(manifest("etl", "5 * * * *"))
    assert r.status_code == 201 and r.headers["etag"] == '"1"'
    assert r.json()["spec"]["schedules"] == ["5 * * * *"]


@pytest.mark.parametrize(
    ("where", "field"),
    [("header", "If-Match"), ("body", "metadata.resourceVersion")],
)
def test_post_with_a_version_is_422_naming_it_and_stores_nothing(
    api: Api, where: str, field: str
) -> None:
    # given a manifest carrying a version (a create names no existing object)
    doc = manifest("fresh")
    headers = {}
    if where == "header":
        headers["If-Match"] = '"1"'
    else:
        doc["metadata"]["resourceVersion"] = "1"
    # when it is posted, then 422 naming where the version was, and nothing is stored
    r = api.apply(doc, **headers)
    refused(r, 422, field)
    assert api.events() == 0
    assert_problem(api.http.get(f"{CW}/fresh"), 404)


# ---------------------------------------------------------------------- PUT


def test_put_replaces_under_its_precondition(api: Api, etl: dict[str, Any]) -> None:
    # given etl at version 1, as GET showed it
    doc = {**etl, "spec": {**etl["spec"], "schedules": ["7 * * * *"]}}
    # when the object is put back with a new schedule and its resourceVersion
    r = api.http.put(f"{CW}/etl", json=doc)
    # then it is replaced, and the version moves
    assert r.status_code == 200 and r.headers["etag"] == '"2"'
    assert r.json()["spec"]["schedules"] == ["7 * * * *"]
    assert r.json()["metadata"]["labels"] == {"team": "data"}


@pytest.mark.parametrize("where", ["body", "header"])
def test_a_stale_put_is_409_and_changes_nothing(api: Api, etl: dict[str, Any], where: str) -> None:
    # given etl moved on (version 2) since it was read at version 1
    assert api.http.post(f"{CW}/etl/suspend").status_code == 200
    now, events = api.http.get(f"{CW}/etl").json(), api.events()
    doc = {**etl, "spec": {**etl["spec"], "schedules": ["7 * * * *"]}}
    headers = {}
    if where == "header":
        doc["metadata"] = {k: v for k, v in etl["metadata"].items() if k != "resourceVersion"}
        headers["If-Match"] = '"1"'
    # when the stale object is put, then 409 with the current version and nothing changes
    r = api.http.put(f"{CW}/etl", json=doc, headers=headers)
    body = assert_problem(r, 409)
    assert body["currentVersion"] == 2 and body["expectedVersion"] == 1
    unchanged(api, now, events)


# ---------------------------------------------------------------------- PATCH: merge patch


def test_merge_patch_changes_what_it_names_and_keeps_the_rest(
    api: Api, etl: dict[str, Any]
) -> None:
    # when a merge patch sets the schedule, adds a label and removes one (null)
    r = api.patch(
        "etl",
        {
            "metadata": {"labels": {"team": None, "tier": "gold"}},
            "spec": {"schedules": ["9 * * * *"]},
        },
        MERGE,
    )
    # then those change and the rest is as it was
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["spec"]["schedules"] == ["9 * * * *"]
    assert got["metadata"]["labels"] == {"tier": "gold"}
    assert got["spec"]["timezone"] == "UTC"
    assert got["spec"]["workflowSpec"] == etl["spec"]["workflowSpec"]
    assert r.headers["etag"] == '"2"' and got["metadata"]["generation"] == 2
    types = [e["type"] for e in api.http.get(f"{CW}/etl/history").json()["items"]]
    assert types == ["CronWorkflowCreated", "SpecUpdated"]


def test_a_merge_patch_with_a_current_resource_version_applies(
    api: Api, etl: dict[str, Any]
) -> None:
    r = api.patch("etl", {"metadata": {"resourceVersion": "1"}, "spec": {"suspend": True}}, MERGE)
    assert r.status_code == 200 and r.json()["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("kind", "removal"),
    [
        pytest.param(MERGE, {"spec": {"suspend": None}}, id="merge patch null"),
        pytest.param(JSON_PATCH, [{"op": "remove", "path": "/spec/suspend"}], id="JSON remove"),
    ],
)
def test_a_patch_that_removes_spec_suspend_resumes_as_an_unset_field_is_false(
    api: Api, etl: dict[str, Any], kind: str, removal: Any
) -> None:
    """A field removed is unset, which Argo reads as false: the CronWorkflow resumes, the
    spec changed (generation + 1). It stayed suspended, with a SpecUpdated recorded."""
    assert api.patch("etl", {"spec": {"suspend": True}}, MERGE).json()["spec"]["suspend"]
    suspended = api.http.get(f"{CW}/etl").json()
    r = api.patch("etl", removal, kind)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["spec"]["suspend"] is False
    assert got["metadata"]["generation"] == suspended["metadata"]["generation"] + 1
    assert got["status"]["nextScheduledTime"] is not None
    types = [e["type"] for e in api.http.get(f"{CW}/etl/history").json()["items"]]
    assert types[-1] == "Resumed"


def test_a_patch_of_labels_alone_keeps_the_generation(api: Api, etl: dict[str, Any]) -> None:
    """The API server moves `metadata.generation` on a change of anything but metadata and
    status; a change of labels or annotations alone keeps it."""
    r = api.patch(
        "etl", {"metadata": {"labels": {"team": "ops"}, "annotations": {"a": "b"}}}, MERGE
    )
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["metadata"]["labels"] == {"team": "ops"}
    assert got["metadata"]["generation"] == etl["metadata"]["generation"]
    assert got["metadata"]["resourceVersion"] != etl["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("patch", "status", "field"),
    [
        pytest.param({"metadata": {"name": "other"}}, 422, "metadata.name", id="renames"),
        pytest.param({"metadata": {"name": None}}, 422, "metadata.name", id="drops the name"),
        pytest.param(
            {"metadata": {"namespace": "ops"}}, 422, "metadata.namespace", id="moves namespace"
        ),
        pytest.param(
            {"spec": {"schedules": ["61 * * * *"]}}, 422, "spec.schedules[0]", id="bad schedule"
        ),
        pytest.param({"spec": {"schedual": "x"}}, 422, "spec.schedual", id="typo"),
        pytest.param(["not", "an object"], 422, "<body>", id="not an object"),
        pytest.param(
            {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}},
            409,
            None,
            id="stale resourceVersion",
        ),
    ],
)
def test_a_bad_merge_patch_is_refused_naming_the_field_and_stores_nothing(
    api: Api, etl: dict[str, Any], patch: Any, status: int, field: str | None
) -> None:
    events = api.events()
    r = api.patch("etl", patch, MERGE)
    refused(r, status, field)
    unchanged(api, etl, events)


# ---------------------------------------------------------------------- PATCH: JSON patch


def test_json_patch_applies_its_operations_in_order(api: Api, etl: dict[str, Any]) -> None:
    # when a JSON patch tests the schedule, replaces it, adds a second one and a label
    ops = [
        {"op": "test", "path": "/spec/schedules/0", "value": "0 * * * *"},
        {"op": "replace", "path": "/spec/schedules/0", "value": "15 * * * *"},
        {"op": "add", "path": "/spec/schedules/-", "value": "45 * * * *"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "gold"},
    ]
    r = api.patch("etl", ops, JSON_PATCH)
    # then all of them took effect, in one write
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["schedules"] == ["15 * * * *", "45 * * * *"]
    assert r.json()["metadata"]["labels"] == {"team": "data", "tier": "gold"}
    assert r.headers["etag"] == '"2"'


@pytest.mark.parametrize(
    ("ops", "field"),
    [
        pytest.param(
            [{"op": "replace", "path": "/spec/nope/x", "value": 1}], "spec.nope.x", id="bad path"
        ),
        pytest.param([{"op": "remove", "path": "/spec/timezonez"}], "spec.timezonez", id="remove"),
        pytest.param(
            [
                {"op": "replace", "path": "/spec/schedules/0", "value": "5 * * * *"},
                {"op": "test", "path": "/spec/timezone", "value": "Europe/Paris"},
            ],
            "spec.timezone",
            id="failing test after a good op",
        ),
        pytest.param(
            [{"op": "replace", "path": "/metadata/name", "value": "other"}],
            "metadata.name",
            id="renames",
        ),
        pytest.param(
            [{"op": "add", "path": "/metadata/uid", "value": "u-1"}],
            "metadata.uid",
            id="sets a uid",
        ),
        pytest.param(
            [{"op": "frobnicate", "path": "/spec/timezone"}], "spec.timezone", id="unknown op"
        ),
        pytest.param([{"op": "add", "value": 1}], "[0].path", id="no path"),
        pytest.param({"op": "add"}, "<body>", id="not a list"),
        pytest.param(
            [{"op": "replace", "path": "/spec/schedules", "value": ["61 * * * *"]}],
            "spec.schedules[0]",
            id="invalid result",
        ),
    ],
)
def test_a_bad_json_patch_is_422_naming_the_field_and_stores_nothing(
    api: Api, etl: dict[str, Any], ops: Any, field: str
) -> None:
    events = api.events()
    r = api.patch("etl", ops, JSON_PATCH)
    refused(r, 422, field)
    unchanged(api, etl, events)


def test_a_failing_test_op_says_what_the_value_is(api: Api, etl: dict[str, Any]) -> None:
    r = api.patch(
        "etl", [{"op": "test", "path": "/spec/timezone", "value": "Europe/Paris"}], JSON_PATCH
    )
    assert_problem(r, 422)
    assert 'the value there is "UTC", not "Europe/Paris"' in r.json()["detail"]


def test_copies_cannot_grow_the_object_without_bound(api: Api, etl: dict[str, Any]) -> None:
    # given a patch of 40 copies, each doubling the spec (2**40 times its size)
    ops = [{"op": "copy", "from": "/spec", "path": f"/spec/x{i}"} for i in range(40)]
    events = api.events()
    # then it is refused long before that, naming the copy that would exceed the bound
    r = api.patch("etl", ops, JSON_PATCH)
    assert "would exceed" in assert_problem(r, 422)["detail"]
    unchanged(api, etl, events)


# ---------------------------------------------------------------------- PATCH: server-side apply


def test_server_side_apply_creates_then_updates_by_one_manager(api: Api) -> None:
    # when ci applies a new CronWorkflow, then changes its schedule
    created = api.server_apply(manifest("nightly"), manager="ci")
    updated = api.server_apply(manifest("nightly", "30 2 * * *"), manager="ci")
    # then the first created it (201, Location) and the second updated it: ci owns it
    assert created.status_code == 201 and created.headers["location"] == f"{CW}/nightly"
    assert updated.status_code == 200 and updated.json()["spec"]["schedules"] == ["30 2 * * *"]
    assert updated.headers["etag"] == '"2"'


def test_another_managers_apply_that_changes_its_fields_is_409_naming_them(
    api: Api, etl: dict[str, Any]
) -> None:
    # given etl created by POST: the default manager (`cronsource apply`'s) set its fields
    events = api.events()
    # when ci applies another schedule and time zone
    r = api.server_apply(manifest("etl", "5 * * * *", timezone="UTC"), manager="ci")
    # then 409 Conflict naming the field it would take from cronsource, nothing stored
    body = assert_problem(r, 409)
    assert body["reason"] == "Conflict"
    assert fields(r) == {"spec.schedules"}
    assert "'cronsource'" in body["errors"][0]["message"]
    unchanged(api, etl, events)
    # and with force=true it takes them, and ci's next apply is its own three-way apply
    forced = api.server_apply(manifest("etl", "5 * * * *", timezone="UTC"), "ci", force=True)
    assert forced.status_code == 200 and forced.json()["spec"]["schedules"] == ["5 * * * *"]
    assert forced.json()["metadata"]["labels"] == {"team": "data"}  # ci did not name them
    third = api.server_apply(manifest("etl", timezone="UTC"), manager="cd")
    assert fields(third) == {"spec.schedules"}  # ci's now
    # and `cronsource apply`'s manager never conflicts: it applies two-way, with a warning
    back = api.server_apply(manifest("etl", labels={"team": "data"}, timezone="UTC"))
    assert back.status_code == 200 and back.json()["spec"]["schedules"] == ["0 * * * *"]
    assert "the last apply was field manager 'ci''s: applied two-way" in back.headers["warning"]


def test_another_managers_apply_of_values_that_agree_is_no_conflict(
    api: Api, etl: dict[str, Any]
) -> None:
    # when ci applies the same schedule and a field cronsource never set
    r = api.server_apply(manifest("etl", timezone="UTC", startingDeadlineSeconds=60), manager="ci")
    # then it is applied
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["startingDeadlineSeconds"] == 60


@pytest.mark.parametrize(
    ("manager", "field"),
    [(None, "fieldManager"), ("", "fieldManager"), ("x" * 129, "fieldManager")],
    ids=["missing", "empty", "too long"],
)
def test_server_side_apply_without_a_valid_field_manager_is_422_and_stores_nothing(
    api: Api, etl: dict[str, Any], manager: str | None, field: str
) -> None:
    events = api.events()
    r = api.server_apply(manifest("etl", "5 * * * *"), manager=manager)
    refused(r, 422, field)
    unchanged(api, etl, events)
    assert_problem(api.server_apply(manifest("new"), manager=manager), 422)
    assert_problem(api.http.get(f"{CW}/new"), 404)


def test_server_side_apply_of_another_name_than_the_path_is_422(
    api: Api, etl: dict[str, Any]
) -> None:
    events = api.events()
    r = api.http.patch(
        f"{CW}/etl",
        json=manifest("other"),
        params={"fieldManager": "ci"},
        headers={"content-type": APPLY},
    )
    refused(r, 422, "metadata.name")
    unchanged(api, etl, events)


# ---------------------------------------------------------------------- PATCH: the rest


@pytest.mark.parametrize(
    "kind", ["application/json", "application/strategic-merge-patch+json", "text/plain"]
)
def test_patch_of_another_content_type_is_415(api: Api, etl: dict[str, Any], kind: str) -> None:
    events = api.events()
    r = api.patch("etl", {"spec": {"suspend": True}}, kind)
    assert "application/merge-patch+json" in assert_problem(r, 415)["detail"]
    unchanged(api, etl, events)


def test_force_is_for_server_side_apply_only(api: Api, etl: dict[str, Any]) -> None:
    events = api.events()
    r = api.http.patch(
        f"{CW}/etl",
        content=b'{"spec": {"suspend": true}}',
        params={"force": "true"},
        headers={"content-type": MERGE},
    )
    refused(r, 422, "force")
    unchanged(api, etl, events)


@pytest.mark.parametrize("kind", [MERGE, JSON_PATCH])
def test_a_patch_of_a_missing_cronworkflow_is_404(api: Api, kind: str) -> None:
    body: Any = {"spec": {"suspend": True}} if kind == MERGE else []
    assert "ghost" in assert_problem(api.patch("ghost", body, kind), 404)["detail"]
    assert api.events() == 0


# ---------------------------------------------------------------------- DELETE


def test_delete_deletes_and_a_second_delete_is_404(api: Api, etl: dict[str, Any]) -> None:
    r = api.http.delete(f"{CW}/etl")
    assert r.status_code == 200 and r.json()["version"] == 2
    assert_problem(api.http.get(f"{CW}/etl"), 404)
    events = api.events()
    assert_problem(api.http.delete(f"{CW}/etl"), 404)
    assert api.events() == events


def test_a_patch_does_not_make_the_completed_label_of_a_stop_the_objects_own(api: Api) -> None:
    # given a CronWorkflow its stop strategy stopped: GET shows Argo's completed label
    stop = {"expression": "cronworkflow.failed == 0"}
    assert api.apply(manifest("stops", "* * * * *", stopStrategy=stop)).status_code == 201
    api.tick("stops", T0 + timedelta(minutes=1))
    shown = api.http.get(f"{CW}/stops").json()["metadata"]["labels"]
    assert shown == {COMPLETED: "true"}
    # when it is patched, then resumed
    assert api.patch("stops", {"spec": {"timezone": "UTC"}}, MERGE).status_code == 200
    resumed = api.http.post(f"{CW}/stops/resume")
    # then the label went with the stop: the patch did not write it into the object
    assert resumed.status_code == 200 and resumed.json()["metadata"]["labels"] == {}
