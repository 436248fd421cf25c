"""The unit tier: our own logic in this process. No server (tests/conftest.py refuses the
fixtures and markers at collection), and here no subprocess and no network connection either:
a test that starts one fails at once, naming what it started, instead of making the quick tier
(`scripts/test.sh --quick`) slow or dependent on the machine. Such a test belongs in
tests/integration (or tests/e2e for `cronsource run`/`serve` processes).

The Kubernetes side runs on tests/kube/fake.py's in-memory API: `kube` and `kube_target` here
are what tests/integration/conftest.py's are on the test kube-apiserver."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from cronsource.adapters.infrastructure.kube import Backoff, KubeTarget
from tests.kube.fake import FakeKube


class NotInTheUnitTier(AssertionError):
    """A unit test reached outside this process: the test is in the wrong folder."""


@pytest.fixture(autouse=True)
def in_process_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def no_subprocess(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        raise NotInTheUnitTier(f"a unit test started a process: {args!r}")

    real_connect = socket.socket.connect

    def no_network(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise NotInTheUnitTier(f"a unit test opened a network connection to {address!r}")
        real_connect(self, address)

    monkeypatch.setattr(subprocess.Popen, "__init__", no_subprocess)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    yield


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    """The cluster: an in-memory KubeApi (tests/kube/fake.py), its watches ending at once."""
    fake = FakeKube()
    yield fake
    fake.close()


@pytest.fixture
def kube_target(kube: FakeKube) -> KubeTarget:
    """The dispatcher's target on that cluster; transient errors are retried at once."""
    return KubeTarget(kube, backoff=Backoff(sleep=lambda s: None))
