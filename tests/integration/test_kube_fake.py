"""tests/unit/test_kube_fake.py's checks on the test kube-apiserver, through cronsource's own
client: the in-memory KubeApi the unit tests use (tests/kube/fake.py) answers as this server
does, in what cronsource relies on. A disagreement fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cronsource.adapters.infrastructure.kube import AioKube
from tests.unit.test_kube_fake import (  # noqa: F401 (collected here by pytest)
    Cluster,
    test_a_change_outside_metadata_bumps_the_generation_and_a_no_op_changes_nothing,
    test_a_created_object_has_a_uid_a_resource_version_and_generation_one,
    test_a_merge_patch_merges_maps_key_by_key_and_null_removes_a_key,
    test_a_stale_resource_version_is_409_conflict_and_changes_nothing,
    test_a_watch_from_a_list_sees_each_change_in_order_then_a_bookmark,
    test_a_watch_from_an_expired_resource_version_is_410_and_a_relist_recovers,
    test_an_object_that_leaves_or_enters_a_watchs_selector_is_deleted_or_added_to_it,
    test_errors_carry_the_status_and_the_reason_our_code_reads,
    test_list_selects_by_label_and_carries_the_clusters_resource_version,
)

pytestmark = pytest.mark.k8s


@pytest.fixture
def cluster(kube_apiserver: Any, kube: AioKube, kube_namespace: str) -> Iterator[Cluster]:
    yield Cluster(
        kube,
        kube_namespace,
        lambda: kube_apiserver.expire_watch_cache("cronworkflows.argoproj.io"),
    )
