"""Shared fixtures. PostgreSQL is a real server, started once per session (tests/pgserver.py)
unless CRONSOURCE_TEST_PG names one; a missing server fails the tests, never skips them."""

import pytest

from tests import pgserver

pg_server_url = pytest.fixture(scope="session")(pgserver.pg_server_url)
pg_url = pytest.fixture(pgserver.pg_url)
