"""Fixtures of the integration tier: the test kube-apiserver seen through the user's client
(`api`) and through ours (`kube`, `kube_target`). The server itself, PostgreSQL and the engine
are tests/conftest.py's, shared with the e2e tier."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.infrastructure.kube import AioKube, Backoff, KubeTarget, connect


@pytest.fixture
def api(kube_api: Any) -> client.CustomObjectsApi:
    """The custom objects API as a user (or kubectl) calls it: the official sync client."""
    return client.CustomObjectsApi(kube_api)


@pytest.fixture
def kube(kube_apiserver: Any) -> Iterator[AioKube]:
    """cronsource's own client (aiohttp on its loop thread) to the test server."""
    k = connect(str(kube_apiserver.kubeconfig))
    yield k
    k.close()


@pytest.fixture
def kube_target(kube: AioKube) -> KubeTarget:
    """The dispatcher's target on the test cluster; transient errors are retried at once."""
    return KubeTarget(kube, backoff=Backoff(sleep=lambda s: None))
