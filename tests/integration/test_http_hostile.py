"""The API under hostile requests (issue 15), over real HTTP (uvicorn on 127.0.0.1 in this
process): preconditions in the body, client uids ignored, a slow body timed out, a body over
the limit refused before it is read, /readyz on a corrupt store. /healthz while a hostile
request is being refused, against a `cronsource serve` process: tests/e2e/test_http_hostile.py."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from tests.http_helpers import manifest, serving
from tests.instants import T0

CW = "/api/v1/namespaces/default/cronworkflows"
YAML = {"Content-Type": "application/yaml"}
MiB = 1024 * 1024


def _yaml_manifest(extra: str) -> str:
    return (
        "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata:\n  name: h\n"
        "spec:\n  schedule: '0 * * * *'\n  workflowSpec:\n    entrypoint: main\n"
        "    templates: [{name: main, container: {image: busybox}}]\n" + extra
    )


def _many_keys(target_bytes: int) -> str:
    lines, size, i = [], 0, 0
    while size < target_bytes:
        line = f"    k{i}: v{i}\n"
        lines.append(line)
        size += len(line)
        i += 1
    return _yaml_manifest("    extra:\n" + "".join("  " + x for x in lines))


# ---------------------------------------------------------------------- preconditions, uid


@pytest.fixture
def api(tmp_path: Path) -> Iterator[httpx.Client]:
    engine = bootstrap(f"sqlite:///{tmp_path}/a.db")
    app = create_app(engine, ServeSettings(body_timeout=1.0), VirtualClock(T0))
    try:
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as http:
            yield http
    finally:
        engine.close()


def test_a_stale_resource_version_in_the_body_is_a_conflict(api: httpx.Client) -> None:
    assert api.post(CW, json=manifest("rv")).status_code == 201
    body = manifest("rv", "5 * * * *")
    body["metadata"]["resourceVersion"] = "1"
    assert api.put(f"{CW}/rv", json=body).status_code == 200  # version 1 -> 2
    body["metadata"]["resourceVersion"] = "1"
    body["spec"]["schedules"] = ["7 * * * *"]
    stale = api.put(f"{CW}/rv", json=body)
    assert stale.status_code == 409 and stale.json()["currentVersion"] == 2
    assert api.get(f"{CW}/rv").json()["spec"]["schedules"] == ["5 * * * *"]


def test_resource_version_and_if_match_that_disagree_are_refused(api: httpx.Client) -> None:
    assert api.post(CW, json=manifest("rv2")).status_code == 201
    body = manifest("rv2")
    body["metadata"]["resourceVersion"] = "1"
    r = api.put(f"{CW}/rv2", json=body, headers={"If-Match": "2"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "metadata.resourceVersion"


def test_a_client_set_uid_never_makes_a_second_object_of_one_name(api: httpx.Client) -> None:
    first = manifest("uid")
    first["metadata"]["uid"] = "11111111-aaaa"
    assert api.post(CW, json=first).status_code == 201
    second = manifest("uid", "9 * * * *")
    second["metadata"]["uid"] = "22222222-bbbb"
    # a create of the name is refused, whatever uid it carries
    assert api.post(CW, json=second).json()["reason"] == "AlreadyExists"
    applied = api.patch(
        f"{CW}/uid",
        json=second,
        params={"fieldManager": "cronsource"},
        headers={"content-type": "application/apply-patch+yaml"},
    )
    assert applied.status_code == 200  # an update of the same object
    again = manifest("uid")
    again["metadata"]["uid"] = "33333333-cccc"
    exists = api.post(CW, json=again, headers={"If-None-Match": "*"})
    assert exists.status_code == 409 and exists.json()["reason"] == "AlreadyExists"
    items = [i for i in api.get(CW).json()["items"] if i["metadata"]["name"] == "uid"]
    assert len(items) == 1 and items[0]["spec"]["schedules"] == ["9 * * * *"]
    assert "uid" not in items[0]["metadata"]
    assert api.delete(f"{CW}/uid").status_code == 200
    assert api.get(f"{CW}/uid").status_code == 404


def test_a_body_trickled_slower_than_the_timeout_is_answered_408(api: httpx.Client) -> None:
    host, port = str(api.base_url.host), int(api.base_url.port or 80)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(
            f"POST {CW} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{".encode()
        )
        started = time.monotonic()
        reply = s.recv(4096).decode()
        assert time.monotonic() - started < 5
    assert reply.startswith("HTTP/1.1 408"), reply


def test_a_content_length_over_3_mib_is_refused_before_reading(api: httpx.Client) -> None:
    r = api.post(CW, content=b"x" * (3 * MiB + 1), headers=YAML)
    assert r.status_code == 413 and "3 MiB" in r.json()["detail"]


def test_readyz_is_false_on_a_store_with_a_corrupt_page(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    engine = bootstrap(f"sqlite:///{db}")
    app = create_app(engine, ServeSettings(), VirtualClock(T0))
    with serving(app) as base:
        for i in range(30):
            assert httpx.post(base + CW, json=manifest(f"c{i}")).status_code == 201
        assert httpx.get(base + "/readyz").status_code == 200
    engine.close()
    with open(db, "r+b") as f:  # scribble over a page in the middle of the file
        f.seek(2 * 4096)
        f.write(b"\xde\xad\xbe\xef" * 1024)
    engine = bootstrap(f"sqlite:///{db}")
    try:
        with serving(create_app(engine, ServeSettings(), VirtualClock(T0))) as base:
            r = httpx.get(base + "/readyz")
        assert r.status_code == 503 and r.json()["status"] == "store unreadable", r.text
    finally:
        engine.close()


def test_a_name_with_a_final_newline_is_refused_and_stores_nothing(api: httpx.Client) -> None:
    r = api.post(CW, json=manifest("abc\n"))
    assert r.status_code == 422 and "DNS-1123" in r.text
    assert api.get(CW).json()["items"] == []
    assert api.get(f"{CW}/abc%0A").status_code == 422  # the path pattern ends at end of text


def test_a_write_past_the_request_timeout_is_answered_504(tmp_path: Path) -> None:
    engine = bootstrap(f"sqlite:///{tmp_path}/t.db")
    app = create_app(engine, ServeSettings(request_timeout=0.000001), VirtualClock(T0))
    try:
        with serving(app) as base:
            r = httpx.post(base + CW, content=_many_keys(200_000), headers=YAML, timeout=30)
        assert r.status_code == 504 and "may still take effect" in r.json()["detail"]
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("command", "body", "headers", "status", "said"),
    [
        pytest.param(
            "backfill",
            b'{"start":"2026-05-04T00:00:00Z","end":"2026-05-04T03:00:00Z",'
            b'"dryRun":true,"dryRun":false}',
            {},
            400,
            "duplicate key 'dryRun'",
            id="a key twice",
        ),
        pytest.param(
            "trigger", b'{"requestId":"a","requestId":"b"}', {}, 400, "requestId", id="trigger"
        ),
        pytest.param("suspend", b'{"by":"a","by":"b"}', {}, 400, "'by'", id="suspend"),
        # Refused by FastAPI's own JSON read first, in its words: still a 400, nothing stored.
        pytest.param("suspend", b'{"by":"\xff"}', {}, 400, "body", id="not UTF-8"),
        pytest.param(
            "resume",
            b"by: me\n",
            {"Content-Type": "application/yaml"},
            415,
            "send application/json",
            id="yaml",
        ),
    ],
)
def test_a_command_body_is_read_by_the_rules_of_every_body(
    api: httpx.Client, command: str, body: bytes, headers: dict[str, str], status: int, said: str
) -> None:
    """FastAPI alone took the last of two keys: a proxy that keeps the first saw a dry run
    where four runs started. Nothing is recorded for a refused command."""
    assert api.post(CW, json=manifest("cmd")).status_code == 201
    r = api.post(
        f"{CW}/cmd/{command}",
        content=body,
        headers={"Content-Type": "application/json", **headers},
    )
    assert r.status_code == status, r.text
    assert said in r.text
    assert api.get(f"{CW}/cmd").headers["ETag"] == '"1"', "something was recorded"


def test_a_clients_generation_is_ignored_as_the_api_server_ignores_it(api: httpx.Client) -> None:
    """It was taken as given (negative, past int64, going back), and on PostgreSQL a value
    past int32 broke every SELECT of the documented audit views."""
    body = manifest("gen")
    body["metadata"]["generation"] = 3_000_000_000
    assert api.post(CW, json=body).status_code == 201
    assert api.get(f"{CW}/gen").json()["metadata"]["generation"] == 1
    patched = api.patch(
        f"{CW}/gen",
        json={"metadata": {"generation": -7}, "spec": {"schedules": ["5 * * * *"]}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["metadata"]["generation"] == 2  # moved on by the spec change


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CW, manifest("nul", labels={"a": "x\u0000y"}), "metadata.labels.a"),
        (f"{CW}/cmd/suspend", {"by": "mallory\u0000"}, "by"),
    ],
)
def test_a_nul_character_is_refused_naming_where(
    api: httpx.Client, path: str, body: dict[str, object], field: str
) -> None:
    """PostgreSQL's jsonb cannot hold U+0000 as text: one such write stored made every SELECT
    of the audit's views fail, for every user."""
    assert api.post(CW, json=manifest("cmd")).status_code == 201
    r = api.post(path, json=body)
    assert r.status_code == 400, r.text
    assert f"{field}: holds U+0000 (NUL)" in r.json()["detail"]
    assert api.get(f"{CW}/nul").status_code == 404
    assert api.get(f"{CW}/cmd").headers["ETag"] == '"1"'


