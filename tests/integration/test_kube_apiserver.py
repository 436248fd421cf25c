"""Contract tests of the test API server (tests/kube/apiserver.py): it behaves like a real
Kubernetes API server in everything cronsource relies on, through the official client (and
one test through cronsource's own).

They document the server's behaviour, not cronsource's: resourceVersion preconditions (409
Conflict), AlreadyExists, generation bumps without a status subresource, list + watch with
bookmarks, 410 Gone for expired resourceVersions, ownerReferences, label selectors.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kube import apiserver as kube

pytestmark = pytest.mark.k8s


GROUP, VERSION = "argoproj.io", "v1alpha1"
CWF, WF = "cronworkflows", "workflows"
CRON_LABEL = "workflows.argoproj.io/cron-workflow"
SCHEDULED_TIME = "workflows.argoproj.io/scheduled-time"


def cron_workflow(name: str, schedule: str = "*/5 * * * *") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": {"workflows.argoproj.io/controller-instanceid": "x"}},
        "spec": {
            "schedules": [schedule],
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 0,
            "workflowMetadata": {"labels": {"team": "a"}},
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox", "args": ["1"]}}],
                "someFieldNoSchemaKnows": {"nested": [1, {"deep": True}]},
            },
        },
    }


def workflow(name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {CRON_LABEL: owner["metadata"]["name"] if owner else "none"},
        "annotations": {SCHEDULED_TIME: "2026-11-29T10:00:00Z"},
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "CronWorkflow",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": meta,
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox"}}],
        },
    }


def status_reason(exc: ApiException) -> str:
    return str(json.loads(exc.body)["reason"])


def rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


# -- the server itself ---------------------------------------------------------------------


def test_server_is_up_with_our_crds(kube_apiserver: kube.ApiServer, kube_api: Any) -> None:
    version = client.VersionApi(kube_api).get_code()
    assert version.git_version.startswith("v1.")
    crds = client.ApiextensionsV1Api(kube_api).list_custom_resource_definition().items
    by_name = {c.metadata.name: c for c in crds}
    assert {"cronworkflows.argoproj.io", "workflows.argoproj.io"} <= set(by_name)
    cwf = by_name["cronworkflows.argoproj.io"]
    assert set(cwf.spec.names.short_names) == {"cwf", "cronwf"}
    assert by_name["workflows.argoproj.io"].spec.names.short_names == ["wf"]
    for crd in (cwf, by_name["workflows.argoproj.io"]):
        assert crd.spec.scope == "Namespaced"
        (ver,) = crd.spec.versions
        assert ver.name == VERSION and ver.served and ver.storage
        assert not (ver.subresources and ver.subresources.status)  # as Argo ships them
        conds = {c.type: c.status for c in crd.status.conditions}
        assert conds["Established"] == "True"
    assert kube_apiserver.startup_seconds < kube.READY_TIMEOUT


# -- objects: create, get, conflicts ---------------------------------------------------------


def test_create_and_get_cron_workflow_keeps_unknown_fields(
    api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    body = cron_workflow("hello")
    created = api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, body)
    meta = created["metadata"]
    assert meta["namespace"] == kube_namespace
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert meta["generation"] == 1
    got = api.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, "hello")
    assert got["spec"] == body["spec"]  # preserved verbatim, unknown fields too
    assert got["metadata"]["labels"] == body["metadata"]["labels"]
    assert rv(got) == rv(created)


def test_merge_patch_with_stale_resource_version_is_409_conflict(
    api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    created = api.create_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, CWF, cron_workflow("cw")
    )
    stale = rv(created)
    first = api.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        kube_namespace,
        CWF,
        "cw",
        {"metadata": {"resourceVersion": stale}, "status": {"succeeded": 1}},
    )
    assert rv(first) != stale
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            CWF,
            "cw",
            {"metadata": {"resourceVersion": stale}, "status": {"succeeded": 99}},
        )
    assert err.value.status == 409
    assert status_reason(err.value) == "Conflict"
    now = api.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, "cw")
    assert now["status"] == {"succeeded": 1}
    assert rv(now) == rv(first)
    # A merge patch without resourceVersion is unconditional (last writer wins).
    api.patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, CWF, "cw", {"status": {"succeeded": 2}}
    )


def test_generation_bumps_on_status_writes_without_status_subresource(
    api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("g"))

    def patch(body: dict[str, Any]) -> dict[str, Any]:
        return dict(
            api.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, "g", body)
        )

    generations = [patch({"status": {"active": [], "lastScheduledTime": None}})["metadata"]]
    generations.append(patch({"status": {"succeeded": 1}})["metadata"])
    generations.append(patch({"spec": {"suspend": True}})["metadata"])
    assert [m["generation"] for m in generations] == [2, 3, 4]
    # Like any Kubernetes object: a change of metadata alone (labels, annotations) does not.
    labelled = patch({"metadata": {"annotations": {"cronsource.io/seq": "7"}}})
    assert labelled["metadata"]["generation"] == 4
    # A patch that changes nothing changes neither generation nor resourceVersion.
    same = patch({"status": {"succeeded": 1}})
    assert same["metadata"]["generation"] == 4 and rv(same) == rv(labelled)
    # There is no /status subresource to write to.
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_custom_object_status(
            GROUP, VERSION, kube_namespace, CWF, "g", {"status": {"succeeded": 5}}
        )
    assert err.value.status == 404


def test_duplicate_name_is_409_already_exists(
    api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF, workflow("dup"))
    with pytest.raises(ApiException) as err:
        api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF, workflow("dup"))
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert body["reason"] == "AlreadyExists"
    assert body["details"]["name"] == "dup" and body["details"]["kind"] == WF


def test_workflow_with_owner_reference_and_label_selection(
    api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    owner = api.create_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, CWF, cron_workflow("parent")
    )
    child = api.create_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, WF, workflow("parent-1764410400", owner)
    )
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF, workflow("stray"))
    (ref,) = child["metadata"]["ownerReferences"]
    assert ref["uid"] == owner["metadata"]["uid"] and ref["controller"] is True
    assert child["metadata"]["annotations"][SCHEDULED_TIME] == "2026-11-29T10:00:00Z"
    children = api.list_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, WF, label_selector=f"{CRON_LABEL}=parent"
    )
    assert [c["metadata"]["name"] for c in children["items"]] == ["parent-1764410400"]
    # This server runs no garbage collector (that is kube-controller-manager's): deleting the
    # owner leaves the child. Tests that need cascading deletion must delete children themselves.
    api.delete_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, "parent")
    api.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF, "parent-1764410400")


def test_delete_with_stale_resource_version_precondition_is_409(
    api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    created = api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF, workflow("d"))
    api.patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, WF, "d", {"status": {"phase": "Running"}}
    )
    with pytest.raises(ApiException) as err:
        api.delete_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            WF,
            "d",
            body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(resource_version=rv(created))
            ),
        )
    assert err.value.status == 409 and status_reason(err.value) == "Conflict"
    with pytest.raises(ApiException) as gone:
        api.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF, "missing")
    assert gone.value.status == 404 and status_reason(gone.value) == "NotFound"


# -- list + watch -------------------------------------------------------------------------------


def collect(
    api: client.CustomObjectsApi, namespace: str, plural: str, seconds: int, **kwargs: Any
) -> list[dict[str, Any]]:
    """Every event of one watch that the server ends after ``seconds``. (Not with
    ``deserialize=False``: kubernetes 37.0.2's Watch then fails with KeyError 'raw_object' on an
    ERROR event instead of raising the 410.)"""
    w = watch.Watch()
    events = []
    for event in w.stream(
        api.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        plural,
        timeout_seconds=seconds,
        **kwargs,
    ):
        events.append(event)
    return events


def test_list_then_watch_with_bookmarks(api: client.CustomObjectsApi, kube_namespace: str) -> None:
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("a"))
    listed = api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
    since = listed["metadata"]["resourceVersion"]

    # Changes made after the list and before the watch are replayed from the watch cache.
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("b"))
    api.patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, CWF, "a", {"spec": {"suspend": True}}
    )
    api.delete_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, "b")

    # ... and those made during the watch arrive too.
    def later() -> None:
        time.sleep(1.0)
        api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("c"))

    t = threading.Thread(target=later)
    t.start()
    try:
        events = collect(
            api, kube_namespace, CWF, 5, resource_version=since, allow_watch_bookmarks=True
        )
    finally:
        t.join()
    changes = [
        (e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"
    ]
    assert changes == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "c")]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, "the server sends a BOOKMARK before it ends the watch"
    last_change_rv = int(rv([e for e in events if e["type"] != "BOOKMARK"][-1]["object"]))
    assert int(rv(bookmarks[-1]["object"])) >= last_change_rv
    assert set(bookmarks[-1]["object"]["metadata"]) <= {"resourceVersion", "annotations"}


def test_watch_from_expired_resource_version_is_410_gone(
    kube_apiserver: kube.ApiServer, api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    listed = api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF)
    old = listed["metadata"]["resourceVersion"]
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("e"))
    # Within the watch cache's history an old resourceVersion still works:
    events = collect(api, kube_namespace, CWF, 1, resource_version=old)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "e")]

    # Once the history is gone (here: the CRD's spec changed, which renews the watch cache,
    # as an apiserver restart or a CRD upgrade does), the same watch is 410 Gone ...
    kube_apiserver.expire_watch_cache("cronworkflows.argoproj.io")
    with pytest.raises(ApiException) as err:
        collect(api, kube_namespace, CWF, 2, resource_version=old)
    assert err.value.status == 410
    assert "too old resource version" in str(err.value.reason)
    # ... as a 200 response whose one event is an ERROR Status with code 410:
    raw = api.list_namespaced_custom_object(
        GROUP,
        VERSION,
        kube_namespace,
        CWF,
        watch=True,
        resource_version=old,
        timeout_seconds=1,
        _preload_content=False,
    )
    lines = [json.loads(line) for line in raw.data.decode().splitlines() if line]
    assert raw.status == 200
    assert [(e["type"], e["object"]["kind"], e["object"]["code"]) for e in lines] == [
        ("ERROR", "Status", 410)
    ]
    assert lines[0]["object"]["reason"] == "Expired"
    # The remedy works: list again, watch from the new resourceVersion.
    relisted = api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF)
    assert [i["metadata"]["name"] for i in relisted["items"]] == ["e"]
    assert (
        collect(
            api, kube_namespace, CWF, 1, resource_version=relisted["metadata"]["resourceVersion"]
        )
        == []
    )


def test_compaction_alone_does_not_expire_the_watch_cache(
    kube_apiserver: kube.ApiServer, api: client.CustomObjectsApi, kube_namespace: str
) -> None:
    """With the watch cache on, watches and exact-version lists are served from the cache's
    history, so compacting etcd does not expire them (see the uncached server below)."""
    api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("k"))
    old = api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF)["metadata"][
        "resourceVersion"
    ]
    api.patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, CWF, "k", {"spec": {"suspend": True}}
    )
    revision = kube_apiserver.compact()
    assert revision > int(old) + 1
    events = collect(api, kube_namespace, CWF, 1, resource_version=old)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "k")]
    exact = {"resource_version": old, "resource_version_match": "Exact"}
    assert api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, **exact)


# -- servers of their own: no watch cache, restart ---------------------------------------------


@pytest.fixture(scope="module")
def uncached_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube.ApiServer]:
    server = kube.start(
        tmp_path_factory.mktemp("kube-uncached"), extra_args=["--watch-cache=false"]
    )
    try:
        yield server
    finally:
        server.stop(remove_data=True)


def test_without_watch_cache_compacting_etcd_expires_watches_and_lists(
    uncached_apiserver: kube.ApiServer, kube_namespace: str
) -> None:
    with uncached_apiserver.api_client() as api_client:
        api = client.CustomObjectsApi(api_client)
        api.create_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, cron_workflow("u"))
        old = api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF)["metadata"][
            "resourceVersion"
        ]
        api.patch_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, CWF, "u", {"spec": {"suspend": True}}
        )
        events = collect(api, kube_namespace, CWF, 1, resource_version=old)
        assert [e["type"] for e in events] == ["MODIFIED"]
        newest = rv(events[0]["object"])

        uncached_apiserver.compact()
        with pytest.raises(ApiException) as err:
            collect(api, kube_namespace, CWF, 2, resource_version=old, allow_watch_bookmarks=True)
        assert err.value.status == 410
        exact = {"resource_version": old, "resource_version_match": "Exact"}
        with pytest.raises(ApiException) as err:
            api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, **exact)
        assert err.value.status == 410 and status_reason(err.value) == "Expired"
        # The newest resourceVersion is not expired: watching from it works. (Without the watch
        # cache there are no bookmarks: they come from the cache.)
        events = collect(
            api, kube_namespace, CWF, 2, resource_version=newest, allow_watch_bookmarks=True
        )
        assert events == []


def test_restart_keeps_objects_and_the_kubeconfig(
    uncached_apiserver: kube.ApiServer, kube_namespace: str
) -> None:
    server = uncached_apiserver
    with server.api_client() as api_client:
        api = client.CustomObjectsApi(api_client)
        created = api.create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, CWF, cron_workflow("r")
        )
        server.restart()
        # The same kubeconfig (port, certificate, token) works after the restart.
        got = api.get_namespaced_custom_object(GROUP, VERSION, kube_namespace, CWF, "r")
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
        assert server.startup_seconds < kube.READY_TIMEOUT


# -- cronsource's own client (adapters/infrastructure/kube/client.py) --------------------------


def test_cronsource_client_works_against_the_server(
    kube_apiserver: kube.ApiServer, kube_namespace: str
) -> None:
    """The adapter's calls as the runtime makes them: create (field manager), list, merge
    patch, a watch with bookmarks that ends when the server ends it, an expired
    resourceVersion as ApiError(410), delete, and a missing object as ApiError(404)."""
    from cronsource.adapters.infrastructure.kube import ApiError, connect

    k = connect(str(kube_apiserver.kubeconfig))
    try:
        created = k.run(k.create(kube_namespace, CWF, cron_workflow("ours")))
        managers = [m["manager"] for m in created["metadata"]["managedFields"]]
        assert managers == ["cronsource"]
        listed = k.run(k.list(kube_namespace, CWF, ""))
        assert [i["metadata"]["name"] for i in listed["items"]] == ["ours"]
        patched = k.run(
            k.patch(kube_namespace, CWF, "ours", {"metadata": {"annotations": {"a": "1"}}})
        )
        assert patched["metadata"]["annotations"] == {"a": "1"}
        assert patched["spec"]["schedules"] == ["*/5 * * * *"]  # a merge, not a replace

        async def watch() -> list[str]:
            return [
                e["type"]
                async for e in k.watch(
                    kube_namespace,
                    CWF,
                    label_selector="",
                    resource_version="0",
                    timeout_seconds=3,
                )
            ]

        began = time.monotonic()
        types = k.run(watch())
        assert time.monotonic() - began < 15  # ended by the server, not re-opened
        assert types[0] == "ADDED" and "BOOKMARK" in types

        before = kube_apiserver.expire_watch_cache(f"{CWF}.{GROUP}")

        async def expired() -> None:
            async for _ in k.watch(
                kube_namespace,
                CWF,
                label_selector="",
                resource_version=str(before),
                timeout_seconds=3,
            ):
                pass

        with pytest.raises(ApiError) as gone:
            k.run(expired())
        assert gone.value.status == 410
        k.run(k.delete(kube_namespace, CWF, "ours"))
        with pytest.raises(ApiError) as missing:
            k.run(k.get(kube_namespace, CWF, "ours"))
        assert missing.value.status == 404 and missing.value.api_reason == "NotFound"
    finally:
        k.close()


def test_cronsource_client_watches_an_object_larger_than_aiohttps_line_limit(
    kube_apiserver: kube.ApiServer, kube_namespace: str
) -> None:
    """aiohttp's own line iteration stops at 512 KiB (LineTooLong): a CronWorkflow of 600 KB
    broke every watch of the cluster at the same event, so no later change of any object was
    seen. Its event and the next object's both arrive now."""
    from cronsource.adapters.infrastructure.kube import connect

    big = cron_workflow("big")
    big["spec"]["workflowSpec"]["templates"][0]["container"]["args"] = ["x" * 900_000]
    k = connect(str(kube_apiserver.kubeconfig))
    try:
        k.run(k.create(kube_namespace, CWF, big))
        k.run(k.create(kube_namespace, CWF, cron_workflow("after")))

        async def watch() -> list[tuple[str, int]]:
            return [
                (e["object"]["metadata"]["name"], len(json.dumps(e["object"])))
                async for e in k.watch(
                    kube_namespace,
                    CWF,
                    label_selector="",
                    resource_version="0",
                    timeout_seconds=2,
                )
                if e["type"] == "ADDED"
            ]

        seen = dict(k.run(watch()))
        assert set(seen) == {"big", "after"}
        assert seen["big"] > 900_000
    finally:
        k.close()


