"""Shared fixtures. PostgreSQL is a real server, started once per session (tests/pgserver.py)
unless CRONSOURCE_TEST_PG names one; a missing server fails the tests, never skips them."""

import pytest

from tests import pgserver
from tests.kube import apiserver as kube_apiserver_module

pg_server_url = pytest.fixture(scope="session")(pgserver.pg_server_url)
pg_url = pytest.fixture(pgserver.pg_url)

# A real Kubernetes API server (the full kube-apiserver + embedded etcd, built from Go
# modules by scripts/build-test-apiserver.sh), started once per session by the tests that use it.
kube_apiserver = pytest.fixture(scope="session")(kube_apiserver_module.kube_apiserver)
kube_api = pytest.fixture(kube_apiserver_module.kube_api)
kube_namespace = pytest.fixture(kube_apiserver_module.kube_namespace)
