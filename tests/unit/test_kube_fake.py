"""The in-memory KubeApi (tests/kube/fake.py) answers as the real API server does, in the few
behaviours cronsource's Kubernetes code relies on: metadata a create hands out, the errors by
status and reason, resourceVersion preconditions, generation bumps without a status
subresource, merge patches, label selectors, and list + watch with bookmarks, selector exits
and 410 Expired.

Each test takes a `cluster`: the fake here, the test kube-apiserver through cronsource's own
client in tests/integration/test_kube_fake.py, which runs these same functions. A behaviour
the fake gets wrong fails there, not in production.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF, ApiError, KubeApi
from tests.kube.fake import FakeKube


@dataclass
class Cluster:
    api: KubeApi
    ns: str
    #: Forget the watch history, as a CRD upgrade does (410 for older resourceVersions).
    expire: Callable[[], None]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    fake = FakeKube()
    try:
        yield Cluster(fake, "team", fake.expire_history)
    finally:
        fake.close()


def cron(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedules": ["* * * * *"],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


def create(cluster: Cluster, body: dict[str, Any], plural: str = CWF) -> dict[str, Any]:
    return cluster.api.run(cluster.api.create(cluster.ns, plural, body))


def patch(cluster: Cluster, name: str, body: dict[str, Any]) -> dict[str, Any]:
    return cluster.api.run(cluster.api.patch(cluster.ns, CWF, name, body))


def refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as e:
        call()
    return e.value


def rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def watched(
    cluster: Cluster, since: str | None, selector: str = "", seconds: int = 1
) -> list[dict[str, Any]]:
    """Every event of one watch, to its end (the server's timeout)."""

    async def go() -> list[dict[str, Any]]:
        return [
            e
            async for e in cluster.api.watch(
                cluster.ns,
                CWF,
                label_selector=selector,
                resource_version=since,
                timeout_seconds=seconds,
            )
        ]

    return cluster.api.run(go())


def listed_at(cluster: Cluster, selector: str = "") -> str:
    """The resourceVersion of a list, where a watch that follows it starts."""
    listed = cluster.api.run(cluster.api.list(cluster.ns, CWF, selector))
    return str(listed["metadata"]["resourceVersion"])


def changes(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]


def test_a_created_object_has_a_uid_a_resource_version_and_generation_one(cluster: Cluster) -> None:
    made = create(cluster, cron("a"))
    meta = made["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["generation"] == 1
    assert meta["namespace"] == cluster.ns
    got = cluster.api.run(cluster.api.get(cluster.ns, CWF, "a"))
    assert rv(got) == rv(made) and got["spec"] == cron("a")["spec"]


def test_errors_carry_the_status_and_the_reason_our_code_reads(cluster: Cluster) -> None:
    create(cluster, cron("a"))
    twice = refused(lambda: create(cluster, cron("a")))
    assert (twice.status, twice.api_reason) == (409, "AlreadyExists")
    for call in (
        lambda: cluster.api.run(cluster.api.get(cluster.ns, CWF, "missing")),
        lambda: patch(cluster, "missing", {"spec": {"suspend": True}}),
        lambda: cluster.api.run(cluster.api.delete(cluster.ns, CWF, "missing")),
    ):
        gone = refused(call)
        assert (gone.status, gone.api_reason) == (404, "NotFound")
    invalid = refused(lambda: create(cluster, cron("Not_A_Name")))
    assert (invalid.status, invalid.api_reason) == (422, "Invalid")


def test_a_stale_resource_version_is_409_conflict_and_changes_nothing(cluster: Cluster) -> None:
    made = create(cluster, cron("a"))
    first = patch(cluster, "a", {"metadata": {"resourceVersion": rv(made)}, "status": {"n": 1}})
    assert rv(first) != rv(made)
    stale = refused(
        lambda: patch(cluster, "a", {"metadata": {"resourceVersion": rv(made)}, "status": {"n": 2}})
    )
    assert (stale.status, stale.api_reason) == (409, "Conflict")
    now = cluster.api.run(cluster.api.get(cluster.ns, CWF, "a"))
    assert now["status"] == {"n": 1} and rv(now) == rv(first)


def test_a_change_outside_metadata_bumps_the_generation_and_a_no_op_changes_nothing(
    cluster: Cluster,
) -> None:
    create(cluster, cron("g"))
    assert patch(cluster, "g", {"status": {"active": []}})["metadata"]["generation"] == 2
    assert patch(cluster, "g", {"spec": {"suspend": True}})["metadata"]["generation"] == 3
    labelled = patch(cluster, "g", {"metadata": {"annotations": {"cronsource.io/seq": "7"}}})
    assert labelled["metadata"]["generation"] == 3
    same = patch(cluster, "g", {"spec": {"suspend": True}})
    assert same["metadata"]["generation"] == 3 and rv(same) == rv(labelled)


def test_a_merge_patch_merges_maps_key_by_key_and_null_removes_a_key(cluster: Cluster) -> None:
    create(cluster, cron("m", labels={"keep": "1", "drop": "1"}))
    patch(cluster, "m", {"status": {"resolvedSchedules": {"a": "1", "b": "2"}}})
    got = patch(
        cluster,
        "m",
        {
            "metadata": {"labels": {"drop": None, "new": "1"}},
            "status": {"resolvedSchedules": {"a": None, "c": "3"}},
        },
    )
    assert got["metadata"]["labels"] == {"keep": "1", "new": "1"}
    assert got["status"]["resolvedSchedules"] == {"b": "2", "c": "3"}
    assert patch(cluster, "m", {"status": {"resolvedSchedules": None}})["status"] == {}


def test_list_selects_by_label_and_carries_the_clusters_resource_version(cluster: Cluster) -> None:
    create(cluster, cron("plain"))
    create(cluster, cron("argos", labels={"instance": "argo"}))
    last = create(cluster, cron("other", labels={"instance": "x"}))

    def names(selector: str) -> list[str]:
        listed = cluster.api.run(cluster.api.list(cluster.ns, CWF, selector))
        assert int(listed["metadata"]["resourceVersion"]) >= int(rv(last))
        return [o["metadata"]["name"] for o in listed["items"]]

    assert names("") == ["argos", "other", "plain"]
    assert names("!instance") == ["plain"]
    assert names("instance") == ["argos", "other"]
    assert names("instance=argo") == ["argos"]
    assert names("instance!=argo") == ["other", "plain"]
    create(
        cluster,
        {
            **cron("wf"),
            "kind": "Workflow",
            "spec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
        WF,
    )
    assert names("") == ["argos", "other", "plain"]  # one kind per list


def test_a_watch_from_a_list_sees_each_change_in_order_then_a_bookmark(cluster: Cluster) -> None:
    create(cluster, cron("a"))
    since = listed_at(cluster)
    create(cluster, cron("b"))
    patch(cluster, "a", {"spec": {"suspend": True}})
    cluster.api.run(cluster.api.delete(cluster.ns, CWF, "b"))
    events = watched(cluster, since)
    assert changes(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    modified, deleted = events[1]["object"], events[2]["object"]
    assert int(rv(deleted)) > int(rv(modified))  # a deletion has a version of its own
    # Bookmarks come when the server sends them (not on every short watch), never behind.
    for bookmark in (e for e in events if e["type"] == "BOOKMARK"):
        assert int(rv(bookmark["object"])) >= int(rv(deleted))
    newest = max(int(rv(e["object"])) for e in events)
    assert changes(watched(cluster, str(newest))) == []  # resumed there: nothing twice


def test_an_object_that_leaves_or_enters_a_watchs_selector_is_deleted_or_added_to_it(
    cluster: Cluster,
) -> None:
    create(cluster, cron("a"))
    since = cluster.api.run(cluster.api.list(cluster.ns, CWF, "!instance"))["metadata"][
        "resourceVersion"
    ]
    patch(cluster, "a", {"metadata": {"labels": {"instance": "argo"}}})  # handed to Argo
    patch(cluster, "a", {"metadata": {"labels": {"instance": None}}})  # and taken back
    assert changes(watched(cluster, since, "!instance")) == [("DELETED", "a"), ("ADDED", "a")]


def test_a_watch_from_an_expired_resource_version_is_410_and_a_relist_recovers(
    cluster: Cluster,
) -> None:
    since = listed_at(cluster)
    create(cluster, cron("e"))
    cluster.expire()
    expired = refused(lambda: watched(cluster, since))
    assert expired.status == 410
    relisted = cluster.api.run(cluster.api.list(cluster.ns, CWF, ""))
    assert [o["metadata"]["name"] for o in relisted["items"]] == ["e"]
    assert changes(watched(cluster, relisted["metadata"]["resourceVersion"])) == []