def test_cronsource_client_rereads_a_rotated_token_file_after_a_401(
    kube_apiserver: kube.ApiServer, kube_namespace: str, tmp_path: Path
) -> None:
    """A kubeconfig with `tokenFile` (as in-cluster service accounts, whose token the kubelet
    rotates): the token read at connect is refused, the file now holds a good one, and the
    same client re-reads it after the 401 and goes on, instead of failing until restarted."""
    import yaml

    from cronsource.adapters.infrastructure.kube import connect

    token_file = tmp_path / "token"
    token_file.write_text("not-the-token")
    cfg = yaml.safe_load(kube_apiserver.kubeconfig.read_text())
    user = cfg["users"][0]["user"]
    del user["token"]
    user["tokenFile"] = str(token_file)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    k = connect(str(path))
    try:
        token_file.write_text(kube_apiserver.token)  # rotated after connect
        listed = k.run(k.list(kube_namespace, CWF, ""))
        assert listed["items"] == []
    finally:
        k.close()


def test_plain_https_with_the_token(kube_apiserver: kube.ApiServer) -> None:
    assert kube_apiserver.request("GET", "/readyz") == "ok"
    with pytest.raises(urllib.request.HTTPError) as err:  # no token: 401
        urllib.request.urlopen(kube_apiserver.url + "/apis", context=kube_apiserver._ssl())
    assert err.value.code == 401