def test_a_backfill_with_a_stale_if_match_is_a_conflict_and_fires_nothing(
    api: httpx.Client,
) -> None:
    """If-Match was ignored on backfill (every other command takes it): a client that read
    version 1 started runs on a CronWorkflow another writer had changed since."""
    assert api.post(CW, json=manifest("bf")).status_code == 201
    assert api.post(f"{CW}/bf/suspend").status_code == 200  # version 2
    assert api.post(f"{CW}/bf/resume").status_code == 200  # version 3+
    version = int(api.get(f"{CW}/bf").headers["ETag"].strip('"'))
    body = {"start": "2026-05-04T08:00:00Z", "end": "2026-05-04T10:00:00Z"}
    for dry in (True, False):
        stale = api.post(
            f"{CW}/bf/backfill", json={**body, "dryRun": dry}, headers={"If-Match": "1"}
        )
        assert stale.status_code == 409, stale.text
        assert stale.json()["currentVersion"] == version
    assert api.get(f"{CW}/bf").headers["ETag"] == f'"{version}"', "something was recorded"
    done = api.post(f"{CW}/bf/backfill", json=body, headers={"If-Match": f'"{version}"'})
    assert done.status_code == 200 and done.json()["fired"] == 3, done.text


def test_delete_options_preconditions_are_kept_as_the_api_server_keeps_them(
    api: httpx.Client,
) -> None:
    """A Kubernetes DeleteOptions body with a stale preconditions.resourceVersion deleted the
    newer object (the body was ignored); an option cronsource does not take is refused."""
    assert api.post(CW, json=manifest("d1")).status_code == 201
    assert api.post(f"{CW}/d1/suspend").status_code == 200  # version 2

    def delete(body: dict[str, object]) -> httpx.Response:
        return api.request("DELETE", f"{CW}/d1", json=body)

    stale = delete(
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}}
    )
    assert stale.status_code == 409 and stale.json()["currentVersion"] == 2, stale.text
    odd = delete({"orphanDependents": True})
    assert odd.status_code == 422 and odd.json()["errors"][0]["field"] == "orphanDependents"
    assert api.get(f"{CW}/d1").status_code == 200
    done = delete({"propagationPolicy": "Background", "preconditions": {"resourceVersion": "2"}})
    assert done.status_code == 200, done.text
    assert api.get(f"{CW}/d1").status_code == 404
